"""Issue 40, a user's flow on `fake_cluster()` in seconds: what the harness costs the user's own
process (benchmarks/RESULTS.md, "A user's flow on fake_cluster()"). Each check runs a user's
script in a process of its own, as `benchmarks/command_start.py`'s USER_FLOW does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.deadlines import scaled
from benchmarks.event_latency import wait_until
from kube_elevator.tasks.adapters.prefect_server import register_user, stop_shared_server
from tests.e2e.test_serve_schedules_and_signals import temporary_server_env

ROOT = Path(__file__).resolve().parents[2]


def run_script(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


# botocore logs each JSON file it parses ("Loading JSON file: <path>", botocore/loaders.py).
PARSED_FILES = """
import json, logging
parsed = []
class Parsed(logging.Handler):
    def emit(self, record):
        if record.msg.startswith("Loading JSON file"):
            parsed.append(str(record.args[0]))
loader_log = logging.getLogger("botocore.loaders")
loader_log.setLevel(logging.DEBUG)
loader_log.addHandler(Parsed())
from kube_elevator.harness import fake_cluster
with fake_cluster(prefect_server=False) as cluster:
    cluster.add_node_group("workers", desired=2)
    assert len(cluster.nodes()) == 2
print(json.dumps(parsed))
"""


def test_moto_and_the_harness_parse_botocores_endpoints_and_ec2_model_once() -> None:
    """moto's own botocore sessions (three at `moto.ec2`'s import, one for its backends'
    regions) each parsed `endpoints.json` and EC2's service model anew: ~0.9 s of CPU. moto's
    answers read a service's model through a loader of its own too
    (`moto.core.utils.get_service_model`), which parsed EC2's once more and listed every
    service botocore has first: ~0.25 s of a cluster's first node group."""
    parsed: list[str] = json.loads(run_script(PARSED_FILES).stdout)
    endpoints = [path for path in parsed if Path(path).name.startswith("endpoints.json")]
    ec2_models = [path for path in parsed
                  if Path(path).parent.parent.name == "ec2"
                  and Path(path).name.startswith("service-2.json")]
    assert len(endpoints) == 1, parsed
    assert len(ec2_models) == 1, parsed


SESSION_AFTER = """
import botocore.loaders, botocore.session
from kube_elevator.harness import fake_cluster
with fake_cluster(prefect_server=False):
    during = botocore.session.get_session().get_component("data_loader")
    again = botocore.session.get_session().get_component("data_loader")
after = botocore.session.get_session().get_component("data_loader")
other = botocore.session.get_session().get_component("data_loader")
print(during is again, after is other, botocore.session.create_loader is botocore.loaders.create_loader)
"""


def test_botocore_sessions_made_after_the_cluster_have_loaders_of_their_own_again() -> None:
    assert run_script(SESSION_AFTER).stdout.split() == ["True", "False", "True"]


# A user's script that ends with status 3 and a line still in stdout's buffer; its handlers
# registered before and after the cluster print what they see.
ENDING = """
import atexit, gc, sys
def last():  # registered first: runs after every other handler
    print("LAST", gc.get_freeze_count() > 100_000, len(gc.get_objects()) < 10_000, flush=True)
atexit.register(last)
from kube_elevator.harness import fake_cluster
with fake_cluster(prefect_server=False) as cluster:
    cluster.add_node_group("workers", desired=1)
# What the cluster made is still walked by the collector (only the imports were frozen).
atexit.register(lambda: print("LATER HANDLER", len(gc.get_objects()) > 10_000, flush=True))
print("partial", end="")
raise SystemExit(3)
"""


