"""The `decide` step: every group's decision in one task run, each group's inputs a
`GroupInputs` (the decision of one group is `decide.plan_group`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kube_elevator.tasks.core.lease_state import GroupState
from kube_elevator.tasks.core.records import AutoScalingGroup, NodeRecord, PodRecord
from kube_elevator.tasks.core.step import step
from kube_elevator.tasks.core.step_inputs import PROGRAMMING_ERRORS, expect, expect_items, expect_number
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.decide import plan_group
from kube_elevator.tasks.escalator.plan import ScalePlan
from kube_elevator.tasks.escalator.utilization import GroupPods


@dataclass(frozen=True)
class GroupInputs:
    """What one group's decision reads, as the tick collected it.

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> pod = ke.PodRecord("web-0", "default", node_name="", phase="Pending",
        ...     cpu_request_milli=500, memory_request_bytes=2**30)
        >>> node = ke.NodeRecord("n1", {"pool": "batch"}, created_unix_seconds=0.0,
        ...     cpu_allocatable_milli=2000, memory_allocatable_bytes=8 * 2**30)
        >>> asg = ke.AutoScalingGroup("batch-asg", min_size=1, max_size=10, desired_capacity=1)
        >>> inputs = ke.GroupInputs(config.node_groups[0], [pod], [node], asg, ke.GroupState())
        >>> inputs.group.name
        'batch'
    """

    group: NodeGroupConfig
    pods: Sequence[PodRecord] | GroupPods
    nodes: Sequence[NodeRecord]
    asg: AutoScalingGroup
    state: GroupState


@step
def decide(groups: Sequence[GroupInputs], now: float,
           cpu_load_percent: Mapping[str, float] | None = None) -> list[ScalePlan | Exception]:
    """The tick's decision: filter each group's nodes, measure, decide (Escalator steps 2 to
    23), for every group in one task run; a group whose decision fails gets its error.

    One task run for all groups, not one each: the decision is pure (a retry decides the same),
    and each task run costs a tick ~20 ms of the Prefect server's time (benchmarks/RESULTS.md);
    each group's plan is in the tick's table artifact and log lines.

    Inputs of the wrong kind are the caller's error, raised before any group is decided; a
    group whose decision fails on its data gets that error as its value, while an error of
    the code (a `TypeError`, an `AttributeError`) is raised, never handed on as a group's.

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> source = ke.SnapshotSource.from_files(
        ...     config.node_groups, ["deployments/examples/cluster.json"])
        >>> groups = config.node_groups
        >>> pods = ke.filter_pods.fn(ke.collect_pods.fn(source), groups)
        >>> nodes = ke.filter_nodes.fn(ke.collect_nodes.fn(source), groups)
        >>> asgs = ke.describe_node_groups.fn(source, [g.cloud_provider_group_name for g in groups])
        >>> states = ke.read_locks.fn(source, [g.name for g in groups])
        >>> inputs = [ke.GroupInputs(g, pods[g.name], nodes[g.name],
        ...                           asgs[g.cloud_provider_group_name], states[g.name])
        ...           for g in groups]
        >>> [(plan.name, plan.delta) for plan in ke.decide.fn(inputs, now=1795262400.0)]
        [('batch', 4), ('services', -1)]
    """
    expect_items("decide", "groups", groups, GroupInputs,
                 "GroupInputs (one per group: its config, pods, nodes, ASG and state)")
    expect_number("decide", "now", now, "a Unix time in seconds (a float)")
    if cpu_load_percent is not None:
        expect("decide", "cpu_load_percent", cpu_load_percent, Mapping,
               "a mapping of node name to CPU load percent, or None")
    plans: list[ScalePlan | Exception] = []
    for one in groups:
        try:
            plans.append(plan_group(one.group, one.pods, one.nodes, one.asg, one.state, now,
                                    cpu_load_percent=cpu_load_percent))
        except PROGRAMMING_ERRORS:
            raise
        except Exception as error:  # this group fails alone, as its own thread would
            plans.append(error)
    return plans
