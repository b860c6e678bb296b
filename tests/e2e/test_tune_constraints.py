"""`elevator tune` judged on a workload with hostname anti-affinity and zonal spreading (issue 37
item 4): the tuned file's savings are stated with the placement constraints modelled and with
them left out, in the summary, in the table and in the tuned file's comments.

The search runs in process (`flows.tune.search` with its batches judged here, as the `tune` flow
judges them in task runs): the flow and the command around it are tested in test_tune.py.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from rich.console import Console

from kube_elevator.fakes.scenario import Wave, load_scenario, without_placement_constraints
from kube_elevator.flows.cli.tune import constraints_table
from kube_elevator.flows.tune import (
    HELD_OUT_SEEDS_START,
    evaluate,
    node_group_text,
    search,
    seeds_from,
    tuned_file,
)
from kube_elevator.tasks.tuning.space import Knobs, current_knobs

EXAMPLES = Path(__file__).resolve().parents[2] / "deployments" / "examples"


def test_the_tuned_files_savings_are_stated_with_and_without_the_constraints(
        tmp_path: Path) -> None:
    loaded = load_scenario(EXAMPLES / "scenario-constraints.yaml")
    groups = loaded.config.node_groups
    seeds, held_out = [1], seeds_from(HELD_OUT_SEEDS_START, 2)

    def run_batches(batches: list[list[Knobs]]) -> list[list[dict[str, float]]]:
        return [[evaluate(loaded, knobs, seeds).to_json() for knobs in chunk]
                for chunk in batches]

    result = search(loaded, groups, trials=4, batch=2, parallel=1, seeds=seeds,
                    held_out=held_out, validation=seeds_from(501, 1), max_pending_seconds=0.0,
                    run_batches=run_batches)
    assert result.unconstrained_held_out is not None and result.chosen is not None
    # the figures left out are the file and the choice on the same seeds, constraints stripped
    stripped = without_placement_constraints(loaded)
    assert stripped is not None
    web = next(a for a in stripped.arrivals if isinstance(a, Wave) and a.name == "web")
    assert not web.constrains_placement and web.topology_spread_constraints == []
    assert web.affinity is not None and web.affinity.pod_anti_affinity is None
    assert web.affinity.node_affinity is not None  # which groups its pods are in: kept
    file = {group.name: current_knobs(group) for group in groups}
    before, after = result.unconstrained_held_out
    assert before == evaluate(stripped, file, held_out)
    assert after == evaluate(stripped, result.chosen, held_out)
    # left out, the replicas no longer wait for a node of their own
    assert result.default_held_out is not None
    assert before.max_pending_seconds < result.default_held_out.max_pending_seconds
    summary = result.summary()["without_placement_constraints"]
    assert summary["default_held_out"] == before.to_json()
    assert summary["tuned_held_out"] == after.to_json()

    console = Console(width=120, record=True)
    console.print(constraints_table(result))
    rows = [line for line in console.export_text().splitlines()
            if "modelled" in line or "left out" in line]
    assert len(rows) == 3  # the title, and a row each
    assert f"{before.node_seconds:.0f} -> {after.node_seconds:.0f}" in rows[2]

    written = tuned_file(tmp_path / "tuned.yaml", node_group_text(loaded), result)
    text = written.read_text()
    assert ("# Savings on held-out seeds with the workload's pod affinity, spreading, host "
            "ports and volume zones modelled: ") in text
    assert "left out: " in text and f"(node-seconds {before.node_seconds:.0f} -> " in text
    assert [g["name"] for g in yaml.safe_load(text)["node_groups"]] == ["zone-a", "zone-b"]


def test_a_workload_without_constraints_is_judged_once() -> None:
    """No wave says anything about other pods, ports or volumes: there is nothing to leave
    out, and no second judgement is made."""
    from kube_elevator.flows.tune import judged_without_constraints

    loaded = load_scenario(EXAMPLES / "scenario.yaml")
    assert without_placement_constraints(loaded) is None
    file = {group.name: current_knobs(group) for group in loaded.config.node_groups}
    assert judged_without_constraints(loaded, file, file, [1]) is None
