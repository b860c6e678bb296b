"""Runs of the served deployments that no process will ever finish, ended Crashed (issue 40).

A serve that is stopped, killed (`kill -9`) or lost mid-submit can leave a run of `autoscale`
Pending ("Submitting") or Running. Nothing will move it again, and while it stays there it
holds the deployment's one concurrency slot: with cancel-new, every later run is cancelled, by
every later serve, for good. Prefect's zombie-run recipe (`flows.crash_detection`) finds only
runs that sent heartbeats, on a server with automations; a run lost before its flow started
sent none. So `elevator serve`, at its start and every poll while it serves, asks the server
for its deployments' Pending, Running and Cancelling runs, and proposes Crashed, with a message
saying why, for each one abandoned. The server then releases the slot
(`ReleaseFlowConcurrencySlots`), and the next due tick runs.

Which run is abandoned (`why_abandoned`): a run's owner is the process that runs it, recorded
in the run's `infrastructure_pid` as `host:pid:start` (`tasks.core.process_owner`; `serve`
marks a run the moment it claims it in-process, and its Runner's claims as they are accepted;
every poll marks the runs its Runner runs in subprocesses, each with the subprocess's own
pid).

- Owner on this host: abandoned when that process is gone (exited, killed, or its pid now
  another process's). A live owner (another serve on this host, a Runner subprocess that
  outlived its killed serve) keeps its run, however long it takes.
- No owner recorded, Pending: a claimer that marks nothing, or marks after its claim, died
  in between (a live one marks within a poll: `LOST_SUBMIT`): abandoned once Pending longer
  than that.
- Owner elsewhere (another replica, another host, a worker's own id), or Running without one:
  this process cannot see that owner's process, so the run's own signs of life speak:
  - Pending: abandoned past `FOREIGN_PENDING` (a worker's pod may pull its image for minutes).
  - Running or Cancelling, and it sent heartbeats since (`prefect.flow-run.heartbeat`, every
    30 s from a serve's runs, `flows.crash_detection`; read from the server's events):
    abandoned once the last is older than `HEARTBEAT_GRACE` (Prefect's zombie-flow recipe, as
    the automation does, but on every server: the sweep needs no automations service). A live
    engine's heartbeat thread beats whatever its tick is doing.
  - Running or Cancelling without a heartbeat (heartbeats off, or a server that keeps no
    events): abandoned past `FOREIGN_RUNNING`, the `autoscale` flow's own timeout and its
    slack (`tasks.core.tick_timeout`): a live engine has ended its run by then.

A run of the ticking deployment left Scheduled past its time (`why_late`) is ended too,
Cancelled: a stopped or killed serve leaves the runs the scheduler made for it while nothing
ran them (a shared server's scheduler goes on making them). Kept, they would all come due at
the next start: `--ticks runs`' Runner claims them together and the concurrency limit cancels
all but one without saying why, and a stale burst run is a tick for pods long placed. A run
later than `late_after` (the interval, and `LATE_SLACK` for a poll and a busy machine) is no
tick a live serve is about to run: Escalator does not make up a missed tick, the next one is
due within an interval.

A run of the `autoscale` flow outside the deployments (a follower's warm-up dry run, `serve`'s
`_warm_up`) holds no slot but stays Running in the UI for good once its serve is killed. Such
a run is ended only when it carries a mark of this host whose process is gone (`why_stray`):
one without a mark, or another host's, may be anyone's own call of the flow, and is left be.

Under leader election only the Lease holder ticks, so a run of the replica that lost the Lease
is another host's: it ends by its own process (its heartbeats stop when that process is gone)
or by age, never cut short by the new leader while that process beats.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from kube_elevator.flows.crash_detection import HEARTBEAT_EVENT, HEARTBEAT_GRACE
from kube_elevator.tasks.core.process_owner import ProcessMark, host_name, lives, parse_mark
from kube_elevator.tasks.core.tick_timeout import TICK_TIMEOUT_SECONDS, TIMEOUT_SLACK_SECONDS

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.objects import FlowRun

# A claim not marked for this long was lost: our serve marks within a poll (2 s by default).
LOST_SUBMIT = timedelta(seconds=60)
FOREIGN_PENDING = timedelta(minutes=15)
# A live engine ends its run at the flow's timeout (`tasks.core.tick_timeout`).
FOREIGN_RUNNING = timedelta(seconds=TICK_TIMEOUT_SECONDS + TIMEOUT_SLACK_SECONDS)
ACTIVE_STATES = ("PENDING", "RUNNING", "CANCELLING")
# How late past the interval a Scheduled run may be before it is no tick a live serve will
# run: a poll, and a loaded machine's delay in claiming it.
LATE_SLACK = timedelta(seconds=30)


@dataclass(frozen=True)
class Bounds:
    """How long a run whose owner this process cannot see may stay where it is."""

    lost_submit: timedelta = LOST_SUBMIT
    foreign_pending: timedelta = FOREIGN_PENDING
    foreign_running: timedelta = FOREIGN_RUNNING
    heartbeat_grace: timedelta = HEARTBEAT_GRACE


def why_abandoned(state_type: str, since: datetime, owner: str | None, now: datetime,
                  host: str, alive: Callable[[ProcessMark], bool],
                  bounds: Bounds = Bounds(), last_heartbeat: datetime | None = None) -> str | None:
    """Why a run in `state_type` (PENDING, RUNNING, CANCELLING) since `since`, owned by
    `owner` (its `infrastructure_pid`), its last heartbeat since then at `last_heartbeat`
    (None: none seen), is abandoned; None while it may still be finished. The rule is the
    module docstring's."""
    mark = parse_mark(owner)
    if mark is not None and mark.host == host:
        if alive(mark):
            return None
        return (f"its process {mark.host}:{mark.pid} is gone (the serve or worker that ran "
                "it stopped or was killed)")
    age = now - since
    pending = state_type == "PENDING"
    who = f"its owner {owner} is not on this host" if owner else "no owner recorded"
    if not pending and last_heartbeat is not None:
        silent = now - last_heartbeat
        if silent <= bounds.heartbeat_grace:
            return None
        return (f"{state_type.title()} with no heartbeat for {silent.total_seconds():.0f} s "
                f"(over {bounds.heartbeat_grace.total_seconds():.0f} s) and {who}: the "
                "process that ran it is gone")
    if not owner and pending:
        limit = bounds.lost_submit
        who = "no process ever took it (lost mid-submit)"
    elif pending:
        limit = bounds.foreign_pending
    else:
        limit = bounds.foreign_running
        who += ", no heartbeat, and past the tick's timeout"
    if age <= limit:
        return None
    return (f"{state_type.title()} for {age.total_seconds():.0f} s (over "
            f"{limit.total_seconds():.0f} s) and {who}")


