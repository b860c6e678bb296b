"""Issue 40, commands in seconds: a command imports what it uses, not what its neighbours use.

Each heavy package named here cost a command a measured share of its CPU when imported for
nothing (benchmarks/RESULTS.md, "Commands without PREFECT_API_URL"): moto 0.3 s, boto3 0.2 s,
the fake API server 0.2 s, the pod autoscalers' models 0.1 s, kubernetes' generated API classes
0.6-0.9 s. The checks run the real command in a process of its own and read its `sys.modules`
at exit.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "deployments" / "examples"

# The command's own process, its modules listed as it ends (typer's SystemExit too).
RUN_AND_LIST = """
import gc, sys
from kube_elevator.flows.cli import main
sys.argv = ["elevator", *sys.argv[1:]]
try:
    main()
finally:  # before the exit handlers: the last of them ends the process
    print("MODULES", " ".join(sorted(sys.modules)))
    print("COLLECTING", gc.isenabled(), flush=True)
"""


def modules_of(*command: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", RUN_AND_LIST, *command], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "COLLECTING True" in done.stdout  # the pause while the CLI loads has ended
    line = next(line for line in done.stdout.splitlines() if line.startswith("MODULES "))
    return set(line.split()[1:])


def under(modules: set[str], *packages: str) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_simulate_fast_starts_neither_moto_boto3_the_fake_api_nor_prefect() -> None:
    modules = modules_of("simulate", str(EXAMPLES / "scenario.yaml"), "--fast",
                         "--format", "json")
    assert under(modules, "moto", "boto3", "prefect", "uvicorn",
                 "kube_elevator.fakes.kube_api.server", "kube_elevator.fakes.aws") == []


def test_a_command_that_is_not_pods_loads_no_pod_autoscaler_models() -> None:
    modules = modules_of("validate", str(EXAMPLES / "nodegroups.yaml"))
    assert under(modules, "kube_elevator.tasks.pod_autoscalers",
                 "kube_elevator.flows.cli.pods_files", "kubernetes.client.api") == []


# Prefect's import (settings, client, schemas) under use_local_server, which every command and
# the harness call first: without cyclic GC it skips ~240 collections, a fifth of its CPU.
PREFECT_IMPORT = """
import gc, os, sys
os.environ["PREFECT_API_URL"] = "http://127.0.0.1:9/api"  # so no server is started
from kube_elevator.tasks.adapters.prefect_server import use_local_server
assert "prefect" not in sys.modules
runs = []
gc.callbacks.append(lambda phase, info: runs.append(info["generation"]) if phase == "start" else None)
assert use_local_server() is None and "prefect" in sys.modules
print(len(runs), gc.isenabled())
"""


def test_prefect_loads_without_full_collections_and_the_collector_is_back_after() -> None:
    done = subprocess.run([sys.executable, "-c", PREFECT_IMPORT], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    collections, collecting = done.stdout.split()
    assert int(collections) <= 2, collections  # with the collector on: about 240
    assert collecting == "True"


# `elevator` ends after the last exit handler, without Python's teardown of its modules (about
# 1 s of a repeat `run --once`): the handlers registered while the command ran (Prefect's, which
# send a run's last events and logs) still run first, and the exit status is the command's.
ENDING = """
import atexit, sys
import kube_elevator.flows.cli as cli

class Torn:
    def __del__(self):
        print("TORN DOWN", flush=True)

kept = Torn()  # a module global: only the interpreter's teardown would collect it

def command():
    atexit.register(lambda: print("HANDLER RAN", flush=True))
    print("partial line", end="")  # left in the buffer: flushed at the end
    raise SystemExit(int(sys.argv[1]))

cli._main = command
cli.main()
"""


def test_elevator_ends_after_its_exit_handlers_with_its_status_and_no_teardown() -> None:
    for status in (0, 3):
        done = subprocess.run([sys.executable, "-c", ENDING, str(status)], capture_output=True,
                              text=True, timeout=120, cwd=ROOT, check=False)
        assert done.returncode == status, done.stderr[-2000:]
        assert done.stdout == "partial lineHANDLER RAN\n"


def test_importing_the_cli_keeps_the_collector_of_the_importing_process() -> None:
    """The pause while the CLI's modules load ends with their import: a process that imports
    the CLI (a test's, with typer's runner) goes on collecting cycles."""
    code = ("import gc; assert gc.isenabled(); import kube_elevator.flows.cli; "
            "print(gc.isenabled())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"
