"""What counts as a tick for `elevator serve`'s health check (issue 40): a run that ran.

The health check (`tasks.core.health`, the Cluster Autoscaler's) fails when no tick finished
within `--max-inactivity`, or none succeeded within `--max-failing-time`. A run of the
`autoscale` deployment is a tick once it ran its flow to an end: Completed (a success) or
Failed (a tick that ran and failed, as a CA loop that errored). A run the concurrency limit
cancelled, one cancelled or crashed before it finished, and one Pending or Running for ever
is no tick: counting them kept `/health-check` at 200 while the deployment was wedged and
every run was cancelled.

`--ticks in-process` decides this from the states its own runs ended in (`tick_outcome`);
`--ticks runs`, whose runs are other processes', from the runs the server recorded
(`ServedTicks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from kube_elevator.tasks.core.health import LoopHealth

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

TICK_STATES = ("COMPLETED", "FAILED")
NEWEST = 20  # runs read a pass: far more than end between two passes


def tick_outcome(state_types: Iterable[str]) -> bool | None:
    """The ticks among runs that ended in `state_types`: True when each one that ran
    completed, False when one failed, None when none ran (cancelled, crashed: no tick)."""
    ran = [state for state in state_types if state in TICK_STATES]
    if not ran:
        return None
    return all(state == "COMPLETED" for state in ran)


class ServedTicks:
    """`deployment_id`'s runs that ended Completed or Failed after `since`, recorded in
    `health` as ticks, each once, as a pass finds them."""

    def __init__(self, health: LoopHealth, deployment_id: UUID, since: datetime,
                 clock: Callable[[], float]) -> None:
        self.health = health
        self.deployment_id = deployment_id
        self.since = since  # the newest end recorded (at first: the start)
        self.clock = clock
        self._at_since: set[UUID] = set()  # the runs that ended at `since`, recorded

    def record(self, ended: Iterable[tuple[UUID, str, datetime]]) -> int:
        """Record the (id, state type, end time) of runs that ended; how many were new."""
        new = sorted((end, run_id, state) for run_id, state, end in ended
                     if state in TICK_STATES and (end > self.since or (
                         end == self.since and run_id not in self._at_since)))
        for end, run_id, state in new:
            if end > self.since:
                self.since, self._at_since = end, set()
            self._at_since.add(run_id)
            self.health.finished(self.clock(), end.timestamp(), state == "COMPLETED")
        return len(new)

    def read(self, client: SyncPrefectClient) -> int:
        """One pass: ask the server for the newest ticks that ended; how many were new."""
        from prefect.client.schemas.filters import (
            DeploymentFilter,
            DeploymentFilterId,
            FlowRunFilter,
            FlowRunFilterEndTime,
            FlowRunFilterState,
            FlowRunFilterStateType,
        )
        from prefect.client.schemas.objects import StateType
        from prefect.client.schemas.sorting import FlowRunSort

        runs = client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[self.deployment_id])),
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(
                    any_=[StateType(name) for name in TICK_STATES])),
                # Prefect's own DateTime is a datetime: pydantic takes ours as it is.
                end_time=FlowRunFilterEndTime(after_=self.since)),  # type: ignore[arg-type]
            sort=FlowRunSort.END_TIME_DESC, limit=NEWEST)
        return self.record((run.id, run.state_type.value, run.end_time) for run in runs
                           if run.state_type is not None and run.end_time is not None)
