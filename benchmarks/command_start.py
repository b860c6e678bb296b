"""How long a command takes, wall clock, without PREFECT_API_URL (issue 40 item 3): the first on a
new PREFECT_HOME (it starts the shared local Prefect server, tasks/adapters/prefect_server.py),
then the median of `--runs` more (which find it). Targets: 15 s for the first, 5 s after.

- `run --once` and `pods run --once` on `elevator fake-cluster --scenario` (the shipped scenario's
  ASGs and Nodes), each a recorded flow run;
- `simulate deployments/examples/scenario.yaml --fast` (no Prefect: the floor of an import);
- a user's own flow on `kube_elevator.harness.fake_cluster()` (`USER_FLOW`).

The machine's load average is printed with the figures: helpers share it. So is a reference of
the machine's own speed, which differs between hosts as much as a cut does: what the user's flow
imports of its own (Prefect, the official client's `CoreV1Api`) costs in a bare process.

    .venv/bin/python -m benchmarks.command_start --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "deployments/examples/scenario.yaml"
NODEGROUPS = ROOT / "deployments/examples/scenario-nodegroups.yaml"
FIRST_TARGET_SECONDS = 15.0
LATER_TARGET_SECONDS = 5.0

# A user's own flow on the harness: one flow run that reads the fake cluster's nodes.
USER_FLOW = """
from kubernetes import client
from prefect import flow
from kube_elevator.harness import fake_cluster

@flow
def count_nodes() -> int:
    return len(client.CoreV1Api(fake_cluster_now.api_client()).list_node().items)

with fake_cluster() as fake_cluster_now:
    fake_cluster_now.add_node_group("workers", desired=2, labels={"pool": "workers"})
    assert count_nodes() == 2
"""

def elevator(*args: str) -> list[str]:
    return [sys.executable, "-m", "kube_elevator.flows.cli", *args]


@contextmanager
def fake_cluster_command(folder: Path) -> Iterator[dict[str, str]]:
    """`elevator fake-cluster --scenario` in a process of its own: the environment its lines
    export (KUBECONFIG, AWS_*)."""
    kubeconfig = folder / "kubeconfig.yaml"
    process = subprocess.Popen(elevator("fake-cluster", "--scenario", str(SCENARIO),
                                        "--kubeconfig-out", str(kubeconfig)),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               cwd=ROOT)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(5)]  # blocks until it prints them
        exports = dict(re.findall(r"(\w+)=(\S+)", lines[3]))
        yield {**exports, "KUBECONFIG": str(kubeconfig)}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


# CPU seconds (user + system) of every command measured, and its children's: on a loaded machine
# the wall clock measures the load; the CPU time is what a quiet machine's wall clock would
# come close to (less the waits on I/O and on the server).
CPU_SECONDS: list[float] = []


def timed(command: list[str], env: dict[str, str], ok_codes: tuple[int, ...] = (0,)) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=900, check=False)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if done.returncode not in ok_codes:
        raise RuntimeError(f"{' '.join(command[2:])}: exit {done.returncode}\n"
                           f"{done.stderr[-2000:]}")
    return seconds


# What the user's flow imports of its own, in a bare process: no command or harness can go
# below it (measured on this machine, s57: ~4 s of the flow's ~7).
USERS_OWN_IMPORTS = "import prefect; from kubernetes import client; client.CoreV1Api"


def reference(runs: int = 3) -> tuple[float, float]:
    """Median wall and CPU seconds of `USERS_OWN_IMPORTS` in a new Python process."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")}
    walls = [timed([sys.executable, "-c", USERS_OWN_IMPORTS], env) for _ in range(runs)]
    return statistics.median(walls), statistics.median(CPU_SECONDS[-runs:])


def measure(runs: int = 5) -> dict[str, dict[str, float]]:
    """{command: {"first": s, "median": s}}, each command on a PREFECT_HOME of its own."""
    from kube_elevator.tasks.adapters.prefect_server import stop_shared_server

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="command-start-") as scratch:
        folder = Path(scratch)
        (folder / "user_flow.py").write_text(USER_FLOW)
        base = {key: value for key, value in os.environ.items()
                if not key.startswith("PREFECT_")}
        base.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_LOGGING_LEVEL="WARNING")
        # A user's Python keeps the bytecode of the modules it compiles (pip compiles a wheel's
        # at install; a checkout's are written on first import). With PYTHONDONTWRITEBYTECODE
        # (set where these figures were first taken) every command compiled kube-elevator's
        # own modules again from source: ~0.33 s of CPU for the harness's alone
        # (benchmarks/RESULTS.md). The first command measured writes them, as a user's would.
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        with fake_cluster_command(folder) as exports:
            commands: dict[str, tuple[list[str], tuple[int, ...]]] = {
                "run --once": (elevator("run", "--nodegroups", str(NODEGROUPS), "--once",
                                        "--kubeconfig", exports["KUBECONFIG"]), (0,)),
                # no Prometheus beside the fake cluster: a cycle that says so may exit 1
                "pods run --once": (elevator("pods", "run", "--prometheus", "http://127.0.0.1:9",
                                             "--once", "--dry-run", "--metrics-port", "0",
                                             "--health-address", "",
                                             "--kubeconfig", exports["KUBECONFIG"]), (0, 1)),
                "simulate --fast": (elevator("simulate", str(SCENARIO), "--fast"), (0,)),
                "a user's flow on fake_cluster()": (
                    [sys.executable, str(folder / "user_flow.py")], (0,)),
            }
            for name, (command, ok) in commands.items():
                home = folder / f"home-{len(results)}"
                env = {**base, **exports, "PREFECT_HOME": str(home)}
                try:
                    first = timed(command, env, ok)
                    first_cpu = CPU_SECONDS[-1]
                    later = [timed(command, env, ok) for _ in range(runs)]
                    later_cpu = statistics.median(CPU_SECONDS[-runs:])
                finally:
                    home.mkdir(exist_ok=True)
                    stop_shared_server(home)
                results[name] = {"first": first, "median": statistics.median(later),
                                 "first_cpu": first_cpu, "median_cpu": later_cpu}
                print(f"{name}: first {first:.1f} s ({first_cpu:.1f} s CPU), median of {runs} "
                      f"{statistics.median(later):.1f} s ({later_cpu:.1f} s CPU; "
                      f"{', '.join(f'{s:.1f}' for s in later)})", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print("load average before: " + " ".join(f"{load:.2f}" for load in os.getloadavg()))
    reference_wall, reference_cpu = reference()
    print(f"the machine: the user's own imports ({USERS_OWN_IMPORTS}) take "
          f"{reference_wall:.1f} s ({reference_cpu:.1f} s CPU) in a bare process", flush=True)
    results = measure(args.runs)
    print("load average after: " + " ".join(f"{load:.2f}" for load in os.getloadavg()))
    for name, figures in results.items():
        met = (figures["first"] <= FIRST_TARGET_SECONDS
               and figures["median"] <= LATER_TARGET_SECONDS)
        print(f"{name:34} first {figures['first']:5.1f} s (<= {FIRST_TARGET_SECONDS:g}), "
              f"then {figures['median']:5.1f} s (<= {LATER_TARGET_SECONDS:g}); CPU "
              f"{figures['first_cpu']:.1f} s, then {figures['median_cpu']:.1f} s: "
              f"{'met' if met else 'NOT met'}")
    print(json.dumps({**results, "reference": {"wall": reference_wall, "cpu": reference_cpu}}))


if __name__ == "__main__":
    main()
