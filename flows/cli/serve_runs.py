"""`elevator serve`'s care of its deployments' runs, at its start and every poll (issue 40):
the abandoned ones ended (`flows.abandoned_runs`), the runs this process holds marked as its
own, and, with `--ticks runs`, the ticks the server recorded counted for the health check
(`flows.served_ticks`); and at its stop, the runs in flight ended, the schedules paused and
Prefect's Runner let go (`serve.run_until_signal`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Collection
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any
from uuid import UUID

from kube_elevator.flows.console_logs import said_on_console
from kube_elevator.tasks.core.process_owner import ProcessMark, mark_of

if TYPE_CHECKING:
    from kube_elevator.flows.cli.stopping import StopDeadline
    from kube_elevator.flows.served_ticks import ServedTicks

log = logging.getLogger(__name__)

# After the grace, how long a run's process has between SIGTERM and SIGKILL.
END_TERM_SECONDS = 1.0
# A Runner cancelled mid-exit (`runner_ended`): how long its task may take to unwind.
CANCELLED_RUNNER_SECONDS = 0.5


def runner_owned(runner: Any) -> dict[UUID, ProcessMark]:
    """The runs Prefect's Runner holds in this process: each being submitted (this process's
    mark) or running in a subprocess (that subprocess's mark, so a subprocess that outlives a
    killed serve keeps its run). Read from the Runner's parts as Prefect 3.8 has them (its
    poller's `_submitting_flow_run_ids`, its `_process_manager`); a Runner without them marks
    nothing, and its runs fall under `flows.abandoned_runs`' age bounds instead. Called in
    the Runner's event loop, so the sets do not change while read."""
    owned: dict[UUID, ProcessMark] = {}
    poller = getattr(runner, "_scheduled_run_poller", None)
    for run_id in set(getattr(poller, "_submitting_flow_run_ids", ()) or ()):
        owned[run_id] = mark_of()
    processes = getattr(runner, "_process_manager", None)
    if processes is not None and hasattr(processes, "flow_run_ids"):
        for run_id in processes.flow_run_ids():
            handle = processes.get(run_id)
            pid = getattr(handle, "pid", None)
            owned[run_id] = mark_of(pid) if isinstance(pid, int) else mark_of()
    return owned


def mark_runs(owned: dict[UUID, ProcessMark]) -> None:
    """Record `owned`'s marks on their runs (`infrastructure_pid`, `flows.abandoned_runs`); a
    server that does not answer is a warning: the next pass marks them."""
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            for run_id, owner in owned.items():
                client.update_flow_run(run_id, infrastructure_pid=str(owner))
    except Exception as error:
        log.warning("the served runs were not marked: %s: %s", type(error).__name__, error)