def needs_heartbeat(state_type: str, owner: str | None, host: str) -> bool:
    """Whether `why_abandoned` reads the run's heartbeats: a run Running or Cancelling whose
    owner this process cannot see."""
    mark = parse_mark(owner)
    return state_type != "PENDING" and (mark is None or mark.host != host)


def last_heartbeat(client: SyncPrefectClient, run_id: UUID, since: datetime,
                   now: datetime) -> datetime | None:
    """When the run last sent a heartbeat between `since` and `now` (the server's events);
    None when it sent none, or the server keeps no events (a Prefect without the events
    API: the age bound speaks instead)."""
    from prefect.events.filters import (
        EventFilter,
        EventNameFilter,
        EventOccurredFilter,
        EventOrder,
        EventResourceFilter,
    )
    from prefect.exceptions import PrefectHTTPStatusError

    read_events = getattr(client, "read_events", None)
    if read_events is None:
        return None
    try:
        page = read_events(EventFilter(
            occurred=EventOccurredFilter(since=since, until=now),  # type: ignore[arg-type]
            event=EventNameFilter(name=[HEARTBEAT_EVENT]),
            resource=EventResourceFilter(id=[f"prefect.flow-run.{run_id}"]),
            order=EventOrder.DESC), limit=1)
    except PrefectHTTPStatusError:  # a server without the events API
        return None
    events = list(page.events)
    if not events:
        return None
    occurred: datetime = events[0].occurred
    return occurred