def test_a_users_process_ends_with_its_status_and_handlers_without_collecting_it_all() -> None:
    """Python's teardown ran several full collections over what the script left alive (the
    cluster, moto, Prefect): ~1.2 s of CPU. The harness freezes it after the exit handlers
    registered after the cluster started, before the earlier ones (tasks/core/collector.py)."""
    done = subprocess.run([sys.executable, "-c", ENDING], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 3, done.stderr[-3000:]
    assert done.stdout == "partialLATER HANDLER True\nLAST True True\n"


# Two clusters, one after the other, in a user's process: what the collector keeps out of its
# passes before, after the first and after the second.
FROZEN = """
import gc
from kube_elevator.harness import fake_cluster
counts = [gc.get_freeze_count()]
for _ in range(2):
    with fake_cluster(prefect_server=False) as cluster:
        cluster.add_node_group("workers", desired=1)
        counts.append(gc.get_freeze_count())
    garbage = [[]]
    garbage[0].append(garbage)  # a cycle made after the first cluster: still collected
    del garbage
    counts.append(gc.collect())
print(*counts)
"""


def test_the_first_cluster_keeps_the_imports_out_of_later_collections_once() -> None:
    """A user's flow on the harness spent 0.7 s of its ~6 in full collections, most of them
    walking the ~260,000 objects of Prefect's, pydantic's and moto's imports again. The first
    cluster of a process freezes what is alive after moto's import (`gc.freeze`, once: a later
    cluster freezes nothing more, and later cyclic garbage is collected as before)."""
    before, first, collected, second, collected_again = map(
        int, run_script(FROZEN).stdout.split())
    assert before == 0
    assert first > 100_000
    assert second <= first  # frozen objects are still freed when unreferenced: fewer, never more
    assert collected >= 2 and collected_again >= 2


# The benchmark's user flow (benchmarks/command_start.py), with a log line: what it leaves on
# the shared local server once its process has ended.
LOGGING_FLOW = """
import json, os
from kubernetes import client
from prefect import flow, get_run_logger
from kube_elevator.harness import fake_cluster

@flow
def count_nodes() -> int:
    count = len(client.CoreV1Api(fake_cluster_now.api_client()).list_node().items)
    get_run_logger().info("counted %d nodes", count)
    return count

with fake_cluster() as fake_cluster_now:
    fake_cluster_now.add_node_group("workers", desired=2, labels={"pool": "workers"})
    state = count_nodes(return_state=True)
print(json.dumps({"run": str(state.state_details.flow_run_id),
                  "api": os.environ["PREFECT_API_URL"]}))
"""


def api(url: str, body: dict[str, object] | None = None) -> object:
    request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=scaled(30)) as answer:
        return json.loads(answer.read())