class RunCare:
    """One pass at a time, each with a client of its own thread."""

    def __init__(self, deployment_ids: Collection[UUID], say: Callable[[str], None],
                 ticks: ServedTicks | None = None, late: Collection[UUID] = (),
                 late_after: timedelta | None = None, stray_flows: Collection[str] = ()) -> None:
        """`late`, `late_after`: the deployments whose runs left Scheduled past their time
        are ended (`flows.abandoned_runs.why_late`); `stray_flows`: the flows whose runs
        outside a deployment, marked with a process of this host that is gone, are ended
        (`flows.abandoned_runs.why_stray`: a killed follower's warm-up run)."""
        self.deployment_ids = list(deployment_ids)
        self.say = say
        self.ticks = ticks
        self.late = list(late)
        self.late_after = late_after
        self.stray_flows = list(stray_flows)

    def sweep(self, owned: dict[UUID, ProcessMark] | None = None) -> list[UUID]:
        """End the abandoned runs (marking `owned` first) and read the ticks that ended; the
        ids ended. A server that does not answer is a warning: the next pass tries again."""
        from prefect.client.orchestration import get_client

        from kube_elevator.flows.abandoned_runs import AbandonedRuns

        held = dict(owned or {})
        try:
            with get_client(sync_client=True) as client:
                ended = AbandonedRuns(client, self.deployment_ids, self.say,
                                      late=self.late, late_after=self.late_after,
                                      stray_flows=self.stray_flows).sweep(
                    lambda: held)
                if self.ticks is not None:
                    self.ticks.read(client)
                return ended
        except Exception as error:  # the Prefect server is away: serve goes on
            log.warning("the served runs were not checked: %s: %s", type(error).__name__,
                        error)
            return []

    def mark(self, owned: dict[UUID, ProcessMark]) -> None:
        mark_runs(owned)

    async def every(self, seconds: float, owned: Callable[[], dict[UUID, ProcessMark]],
                    mark_seconds: float | None = None) -> None:
        """A pass every `seconds`, until cancelled; `owned` read in the loop's thread, and the
        runs new in it marked every `mark_seconds` between passes: a serve killed just after
        it submitted a run leaves that run marked with a process that is gone (ended at the
        next start), not unmarked (ended only by age). Never ends by itself: serve stops
        when this task ends."""
        marked: dict[UUID, ProcessMark] = {}
        step = min(seconds, mark_seconds or seconds)
        waited = 0.0
        while True:
            await asyncio.sleep(step)
            waited += step
            try:
                held = owned()
            except Exception as error:  # a Runner's parts changed: its runs go unmarked
                log.warning("the Runner's runs were not read: %s", error)
                held = {}
            if waited >= seconds:
                waited = 0.0
                await asyncio.to_thread(self.sweep, held)
            else:
                new = {run_id: owner for run_id, owner in held.items()
                       if marked.get(run_id) != owner}
                if new:
                    await asyncio.to_thread(self.mark, new)
            marked = held


