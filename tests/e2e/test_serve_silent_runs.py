"""Issue 40, finding 5: a run Running with no owner this serve can see (none recorded, or
another host's: a replica that lost the Lease, a worker) and no process behind it is ended by
its silence, not after an hour: its heartbeats stopped (`flows.abandoned_runs`), on every kind
of server (a `prefect server start` on SQLite and on PostgreSQL; the temporary one's are
tests/e2e/test_serve_abandoned_runs.py's), and the next tick completes within an interval.

The run is left as a process that died mid-tick leaves it: claimed, Running, its last
heartbeat sent (the engine's event, `prefect.flow-run.heartbeat`) before the next serve
started. The crash-detection automation that serve creates never saw that heartbeat (it did
not exist yet), so only the sweep can end the run; the message says which did. The rule, run
by run and with a clock, is tests/unit/test_abandoned_runs.py's.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from benchmarks.deadlines import scaled
from benchmarks.event_latency import BurstCluster, Child, wait_until
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.abandoned_runs import HEARTBEAT_GRACE
from kube_elevator.flows.cli.serve import CARE_SECONDS
from kube_elevator.flows.crash_detection import HEARTBEAT_EVENT
from tests.e2e.test_serve_abandoned_runs import (
    INTERVAL_SECONDS,
    RUN_START_SLACK_SECONDS,
    SERVE_START_SECONDS,
    completed_after,
    leave_a_pending_run,
    serve_command,
    state_of,
)
from tests.e2e.test_serve_schedules_and_signals import (
    group_stopped,
    postgres_url,  # noqa: F401 (a fixture, used by name)
    prefect_server,
)

# A host no process of this test runs on (another replica's pid namespace).
ANOTHER_HOST = "another-replica/4026531999:4242:123"


def leave_a_silent_running_run(nodegroups: str, kubeconfig: str, interval: float,
                               owner: str | None) -> dict[str, str]:
    """As a process that died mid-tick leaves its run: the `autoscale` deployment's slot
    claimed, the run Running with `owner` (None: none recorded), one heartbeat sent, then
    nothing. The run's and the deployment's ids, on PREFECT_API_URL's server."""
    from prefect.client.orchestration import get_client
    from prefect.events import Event
    from prefect.states import Running
    from prefect.utilities.engine import propose_state_sync

    left = leave_a_pending_run(nodegroups, kubeconfig, interval, owner or "")
    with get_client(sync_client=True) as client:
        run_id = UUID(left["run"])
        if owner is None:  # no owner: not even an empty one
            client.update_flow_run(run_id, infrastructure_pid=None)
        assert propose_state_sync(client, Running(), flow_run_id=run_id).is_running()
        run = client.read_flow_run(run_id)
        beat = Event(event=HEARTBEAT_EVENT, resource={
            "prefect.resource.id": f"prefect.flow-run.{run_id}",
            "prefect.resource.name": run.name}, related=[{
                "prefect.resource.id": f"prefect.flow.{run.flow_id}",
                "prefect.resource.role": "flow", "prefect.resource.name": "autoscale"}])
        client.request("POST", "/events", json=[beat.model_dump(mode="json")])
    return left


def ended_by_silence(state: Any) -> bool:
    return state is not None and state.is_crashed() and "no heartbeat for" in (
        state.message or "") and (state.message or "").startswith("abandoned: Running")


@pytest.mark.parametrize(("kind", "ticks", "owner"), [
    pytest.param("sqlite", "in-process", None, id="sqlite-in-process-no-owner"),
    pytest.param("postgres", "in-process", ANOTHER_HOST, id="postgres-in-process-another-host"),
    pytest.param("sqlite", "runs", ANOTHER_HOST, id="sqlite-runs-another-host"),
])
def test_a_running_run_without_a_visible_owner_ends_when_its_heartbeats_stop(
        kind: str, ticks: str, owner: str | None, fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Before: kept Running for `FOREIGN_RUNNING` (an hour), the slot held, every tick due
    cancelled. Now: Crashed once silent for the heartbeat grace (a sweep later), saying so,
    and a tick completes within an interval of it."""
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    with prefect_server(kind, request) as server:
        assert server is not None
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings({PREFECT_API_URL: server.api_url}):
            left = leave_a_silent_running_run(str(cluster.nodegroups), str(cluster.kubeconfig),
                                              INTERVAL_SECONDS, owner)
        silent_since = time.monotonic()
        run_id, deployment_id = UUID(left["run"]), UUID(left["deployment"])
        with group_stopped(Child(serve_command(cluster, ticks), server.env(**fake_aws.env()),
                                 tmp_path / "serve.log", new_session=True)) as serve:
            serve.wait_for("serving autoscale/autoscale", scaled(SERVE_START_SECONDS))
            # Not before the grace: while it may beat, it is kept (the unit tests' rule).
            if time.monotonic() - silent_since < HEARTBEAT_GRACE.total_seconds() - CARE_SECONDS:
                assert state_of(server, run_id).is_running()
            wait_until(lambda: ended_by_silence(state_of(server, run_id)),
                       HEARTBEAT_GRACE.total_seconds() + scaled(2 * CARE_SECONDS + 30),
                       "the silent run to end Crashed")
            ended = datetime.now(UTC)
            ended_at = time.monotonic()
            print(f"\n{kind}, --ticks {ticks}: the silent run ended "
                  f"{ended_at - silent_since:.1f} s after its last heartbeat")
            assert ended_at - silent_since >= HEARTBEAT_GRACE.total_seconds()
            done = wait_until(lambda: completed_after(server, deployment_id, ended),
                              INTERVAL_SECONDS + scaled(RUN_START_SLACK_SECONDS),
                              "a tick to complete after the silent run ended")
            print(f"{kind}, --ticks {ticks}: the next tick completed "
                  f"{time.monotonic() - ended_at:.1f} s later (--interval "
                  f"{INTERVAL_SECONDS:g}s; load {os.getloadavg()[0]:.1f})")
            assert done.id != run_id
            assert "no heartbeat for" in serve.output()
            os.killpg(serve.process.pid, signal.SIGTERM)
            assert serve.process.wait(timeout=scaled(60)) == 0, serve.output()[-3000:]
