"""A tick killed with SIGKILL ends Crashed on the Prefect server (issue 14, item 8).

`elevator run --once` runs a real tick against the fake cluster, whose pods list never answers
(a `hang` fault): the flow run is Running, stuck in its collect step, when the process is
killed. Nothing in that process can report the end; the crash-detection automation
(`flows/crash_detection.py`: heartbeats expected while a run is Running) marks it Crashed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from prefect import get_client
from prefect.client.schemas.filters import FlowFilter, FlowFilterName, FlowRunFilter
from prefect.client.schemas.objects import FlowRun
from prefect.settings import PREFECT_API_URL

from fakes.aws import FakeAws
from fakes.kube_api.server import FakeKubeApi
from flows.crash_detection import AUTOMATION_NAME, ensure_crash_detection
from tests.contract.test_faults import two_groups

pytestmark = pytest.mark.usefixtures("prefect_server")

GRACE = timedelta(seconds=35)  # the shortest that still outlasts a 30 s heartbeat


def autoscale_runs() -> list[FlowRun]:
    with get_client(sync_client=True) as client:
        return client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(
            any_=["autoscale"])), flow_run_filter=FlowRunFilter())


def wait_for(what: str, check: object, seconds: float) -> None:
    """Poll the server (it records states from events, after the fact) until `check()`."""
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.fixture
def crash_detection_removed_after() -> Iterator[None]:
    """The automation watches every later flow run on the session's server (its proactive
    trigger costs the shared SQLite server, measured: a later 8-tick flow simulation took
    84 s instead of 24 s): remove it when the test ends."""
    yield
    with get_client(sync_client=True) as client:
        for automation in client.read_automations_by_name(AUTOMATION_NAME):
            client.delete_automation(automation.id)


@pytest.mark.usefixtures("crash_detection_removed_after")
def test_a_killed_tick_ends_crashed(fake_aws: FakeAws, fake_kube: FakeKubeApi,
                                    kubeconfig: Path, tmp_path: Path) -> None:
    # The automation `elevator run` would create, with the shortest grace to keep this quick;
    # `run` finds it by name and leaves it as it is.
    assert ensure_crash_detection(GRACE)
    nodegroups = two_groups(fake_aws, fake_kube, tmp_path, "killed")
    hang = fake_kube.faults.add("hang", method="GET", path="/api/v1/pods", count=None)
    before = {run.id for run in autoscale_runs()}
    env = {**os.environ, **fake_aws.env(), "PREFECT_API_URL": str(PREFECT_API_URL.value()),
           "ELEVATOR_READ_TIMEOUT_SECONDS": "600", "ELEVATOR_RETRY_DELAY_SECONDS": "0"}
    process = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", "run", "--nodegroups", str(nodegroups),
         "--kubeconfig", str(kubeconfig), "--once"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert fake_kube.faults.wait_fired(hang, timeout=120), "the tick never listed pods"
        [run] = [run for run in autoscale_runs() if run.id not in before]
        assert run.state is not None and run.state.is_running()
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    fake_kube.faults.clear()

    def crashed() -> bool:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(run.id).state
        return state is not None and state.is_crashed()

    wait_for("the killed tick's run to be marked Crashed", crashed,
             GRACE.total_seconds() + 60)
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(run.id).state
        automations = client.read_automations_by_name(AUTOMATION_NAME)
    assert state is not None and "No heartbeat" in (state.message or "")
    assert len(automations) == 1  # `run` found it by name: not created twice
