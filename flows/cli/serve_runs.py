"""`elevator serve`'s care of its deployments' runs, at its start and every poll (issue 40):
the abandoned ones ended (`flows.abandoned_runs`), the runs this process holds marked as its
own, and, with `--ticks runs`, the ticks the server recorded counted for the health check
(`flows.served_ticks`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from kube_elevator.tasks.core.process_owner import ProcessMark, mark_of

if TYPE_CHECKING:
    from kube_elevator.flows.served_ticks import ServedTicks

log = logging.getLogger(__name__)


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


class RunCare:
    """One pass at a time, each with a client of its own thread."""

    def __init__(self, deployment_ids: Collection[UUID], say: Callable[[str], None],
                 ticks: ServedTicks | None = None, late: Collection[UUID] = (),
                 late_after: timedelta | None = None) -> None:
        """`late`, `late_after`: the deployments whose runs left Scheduled past their time
        are ended (`flows.abandoned_runs.why_late`)."""
        self.deployment_ids = list(deployment_ids)
        self.say = say
        self.ticks = ticks
        self.late = list(late)
        self.late_after = late_after

    def sweep(self, owned: dict[UUID, ProcessMark] | None = None) -> list[UUID]:
        """End the abandoned runs (marking `owned` first) and read the ticks that ended; the
        ids ended. A server that does not answer is a warning: the next pass tries again."""
        from prefect.client.orchestration import get_client

        from kube_elevator.flows.abandoned_runs import AbandonedRuns

        held = dict(owned or {})
        try:
            with get_client(sync_client=True) as client:
                ended = AbandonedRuns(client, self.deployment_ids, self.say,
                                      late=self.late, late_after=self.late_after).sweep(
                    lambda: held)
                if self.ticks is not None:
                    self.ticks.read(client)
                return ended
        except Exception as error:  # the Prefect server is away: serve goes on
            log.warning("the served runs were not checked: %s: %s", type(error).__name__,
                        error)
            return []

    def mark(self, owned: dict[UUID, ProcessMark]) -> None:
        """Record `owned`'s marks on their runs; a server that does not answer is a warning."""
        from prefect.client.orchestration import get_client

        try:
            with get_client(sync_client=True) as client:
                for run_id, owner in owned.items():
                    client.update_flow_run(run_id, infrastructure_pid=str(owner))
        except Exception as error:  # the next pass marks them
            log.warning("the served runs were not marked: %s: %s", type(error).__name__, error)

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


def cancel_runs(run_ids: Collection[UUID], message: str) -> list[UUID]:
    """End `run_ids` Cancelled with `message`, each unless it has ended already (a tick that
    finished meanwhile keeps its Completed); the ids Cancelled. A server that does not answer
    is a warning: the runs then end as their processes do."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import Abort
    from prefect.states import Cancelled
    from prefect.utilities.engine import propose_state_sync

    cancelled = []
    try:
        with get_client(sync_client=True) as client:
            for run_id in run_ids:
                state = client.read_flow_run(run_id).state
                if state is not None and state.is_final():
                    continue
                try:
                    ended = propose_state_sync(client, Cancelled(message=message),
                                               flow_run_id=run_id)
                except Abort:  # ended meanwhile
                    continue
                if ended.is_cancelled():
                    cancelled.append(run_id)
    except Exception as error:  # the server is away: the stop goes on
        log.warning("the runs in flight were not cancelled: %s: %s", type(error).__name__,
                    error)
    return cancelled
