"""The Cluster Autoscaler's steps: one cluster read or one effect each, and its pure decisions.

Each is its own task run, so a retry repeats one call (a throttled SetDesiredCapacity does not
re-read the Leases or terminate instances again) and the UI shows what the tick did. The Lease
is written only through `tasks.steps.lease.write_lock`; the composition is
`flows/cluster_autoscaler.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

from kube_elevator.tasks.adapters.ports import CloudActions, KubeActions
from kube_elevator.tasks.cluster_autoscaler.scale_up import decide_scale_up
from kube_elevator.tasks.cluster_autoscaler.unneeded import plan_scale_down
from kube_elevator.tasks.core.lease_state import GroupState, lease_name
from kube_elevator.tasks.core.records import (
    ESCALATOR_TAINT_KEY,
    AsgTemplateSource,
    AutoScalingGroup,
    NodeRecord,
)
from kube_elevator.tasks.core.step import step

# The decisions, as task runs of their own (pure: records and `now` in, a plan out).
plan_unschedulable_scale_up = step(decide_scale_up, "plan-unschedulable-scale-up")
plan_unneeded_scale_down = step(plan_scale_down, "plan-unneeded-scale-down")


@step
def read_group_states(kube: KubeActions, namespace: str,
                      group_names: Sequence[str]) -> dict[str, GroupState]:
    """Each group's Lease as it is now: the group ticks may have written it this tick."""
    return {name: kube.read_state(namespace, lease_name(name)) for name in group_names}


@step
def read_config_map(kube: KubeActions, namespace: str, name: str) -> dict[str, str] | None:
    """CA §1.2: the priority expander reads its ConfigMap every time it runs."""
    return kube.read_config_map(namespace, name)


@step
def read_template_sources(cloud: CloudActions,
                          asg_names: Sequence[str]) -> dict[str, AsgTemplateSource]:
    """The launch template and tags of groups without a live node (scale from zero)."""
    return cloud.template_sources(asg_names)


@step
def terminate_instances(cloud: CloudActions, asg_name: str,
                        nodes: Sequence[NodeRecord]) -> tuple[str, ...]:
    """Terminate without replacement; an instance already gone counts as done."""
    return tuple(cloud.terminate_instances(asg_name, nodes))


@step
def set_desired_capacity(cloud: CloudActions, asg: AutoScalingGroup, target: int) -> int:
    """The ASG's absolute target (idempotent: a retry asks for the same size)."""
    return cloud.set_desired_capacity(asg, target)


@step
def taint_nodes(kube: KubeActions, names: Sequence[str], stamp: str,
                effect: str) -> tuple[str, ...]:
    """Escalator's taint (value: Unix seconds) on each node; the nodes now tainted."""
    return tuple(name for name in names
                 if kube.ensure_tainted(name, stamp, effect, ESCALATOR_TAINT_KEY))


__all__ = ["plan_unneeded_scale_down", "plan_unschedulable_scale_up", "read_config_map",
           "read_group_states", "read_template_sources", "set_desired_capacity", "taint_nodes",
           "terminate_instances"]
