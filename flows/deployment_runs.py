"""The `autoscale` deployment's runs, executed in the process that keeps the watch cache.

Prefect's Runner starts every run of a served deployment as a process of its own, and a new
process cannot read this one's cache: its tick would list 150,000 pods again. So
`elevator serve --ticks in-process` executes the deployment's runs itself, as the Runner would:
scheduled runs once due, runs started from the UI's Run button, and a run made at once for a
burst of pending pods. Each is still a run of the deployment, recorded with its task runs, and
the deployment's concurrency limit still holds: the server decides whether a run may go
Pending, for us as for any worker.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

if TYPE_CHECKING:
    from prefect import Flow
    from prefect.client.orchestration import SyncPrefectClient

    from kube_elevator.flows.run_state import RunOutcome
    from kube_elevator.tasks.core.process_owner import ProcessMark

BURST_TAG = "pending-pods"
LEADING_TAG = "leading"  # the run a replica starts as it takes the lead


def utc_now() -> datetime:
    return datetime.now(UTC)


class DeploymentRuns:
    """Finds, claims and runs `deployment_id`'s runs in this process, one at a time."""

    def __init__(self, flow: Flow[..., Any], deployment_id: UUID, client: SyncPrefectClient,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.flow = flow
        self.deployment_id = deployment_id
        self.client = client
        self.clock = clock
        # The run this process has claimed and not finished (read by serve's sweep in another
        # thread: one name's value, swapped whole).
        self.in_hand: UUID | None = None

    def owned(self) -> dict[UUID, ProcessMark]:
        """The run this process holds, with its mark: serve's sweep marks it if the mark is
        not there yet and never ends it (a claim whose mark stalls is this live process's, not
        a lost submit)."""
        from kube_elevator.tasks.core.process_owner import mark_of

        run_id = self.in_hand
        return {} if run_id is None else {run_id: mark_of()}

    def start_now(self, why: str, tag: str = BURST_TAG) -> UUID:
        """A run of the deployment, due now: a burst of pending pods (or a replica that just
        took the lead) should not wait for the schedule. It carries the deployment's
        parameters, like a run from the UI."""
        from prefect.states import Scheduled

        run = self.client.create_flow_run_from_deployment(
            self.deployment_id, state=Scheduled(scheduled_time=self.clock()), tags=[tag])
        return run.id

    def resume(self) -> None:
        """The schedule on again: the replica that led before paused it as it stopped."""
        self.client.resume_deployment(self.deployment_id)

    def due(self) -> list[UUID]:
        """Runs whose time has come, oldest first. Of the schedule's own runs only the newest:
        a tick missed while this process was busy or away is not made up (Escalator ticks on
        an interval; Prefect's Runner would start them together and the concurrency limit
        would cancel all but one). Asking this way also tells the server the deployment is
        being served (the UI shows it Ready)."""
        runs = self.client.get_scheduled_flow_runs_for_deployments(
            [self.deployment_id], scheduled_before=self.clock())
        runs.sort(key=lambda run: run.next_scheduled_start_time or run.expected_start_time
                  or self.clock())
        scheduled = [run.id for run in runs if run.auto_scheduled]
        for late in scheduled[:-1]:
            self._skip(late)
        return [run.id for run in runs if not run.auto_scheduled or run.id == scheduled[-1]]

    def _skip(self, flow_run_id: UUID) -> None:
        from prefect.exceptions import Abort
        from prefect.states import Cancelled
        from prefect.utilities.engine import propose_state_sync

        with contextlib.suppress(Abort):  # taken or ended meanwhile: not ours to skip
            propose_state_sync(self.client, Cancelled(
                message="skipped: a later scheduled tick was due"), flow_run_id=flow_run_id)

    def execute(self, flow_run_id: UUID) -> RunOutcome | None:
        """Claim the run (propose Pending), mark it this process's (`infrastructure_pid`: a
        serve that finds it after this process died ends it, `flows.abandoned_runs`) and run
        its flow here; its outcome as this process computed it. None when the server said no
        (another process claimed it first, or the concurrency limit cancelled it), or when the
        run was ended before it began."""
        from prefect.exceptions import Abort
        from prefect.states import Pending
        from prefect.utilities.engine import propose_state_sync

        try:
            claimed = propose_state_sync(self.client, Pending(), flow_run_id=flow_run_id)
        except Abort:
            return None
        if not claimed.is_pending():
            return None
        self.in_hand = flow_run_id
        try:
            return self._mark_and_run(flow_run_id)
        finally:
            self.in_hand = None

    def _mark_and_run(self, flow_run_id: UUID) -> RunOutcome | None:
        """`execute`'s steps after the claim, while the run is `in_hand`."""
        from prefect.flow_engine import run_flow

        from kube_elevator.flows.run_state import run_here
        from kube_elevator.tasks.core.process_owner import mark_of

        try:
            self.client.update_flow_run(flow_run_id, infrastructure_pid=str(mark_of()))
        except Exception as error:  # serve's sweep marks it (`owned`) at its next pass
            logging.getLogger(__name__).warning("run %s not marked as this process's: %s",
                                                flow_run_id, error)
        flow_run = self.client.read_flow_run(flow_run_id)
        if flow_run.state is None or not flow_run.state.is_pending():
            # Ended while it was being marked (a stalled server, and another serve's sweep
            # took it for a lost submit and ended it Crashed): not run after all.
            return None
        return run_here(lambda: run_flow(  # type: ignore[arg-type, return-value]
            self.flow, flow_run=flow_run, parameters=dict(flow_run.parameters),
            return_type="state"))

    def run_due(self) -> list[RunOutcome]:
        """Every due run, one after another (a tick at a time, as the limit wants)."""
        return [outcome for run_id in self.due()
                if (outcome := self.execute(run_id)) is not None]
