"""What a tick needs of the cluster and the cloud: the calls its steps make, as protocols.

`tasks.steps.node_groups.Adapters` holds one of each. `tasks.adapters.kube.KubeClient` and
`tasks.adapters.cloud.AsgClient`
satisfy them structurally (the live path, over HTTP); `fakes.memory_world` does too, on plain
Python objects, so the simulator's fast mode runs the same steps with no HTTP in between.
Each method here is called by a step of `flows/tick.py` (`LiveSource`'s reads, the act, lock,
drain and Cluster Autoscaler steps); nothing else belongs here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kube_elevator.tasks.core.lease_state import GroupState
from kube_elevator.tasks.core.records import ESCALATOR_TAINT_KEY, AutoScalingGroup, NodeRecord, PodRecord

if TYPE_CHECKING:
    from kube_elevator.tasks.adapters.fleet_request import FleetRequest
    from kube_elevator.tasks.core.records import AsgTemplateSource


@runtime_checkable  # Prefect validates a flow parameter of type `Adapters` with isinstance
class KubeActions(Protocol):
    """The Kubernetes calls of a tick (`tasks.adapters.kube.KubeClient`'s semantics: 409 on a stale
    resourceVersion, "ensure" writes, 404 as done).

    Example:
        ```python
        kube: ke.KubeActions = ke.KubeClient(kubernetes.config.new_client_from_config())
        ```
    """

    # reads (LiveSource)
    def list_pods(self) -> list[PodRecord]: ...

    def list_nodes(self) -> list[NodeRecord]: ...

    def list_pod_disruption_budgets(self) -> list[dict[str, Any]]: ...

    def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None: ...

    # the group's Lease (tasks.core.lease_state)
    def read_state(self, namespace: str, name: str) -> GroupState: ...

    def write_state(self, namespace: str, name: str, state: GroupState,
                    now: float) -> GroupState: ...

    # nodes and pods (tasks.steps: node_groups, drain, cluster_autoscaler)
    def ensure_tainted(self, name: str, value: str, effect: str,
                       key: str = ESCALATOR_TAINT_KEY) -> bool: ...

    def ensure_untainted(self, name: str, key: str = ESCALATOR_TAINT_KEY) -> bool: ...

    def delete_node(self, name: str) -> bool: ...

    def evict_pod(self, namespace: str, name: str, uid: str = "") -> bool: ...


@runtime_checkable
class CloudActions(Protocol):
    """The Auto Scaling calls of a tick (`tasks.adapters.cloud.AsgClient`'s semantics: clamped,
    retry-safe writes, `CloudError` with Escalator's messages).

    Example:
        ```python
        cloud: ke.CloudActions = ke.AsgClient(boto3.client("autoscaling"), boto3.client("ec2"))
        ```
    """

    def describe(self, names: Sequence[str]) -> dict[str, AutoScalingGroup]: ...

    def set_desired_capacity(self, group: AutoScalingGroup, target: int) -> int: ...

    def terminate_instances(self, group_name: str, nodes: Sequence[NodeRecord]) -> list[str]: ...

    def template_sources(self, names: Sequence[str]) -> dict[str, AsgTemplateSource]: ...

    def launch_times(self, provider_ids: Sequence[str]) -> dict[str, float]:
        """EC2's LaunchTime (Unix seconds) of these nodes' instances, by providerID; those EC2
        does not know (or whose providerID names no instance) are left out."""
        ...

    # The one-shot scale-up through EC2 Fleet (`tasks.adapters.fleet.FleetCalls`'s semantics).
    def launch_fleet(self, request: FleetRequest) -> list[str]: ...

    def wait_until_ready(self, instance_ids: Sequence[str], timeout_seconds: float) -> bool: ...

    def attach_instances(self, asg_name: str, instance_ids: Sequence[str]) -> list[str]: ...

    def terminate_unattached(self, asg_name: str, claim: str, instance_ids: Sequence[str]
                             ) -> tuple[list[str], list[str]]: ...

    def tag_node_group(self, asg_name: str) -> None: ...


__all__ = ["CloudActions", "KubeActions"]
