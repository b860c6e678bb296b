"""Issue 40: without PREFECT_API_URL, `elevator`'s one-shot commands and the harness share one
local Prefect server (tasks/adapters/prefect_server.py) instead of starting Prefect's temporary
server each (20-50 s); it stops itself when idle; `serve --ticks runs`'s runs reach serve's own;
and a server that does not answer in time is one line in every command that starts one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from benchmarks.deadlines import scaled
from benchmarks.event_latency import FREE_HEALTH_PORT, ROOT, BurstCluster, Child, wait_until
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.tasks.adapters.prefect_server import (
    RECORD_NAME,
    USERS_NAME,
    alive,
    register_user,
    started_at,
    stop_shared_server,
)
from tests.e2e.test_serve_schedules_and_signals import (
    elevator,
    group_stopped,
    processes_of,
    temporary_server_env,
)

# A user's own flow on the harness, no PREFECT_API_URL: the flow run's id and the API it used.
USER_FLOW = """
import json, os
from prefect import flow
from kube_elevator.harness import fake_cluster

@flow
def nodes() -> int:
    return len(fake_cluster_now.nodes())

with fake_cluster() as fake_cluster_now:
    fake_cluster_now.add_node_group("workers", desired=2, labels={"pool": "workers"})
    state = nodes(return_state=True)
    assert state.result() == 2
print(json.dumps({"run": str(state.state_details.flow_run_id),
                  "api": os.environ["PREFECT_API_URL"]}))
"""


def recorded(home: Path) -> dict[str, object]:
    return dict(json.loads((home / RECORD_NAME).read_text()))


def flow_run_ids(api_url: str) -> set[str]:
    request = urllib.request.Request(f"{api_url}/flow_runs/filter", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=scaled(30)) as answer:
        return {run["id"] for run in json.loads(answer.read())}


def test_a_users_flows_on_the_harness_share_one_server_that_stops_when_idle(
        tmp_path: Path) -> None:
    home = tmp_path / "prefect-home"
    home.mkdir()
    env = temporary_server_env(home, ELEVATOR_PREFECT_SERVER_IDLE_SECONDS="1")
    env.pop("ELEVATOR_HARNESS_PREFECT_SERVER", None)  # the harness's default, as a user's
    register_user(home, os.getpid())  # this test uses the server too: it stays meanwhile
    script = tmp_path / "user_flow.py"
    script.write_text(USER_FLOW)
    try:
        answers = []
        servers = []
        for _ in range(2):
            done = subprocess.run([sys.executable, str(script)], env=env, cwd=ROOT,
                                  capture_output=True, text=True, timeout=scaled(600), check=False)
            assert done.returncode == 0, done.stderr[-3000:]
            answers.append(json.loads(done.stdout.strip().splitlines()[-1]))
            servers.append(recorded(home))
        # The second process found the first one's server: the same process, the same URL.
        assert servers[0] == servers[1]
        assert answers[0]["api"] == answers[1]["api"] == servers[0]["url"]
        pid = int(str(servers[0]["pid"]))
        assert alive(pid)
        # Each flow run is recorded on it, as the UI would list it.
        assert {answers[0]["run"], answers[1]["run"]} <= flow_run_ids(str(servers[0]["url"]))
        # This test lets go: no user left, it stops by itself within a few idle bounds.
        (home / USERS_NAME / f"{os.getpid()}-{started_at(os.getpid())}").unlink()
        wait_until(lambda: not alive(pid), 120, "the idle server to stop", interval=0.2)
        assert not (home / RECORD_NAME).exists()
    finally:
        stop_shared_server(home)
    assert not processes_of(home)


# --- a server that does not answer in time: one line, in every command that starts one --------

LINE = ("error: the temporary Prefect server this command starts (no PREFECT_API_URL) did not "
        "answer within 1 s: set PREFECT_API_URL to a running Prefect server (start one with "
        "`prefect server start`), or allow it longer with "
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS")
SCENARIO = ROOT / "deployments/examples/scenario.yaml"


@pytest.mark.parametrize("command", [
    pytest.param(("run", "--once"), id="run-once"),
    pytest.param(("pods", "run", "--once", "--prometheus", "http://127.0.0.1:9",
                  "--metrics-port", "0"), id="pods-run-once"),
    pytest.param(("simulate", str(SCENARIO), "--prefect"), id="simulate-prefect"),
    pytest.param(("tune", str(SCENARIO), "--trials", "1", "--seeds", "1", "--held-out", "1"),
                 id="tune"),
])
def test_a_server_that_does_not_answer_in_time_is_one_line(
        command: tuple[str, ...], fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    args = list(command)
    if command[0] == "run":
        args += ["--nodegroups", str(cluster.nodegroups), "--kubeconfig", str(cluster.kubeconfig)]
    elif command[0] == "pods":
        args += ["--kubeconfig", str(cluster.kubeconfig)]
    elif command[0] == "tune":
        args += ["--output", str(tmp_path / "tuned.yaml")]
    home = tmp_path / "prefect-home"
    done = subprocess.run(
        elevator(*args), env=temporary_server_env(
            home, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="1", **fake_aws.env()),
        cwd=tmp_path, capture_output=True, text=True, timeout=scaled(300), check=False)
    both = done.stdout + done.stderr
    assert done.returncode == 1, both[-3000:]
    assert "Traceback" not in both, both[-3000:]
    assert [line for line in done.stderr.splitlines() if "error" in line.lower()] == [LINE], \
        done.stderr[-3000:]
    assert not processes_of(home)  # the server it was still starting is stopped too
    assert not (home / RECORD_NAME).exists()


# --- serve --ticks runs without PREFECT_API_URL ------------------------------------------------


def test_serve_ticks_runs_reaches_its_server_from_each_runs_process(
        fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path) -> None:
    """Each scheduled run is a process of its own: it inherits PREFECT_API_URL naming serve's
    server, instead of starting a temporary server of its own (which took Prefect's 20 s and
    crashed)."""
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    home = tmp_path / "prefect-home"
    command = elevator("serve", "--nodegroups", str(cluster.nodegroups), "--kubeconfig",
                       str(cluster.kubeconfig), "--interval", "3s", "--poll", "0.5s",
                       "--ticks", "runs", *FREE_HEALTH_PORT)
    with group_stopped(Child(command, temporary_server_env(home, **fake_aws.env()),
                             tmp_path / "serve.log", new_session=True)) as serve:
        serve.wait_for("Finished in state Completed", 300)
        assert "Timed out while attempting to connect" not in serve.output()
    assert "Traceback" not in serve.output(), serve.output()[-3000:]
