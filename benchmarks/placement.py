"""Load-aware placement and scale-down (Trimaran) against Escalator's defaults, simulated.

The bundled batch scenario twice: the plain scheduler with oldest-first scale-down, then pods
placed by the scheduler extender (TargetLoadPacking) with `scale_down_selection: least_loaded`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from kube_elevator.fakes.scenario import LoadedScenario, load_scenario
from kube_elevator.flows.simulation import simulate

EXAMPLES = Path(__file__).parent.parent / "deployments" / "examples"


def load_aware(loaded: LoadedScenario, policy: str = "target-load-packing") -> LoadedScenario:
    """The same scenario with extender placement and least-loaded scale-down everywhere."""
    groups = [group.model_copy(update={"scale_down_selection": "least_loaded"})
              for group in loaded.config.node_groups]
    document = (loaded.config.document.model_copy(update={"node_groups": groups})
                if loaded.config.document else None)
    config = dataclasses.replace(loaded.config, node_groups=tuple(groups), document=document)
    scenario = loaded.scenario.model_copy(update={"placement": policy})
    return LoadedScenario(scenario, config, loaded.source, loaded.arrivals)


def compare(name: str = "scenario.yaml") -> dict[str, dict[str, Any]]:
    loaded = load_scenario(EXAMPLES / name)
    return {"default": simulate(loaded).summary,
            "load-aware": simulate(load_aware(loaded)).summary}


if __name__ == "__main__":
    for label, summary in compare().items():
        print(label, summary)
