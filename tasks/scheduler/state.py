"""The scheduler's cache: each node with the sums of its pods, and the order nodes are tried in.

* `NodeState` is framework.NodeInfo (pkg/scheduler/framework/types.go): the node, its pods,
  `Requested` (their requests) and `NonZeroRequested` (with the scoring defaults),
  `PodsWithAffinity`, `PodsWithRequiredAntiAffinity` and `UsedPorts`, kept as pods come and
  go; the cluster counts the first two over all nodes (`ClusterState.affinity_counts`), so a
  cycle knows without a walk that no pod has any; plus, for PodTopologySpread, the count of
  its pods per (namespace, labels), so counting the pods a selector matches costs one check
  per distinct label set.
* `NodeTree` is pkg/scheduler/backend/cache/node_tree.go: nodes grouped by zone in the order
  they were added, listed round robin over the zones; the snapshot's node list
  (cache.go updateNodeInfoSnapshotList) is that list, which the filters walk from
  `nextStartNodeIndex`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

from kube_elevator.tasks.core.api_objects import Taint
from kube_elevator.tasks.core.records import NodeRecord
from kube_elevator.tasks.core.selectors import LabelSelector
from kube_elevator.tasks.scheduler.objects import HostPort, SchedPod

Key = tuple[str, str]  # (namespace, name)


@lru_cache(maxsize=65536)
def _selects(selector: LabelSelector, labels: frozenset[tuple[str, str]]) -> bool:
    return selector.matches(dict(labels))


class NodeState:
    """framework.NodeInfo for one node (see the module docstring). `version` changes with any
    change of the node or its pods, so answers computed from it can be cached against it."""

    __slots__ = ("affinity_pods", "allocatable_cpu_milli", "allocatable_extended",
                 "allocatable_memory_bytes", "allowed_pods", "cluster_counts", "label_counts",
                 "labels", "name", "nonzero_cpu_milli", "nonzero_memory_bytes", "pods",
                 "priorities", "record", "requested_cpu_milli", "requested_extended",
                 "requested_memory_bytes", "resource_key", "taints", "used_ports", "version")

    def __init__(self, record: NodeRecord, cluster_counts: list[int] | None = None,
                 priorities: dict[int, int] | None = None) -> None:
        self.pods: dict[Key, SchedPod] = {}
        # PodsWithAffinity (those with required anti-affinity among them), UsedPorts
        self.affinity_pods: dict[Key, SchedPod] = {}
        self.used_ports: dict[HostPort, int] = {}
        # [pods with affinity, pods with required anti-affinity] over the cluster's nodes
        self.cluster_counts = cluster_counts if cluster_counts is not None else [0, 0]
        # the cluster's pods per priority (DefaultPreemption looks for lower ones)
        self.priorities = priorities if priorities is not None else {}
        self.requested_cpu_milli = self.requested_memory_bytes = 0
        self.nonzero_cpu_milli = self.nonzero_memory_bytes = 0
        self.requested_extended: dict[str, int] = {}
        self.label_counts: dict[tuple[str, frozenset[tuple[str, str]]], int] = {}
        self.version = 0
        self.set_record(record)

    def set_record(self, record: NodeRecord) -> None:
        self.record = record
        self.name = record.name
        self.labels: Mapping[str, str] = record.labels
        self.taints: tuple[Taint, ...] = record.taints
        self.allocatable_cpu_milli = record.cpu_allocatable_milli
        self.allocatable_memory_bytes = record.memory_allocatable_bytes
        self.allocatable_extended: Mapping[str, int] = dict(record.extended_allocatable)
        self.allowed_pods = record.max_pods
        self.version += 1
        self._key_resources()

    def _key_resources(self) -> None:
        """`resource_key`: all the resource scores read of the node, as a hashable value."""
        self.resource_key = (
            self.allocatable_cpu_milli, self.allocatable_memory_bytes, self.requested_cpu_milli,
            self.requested_memory_bytes, self.nonzero_cpu_milli, self.nonzero_memory_bytes,
            tuple(sorted(self.allocatable_extended.items())) if self.allocatable_extended
            else (),
            tuple(sorted(self.requested_extended.items())) if self.requested_extended else ())

    @property
    def pod_count(self) -> int:
        return len(self.pods)

    def add_pod(self, key: Key, pod: SchedPod) -> None:
        """NodeInfo.AddPod."""
        self.pods[key] = pod
        self._account(pod, 1)
        if not pod.plain:
            self._account_constraints(key, pod, 1)

    def remove_pod(self, key: Key) -> SchedPod | None:
        """NodeInfo.RemovePod; None when the pod was not here."""
        pod = self.pods.pop(key, None)
        if pod is not None:
            self._account(pod, -1)
            if not pod.plain:
                self._account_constraints(key, pod, -1)
        return pod

    def _account(self, pod: SchedPod, sign: int) -> None:
        self.requested_cpu_milli += sign * pod.cpu_milli
        self.requested_memory_bytes += sign * pod.memory_bytes
        self.nonzero_cpu_milli += sign * pod.nonzero_cpu_milli
        self.nonzero_memory_bytes += sign * pod.nonzero_memory_bytes
        for name, amount in pod.extended:
            self.requested_extended[name] = self.requested_extended.get(name, 0) + sign * amount
        priorities = self.priorities
        count = priorities.get(pod.priority, 0) + sign
        if count:
            priorities[pod.priority] = count
        else:
            priorities.pop(pod.priority, None)
        if not pod.terminating:  # countPodsMatchSelector bypasses terminating pods
            label_key = (pod.namespace, pod.label_set)
            count = self.label_counts.get(label_key, 0) + sign
            if count:
                self.label_counts[label_key] = count
            else:
                self.label_counts.pop(label_key, None)
        self.version += 1
        self._key_resources()

    def _account_constraints(self, key: Key, pod: SchedPod, sign: int) -> None:
        if pod.pod_affinity:
            if sign > 0:
                self.affinity_pods[key] = pod
            else:
                self.affinity_pods.pop(key, None)
            self.cluster_counts[0] += sign
            if pod.required_anti_affinity:
                self.cluster_counts[1] += sign
        for port in pod.host_ports:
            count = self.used_ports.get(port, 0) + sign
            if count:
                self.used_ports[port] = count
            else:
                self.used_ports.pop(port, None)

    def detach(self) -> None:
        """The node left the cluster: its pods no longer count in the cluster's totals."""
        for pod in self.affinity_pods.values():
            self.cluster_counts[0] -= 1
            if pod.required_anti_affinity:
                self.cluster_counts[1] -= 1
        for pod in self.pods.values():
            count = self.priorities.get(pod.priority, 0) - 1
            if count:
                self.priorities[pod.priority] = count
            else:
                self.priorities.pop(pod.priority, None)
        self.cluster_counts = [0, 0]
        self.priorities = {}

    def count_matching(self, selector: LabelSelector | None, namespace: str) -> int:
        """countPodsMatchSelector: this node's pods in `namespace`, not terminating, that the
        selector matches; an empty or null selector matches none."""
        if selector is None or not selector.requirements:
            return 0
        return sum(count for (pod_namespace, labels), count in self.label_counts.items()
                   if pod_namespace == namespace and _selects(selector, labels))


