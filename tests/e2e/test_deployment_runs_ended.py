"""A run ended while serve marked its claim is not run after all (seen on Prefect 3.8.6: the
mark's request stalled 61 s on a shared SQLite server, serve's sweep ended the run Crashed as a
lost submit, and the run then began and completed over its Crashed state)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from kube_elevator.flows.autoscale import autoscale
from kube_elevator.flows.deployment_runs import DeploymentRuns


class SweptWhileMarking:
    """Prefect's client, but the sweep of another thread ends the run Crashed just before the
    mark lands, as it did when the mark's request stalled."""

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