@contextmanager
def shared_server_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A user's environment: no PREFECT_API_URL, a new PREFECT_HOME whose shared local server
    stays while the test reads it (this process counts as its user), and is stopped after."""
    home = tmp_path / "prefect-home"
    home.mkdir()
    env = temporary_server_env(home)
    env.pop("ELEVATOR_HARNESS_PREFECT_SERVER", None)  # the harness's default, as a user's
    register_user(home, os.getpid())
    try:
        yield env
    finally:
        stop_shared_server(home)


def test_the_users_flow_run_and_its_logs_are_on_the_shared_server_after_its_process_ends(
        tmp_path: Path) -> None:
    """The process's end skips the collector's passes, not Prefect's exit handlers: the run's
    last state and its log lines, which Prefect's workers send as the process ends, arrive."""
    with shared_server_env(tmp_path) as env:
        done = subprocess.run([sys.executable, "-c", LOGGING_FLOW], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=scaled(600), check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        run = api(f"{answer['api']}/flow_runs/{answer['run']}")
        assert isinstance(run, dict) and run["state"]["type"] == "COMPLETED"
        logs = api(f"{answer['api']}/logs/filter",
                   {"logs": {"flow_run_id": {"any_": [answer["run"]]}}})
        assert isinstance(logs, list)
        assert "counted 2 nodes" in [log["message"] for log in logs]


# A user's flow on the shared local server, in as many `fake_cluster(**options)` blocks one
# after the other as argv says, with the options in argv.
HEARTBEAT_FLOW = """
import json, os, sys
from prefect import flow
from kube_elevator.harness import fake_cluster

@flow
def count_nodes() -> int:
    return len(fake_cluster_now.nodes())

runs = []
for _ in range(int(sys.argv[2])):
    with fake_cluster(**json.loads(sys.argv[1])) as fake_cluster_now:
        fake_cluster_now.add_node_group("workers", desired=2)
        state = count_nodes(return_state=True)
    assert state.is_completed(), state
    runs.append(str(state.state_details.flow_run_id))
print(json.dumps({"runs": runs, "api": os.environ["PREFECT_API_URL"]}))
"""


def test_the_users_flow_runs_send_no_heartbeats_to_the_harnesss_own_server_unless_asked(
        tmp_path: Path) -> None:
    """Prefect's heartbeat thread sleeps in 1 s slices and is joined at a sync run's end: a
    user's flow on the harness waited up to 1 s for it after its last line (0.5-0.9 s measured,
    benchmarks/RESULTS.md). On the local server the harness chose, no automation watches for
    silent runs, so the harness turns them off there (Prefect's own setting, in a settings
    context of its own), in a process's later blocks too (PREFECT_API_URL stays set from the
    first); `flow_heartbeats=True` keeps Prefect's."""
    with shared_server_env(tmp_path) as env:
        found = {}
        for name, options, blocks in (("default", {}, 2), ("asked", {"flow_heartbeats": True}, 1)):
            done = subprocess.run(
                [sys.executable, "-c", HEARTBEAT_FLOW, json.dumps(options), str(blocks)],
                env=env, cwd=ROOT, capture_output=True, text=True, timeout=scaled(600),
                check=False)
            assert done.returncode == 0, done.stderr[-3000:]
            found[name] = json.loads(done.stdout.strip().splitlines()[-1])

        def heartbeats(name: str, index: int = 0) -> int:
            page = api(f"{found[name]['api']}/events/filter", {
                "filter": {"event": {"name": ["prefect.flow-run.heartbeat"]},
                           "resource": {"id": [f"prefect.flow-run.{found[name]['runs'][index]}"]}},
                "limit": 10})
            assert isinstance(page, dict)
            return len(page["events"])

        # The asked run's heartbeat, sent after the default runs' process had ended, reaches
        # the server's events: a heartbeat of a default run would have arrived before it.
        wait_until(lambda: heartbeats("asked") > 0, 60, "the asked run's heartbeat",
                   interval=0.5)
        assert [heartbeats("default", index) for index in (0, 1)] == [0, 0]


# Heavy packages a user's script on the harness need not load (benchmarks/RESULTS.md): moto
# with its EC2 models until a cluster starts, Prefect until the script imports it, kubernetes
# 37's generated API classes (0.6-0.9 s) unless the script's own code calls them, the ASGI
# framework Prefect's server uses, protobuf, matplotlib, the flows.
MODULES_AFTER = """
import sys
import kube_elevator.harness
imported = set(sys.modules)
if sys.argv[1] == "started":
    with kube_elevator.harness.fake_cluster(prefect_server=False) as cluster:
        cluster.add_node_group("workers", desired=2)
        cluster.advance(60)
        assert len(cluster.nodes()) == 2
    imported = set(sys.modules)
print(" ".join(sorted(imported)))
"""
NEVER = ("prefect", "kubernetes.client.api", "fastapi", "google.protobuf", "matplotlib",
         "kube_elevator.flows", "kube_elevator.tasks.pod_autoscalers")


def modules_after(stage: str) -> set[str]:
    return set(run_script(MODULES_AFTER, stage).stdout.split())


def under(modules: set[str], *packages: str) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_importing_the_harness_loads_neither_moto_prefect_nor_the_generated_api_classes() -> None:
    assert under(modules_after("imported"), "moto", "uvicorn", *NEVER) == []


def test_a_cluster_with_a_node_group_loads_no_prefect_nor_the_generated_api_classes() -> None:
    modules = modules_after("started")
    assert under(modules, *NEVER) == []
    assert under(modules, "moto.ec2", "moto.autoscaling")  # what it does use
