"""Executing a ScalePlan through the adapters, each action safe to retry.

Escalator order: empty force-tainted and expired tainted nodes are removed first (§5 step 20,
§7.1), then new taints; on scale-up, untaint before asking the cloud for nodes (§6). Every
action is "ensure": a retry after a lost answer does nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from kube_elevator.tasks.adapters.ports import (  # at run time: Prefect validates `Adapters`
    CloudActions,
    KubeActions,
)
from kube_elevator.tasks.core.records import ESCALATOR_TAINT_KEY, AutoScalingGroup, NodeRecord
from kube_elevator.tasks.core.step import step
from kube_elevator.tasks.core.step_inputs import expect, expect_items, expect_number
from kube_elevator.tasks.escalator.plan import ScalePlan

Status = Literal["acted", "nothing to do", "dry run", "lost race", "failed"]


@dataclass(frozen=True)
class ActionsDone:
    """What a tick actually changed (the plan says what it meant to).

    Example:
        >>> done = ke.ActionsDone(untainted=("batch-node-00000",), asg_desired_set=6)
        >>> done.asg_desired_set
        6
    """

    untainted: tuple[str, ...] = ()
    tainted: tuple[str, ...] = ()
    terminated_instances: tuple[str, ...] = ()
    deleted_nodes: tuple[str, ...] = ()
    asg_desired_set: int | None = None
    evicted: tuple[str, ...] = ()  # namespace/name, drained with scale_down.drain
    # A one-shot scale-up (flows/fleet.py): its instances attached to the ASG, and those
    # terminated because they could not be.
    attached_instances: tuple[str, ...] = ()
    fleet_terminated_instances: tuple[str, ...] = ()

    def merged(self, other: ActionsDone) -> ActionsDone:
        return ActionsDone(
            self.untainted + other.untainted, self.tainted + other.tainted,
            self.terminated_instances + other.terminated_instances,
            self.deleted_nodes + other.deleted_nodes,
            other.asg_desired_set if other.asg_desired_set is not None else self.asg_desired_set,
            self.evicted + other.evicted, self.attached_instances + other.attached_instances,
            self.fleet_terminated_instances + other.fleet_terminated_instances)

    def to_json(self) -> dict[str, object]:
        shown: dict[str, object] = {
            "untainted": list(self.untainted), "tainted": list(self.tainted),
            "terminated_instances": list(self.terminated_instances),
            "deleted_nodes": list(self.deleted_nodes),
            "asg_desired_set": self.asg_desired_set}
        if self.evicted:  # only with scale_down.drain: the line stays Escalator's otherwise
            shown["evicted"] = list(self.evicted)
        if self.attached_instances or self.fleet_terminated_instances:  # one-shot groups
            shown["attached_instances"] = list(self.attached_instances)
            shown["fleet_terminated_instances"] = list(self.fleet_terminated_instances)
        return shown


@dataclass(frozen=True)
class Adapters:
    """The clients a tick acts through: `KubeClient` and `AsgClient` live, or the simulator's
    in-memory world (`fakes.memory_world`); the protocols name what the steps call.

    Example:
        ```python
        import boto3
        from kubernetes import config as kube_config

        api = kube_config.new_client_from_config()
        adapters = ke.Adapters(ke.KubeClient(api),
                               ke.AsgClient(boto3.client("autoscaling"), boto3.client("ec2")))
        results = ke.tick(ke.run_plain, ke.LiveSource(adapters), adapters, groups, now=time.time())
        ```
    """

    kube: KubeActions
    cloud: CloudActions
    lease_namespace: str = "kube-system"


@dataclass(frozen=True)
class GroupResult:
    """One group's tick: the plan `elevator plan` prints, and what was actually done.

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> source = ke.SnapshotSource.from_files(
        ...     config.node_groups, ["deployments/examples/cluster.json"])
        >>> result = ke.tick(ke.run_plain, source, None, config.node_groups, now=1795262400.0)[0]
        >>> (result.plan.name, result.status, result.done.untainted)
        ('batch', 'dry run', ())
    """

    plan: ScalePlan
    status: Status
    done: ActionsDone = field(default_factory=ActionsDone)
    message: str = ""
    asg: AutoScalingGroup | None = None  # as described this tick (for the cloud gauges)
    # Escalator's node registration lag, seconds, on the first unlocked tick after a scale-out
    # (metrics only: a simulated clock has no launch times, so tick records leave it out).
    registration_lags_seconds: tuple[float, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {**self.plan.to_json(), "status": self.status, "message": self.message,
                "done": self.done.to_json()}


@step
def taint_and_remove(adapters: Adapters, plan: ScalePlan, asg: AutoScalingGroup,
                     nodes: Sequence[NodeRecord], now: float) -> ActionsDone:
    """Terminate the planned nodes in the ASG (desired decremented), delete them, then taint.

    Example:
        ```python
        if plan.taint or plan.delete:                 # after write_lock claimed the tick
            done = ke.taint_and_remove(adapters, plan, asgs[plan.name], nodes[plan.name], now)
        ```
    """
    _expect_acting("taint_and_remove", adapters, plan, asg)
    expect_items("taint_and_remove", "nodes", nodes, NodeRecord,
                 "NodeRecord (the group's, from filter_nodes)", sample=True)
    expect_number("taint_and_remove", "now", now, "a Unix time in seconds (a float)")
    if plan.dry_mode:
        return ActionsDone()
    terminated: list[str] = []
    deleted: list[str] = []
    if plan.delete:
        by_name = {node.name: node for node in nodes}
        doomed = [by_name[name] for name in plan.delete]
        terminated = adapters.cloud.terminate_instances(asg.name, doomed)
        # Escalator: the cloud first, then the Node objects; a Node already gone is done.
        for node in doomed:
            adapters.kube.delete_node(node.name)
            deleted.append(node.name)
    tainted = []
    stamp = str(int(now))  # Escalator's format: the taint value is Unix seconds
    for name in plan.taint:
        if adapters.kube.ensure_tainted(name, stamp, plan.taint_effect, ESCALATOR_TAINT_KEY):
            tainted.append(name)
    return ActionsDone(tainted=tuple(tainted), terminated_instances=tuple(terminated),
                       deleted_nodes=tuple(deleted))


@step
def registration_lags(adapters: Adapters, nodes: Sequence[NodeRecord],
                      scaled_out_at: float) -> tuple[float, ...]:
    """Escalator's calculateNewNodeMetrics: for each node that registered after the last
    scale-out, seconds from its instance's launch (EC2's LaunchTime) to its registration."""
    new = [node for node in nodes if node.created_unix_seconds > scaled_out_at]
    if not new:
        return ()
    launched = adapters.cloud.launch_times([node.provider_id for node in new])
    return tuple(node.created_unix_seconds - launched[node.provider_id] for node in new
                 if node.provider_id in launched)


@step
def untaint_or_increase(adapters: Adapters, plan: ScalePlan, asg: AutoScalingGroup,
                        one_shot: bool = False) -> ActionsDone:
    """Escalator §6: untaint the planned nodes, then set the ASG to the planned absolute size
    (a `one_shot` group's increase is a fleet instead: `flows/fleet.py`).

    The target is absolute and computed once by `decide`, so a retry sets the same value and
    can never scale up twice; the adapter clamps it to the ASG's current MinSize/MaxSize.

    Example:
        ```python
        if plan.untaint or plan.cloud_increase:       # after write_lock claimed the tick
            done = ke.untaint_or_increase(adapters, plan, asgs[plan.name])
        ```
    """
    _expect_acting("untaint_or_increase", adapters, plan, asg)
    if plan.dry_mode:
        return ActionsDone()
    untainted = tuple(name for name in plan.untaint if adapters.kube.ensure_untainted(name))
    desired = None
    if plan.cloud_increase > 0 and not one_shot:
        desired = adapters.cloud.set_desired_capacity(asg, plan.asg_desired)
    return ActionsDone(untainted=untainted, asg_desired_set=desired)


def _expect_acting(step_name: str, adapters: object, plan: object, asg: object) -> None:
    """The inputs every acting step takes: the clients, the group's plan and its ASG."""
    expect(step_name, "adapters", adapters, Adapters, "Adapters (make_adapters, or your own)")
    expect(step_name, "plan", plan, ScalePlan, "the group's ScalePlan (from decide)")
    expect(step_name, "asg", asg, AutoScalingGroup,
           "the group's AutoScalingGroup (from describe_node_groups)")
