"""The decision's parts as steps, for flows of one's own (spec/escalator.md §5.1 and §5.2).

The tick runs them inside `decide`, one task run for every group (the decision is pure, and a
task run costs more than it); a flow that puts a check of its own between filtering and
deciding calls them as tasks here, each a task run with the tick's retry policy.
"""

from __future__ import annotations

from collections.abc import Sequence

from kube_elevator.tasks.core.records import NodeRecord, PodRecord
from kube_elevator.tasks.core.step import step
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.filter_nodes import classify_nodes, nodes_by_group, pods_by_group
from kube_elevator.tasks.escalator.utilization import GroupPods, Utilization, group_utilization


@step
def filter_pods(pods: Sequence[PodRecord], groups: Sequence[NodeGroupConfig]
                ) -> dict[str, list[PodRecord]]:
    """Every group's pods by its label, in node selectors or required node affinity
    (Escalator §5.1; daemonset pods never count)."""
    return pods_by_group(pods, groups)


@step
def filter_nodes(nodes: Sequence[NodeRecord], groups: Sequence[NodeGroupConfig]
                 ) -> dict[str, list[NodeRecord]]:
    """Every group's nodes by its label (Escalator §5.1), in listing order."""
    return nodes_by_group(nodes, groups)


@step
def compute_utilization(pods: Sequence[PodRecord] | GroupPods, nodes: Sequence[NodeRecord]
                        ) -> Utilization:
    """One group's requests and capacity over its untainted nodes (Escalator §5.2, steps 8
    and 9): the numbers the scale-up threshold and the taint thresholds compare."""
    return group_utilization(pods, nodes, classify_nodes(nodes).untainted)
