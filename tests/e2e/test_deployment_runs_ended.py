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
from kube_elevator.flows.deployment_runs import DeploymentRuns
from kube_elevator.tasks.core.process_owner import mark_of


class BeforeTheMark:
    """Prefect's client, but `step` runs (given the run's id) just before the mark lands, as a
    concurrent sweep did while the mark's request stalled; what it returned, and the run's mark
    at that moment, are kept in `seen`."""

    def __init__(self, client: Any, step: Callable[[UUID], Any]) -> None:
        self.client = client
        self.step = step
        self.seen: list[tuple[Any, str | None]] = []

    def update_flow_run(self, flow_run_id: UUID, **changes: Any) -> Any:
        result = self.step(flow_run_id)
        self.seen.append((result, self.client.read_flow_run(flow_run_id).infrastructure_pid))
        return self.client.update_flow_run(flow_run_id, **changes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


@flow
def tick_stand_in() -> str:
    return "ticked"


def test_a_run_ended_while_its_claim_was_marked_is_not_run(prefect_server: None) -> None:
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    with get_client(sync_client=True) as client:
        flow_id = client.create_flow(tick_stand_in)
        deployment_id = client.create_deployment(flow_id=flow_id, name="ended-while-marked")
        run = client.create_flow_run_from_deployment(deployment_id)
        # Another process's sweep ends the run Crashed just before the mark lands.
        ended_elsewhere = BeforeTheMark(client, lambda run_id: client.set_flow_run_state(
            run_id, Crashed(message="abandoned: lost submit"), force=True))
        runs = DeploymentRuns(tick_stand_in, deployment_id, ended_elsewhere)  # type: ignore[arg-type]

        assert runs.execute(run.id) is None

        states = [state.type.value for state in client.read_flow_run_states(run.id)]
        assert states[-1] == "CRASHED", states
        assert "RUNNING" not in states, states


def test_a_claim_whose_mark_is_late_is_marked_by_serves_own_sweep_and_runs(
        prefect_server: None) -> None:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        flow_id = client.create_flow(tick_stand_in)
        deployment_id = client.create_deployment(flow_id=flow_id, name="marked-late")
        run = client.create_flow_run_from_deployment(deployment_id)
        care = AbandonedRuns(client, [deployment_id], say=print,
                             bounds=Bounds(lost_submit=timedelta(0)))
        # serve's own sweep passes just before the mark lands, the lost-submit bound at zero:
        # a claim unmarked for any time at all is past it.
        stalled = BeforeTheMark(client, lambda _run_id: care.sweep(runs.owned))
        runs = DeploymentRuns(tick_stand_in, deployment_id, stalled)  # type: ignore[arg-type]

        outcome = runs.execute(run.id)

        assert stalled.seen == [([], str(mark_of()))]  # not ended: marked as this process's
        assert outcome is not None and outcome.state.is_completed(), outcome
        assert runs.owned() == {}  # finished: no longer held
