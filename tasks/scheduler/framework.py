"""Filter and score one pod against nodes: the framework's Filter, PreScore, Score,
NormalizeScore and weighting (pkg/scheduler/framework/runtime/framework.go RunScorePlugins:
each plugin's normalised score times its weight, summed per node).

`score_nodes` is the pure entry point over Kubernetes objects as `kubectl get -o json` gives
them, so tables written elsewhere can be run against the model; the simulator's scheduler
(`tasks.scheduler.cycle`) calls the same `filter_node` and `score_feasible`, caching the
per-node parts (`node_raw_scores`) against each node's version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube_elevator.tasks.scheduler import interpodaffinity, podtopologyspread, podtopologyspread_filter
from kube_elevator.tasks.scheduler.noderesources import balanced_score, best_effort, fit_score, fits_request
from kube_elevator.tasks.scheduler.objects import (
    NO_NAMESPACES,
    NamespaceLabels,
    SchedPod,
    Volumes,
    Workloads,
    node_from_api,
    sched_pod,
)
from kube_elevator.tasks.scheduler.profiles import (
    BALANCED_ALLOCATION,
    IMAGE_LOCALITY,
    INTER_POD_AFFINITY,
    KUBERNETES_VERSION,
    NODE_AFFINITY,
    NODE_RESOURCES_FIT,
    POD_TOPOLOGY_SPREAD,
    REQUESTED_TO_CAPACITY_RATIO,
    TAINT_TOLERATION,
    Profile,
    profile_named,
)
from kube_elevator.tasks.scheduler.simple_plugins import (
    check_preferred_terms,
    default_normalize_score,
    intolerable_taints,
    ports_conflict,
    prefer_no_schedule_tolerations,
    preferred_affinity_score,
    preferred_terms,
    required_affinity_matches,
    schedulable,
    tolerates_do_not_schedule,
    volume_zones_match,
)
from kube_elevator.tasks.scheduler.state import ClusterState, NodeState, cluster_from

MAX_NODE_SCORE = 100
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class NodeScore:
    """One node's scores: `scores` per plugin that ran (PreScore did not skip it), each after
    NormalizeScore on kube-scheduler's 0-100 scale; `total` is the sum of score x weight,
    what the scheduler ranks nodes by."""

    name: str
    scores: Mapping[str, int]
    total: int


@dataclass(frozen=True)
class Scores:
    """`score_nodes`'s answer: the nodes in the order given, and the plugins of the profile
    this model leaves out that would have had something to score here."""

    nodes: tuple[NodeScore, ...]
    unmodelled: tuple[str, ...] = ()
    version: str = KUBERNETES_VERSION

    @property
    def totals(self) -> dict[str, int]:
        return {node.name: node.total for node in self.nodes}

    def plugin(self, name: str) -> dict[str, int]:
        """One plugin's score per node (nodes it did not score left out)."""
        return {node.name: node.scores[name] for node in self.nodes if name in node.scores}


# --- filters ------------------------------------------------------------------------------------


def node_admits(pod: SchedPod, node: NodeState) -> bool:
    """The filters that read the node's object only (not its pods): NodeUnschedulable,
    TaintToleration, NodeAffinity. A not-Ready node is refused as the
    node.kubernetes.io/not-ready:NoSchedule taint the node lifecycle controller adds would."""
    record = node.record
    return (record.ready and schedulable(pod, record)
            and tolerates_do_not_schedule(pod.tolerations, node.taints)
            and required_affinity_matches(pod, node.labels, node.name))


def filter_node(pod: SchedPod, node: NodeState,
                filters: ClusterFilters | None = None) -> bool:
    """The filters this model runs, in the default profile's order: NodeUnschedulable,
    TaintToleration, NodeAffinity (`node_admits`), NodeResourcesFit, then those that read
    other nodes' pods or the pod's volumes (`filters`, from `cluster_filters`: NodePorts,
    VolumeZone, PodTopologySpread, InterPodAffinity). Left out: NodeName and the volume
    filters besides VolumeZone (VolumeRestrictions, NodeVolumeLimits, VolumeBinding)."""
    return (node_admits(pod, node) and fits_request(pod, node)
            and (filters is None or filters.admits(node)))


NODE_LEVEL = "NodeUnschedulable/TaintToleration/NodeAffinity"
NODE_PORTS = "NodePorts"
VOLUME_ZONE = "VolumeZone"
SPREAD_FILTER = "PodTopologySpread"
INTER_POD_AFFINITY_FILTER = "InterPodAffinity"