def cancel_runs(run_ids: Collection[UUID], message: str,
                sleep: Callable[[float], None] = time.sleep) -> list[UUID]:
    """End `run_ids` Cancelled with `message`, each unless it has ended already (a tick that
    finished meanwhile keeps its Completed); the ids Cancelled. A server that does not answer
    is a warning: the runs then end as their processes do. A busy answer is sent again at once,
    as the pause's (`pause_schedules`): this is the stop's last call before its deadline."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import Abort
    from prefect.states import Cancelled
    from prefect.utilities.engine import propose_state_sync

    from kube_elevator.tasks.adapters.prefect_busy import prefect_retries_off, retried_while_busy

    cancelled = []
    try:
        with prefect_retries_off(), get_client(sync_client=True) as client:
            for run_id in run_ids:
                # A read sent twice reads once.
                state = retried_while_busy(partial(client.read_flow_run, run_id),
                                           idempotent=True, sleep=sleep).state
                if state is not None and state.is_final():
                    continue
                try:
                    # Sent again only after a busy answer, which carried nothing out.
                    ended = retried_while_busy(
                        partial(propose_state_sync, client, Cancelled(message=message),
                                flow_run_id=run_id), sleep=sleep)
                except Abort:  # ended meanwhile
                    continue
                if ended.is_cancelled():
                    cancelled.append(run_id)
    except Exception as error:  # the server is away: the stop goes on
        log.warning("the runs in flight were not cancelled: %s: %s", type(error).__name__,
                    error)
    return cancelled


# The message of a run serve ended because it stopped before the run's flow began.
NOT_BEGUN_MESSAGE = "serve stopped before the run began"


class SubmissionGuard:
    """No run of the Runner's starts once serve is stopping, even one whose claim was in flight.

    Prefect's Runner (3.8 and 3.9: `ScheduledRunPoller._submit_run`, `FlowRunExecutor.submit`)
    claims a run (`StateProposer.propose_pending`: Scheduled -> Pending), then proposes
    Submitting (`propose_submitting`), then starts its process. A claim already awaiting the
    server when the signal came is answered later (the concurrency slot freed by the run that
    just finished): replacing the method at the signal does not reach that call, and the run
    started after the signal, its process then killed at the grace (issue 40). So both
    proposals are wrapped from the Runner's start (`runner`): once `stopping`, a claim is not
    made (the run stays Scheduled for the next serve), and a proposal the server accepted
    after the stop began ends its run Cancelled, through orchestration (not `force`: so the
    deployment's concurrency slot is released), answering False: the Runner starts nothing.
    An accepted claim is marked with this process (`mark_runs`) before the Runner goes on: a
    serve killed mid-submit leaves a run the next serve ends at once, its owner gone
    (`flows.abandoned_runs`), not one that holds the slot for a minute.
    """

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.stopping = False

    def runner(self, **options: Any) -> Any:
        """Prefect's `Runner(**options)`, guarded as it enters (its state proposer is made
        in `Runner.__aenter__`, before its poller's first poll)."""
        from prefect.runner import Runner

        guard = self

        class GuardedRunner(Runner):
            async def __aenter__(self) -> Any:
                entered = await super().__aenter__()
                guard.install(self)
                return entered

        return GuardedRunner(**options)

    def install(self, runner: Any) -> bool:
        """Wrap the proposals of `runner`'s state proposer (once); False when it has none (a
        Runner whose parts changed: the stop then refuses only the runs not yet claimed)."""
        proposer = getattr(runner, "_state_proposer", None)
        if proposer is None or getattr(proposer, "_kube_elevator_guarded", False):
            return proposer is not None
        for name, claimed in (("propose_pending", False), ("propose_submitting", True)):
            original = getattr(proposer, name, None)
            if original is not None:
                setattr(proposer, name, self._guarded(original, claimed))
        proposer._kube_elevator_guarded = True
        return True

    def stop(self, runner: Any) -> None:
        """From now on no run is submitted; the poller stops polling. Safe from a signal
        handler: attribute assignments."""
        self.stopping = True
        poller = getattr(runner, "_scheduled_run_poller", None)
        if poller is not None:
            poller.stopping = True

    def _guarded(self, original: Callable[..., Any], claimed: bool
                 ) -> Callable[..., Any]:
        """`original` (True: go on with the run), refused once stopping. `claimed`: the run is
        Pending already when it is called (Submitting), so a refusal ends it."""
        async def guarded(flow_run: Any, *args: Any, **kwargs: Any) -> Any:
            if self.stopping:
                if claimed:  # Pending: it holds the slot until ended
                    await asyncio.to_thread(self._end, flow_run)
                return False  # not claimed: still Scheduled, for the next serve
            accepted = await original(flow_run, *args, **kwargs)
            if accepted and self.stopping:  # the stop began while the server answered
                await asyncio.to_thread(self._end, flow_run)
                return False
            if accepted and not claimed:
                # This process's run now: marked before the Runner goes on, not at the next
                # poll. A serve killed in between left the run Pending with no owner, holding
                # the slot until `LOST_SUBMIT` (60 s, past a 15 s interval). Only the claim's
                # winner marks: a mark before the claim would overwrite another serve's.
                await asyncio.to_thread(mark_runs, {flow_run.id: mark_of()})
            return accepted

        return guarded

    def _end(self, flow_run: Any) -> None:
        if cancel_runs([flow_run.id], NOT_BEGUN_MESSAGE):
            self.say(f"flow run '{flow_run.name}' ended Cancelled: {NOT_BEGUN_MESSAGE}")


def submitting(runner: Any) -> set[UUID]:
    """The runs the Runner's poller is submitting or running (Prefect 3.8, 3.9: its
    `_submitting_flow_run_ids`, held until the run's process exits); none without it."""
    poller = getattr(runner, "_scheduled_run_poller", None)
    return set(getattr(poller, "_submitting_flow_run_ids", ()) or ())


def not_begun(run_ids: Collection[UUID]) -> list[UUID]:
    """Those of `run_ids` still Pending: their processes started, their flows not begun (the
    process importing, 2-10 s on a busy machine). A server that does not answer: none."""
    from prefect.client.orchestration import get_client

    found = []
    try:
        with get_client(sync_client=True) as client:
            for run_id in run_ids:
                state = client.read_flow_run(run_id).state
                if state is not None and state.is_pending():
                    found.append(run_id)
    except Exception as error:  # the server is away: they keep their grace
        log.warning("the runs in flight were not read: %s: %s", type(error).__name__, error)
    return found


async def end_not_begun(runner: Any, processes: Any, deadline: float,
                        stopping: StopDeadline) -> None:
    """Until the runs in flight end (or `deadline`): each run's process, as it is seen, whose
    run is still Pending (its flow not begun: the process importing, which takes 2-10 s on a
    busy machine) is ended Cancelled, saying why, and killed at once rather than waited for
    through the grace; a run Running keeps its grace. Also waits for the runs being submitted
    (their claims in flight: `SubmissionGuard` ends them unstarted).

    The race with the run's process proposing Running as serve proposes Cancelled: Prefect's
    orchestration does not refuse a Cancelled run's Running (a terminal run may run again:
    core_policy's HandleFlowTerminalStateTransitions refuses only Cancelling, Paused and
    Crashed), and Prefect's API has no conditional proposal (Cancelled only if still
    Pending). So serve freezes the process (SIGSTOP) before it looks: it cannot propose Running
    from then on. It looks; Running (it began before the freeze): it goes on (SIGCONT) and
    keeps its grace; Pending: Cancelled, then SIGKILL. Left: a Running sent just before the
    freeze that the server answers only after serve's look. Before serve's Cancelled, the run
    is Cancelled from Running and killed as it begins, while it reads (its pod list comes
    before any change); after it, the run is Running again, and the kill ends it Crashed
    (Prefect's Runner reports the exit). Either way no tick acts after the signal, and the
    next serve ticks again: the choice of a stop that never waits for an import."""
    loop = asyncio.get_running_loop()
    looked: set[UUID] = set()
    while loop.time() < deadline:
        flying = set(processes.flow_run_ids())
        if not flying and not submitting(runner):
            return
        new = flying - looked
        looked |= new
        if new:
            await _end_if_not_begun(processes, new, stopping)
        await asyncio.sleep(0.1)


async def _end_if_not_begun(processes: Any, run_ids: set[UUID],
                            stopping: StopDeadline) -> None:
    """Freeze the processes of `run_ids`, end (Cancelled, then killed) those whose runs are
    Pending, and let the others go on (`end_not_begun`)."""
    cancelled: list[UUID] = []
    signal_runs(processes, run_ids, signal.SIGSTOP)
    try:
        early = await asyncio.to_thread(not_begun, run_ids)
        if early:
            stopping.doing = "ending the runs whose flows had not begun"
            cancelled = await asyncio.to_thread(cancel_runs, early, NOT_BEGUN_MESSAGE)
            for run_id in cancelled:
                stopping.say(f"flow run {run_id} ended Cancelled: {NOT_BEGUN_MESSAGE}")
            said_on_console(cancelled)  # not Prefect's "SIGKILL ... memory limits" after it
            signal_runs(processes, cancelled, signal.SIGKILL)
    finally:  # whatever happened (the stop's deadline, too), no process is left frozen
        signal_runs(processes, run_ids - set(cancelled), signal.SIGCONT)
        stopping.doing = "waiting for the run in flight"


def signal_runs(processes: Any, run_ids: Collection[UUID], signum: signal.Signals) -> None:
    """`signum` to the processes of `run_ids` (by pid: a process that has exited is skipped)."""
    for run_id in run_ids:
        pid = getattr(processes.get(run_id), "pid", None)
        if isinstance(pid, int):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)


