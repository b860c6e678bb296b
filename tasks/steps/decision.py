"""The decision's parts as steps, for flows of one's own (spec/escalator.md §5.1 and §5.2).

The tick runs them inside `decide`, one task run for every group (the decision is pure, and a
task run costs more than it); a flow that puts a check of its own between filtering and
deciding calls them as tasks here, each a task run with the tick's retry policy.
"""

from __future__ import annotations

from collections.abc import Sequence

from kube_elevator.tasks.core.records import NodeRecord, PodRecord
from kube_elevator.tasks.core.step import step
from kube_elevator.tasks.core.step_inputs import expect_items
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.filter_nodes import classify_nodes, nodes_by_group, pods_by_group
from kube_elevator.tasks.escalator.utilization import GroupPods, Utilization, group_utilization


@step
def filter_pods(pods: Sequence[PodRecord], groups: Sequence[NodeGroupConfig]
                ) -> dict[str, list[PodRecord]]:
    """Every group's pods by its label, in node selectors or required node affinity
    (Escalator §5.1; daemonset pods never count).

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> source = ke.SnapshotSource.from_files(
        ...     config.node_groups, ["deployments/examples/cluster.json"])
        >>> pods = ke.filter_pods.fn(ke.collect_pods.fn(source), config.node_groups)
        >>> {name: len(group) for name, group in pods.items()}
        {'batch': 30, 'services': 8}
    """
    expect_items("filter_pods", "pods", pods, PodRecord, "PodRecord (collect_pods)", sample=True)
    _expect_groups("filter_pods", groups)
    return pods_by_group(pods, groups)


@step
def filter_nodes(nodes: Sequence[NodeRecord], groups: Sequence[NodeGroupConfig]
                 ) -> dict[str, list[NodeRecord]]:
    """Every group's nodes by its label (Escalator §5.1), in listing order.

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> source = ke.SnapshotSource.from_files(
        ...     config.node_groups, ["deployments/examples/cluster.json"])
        >>> nodes = ke.filter_nodes.fn(ke.collect_nodes.fn(source), config.node_groups)
        >>> {name: len(group) for name, group in nodes.items()}
        {'batch': 3, 'services': 5}
    """
    expect_items("filter_nodes", "nodes", nodes, NodeRecord, "NodeRecord (collect_nodes)",
                 sample=True)
    _expect_groups("filter_nodes", groups)
    return nodes_by_group(nodes, groups)


@step
def compute_utilization(pods: Sequence[PodRecord] | GroupPods, nodes: Sequence[NodeRecord]
                        ) -> Utilization:
    """One group's requests and capacity over its untainted nodes (Escalator §5.2, steps 8
    and 9): the numbers the scale-up threshold and the taint thresholds compare.

    Example:
        >>> pod = ke.PodRecord("web-0", "default", node_name="", phase="Pending",
        ...     cpu_request_milli=500, memory_request_bytes=2**30)
        >>> node = ke.NodeRecord("n1", {"pool": "batch"}, created_unix_seconds=0.0,
        ...     cpu_allocatable_milli=2000, memory_allocatable_bytes=8 * 2**30)
        >>> usage = ke.compute_utilization.fn([pod], [node])
        >>> (usage.requests.cpu_milli, usage.capacity.cpu_milli)
        (500, 2000)
    """
    if not isinstance(pods, GroupPods):
        expect_items("compute_utilization", "pods", pods, PodRecord,
                     "PodRecord (one group's, from filter_pods)", sample=True)
    expect_items("compute_utilization", "nodes", nodes, NodeRecord,
                 "NodeRecord (one group's, from filter_nodes)", sample=True)
    return group_utilization(pods, nodes, classify_nodes(nodes).untainted)


def _expect_groups(step_name: str, groups: object) -> None:
    expect_items(step_name, "groups", groups, NodeGroupConfig,
                 "NodeGroupConfig (load_node_groups(path).node_groups)")
