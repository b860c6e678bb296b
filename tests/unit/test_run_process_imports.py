"""A tick's run in a process of its own (`elevator serve --ticks runs`, a worker's) imports the
`autoscale` flow's module before anything else of ours: what that module loads is on the way
to the first tick's Running (issue 40: 14-23 s under load, most of it the process's start).
An Escalator tick's process does not load the Cluster Autoscaler's parts, the watch cache it
does not keep, nor the command line's typer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kube_elevator.flows.crash_detection import QUIET_CONSOLE_VARIABLE

ROOT = Path(__file__).resolve().parents[2]

NOT_AT_A_RUNS_START = (
    "kube_elevator.flows.cluster_autoscaler",
    "kube_elevator.tasks.cluster_autoscaler.drain",
    "kube_elevator.tasks.cluster_autoscaler.unneeded",
    "kube_elevator.tasks.cluster_autoscaler.scale_up",
    "kube_elevator.tasks.cluster_autoscaler.estimator",
    "kube_elevator.tasks.scheduler",
    "kube_elevator.tasks.adapters.kube_cache",
    "kube_elevator.tasks.adapters.kube_watch",
    "kube_elevator.flows.cli",
    "typer",  # (rich is Prefect's own: its console logging)
)


def modules_after_importing_the_flow() -> list[str]:
    """The modules a fresh process holds once it imported `flows.autoscale` as serve's runs
    do (their console without tracebacks)."""
    env = {**os.environ, QUIET_CONSOLE_VARIABLE: "1"}
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys\nimport kube_elevator.flows.autoscale\n"
         "print(json.dumps(sorted(sys.modules)))"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_runs_process_imports_only_what_an_escalator_tick_uses() -> None:
    loaded = modules_after_importing_the_flow()
    assert "kube_elevator.flows.tick" in loaded  # the tick itself is there
    unwanted = [name for name in loaded
                if any(name == prefix or name.startswith(prefix + ".")
                       for prefix in NOT_AT_A_RUNS_START)]
    assert not unwanted, unwanted