def failing_filter(pod: SchedPod, node: NodeState,
                   filters: ClusterFilters | None = None) -> str | None:
    """The first filter, in the default profile's order, that refuses the pod on the node
    (RunFilterPlugins stops there), None when all pass."""
    if not node_admits(pod, node):
        return NODE_LEVEL
    if pod.host_ports and ports_conflict(node.used_ports, pod.host_ports):
        return NODE_PORTS
    if not fits_request(pod, node):
        return NODE_RESOURCES_FIT
    if pod.volume_error or (pod.volume_zones
                            and not volume_zones_match(pod.volume_zones, node.labels)):
        return VOLUME_ZONE
    if filters is not None:
        if filters.spread is not None and not podtopologyspread_filter.satisfies(
                filters.spread, pod, node.labels):
            return SPREAD_FILTER
        if filters.affinity is not None and not interpodaffinity.satisfies(
                filters.affinity, node.labels, filters.namespaces):
            return INTER_POD_AFFINITY_FILTER
    return None


@dataclass
class ClusterFilters:
    """The PreFilter answers of the filters that read more than the node for one pod:
    NodePorts and VolumeZone (the pod's own ports and zones), PodTopologySpread and
    InterPodAffinity (counts over the cluster)."""

    pod: SchedPod
    namespaces: NamespaceLabels
    spread: podtopologyspread_filter.PreFilterState | None
    affinity: interpodaffinity.PreFilterState | None

    def admits(self, node: NodeState) -> bool:
        pod = self.pod
        if pod.volume_error:
            return False
        if pod.host_ports and ports_conflict(node.used_ports, pod.host_ports):
            return False
        labels = node.labels
        if pod.volume_zones and not volume_zones_match(pod.volume_zones, labels):
            return False
        if self.spread is not None and not podtopologyspread_filter.satisfies(
                self.spread, pod, labels):
            return False
        return self.affinity is None or interpodaffinity.satisfies(self.affinity, labels,
                                                                   self.namespaces)


def cluster_filters(pod: SchedPod, all_nodes: Sequence[NodeState], profile: Profile,
                    namespaces: NamespaceLabels = NO_NAMESPACES,
                    affinity_counts: Sequence[int] | None = None) -> ClusterFilters | None:
    """PreFilter of NodePorts, VolumeZone, PodTopologySpread and InterPodAffinity over every
    node; None when all four skip, so a pod with no affinity, spreading, port or zonal volume
    in a cluster where no pod has required anti-affinity costs nothing more.
    `affinity_counts`: the cluster's [pods with affinity, with required anti-affinity]."""
    if affinity_counts is None:
        affinity_counts = _affinity_counts(all_nodes)
    existing_anti = affinity_counts[1] > 0
    hard_defaults = profile.spread_defaults is not None and not pod.spread_constraints
    if pod.plain and not existing_anti and not hard_defaults:
        return None
    spread = podtopologyspread_filter.pre_filter(pod, all_nodes, profile.spread_defaults) \
        if pod.spread_constraints or hard_defaults else None
    affinity = interpodaffinity.pre_filter(pod, all_nodes, namespaces, existing_anti) \
        if pod.affinity is not None or existing_anti else None
    if (spread is None and affinity is None and not pod.host_ports and not pod.volume_zones
            and not pod.volume_error):
        return None
    return ClusterFilters(pod, namespaces, spread, affinity)


def _affinity_counts(nodes: Iterable[NodeState]) -> list[int]:
    counts = [0, 0]
    for node in nodes:
        for pod in node.affinity_pods.values():
            counts[0] += 1
            counts[1] += pod.required_anti_affinity
    return counts


# --- scores -------------------------------------------------------------------------------------

def resource_scores(pod: SchedPod, node: NodeState, profile: Profile) -> tuple[int, int]:
    """NodeResourcesFit's and BalancedAllocation's Score on one node: they read the node's
    allocatable and its pods' sums only (`NodeState.resource_key`), so a scheduler may cache
    them by that state."""
    shape = profile.shape if profile.strategy == REQUESTED_TO_CAPACITY_RATIO else ()
    return (fit_score(pod, node, profile.fit_resources, profile.most_allocated, shape),
            balanced_score(pod, node, profile.balanced_resources, profile.balanced_v136))


ResourceScores = Callable[[NodeState], tuple[int, int]]


