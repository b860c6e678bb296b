"""A tick killed with SIGKILL ends Crashed on the Prefect server (issue 14, item 8).

`elevator run --once` runs a real tick against the fake cluster, whose pods list never answers
(a `hang` fault): the flow run is Running, stuck in its collect step, when the process is
killed. Nothing in that process can report the end; the crash-detection automation
(`flows/crash_detection.py`: heartbeats expected once a run sent one) marks it Crashed.

The Prefect server may be shared: runs of other flows, with or without heartbeats, are never
marked Crashed by it.
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
from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
from prefect.settings import PREFECT_API_URL

from benchmarks.deadlines import scaled
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.crash_detection import AUTOMATION_NAME, OWN_FLOWS, ensure_crash_detection
from tests.contract.test_faults import two_groups

pytestmark = pytest.mark.usefixtures("prefect_server")

GRACE = timedelta(seconds=35)  # the shortest that still outlasts a 30 s heartbeat


def autoscale_runs() -> list[FlowRun]:
    with get_client(sync_client=True) as client:
        return client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(
            any_=["autoscale"])), flow_run_filter=FlowRunFilter())


def wait_for(what: str, check: object, seconds: float) -> None:
    """Poll the server (it records states from events, after the fact) until `check()`, for
    `seconds` scaled by the one deadline setting (benchmarks/deadlines.py)."""
    deadline = time.monotonic() + scaled(seconds)
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


# A flow run that sleeps until it is killed, of the flow named by its first argument.
SLEEPING_FLOW = """
import sys, time
from prefect import flow

@flow(name=sys.argv[1])
def sleeps() -> None:
    time.sleep(600)

sleeps()
"""


def test_own_flows_are_the_projects_flows() -> None:
    from kube_elevator.flows.autoscale import autoscale
    from kube_elevator.flows.pod_autoscale import pod_autoscale
    from kube_elevator.flows.tune import tune_flow

    assert set(OWN_FLOWS) == {autoscale.name, pod_autoscale.name, tune_flow.name}


def launch_sleeping_flow(flow_name: str, heartbeats: bool) -> subprocess.Popen[bytes]:
    """A subprocess running a flow of that name (with `heartbeats`, every 30 s)."""
    env = {name: value for name, value in os.environ.items()
           if name != "PREFECT_FLOWS_HEARTBEAT_FREQUENCY"}
    env["PREFECT_API_URL"] = str(PREFECT_API_URL.value())
    if heartbeats:
        env["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] = "30"
    return subprocess.Popen([sys.executable, "-c", SLEEPING_FLOW, flow_name], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def sleeping_flow_run(process: subprocess.Popen[bytes], flow_name: str,
                      heartbeats: bool) -> FlowRun:
    """The flow run of a `launch_sleeping_flow` process once the server has it Running (and,
    with `heartbeats`, once its first heartbeat reached the server)."""
    found: list[FlowRun] = []

    def running() -> bool:
        assert process.poll() is None, f"the {flow_name} process ended"
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(
                any_=[flow_name])))
        found[:] = [run for run in runs if run.state is not None and run.state.is_running()]
        return bool(found)

    def heartbeat_recorded() -> bool:
        with get_client(sync_client=True) as client:
            page = client.read_events(EventFilter(
                event=EventNameFilter(name=["prefect.flow-run.heartbeat"]),
                resource=EventResourceFilter(id=[f"prefect.flow-run.{found[0].id}"])),
                limit=1)  # the client's default, 100, is over the server's maximum (50)
        return bool(page.events)

    wait_for(f"a Running {flow_name} run", running, 90)
    if heartbeats:
        wait_for(f"the {flow_name} run's first heartbeat", heartbeat_recorded, 60)
    return found[0]


def state_types(run: FlowRun) -> list[str]:
    with get_client(sync_client=True) as client:
        return [state.type.value for state in client.read_flow_run_states(run.id)]


def start_a_tick_that_hangs(fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path,
                            nodegroups: Path, processes: list[subprocess.Popen[bytes]]
                            ) -> tuple[subprocess.Popen[bytes], FlowRun]:
    """`elevator run --once` on the fake cluster, whose pods list never answers: its process
    (added to `processes` as it starts), and its run, Running, stuck in its collect step."""
    hang = fake_kube.faults.add("hang", method="GET", path="/api/v1/pods", count=None)
    before = {run.id for run in autoscale_runs()}
    env = {**os.environ, **fake_aws.env(), "PREFECT_API_URL": str(PREFECT_API_URL.value()),
           "ELEVATOR_READ_TIMEOUT_SECONDS": "600", "ELEVATOR_RETRY_DELAY_SECONDS": "0"}
    process = subprocess.Popen(
        [sys.executable, "-m", "kube_elevator.flows.cli", "run", "--nodegroups", str(nodegroups),
         "--kubeconfig", str(kubeconfig), "--once"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    processes.append(process)
    assert fake_kube.faults.wait_fired(hang, timeout=scaled(120)), "the tick never listed pods"
    [run] = [run for run in autoscale_runs() if run.id not in before]
    assert run.state is not None and run.state.is_running()
    return process, run


@pytest.mark.usefixtures("crash_detection_removed_after")
def test_a_killed_tick_ends_crashed_and_other_flows_runs_never_do(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path) -> None:
    """A tick killed with SIGKILL ends Crashed, said so by the automation `elevator run`
    would create (here with the shortest grace, to keep this quick; `run` finds it by name and
    leaves it as it is).

    Another team's runs on the same server: one that sends no heartbeats (a worker without
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY) and is still running, and one whose process died after
    a heartbeat. Neither is the automation's business: the killed tick, killed last, is their
    control; by the time it is marked Crashed both others had been silent for longer.

    (Two tests until now, each waiting out the grace; one wait serves both.)"""
    assert ensure_crash_detection(GRACE)
    nodegroups = two_groups(fake_aws, fake_kube, tmp_path, "killed")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        # The two other teams' flows start at once (a process's start is what takes the time
        # here); the tick only once the one that died has: its heartbeats stopped first.
        others = (("other-teams-flow", False), ("other-teams-heartbeat-flow", True))
        processes.extend(launch_sleeping_flow(name, heartbeats) for name, heartbeats in others)
        silent_process, died_process = processes
        silent, died = (sleeping_flow_run(process, name, heartbeats)
                        for process, (name, heartbeats) in zip(processes, others, strict=True))
        died_process.send_signal(signal.SIGKILL)
        died_process.wait(timeout=scaled(30))
        tick_process, tick = start_a_tick_that_hangs(fake_aws, fake_kube, kubeconfig,
                                                     nodegroups, processes)
        tick_process.send_signal(signal.SIGKILL)
        tick_process.wait(timeout=scaled(30))
        fake_kube.faults.clear()

        wait_for("the killed tick's run to be marked Crashed",
                 lambda: "CRASHED" in state_types(tick), GRACE.total_seconds() + 60)
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(tick.id).state
            automations = client.read_automations_by_name(AUTOMATION_NAME)
        assert state is not None and state.is_crashed(), state
        assert "No heartbeat" in (state.message or "")
        assert len(automations) == 1  # `run` found it by name: not created twice
        time.sleep(5)  # the automation's later evaluations, should one be due for the others
        assert "CRASHED" not in state_types(silent), "a run without heartbeats was crashed"
        assert "CRASHED" not in state_types(died), "another flow's run was crashed"
        assert silent_process.poll() is None  # still running: it was not cut short either
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=scaled(30))