def zone_key(labels: Mapping[str, str]) -> str:
    """k8s.io/component-helpers node/topology GetZoneKey: region and zone (the beta labels
    first), "" when neither is set."""
    zone = labels.get("failure-domain.beta.kubernetes.io/zone")
    if zone is None:
        zone = labels.get("topology.kubernetes.io/zone", "")
    region = labels.get("failure-domain.beta.kubernetes.io/region")
    if region is None:
        region = labels.get("topology.kubernetes.io/region", "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


class NodeTree:
    """node_tree.go: node names per zone in the order they were added."""

    def __init__(self) -> None:
        self.tree: dict[str, list[str]] = {}
        self.zones: list[str] = []
        self.zone_of: dict[str, str] = {}

    def add(self, name: str, zone: str) -> None:
        if name in self.zone_of:
            return
        if zone in self.tree:
            self.tree[zone].append(name)
        else:
            self.zones.append(zone)
            self.tree[zone] = [name]
        self.zone_of[name] = zone

    def remove(self, name: str) -> None:
        zone = self.zone_of.pop(name, None)
        if zone is None:
            return
        names = self.tree[zone]
        names.remove(name)
        if not names:
            del self.tree[zone]
            self.zones.remove(zone)

    def update(self, name: str, zone: str) -> None:
        """updateNode: a node whose zone changed moves to the end of its new zone."""
        if self.zone_of.get(name) != zone:
            self.remove(name)
            self.add(name, zone)

    def list(self) -> list[str]:
        """list(): round robin over the zones, the i-th node of each in turn."""
        names: list[str] = []
        zones = [self.tree[zone] for zone in self.zones]
        index = 0
        while zones:
            zones = [members for members in zones if index < len(members)]
            names.extend(members[index] for members in zones)
            index += 1
        return names


class ClusterState:
    """The snapshot the scheduler reads: every node's state, in the node tree's order."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeState] = {}
        self.tree = NodeTree()
        self._order: list[NodeState] | None = None
        # [pods with pod (anti-)affinity, pods with required anti-affinity] on all nodes
        self.affinity_counts = [0, 0]
        self.priorities: dict[int, int] = {}  # priority -> pods on all nodes

    def add_node(self, record: NodeRecord) -> NodeState:
        state = NodeState(record, self.affinity_counts, self.priorities)
        self.nodes[record.name] = state
        self.tree.add(record.name, zone_key(record.labels))
        self._order = None
        return state

    def update_node(self, record: NodeRecord) -> None:
        self.nodes[record.name].set_record(record)
        zone = zone_key(record.labels)
        if self.tree.zone_of.get(record.name) != zone:
            self.tree.update(record.name, zone)
            self._order = None

    def remove_node(self, name: str) -> NodeState | None:
        state = self.nodes.pop(name, None)
        if state is not None:
            state.detach()
            self.tree.remove(name)
            self._order = None
        return state

    def order(self) -> list[NodeState]:
        """The snapshot's nodeInfoList."""
        if self._order is None:
            self._order = [self.nodes[name] for name in self.tree.list()]
        return self._order


def cluster_from(nodes: Iterable[NodeRecord],
                 pods: Iterable[tuple[Key, SchedPod]]) -> ClusterState:
    """A snapshot of nodes (in the order given) and the pods bound to them; pods of other
    nodes are left out, as the snapshot holds only nodes that exist."""
    cluster = ClusterState()
    for node in nodes:
        cluster.add_node(node)
    for key, pod in pods:
        state = cluster.nodes.get(pod.node_name)
        if state is not None:
            state.add_pod(key, pod)
    return cluster


__all__ = ["ClusterState", "Key", "NodeState", "NodeTree", "cluster_from", "zone_key"]
