"""The Prefect overhead of one tick: a real flow run with every task run recorded, minus the
same steps called without Prefect.

Two setups, each in its own process: Prefect's default (an ephemeral SQLite server, Prefect's
own engine) and ours (a Postgres-backed server, as a real deployment runs, and the heartbeat fix
in flows/prefect_compat.py). Every task run must reach the server: the figure is only valid if the
API lists all of them.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kube_elevator.flows.prefect_compat import SERVER_SETTINGS

RUNS = 15

WORKER = r"""
import json, os, statistics, sys, tempfile, time
from pathlib import Path
import yaml
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.cluster import SimulatedCluster
from kube_elevator.fakes.kube_api import FakeKubeApi
from kube_elevator.fakes.scenario import load_scenario

runs = int(sys.argv[1])
loaded = load_scenario("deployments/examples/scenario.yaml")
with FakeKubeApi() as kube, FakeAws() as aws:
    os.environ.update(aws.env())
    aws.reset()
    cluster = SimulatedCluster(kube, aws, loaded.scenario.asgs, loaded.config.node_groups)
    cluster.create_asgs(1_800_000_000)
    scratch = Path(tempfile.mkdtemp())
    kubeconfig = kube.write_kubeconfig(scratch / "kubeconfig")
    nodegroups = scratch / "nodegroups.yaml"
    nodegroups.write_text(yaml.safe_dump(loaded.config.document.model_dump()))
    from kube_elevator.flows.autoscale import autoscale, live_tick, make_adapters
    from kube_elevator.tasks.core.step import run_plain
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    groups = loaded.config.node_groups
    adapters = make_adapters(str(kubeconfig), "kube-system", None)
    plain = []
    for index in range(runs):
        start = time.perf_counter()
        live_tick(run_plain, adapters, groups, 1_800_000_000 + index, dry_run=True)
        plain.append(time.perf_counter() - start)
    flow_runs, ids = [], []
    import contextlib
    from kube_elevator.flows.prefect_compat import one_client_for_runs
    ours = os.environ.get("ELEVATOR_PREFECT_ENGINE_FIX") == "1"
    # Ours runs the flow as `elevator run` and `elevator watch` do: one client for every run.
    with one_client_for_runs() if ours else contextlib.nullcontext():
        for index in range(runs + 2):
            start = time.perf_counter()
            state = autoscale(nodegroups=str(nodegroups), kubeconfig=str(kubeconfig),
                              dry_run=True, return_state=True)
            elapsed = time.perf_counter() - start
            if index >= 2:  # the first runs warm the server's caches
                flow_runs.append(elapsed)
            ids.append(state.state_details.flow_run_id)
    expected = 3 + 1 + 1 + 1  # collect x3, read-locks, decide (all groups), publish
    deadline = time.monotonic() + 60
    with get_client(sync_client=True) as api:
        while True:
            recorded = api.read_task_runs(flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=ids)))
            if len(recorded) >= expected * len(ids) or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # polling the server's recorder, with a deadline
    print(json.dumps({"plain": statistics.median(plain), "flow": statistics.median(flow_runs),
                      "task_runs": len(recorded), "expected_task_runs": expected * len(ids)}))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_http(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)  # the server is starting: poll with a deadline


# Where Debian's `postgresql` installs its server's programs: a directory per major version.
POSTGRESQL_ROOT = Path("/usr/lib/postgresql")
NO_POSTGRESQL = "PostgreSQL is not installed (Debian: apt-get install postgresql)"


def postgresql_bin(root: Path = POSTGRESQL_ROOT) -> Path | None:
    """The bin directory (initdb, pg_ctl) of the newest PostgreSQL under ROOT, if any."""
    found = sorted(root.glob("*/bin/initdb"))
    return found[-1].parent if found else None