async def end_processes(processes: Any, term_seconds: float = END_TERM_SECONDS,
                        cancelled: Collection[UUID] = ()) -> None:
    """The runs' processes still in flight after the grace: SIGTERM, then SIGKILL after
    `term_seconds`; those of the runs `cancelled` already (`cancel_runs`), SIGKILL
    at once. Prefect's engine takes a SIGTERM without its Runner's cancel for a crash and
    forces its run Crashed over our Cancelled; killed, it cannot, and the Runner's own
    Crashed is refused for a run already ended. Prefect's Runner would cancel each with
    SIGTERM and wait up to 30 s for it, past the stop's deadline; and a run's process that
    took the signal (a SIGTERM to the whole group) may still be waiting for its tick's
    threads, blocked on a slow API, to end: the stop would outlast the grace, and the
    process serve. A run not Cancelled ends Crashed (the Runner, or the next serve's
    `flows.abandoned_runs`)."""
    loop = asyncio.get_running_loop()
    flying = set(processes.flow_run_ids())
    signal_runs(processes, flying & set(cancelled), signal.SIGKILL)
    signal_runs(processes, flying - set(cancelled), signal.SIGTERM)
    until = loop.time() + term_seconds
    while processes.flow_run_ids() and loop.time() < until:
        await asyncio.sleep(0.1)
    kill_in_flight(processes)