def plugin_scores(pod: SchedPod, feasible: Sequence[NodeState],
                  all_nodes: Sequence[NodeState], profile: Profile,
                  resources: ResourceScores | None = None, *,
                  namespaces: NamespaceLabels = NO_NAMESPACES,
                  affinity_counts: Sequence[int] | None = None) -> dict[str, list[int]]:
    """prioritizeNodes' RunPreScorePlugins, RunScorePlugins and NormalizeScore for the nodes
    that passed the filters: per plugin that ran (PreScore did not skip it), its score on each
    node, in order. `resources` may serve `resource_scores` from a cache; `affinity_counts`
    is the cluster's count of pods with pod affinity (and required anti-affinity), which
    spares InterPodAffinity a walk when there are none."""
    if resources is None:
        def resources(node: NodeState) -> tuple[int, int]:
            return resource_scores(pod, node, profile)
    pairs = [resources(node) for node in feasible]
    columns: dict[str, list[int]] = {NODE_RESOURCES_FIT: [pair[0] for pair in pairs]}
    if not best_effort(pod, profile.balanced_resources):
        columns[BALANCED_ALLOCATION] = [pair[1] for pair in pairs]
    tolerations = prefer_no_schedule_tolerations(pod.tolerations)
    columns[TAINT_TOLERATION] = default_normalize_score(MAX_NODE_SCORE, True, [
        intolerable_taints(node.taints, tolerations) if node.taints else 0
        for node in feasible])
    affinity_terms = preferred_terms(pod, profile.added_preferred_terms)
    if affinity_terms:  # PreScore skips a pod without preferred terms
        check_preferred_terms(affinity_terms)
        columns[NODE_AFFINITY] = default_normalize_score(MAX_NODE_SCORE, False, [
            preferred_affinity_score(affinity_terms, node.labels, node.name)
            for node in feasible])
    spread = podtopologyspread.pre_score(pod, feasible, all_nodes, profile.spread_defaults)
    if spread is not None:
        columns[POD_TOPOLOGY_SPREAD] = podtopologyspread.normalize(
            spread, [node.name for node in feasible],
            [podtopologyspread.score(spread, pod, node) for node in feasible])
    if feasible and profile.weights.get(INTER_POD_AFFINITY, 0):
        if affinity_counts is None:
            affinity_counts = _affinity_counts(all_nodes)
        topology_scores = interpodaffinity.pre_score(
            pod, all_nodes, namespaces, profile.hard_pod_affinity_weight,
            profile.ignore_preferred_terms_of_existing_pods, affinity_counts[0] > 0)
        if topology_scores is not None:
            columns[INTER_POD_AFFINITY] = interpodaffinity.normalize(
                [interpodaffinity.score(topology_scores, node.labels) for node in feasible])
    return columns


def weighted_totals(columns: Mapping[str, Sequence[int]], profile: Profile) -> list[int]:
    """Each node's total: the sum over plugins of score x the plugin's weight."""
    totals: list[int] | None = None
    for plugin, values in columns.items():
        weight = profile.weights.get(plugin, 0)
        if totals is None:
            totals = [weight * value for value in values]
        else:
            totals = [total + weight * value for total, value in zip(totals, values, strict=True)]
    return totals or []


def score_feasible(pod: SchedPod, feasible: Sequence[NodeState], all_nodes: Sequence[NodeState],
                   profile: Profile, resources: ResourceScores | None = None, *,
                   namespaces: NamespaceLabels = NO_NAMESPACES,
                   affinity_counts: Sequence[int] | None = None) -> list[NodeScore]:
    """The nodes' scores per plugin and weighted totals (`plugin_scores`, `weighted_totals`)."""
    columns = plugin_scores(pod, feasible, all_nodes, profile, resources,
                            namespaces=namespaces, affinity_counts=affinity_counts)
    totals = weighted_totals(columns, profile)
    return [NodeScore(node.name, {plugin: values[index] for plugin, values in columns.items()},
                      totals[index]) for index, node in enumerate(feasible)]