def why_stray(owner: str | None, host: str, alive: Callable[[ProcessMark], bool]) -> str | None:
    """Why a run of the flow outside the deployments, owned by `owner`, is abandoned: only its
    own mark on this host, of a process that is gone, says so (the module docstring)."""
    mark = parse_mark(owner)
    if mark is None or mark.host != host or alive(mark):
        return None
    return (f"its process {mark.host}:{mark.pid} is gone (the serve that ran it stopped or "
            "was killed)")


def why_late(scheduled_at: datetime, now: datetime, late_after: timedelta) -> str | None:
    """Why a run still Scheduled for `scheduled_at` is abandoned (no serve will run it); None
    while one may still claim it. The rule is the module docstring's."""
    late = now - scheduled_at
    if late <= late_after:
        return None
    return (f"Scheduled for {scheduled_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC and "
            f"{late.total_seconds():.0f} s late (over {late_after.total_seconds():.0f} s): no "
            "serve took it (the one that would have stopped or was killed); a missed tick "
            "is not made up")


def late_runs(client: SyncPrefectClient, deployment_ids: Collection[UUID],
              before: datetime) -> list[FlowRun]:
    """The deployments' runs still Scheduled for a time before `before`."""
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterExpectedStartTime,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    return list(client.read_flow_runs(
        deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=list(deployment_ids))),
        flow_run_filter=FlowRunFilter(
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])),
            # Prefect's own DateTime is a datetime: pydantic takes ours as it is.
            expected_start_time=FlowRunFilterExpectedStartTime(
                before_=before))))  # type: ignore[arg-type]


def active_runs(client: SyncPrefectClient, deployment_ids: Collection[UUID]) -> list[FlowRun]:
    """The deployments' runs that hold or may take a concurrency slot."""
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    return list(client.read_flow_runs(
        deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=list(deployment_ids))),
        flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(
            any_=[StateType(name) for name in ACTIVE_STATES])))))


def stray_runs(client: SyncPrefectClient, flow_names: Collection[str]) -> list[FlowRun]:
    """The flows' runs of no deployment that are Pending, Running or Cancelling."""
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterDeploymentId,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    if not flow_names:
        return []
    return list(client.read_flow_runs(
        flow_filter=FlowFilter(name=FlowFilterName(any_=list(flow_names))),
        flow_run_filter=FlowRunFilter(
            deployment_id=FlowRunFilterDeploymentId(is_null_=True),
            state=FlowRunFilterState(type=FlowRunFilterStateType(
                any_=[StateType(name) for name in ACTIVE_STATES])))))


def utc_now() -> datetime:
    return datetime.now(UTC)