def kill_in_flight(processes: Any) -> None:
    """SIGKILL to each run's process still in flight (`processes`: the Runner's)."""
    signal_runs(processes, set(processes.flow_run_ids()), signal.SIGKILL)


def kill_runs(runner: Any) -> None:
    """The Runner's runs' processes killed: a forced stop leaves none behind, frozen or
    ticking (its run ends Crashed at the next serve's look, `flows.abandoned_runs`). The
    Runner's process manager is read now: it makes a new one as it starts."""
    processes = getattr(runner, "_process_manager", None)
    if processes is not None:
        kill_in_flight(processes)


def pause_schedules(deployment_ids: Collection[UUID],
                    sleep: Callable[[float], None] = time.sleep) -> None:
    """Pause the schedules until the next start, as Prefect's Runner does for the deployments
    it serves: no scheduled runs pile up while nothing would run them. A busy answer (a SQLite
    server's lock) is retried at once, not after Prefect's 2-16 s backoff, which outlasted the
    stop's deadline on a loaded machine (`tasks.adapters.prefect_busy`); a server that does not
    answer is a warning (the stop's deadline bounds the wait). `sleep`: between busy answers."""
    if not deployment_ids:
        return
    from prefect.client.orchestration import get_client

    from kube_elevator.tasks.adapters.prefect_busy import prefect_retries_off, retried_while_busy

    try:
        with prefect_retries_off(), get_client(sync_client=True) as client:
            for deployment_id in deployment_ids:
                # A pause sent twice pauses once.
                retried_while_busy(partial(client.pause_deployment, deployment_id),
                                   idempotent=True, sleep=sleep)
    except Exception as error:
        log.warning("the schedules were not paused: %s: %s", type(error).__name__, error)


async def runner_ended(started: asyncio.Future[None], seconds: float,
                       say: Callable[[str], None]) -> None:
    """Prefect's Runner's own exit (`started`: its `start()`), for at most `seconds`. What serve
    owes is done by then: no run in flight, the schedules paused. The rest is the Runner's
    bookkeeping, a Crashed state proposed for each run it saw killed (refused: the run ended
    Cancelled) and its client's close, each a round trip to the server; on two busy CPUs (load
    5.6, s58's fresh clone) they outlasted the stop's deadline, exit 1, with nothing left
    undone. Past `seconds` the Runner is cancelled, and serve exits 0."""
    seconds = max(0.0, seconds)
    done, _ = await asyncio.wait({started}, timeout=seconds)
    if not done:
        say(f"Prefect's Runner had not finished its exit within {seconds:.1f}s: cancelled "
            "(its runs had ended)")
        started.cancel()
        await asyncio.wait({started}, timeout=CANCELLED_RUNNER_SECONDS)
        if started.done() and not started.cancelled():
            started.exception()  # retrieved: a Runner cancelled mid-exit may raise anything
        return
    with contextlib.suppress(asyncio.CancelledError):
        await started  # the Runner's own error, if it ended on one
