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

The three cases (server kind, `--ticks` mode, owner) run side by side in one test: each waits
out the real grace (three 30 s heartbeats, Prefect's minimum frequency), so one after another
they took three graces (~390 s); side by side, each with its own server, serve and fake
cluster, they take about one.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import pytest

from benchmarks.deadlines import scaled
from benchmarks.event_latency import BurstCluster, Child, PrefectServer, wait_until
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


@dataclass(frozen=True)
class Case:
    """One of the cases: the server's kind, serve's `--ticks` mode, the silent run's owner."""
    name: str
    kind: str
    ticks: str
    owner: str | None


CASES = (
    Case("sqlite-in-process-no-owner", "sqlite", "in-process", None),
    Case("postgres-in-process-another-host", "postgres", "in-process", ANOTHER_HOST),
    Case("sqlite-runs-another-host", "sqlite", "runs", ANOTHER_HOST),
)

T = TypeVar("T")


def side_by_side(work: Callable[[T], Any], items: list[T]) -> list[Any]:
    """`work` on each item in a thread of its own (each in a copy of this thread's context, where
    Prefect keeps its settings); the results in order, or the first item's error re-raised."""
    with ThreadPoolExecutor(len(items)) as pool:
        futures = [pool.submit(contextvars.copy_context().run, work, item) for item in items]
        return [future.result() for future in futures]


def servers_for(cases: tuple[Case, ...], stack: contextlib.ExitStack,
                request: pytest.FixtureRequest) -> list[PrefectServer]:
    """A `prefect server start` of each case's kind, started at once (each start is mostly
    waiting on imports; one after another they took 30-90 s here)."""
    servers = [PrefectServer(settings={
        "PREFECT_API_DATABASE_CONNECTION_URL": request.getfixturevalue("postgres_url")}
        if case.kind == "postgres" else {}) for case in cases]
    for server in servers:
        stack.callback(server.stop)
    side_by_side(PrefectServer.start, servers)
    return servers


def test_running_runs_without_a_visible_owner_end_when_their_heartbeats_stop(
        fake_aws: FakeAws, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Before: kept Running for `FOREIGN_RUNNING` (an hour), the slot held, every tick due
    cancelled. Now: Crashed once silent for the heartbeat grace (a sweep later), saying so,
    and a tick completes within an interval of it; in each case of `CASES`."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with contextlib.ExitStack() as stack:
        servers = servers_for(CASES, stack, request)
        clusters: list[BurstCluster] = []
        for case in CASES:  # a fake API each: the cases' nodes carry the same labels
            (tmp_path / case.name).mkdir()
            clusters.append(BurstCluster(stack.enter_context(FakeKubeApi()), fake_aws,
                                         tmp_path / case.name))
        left: list[dict[str, str]] = []
        silent_since: list[float] = []  # this test's clock at each run's last heartbeat
        for case, server, cluster in zip(CASES, servers, clusters, strict=True):
            with temporary_settings({PREFECT_API_URL: server.api_url}):
                left.append(leave_a_silent_running_run(
                    str(cluster.nodegroups), str(cluster.kubeconfig), INTERVAL_SECONDS,
                    case.owner))
            silent_since.append(time.monotonic())

        def ends_by_silence(index: int) -> str:
            case, server, cluster = CASES[index], servers[index], clusters[index]
            run_id, deployment_id = UUID(left[index]["run"]), UUID(left[index]["deployment"])
            with group_stopped(Child(serve_command(cluster, case.ticks),
                                     server.env(**fake_aws.env()),
                                     cluster.directory / "serve.log", new_session=True)) as serve:
                serve.wait_for("serving autoscale/autoscale", scaled(SERVE_START_SECONDS))
                # Not before the grace: while it may beat, it is kept (the unit tests' rule).
                if time.monotonic() - silent_since[index] < \
                        HEARTBEAT_GRACE.total_seconds() - CARE_SECONDS:
                    assert state_of(server, run_id).is_running(), case.name
                # Polled once a second: a later look only lengthens the silence measured.
                wait_until(lambda: ended_by_silence(state_of(server, run_id)),
                           HEARTBEAT_GRACE.total_seconds() + scaled(2 * CARE_SECONDS + 30),
                           f"{case.name}: the silent run to end Crashed", interval=1.0)
                ended = datetime.now(UTC)
                ended_at = time.monotonic()
                silence = ended_at - silent_since[index]
                assert silence >= HEARTBEAT_GRACE.total_seconds(), (case.name, silence)
                done = wait_until(lambda: completed_after(server, deployment_id, ended),
                                  INTERVAL_SECONDS + scaled(RUN_START_SLACK_SECONDS),
                                  f"{case.name}: a tick to complete after the silent run "
                                  "ended", interval=0.5)
                next_tick = time.monotonic() - ended_at
                assert done.id != run_id, case.name
                assert "no heartbeat for" in serve.output(), case.name
                os.killpg(serve.process.pid, signal.SIGTERM)
                assert serve.process.wait(timeout=scaled(60)) == 0, serve.output()[-3000:]
            return (f"{case.kind}, --ticks {case.ticks}: the silent run ended {silence:.1f} s "
                    f"after its last heartbeat, the next tick completed {next_tick:.1f} s later "
                    f"(--interval {INTERVAL_SECONDS:g}s; load {os.getloadavg()[0]:.1f})")

        print("", *side_by_side(ends_by_silence, list(range(len(CASES)))), sep="\n")
