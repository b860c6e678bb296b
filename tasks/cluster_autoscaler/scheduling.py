"""The scheduler's filters in the Cluster Autoscaler's simulations (CA §1.1, §1.4).

CA runs kube-scheduler's own Filter plugins against its ClusterSnapshot (the live nodes and
their pods, upcoming nodes, and the template copies the estimator adds), so a pod with pod
anti-affinity, a DoNotSchedule spread constraint or a host port is placed as the scheduler
would place it. `FilterSnapshot` is that snapshot over the model of `tasks.scheduler`; it is
built only when some pod needs more than resources, selectors and taints (`needs_filters`),
so the common case keeps the resource-only bookkeeping of `estimator`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from kube_elevator.tasks.cluster_autoscaler.templates import TemplateNode
from kube_elevator.tasks.core.records import NodeRecord, PodRecord
from kube_elevator.tasks.scheduler.framework import cluster_filters, failing_filter
from kube_elevator.tasks.scheduler.objects import SchedPod, sched_from_record
from kube_elevator.tasks.scheduler.profiles import profile_named
from kube_elevator.tasks.scheduler.state import ClusterState, Key, NodeState

HOSTNAME = "kubernetes.io/hostname"
PROFILE = profile_named("default")


def needs_filters(pods: Iterable[PodRecord], existing: Iterable[PodRecord] = ()) -> bool:
    """Some pod to place has pod (anti-)affinity, spreading or a host port, or a pod in the
    cluster has required anti-affinity (which every other pod is checked against)."""
    return (any(pod.placement is not None for pod in pods)
            or any(pod.placement is not None and pod.placement.required_anti_affinity
                   for pod in existing))


def pod_key(pod: PodRecord) -> Key:
    return (pod.namespace, pod.name)


def template_record(template: TemplateNode, name: str) -> NodeRecord:
    """A fresh copy of the template as a node of the snapshot (SanitizedNodeInfo: its own
    name and hostname label; room is what the DaemonSet pods leave)."""
    return NodeRecord(
        name=name, labels={**template.labels, HOSTNAME: name}, created_unix_seconds=0.0,
        cpu_allocatable_milli=template.free_cpu_milli,
        memory_allocatable_bytes=template.free_memory_bytes, taints=template.taints,
        extended_allocatable=tuple(sorted(template.free_extended.items())),
        pods_allocatable=max(template.free_pods, 0) or -1)


class FilterSnapshot:
    """CA's ClusterSnapshot with the scheduler's filters (PredicateChecker): nodes in the order
    added, their pods as the scheduler sees them; pods and nodes may be added and removed."""

    def __init__(self, nodes: Iterable[NodeRecord], pods: Iterable[PodRecord]) -> None:
        self.cluster = ClusterState()
        for node in nodes:
            self.cluster.add_node(node)
        for pod in pods:
            where = pod.node_name or pod.nominated_node
            if where in self.cluster.nodes and pod.phase not in ("Succeeded", "Failed"):
                self.cluster.nodes[where].add_pod(pod_key(pod), sched_from_record(pod))

    def names(self) -> list[str]:
        return list(self.cluster.nodes)

    def node(self, name: str) -> NodeState:
        return self.cluster.nodes[name]

    def add_node(self, record: NodeRecord) -> NodeState:
        return self.cluster.add_node(record)

    def remove_node(self, name: str) -> None:
        self.cluster.remove_node(name)

    def failing(self, pod: SchedPod, name: str) -> str | None:
        """The filter that refuses the pod on the node, None when it fits (CheckPredicates)."""
        filters = cluster_filters(pod, list(self.cluster.nodes.values()), PROFILE,
                                  affinity_counts=self.cluster.affinity_counts)
        return failing_filter(pod, self.cluster.nodes[name], filters)

    def fits(self, pod: SchedPod, name: str) -> bool:
        return self.failing(pod, name) is None

    def checker(self, pod: SchedPod) -> Callable[[str], bool]:
        """Whether the pod passes the filters on a node, for the snapshot as it is now (the
        PreFilter answers computed once for all the nodes asked about)."""
        filters = cluster_filters(pod, list(self.cluster.nodes.values()), PROFILE,
                                  affinity_counts=self.cluster.affinity_counts)
        nodes = self.cluster.nodes
        return lambda name: name in nodes and failing_filter(pod, nodes[name], filters) is None

    def first_fit(self, pod: SchedPod, names: Sequence[str]) -> str | None:
        """SchedulePodOnAnyNodeMatching over `names`, in order."""
        if not names:
            return None
        filters = cluster_filters(pod, list(self.cluster.nodes.values()), PROFILE,
                                  affinity_counts=self.cluster.affinity_counts)
        for name in names:
            if failing_filter(pod, self.cluster.nodes[name], filters) is None:
                return name
        return None

    def place(self, key: Key, pod: SchedPod, name: str) -> None:
        self.cluster.nodes[name].add_pod(key, pod)

    def unplace(self, key: Key, name: str) -> None:
        node = self.cluster.nodes.get(name)
        if node is not None:
            node.remove_pod(key)


__all__ = ["FilterSnapshot", "needs_filters", "pod_key", "template_record"]