def unmodelled_plugins(node_objects: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The profile's plugins this model leaves out that would score here: ImageLocality when
    a node reports its images (the simulator's never do: it scores nothing there)."""
    if any((node.get("status") or {}).get("images") for node in node_objects):
        return (IMAGE_LOCALITY,)
    return ()


def namespace_labels(objects: Iterable[Mapping[str, Any]] | Mapping[str, Any]
                     ) -> dict[str, Mapping[str, str]]:
    """Namespace objects (or a `List` of them) as name -> labels."""
    return {str((obj.get("metadata") or {}).get("name") or ""):
            dict((obj.get("metadata") or {}).get("labels") or {}) for obj in _items(objects)}


def _items(objects: Iterable[Mapping[str, Any]] | Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Objects given as a list, or as a `List` document (`kubectl get ... -o json`)."""
    if isinstance(objects, Mapping):
        return list(objects.get("items") or ())
    return list(objects)


Objects = Iterable[Mapping[str, Any]] | Mapping[str, Any]


@dataclass
class Snapshot:
    """A cluster built from API objects: the incoming pod, the node states in the order given,
    the namespaces' labels. Bound pods are keyed (namespace, "<index>/<name>"), the index
    counting the pods given that have not finished."""

    pod: SchedPod
    cluster: ClusterState
    listed: list[NodeState]
    every: list[NodeState]
    namespaces: NamespaceLabels
    node_objects: list[Mapping[str, Any]]


def snapshot_of(pod: Mapping[str, Any], nodes: Objects, pods: Objects, all_nodes: Objects | None,
              workloads: Objects, namespaces: Objects, volumes: Objects) -> Snapshot:
    known = Workloads(_items(workloads))
    catalog = Volumes(_items(volumes))
    incoming = sched_pod(pod, known, catalog)
    node_objects = _items(nodes)
    every_object = node_objects if all_nodes is None else _items(all_nodes)
    listed_names = {str((obj.get("metadata") or {}).get("name")) for obj in node_objects}
    others = [obj for obj in every_object
              if str((obj.get("metadata") or {}).get("name")) not in listed_names]
    existing = [sched_pod(obj, known, catalog) for obj in _items(pods)
                if ((obj.get("status") or {}).get("phase") not in TERMINAL_PHASES)]
    # keyed by position: tables may hold several unnamed pods on one node
    cluster: ClusterState = cluster_from(
        [node_from_api(obj) for obj in [*node_objects, *others]],
        [((p.namespace, f"{index}/{p.name}"), p) for index, p in enumerate(existing)])
    listed = [cluster.nodes[node_from_api(obj).name] for obj in node_objects]
    every = [cluster.nodes[node_from_api(obj).name] for obj in every_object]
    return Snapshot(incoming, cluster, listed, every, namespace_labels(namespaces),
                     [*node_objects, *others])


def score_nodes(pod: Mapping[str, Any], nodes: Objects, pods: Objects = (),
                profile: str | Profile = "default", *, all_nodes: Objects | None = None,
                workloads: Objects = (), namespaces: Objects = (),
                volumes: Objects = ()) -> Scores:
    """Score `pod` on each of `nodes` as kube-scheduler v1.35 would after its filters.

    Args:
        pod: the Pod object to place (its `spec.nodeName` is ignored).
        nodes: the Node objects that passed the filters: every one is scored, in this order.
        pods: the pods already in the cluster; those bound to a node (`spec.nodeName`) and
            not finished count on it, as the scheduler's cache holds them.
        profile: a profile name ("default", "most-allocated") or a `Profile`.
        all_nodes: every node of the cluster, when some did not pass the filters
            (PodTopologySpread and InterPodAffinity count pods on all of them); default:
            `nodes`.
        workloads: Services, ReplicaSets, StatefulSets and ReplicationControllers, whose
            selectors give the system default spreading constraints their selector.
        namespaces: Namespace objects, whose labels pod (anti-)affinity terms'
            namespaceSelector reads.
        volumes: PersistentVolumeClaims, PersistentVolumes and StorageClasses (VolumeZone).

    Each of these may also be a `List` document. Returns per node the normalised score of
    each plugin that ran and the weighted total. A pod whose terms the scheduler cannot read
    (an invalid label key or value) raises `SchedulingError`, as the plugin's PreScore fails.
    """
    chosen = profile_named(profile) if isinstance(profile, str) else profile
    if chosen.first_fit:
        raise ValueError("the first-fit profile scores no node: it takes the oldest that fits")
    snap = snapshot_of(pod, nodes, pods, all_nodes, workloads, namespaces, volumes)
    scores = score_feasible(snap.pod, snap.listed, snap.every, chosen,
                            namespaces=snap.namespaces,
                            affinity_counts=snap.cluster.affinity_counts)
    return Scores(tuple(scores), unmodelled_plugins(snap.node_objects))


def filter_nodes(pod: Mapping[str, Any], nodes: Objects, pods: Objects = (),
                 profile: str | Profile = "default", *, workloads: Objects = (),
                 namespaces: Objects = (), volumes: Objects = ()) -> list[str]:
    """The names of `nodes` (every node of the cluster) that pass kube-scheduler v1.35's
    filters for `pod`, in the order given; the arguments as `score_nodes`'."""
    chosen = profile_named(profile) if isinstance(profile, str) else profile
    snap = snapshot_of(pod, nodes, pods, None, workloads, namespaces, volumes)
    filters = cluster_filters(snap.pod, snap.every, chosen, snap.namespaces,
                              snap.cluster.affinity_counts)
    return [node.name for node in snap.every if filter_node(snap.pod, node, filters)]


__all__ = [
    "ClusterFilters",
    "NodeScore",
    "ResourceScores",
    "Scores",
    "Snapshot",
    "cluster_filters",
    "failing_filter",
    "filter_node",
    "filter_nodes",
    "namespace_labels",
    "node_admits",
    "plugin_scores",
    "resource_scores",
    "score_feasible",
    "score_nodes",
    "snapshot_of",
    "unmodelled_plugins",
    "weighted_totals",
]
