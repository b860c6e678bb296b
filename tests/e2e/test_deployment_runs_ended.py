"""A claim whose mark is late (seen on Prefect 3.8.6: the mark's request stalled 61 s on a shared
SQLite server, serve's sweep ended the run Crashed as a lost submit, and the run then began and
completed over its Crashed state): serve's own sweep knows the claim as this process's and marks
it; a run another process ended meanwhile is not run after all."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

from prefect import flow

from kube_elevator.flows.abandoned_runs import AbandonedRuns, Bounds
from kube_elevator.flows.autoscale import autoscale
from kube_elevator.flows.deployment_runs import DeploymentRuns
from kube_elevator.tasks.core.process_owner import mark_of


class SweptWhileMarking:
    """Prefect's client, but another process's sweep ends the run Crashed just before the mark
    lands, as serve's own did when the mark's request stalled."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def update_flow_run(self, flow_run_id: UUID, **changes: Any) -> Any:
        from prefect.states import Crashed

        self.client.set_flow_run_state(flow_run_id, Crashed(message="abandoned: lost submit"),
                                       force=True)
        return self.client.update_flow_run(flow_run_id, **changes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_a_run_ended_while_its_claim_was_marked_is_not_run(prefect_server: None) -> None:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        flow_id = client.create_flow(autoscale)
        deployment_id = client.create_deployment(flow_id=flow_id, name="ended-while-marked")
        run = client.create_flow_run_from_deployment(deployment_id)
        runs = DeploymentRuns(autoscale, deployment_id, SweptWhileMarking(client))  # type: ignore[arg-type]

        assert runs.execute(run.id) is None

        states = [state.type.value for state in client.read_flow_run_states(run.id)]
        assert states[-1] == "CRASHED", states
        assert "RUNNING" not in states, states


class SweptBeforeTheMark:
    """Prefect's client, but serve's own sweep passes just before the mark lands, with the
    lost-submit bound at zero: a claim unmarked for any time at all is past it."""

    def __init__(self, client: Any, sweep: Callable[[], list[UUID]]) -> None:
        self.client = client
        self.sweep = sweep
        self.swept: list[tuple[list[UUID], str | None]] = []

    def update_flow_run(self, flow_run_id: UUID, **changes: Any) -> Any:
        ended = self.sweep()
        self.swept.append((ended, self.client.read_flow_run(flow_run_id).infrastructure_pid))
        return self.client.update_flow_run(flow_run_id, **changes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


@flow
def tick_stand_in() -> str:
    return "ticked"


def test_a_claim_whose_mark_is_late_is_marked_by_serves_own_sweep_and_runs(
        prefect_server: None) -> None:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        flow_id = client.create_flow(tick_stand_in)
        deployment_id = client.create_deployment(flow_id=flow_id, name="marked-late")
        run = client.create_flow_run_from_deployment(deployment_id)
        care = AbandonedRuns(client, [deployment_id], say=print,
                             bounds=Bounds(lost_submit=timedelta(0)))
        stalled = SweptBeforeTheMark(client, lambda: care.sweep(runs.owned))
        runs = DeploymentRuns(tick_stand_in, deployment_id, stalled)  # type: ignore[arg-type]

        outcome = runs.execute(run.id)

        assert stalled.swept == [([], str(mark_of()))]  # not ended: marked as this process's
        assert outcome is not None and outcome.state.is_completed(), outcome
        assert runs.owned() == {}  # finished: no longer held