class AbandonedRuns:
    """Marks the runs this process owns, and ends those no process will finish."""

    def __init__(self, client: SyncPrefectClient, deployment_ids: Collection[UUID],
                 say: Callable[[str], None], clock: Callable[[], datetime] = utc_now,
                 bounds: Bounds = Bounds(),
                 alive: Callable[[ProcessMark], bool] = lives,
                 late: Collection[UUID] = (), late_after: timedelta | None = None,
                 stray_flows: Collection[str] = ()) -> None:
        """`late`: the deployments whose runs left Scheduled past `late_after` are ended too
        (the ticking one; a manual run someone asked for waits for a serve). `stray_flows`:
        the flows whose runs outside a deployment are ended when `why_stray` says so."""
        self.client = client
        self.deployment_ids = list(deployment_ids)
        self.say = say
        self.clock = clock
        self.bounds = bounds
        self.alive = alive
        self.host = host_name()
        self.late = list(late)
        self.late_after = late_after
        self.stray_flows = list(stray_flows)

    def mark(self, flow_run_id: UUID, owner: ProcessMark) -> None:
        """Record `owner` as the run's process (`infrastructure_pid`)."""
        self.client.update_flow_run(flow_run_id, infrastructure_pid=str(owner))

    def sweep(self, owned: Callable[[], dict[UUID, ProcessMark]] = dict) -> list[UUID]:
        """One pass: mark the runs `owned` says this process holds (the mark they lack), then
        end every other abandoned one; the ids ended."""
        from prefect.exceptions import Abort
        from prefect.states import Crashed
        from prefect.utilities.engine import propose_state_sync

        ended = []
        runs = active_runs(self.client, self.deployment_ids)
        mine = owned()
        for run in runs:
            held = mine.get(run.id)
            if held is not None:
                if run.infrastructure_pid != str(held):
                    self.mark(run.id, held)
                continue
            state = run.state
            if state is None:
                continue
            now = self.clock()
            beat = (last_heartbeat(self.client, run.id, state.timestamp, now)
                    if needs_heartbeat(state.type.value, run.infrastructure_pid, self.host)
                    else None)
            why = why_abandoned(state.type.value, state.timestamp, run.infrastructure_pid,
                                now, self.host, self.alive, self.bounds, beat)
            if why is None:
                continue
            message = f"abandoned: {why}; ended so the deployment's next run may start"
            try:
                answer = propose_state_sync(self.client, Crashed(message=message),
                                            flow_run_id=run.id)
            except Abort:  # it moved meanwhile: its owner lives after all
                continue
            if answer.is_crashed():
                self.say(f"run {run.name} ({state.name}) ended Crashed: {why}")
                ended.append(run.id)
        return ended + self.sweep_stray() + self.sweep_late()

    def sweep_stray(self) -> list[UUID]:
        """End, Crashed, the `stray_flows`' runs outside a deployment that `why_stray` says no
        process will finish; their ids."""
        from prefect.exceptions import Abort
        from prefect.states import Crashed
        from prefect.utilities.engine import propose_state_sync

        ended = []
        for run in stray_runs(self.client, self.stray_flows):
            why = why_stray(run.infrastructure_pid, self.host, self.alive)
            if why is None or run.state is None:
                continue
            try:
                answer = propose_state_sync(self.client, Crashed(message=f"abandoned: {why}"),
                                            flow_run_id=run.id)
            except Abort:  # it moved meanwhile
                continue
            if answer.is_crashed():
                self.say(f"run {run.name} ({run.state.name}, outside the deployments) ended "
                         f"Crashed: {why}")
                ended.append(run.id)
        return ended

    def sweep_late(self) -> list[UUID]:
        """End, Cancelled, the `late` deployments' runs Scheduled past `late_after`; their
        ids."""
        from prefect.exceptions import Abort
        from prefect.states import Cancelled
        from prefect.utilities.engine import propose_state_sync

        if not self.late or self.late_after is None:
            return []
        now = self.clock()
        ended = []
        for run in late_runs(self.client, self.late, now - self.late_after):
            state = run.state
            at = (state.state_details.scheduled_time if state is not None else None) \
                or run.expected_start_time
            if state is None or at is None:
                continue
            why = why_late(at, now, self.late_after)
            if why is None:
                continue
            message = f"abandoned: {why}; ended so the deployment's next run may start"
            try:
                answer = propose_state_sync(self.client, Cancelled(message=message),
                                            flow_run_id=run.id)
            except Abort:  # claimed meanwhile: a serve runs it after all
                continue
            if answer.is_cancelled():
                ended.append(run.id)
        if ended:
            self.say(f"{len(ended)} run(s) left Scheduled over "
                     f"{self.late_after.total_seconds():.0f} s past their time ended "
                     "Cancelled (abandoned: a missed tick is not made up)")
        return ended