@contextmanager
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL on 127.0.0.1 (Debian's package); yields a SQLAlchemy URL."""
    bin_dir = postgresql_bin()
    if bin_dir is None:
        raise RuntimeError(NO_POSTGRESQL)
    data = Path(tempfile.mkdtemp(prefix="elevator-pg-"))
    port = _free_port()
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_postgres:
        shutil.chown(data, "postgres", "postgres")
    subprocess.run([*as_postgres, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                    "--auth=trust", "--no-sync"], check=True, capture_output=True)
    subprocess.run([*as_postgres, str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-l",
                    str(data / "log"), "-o",
                    f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off",
                    "start"], check=True, capture_output=True)
    try:
        subprocess.run([*as_postgres, str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p",
                        str(port), "-U", "postgres", "prefect"], check=True,
                       capture_output=True)
        yield f"postgresql+asyncpg://postgres@127.0.0.1:{port}/prefect"
    finally:
        subprocess.run([*as_postgres, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "stop"], check=False, capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


# Server loops a tick never needs (schedules are served by `elevator serve` or the worker's
# own scheduler service instance elsewhere; no pauses, no late-run marking, no vacuum): on a
# 2-core machine their wake-ups compete with the API for the CPU. The task-run recorder, the
# event persister and triggers (the event-driven ticks) stay on.
IDLE_SERVICES = ("CANCELLATION_CLEANUP", "DB_VACUUM", "FOREMAN", "LATE_RUNS", "SCHEDULER",
                 "PAUSE_EXPIRATIONS", "REPOSSESSOR", "CLEANUP_RECONCILER", "EVENT_LOGGER")


@contextmanager
def prefect_server(database_url: str | None,
                   settings: dict[str, str] = SERVER_SETTINGS) -> Iterator[str]:
    """A lean `prefect server start` (IDLE_SERVICES off) on 127.0.0.1, with `settings`;
    yields its API URL."""
    port = _free_port()
    home = tempfile.mkdtemp(prefix="elevator-prefect-")
    env = {**os.environ, "PREFECT_HOME": home, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_LOGGING_LEVEL": "WARNING", "PREFECT_UI_ENABLED": "false"}
    env.update({f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in IDLE_SERVICES})
    env.update(settings)
    if database_url:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = database_url
    server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host",
                               "127.0.0.1", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_http(f"http://127.0.0.1:{port}/api/health", 120)
        yield f"http://127.0.0.1:{port}/api"
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:  # a busy machine: never leave it running
            server.kill()
            server.wait()
        shutil.rmtree(home, ignore_errors=True)


def run_worker(api_url: str | None, engine_fix: bool, runs: int = RUNS) -> dict[str, float]:
    env = {**os.environ, "PREFECT_LOGGING_LEVEL": "WARNING",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "ELEVATOR_PREFECT_ENGINE_FIX": "1" if engine_fix else "0",
           "PREFECT_HOME": tempfile.mkdtemp(prefix="elevator-prefect-client-")}
    if api_url:
        env["PREFECT_API_URL"] = api_url
    else:
        env.pop("PREFECT_API_URL", None)  # Prefect's default: an ephemeral SQLite server
    result = subprocess.run([sys.executable, "-c", WORKER, str(runs)], env=env,
                            capture_output=True, text=True, check=False, timeout=900,
                            cwd=Path(__file__).parent.parent)
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    measured: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return measured


def measure() -> dict[str, dict[str, float]]:
    default = run_worker(None, engine_fix=False)
    with postgres() as database, prefect_server(database) as api_url:
        tuned = run_worker(api_url, engine_fix=True)
    return {"default": default, "tuned": tuned}


def compare_recorder() -> dict[str, dict[str, float]]:
    """The same tuned setup with the task-run recorder as Prefect ships it (one event a write)
    and as SERVER_SETTINGS sets it (batched), each on a fresh server."""
    measured = {}
    for label, settings in (("recorder as shipped", {}), ("recorder batched", SERVER_SETTINGS)):
        with postgres() as database, prefect_server(database, settings=settings) as api_url:
            measured[label] = run_worker(api_url, engine_fix=True)
    return measured


if __name__ == "__main__":
    # `--compare-recorder`: what batching the server's task-run recorder saves (RESULTS.md).
    chosen = compare_recorder if "--compare-recorder" in sys.argv[1:] else measure
    print(json.dumps(chosen(), indent=2))
