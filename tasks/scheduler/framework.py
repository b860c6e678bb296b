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

from kube_elevator.tasks.scheduler import podtopologyspread
from kube_elevator.tasks.scheduler.noderesources import balanced_score, best_effort, fit_score, fits_request
from kube_elevator.tasks.scheduler.objects import (
    SchedPod,
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
    TAINT_TOLERATION,
    Profile,
    profile_named,
)
from kube_elevator.tasks.scheduler.simple_plugins import (
    default_normalize_score,
    intolerable_taints,
    prefer_no_schedule_tolerations,
    preferred_affinity_score,
    preferred_terms,
    required_affinity_matches,
    schedulable,
    tolerates_do_not_schedule,
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


def filter_node(pod: SchedPod, node: NodeState) -> bool:
    """The filters this model runs, in the default profile's order: NodeUnschedulable,
    TaintToleration, NodeAffinity (`node_admits`), then NodeResourcesFit. Left out: NodeName,
    NodePorts and the volume filters (no simulated pod uses them)."""
    return node_admits(pod, node) and fits_request(pod, node)


# --- scores -------------------------------------------------------------------------------------

def resource_scores(pod: SchedPod, node: NodeState, profile: Profile) -> tuple[int, int]:
    """NodeResourcesFit's and BalancedAllocation's Score on one node: they read the node's
    allocatable and its pods' sums only (`NodeState.resource_key`), so a scheduler may cache
    them by that state."""
    return (fit_score(pod, node, profile.fit_resources, profile.most_allocated),
            balanced_score(pod, node, profile.balanced_resources))


ResourceScores = Callable[[NodeState], tuple[int, int]]


def plugin_scores(pod: SchedPod, feasible: Sequence[NodeState],
                  all_nodes: Sequence[NodeState], profile: Profile,
                  resources: ResourceScores | None = None) -> dict[str, list[int]]:
    """prioritizeNodes' RunPreScorePlugins, RunScorePlugins and NormalizeScore for the nodes
    that passed the filters: per plugin that ran (PreScore did not skip it), its score on each
    node, in order. `resources` may serve `resource_scores` from a cache."""
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
        columns[NODE_AFFINITY] = default_normalize_score(MAX_NODE_SCORE, False, [
            preferred_affinity_score(affinity_terms, node.labels, node.name)
            for node in feasible])
    spread = podtopologyspread.pre_score(pod, feasible, all_nodes)
    if spread is not None:
        columns[POD_TOPOLOGY_SPREAD] = podtopologyspread.normalize(
            spread, [node.name for node in feasible],
            [podtopologyspread.score(spread, pod, node) for node in feasible])
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
                   profile: Profile, resources: ResourceScores | None = None) -> list[NodeScore]:
    """The nodes' scores per plugin and weighted totals (`plugin_scores`, `weighted_totals`)."""
    columns = plugin_scores(pod, feasible, all_nodes, profile, resources)
    totals = weighted_totals(columns, profile)
    return [NodeScore(node.name, {plugin: values[index] for plugin, values in columns.items()},
                      totals[index]) for index, node in enumerate(feasible)]


def unmodelled_plugins(pod: SchedPod, pods: Iterable[SchedPod],
                       node_objects: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The profile's plugins this model leaves out that would score here: InterPodAffinity
    when the pod or a pod on the nodes has pod (anti-)affinity, ImageLocality when a node
    reports its images (the simulator's do neither: both score nothing there)."""
    left_out = []
    if pod.pod_affinity or any(other.pod_affinity for other in pods):
        left_out.append(INTER_POD_AFFINITY)
    if any((node.get("status") or {}).get("images") for node in node_objects):
        left_out.append(IMAGE_LOCALITY)
    return tuple(left_out)


def _items(objects: Iterable[Mapping[str, Any]] | Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Objects given as a list, or as a `List` document (`kubectl get ... -o json`)."""
    if isinstance(objects, Mapping):
        return list(objects.get("items") or ())
    return list(objects)


def score_nodes(pod: Mapping[str, Any],
                nodes: Iterable[Mapping[str, Any]] | Mapping[str, Any],
                pods: Iterable[Mapping[str, Any]] | Mapping[str, Any] = (),
                profile: str | Profile = "default", *,
                all_nodes: Iterable[Mapping[str, Any]] | Mapping[str, Any] | None = None,
                workloads: Iterable[Mapping[str, Any]] | Mapping[str, Any] = ()) -> Scores:
    """Score `pod` on each of `nodes` as kube-scheduler v1.35 would after its filters.

    Args:
        pod: the Pod object to place (its `spec.nodeName` is ignored).
        nodes: the Node objects that passed the filters: every one is scored, in this order.
        pods: the pods already in the cluster; those bound to a node (`spec.nodeName`) and
            not finished count on it, as the scheduler's cache holds them.
        profile: a profile name ("default", "most-allocated") or a `Profile`.
        all_nodes: every node of the cluster, when some did not pass the filters
            (PodTopologySpread counts pods on all of them); default: `nodes`.
        workloads: Services, ReplicaSets, StatefulSets and ReplicationControllers, whose
            selectors give the system default spreading constraints their selector.

    Each of `nodes`, `pods`, `all_nodes` and `workloads` may also be a `List` document.
    Returns per node the normalised score of each plugin that ran and the weighted total.
    """
    chosen = profile_named(profile) if isinstance(profile, str) else profile
    if chosen.first_fit:
        raise ValueError("the first-fit profile scores no node: it takes the oldest that fits")
    known = Workloads(_items(workloads))
    incoming = sched_pod(pod, known)
    node_objects = _items(nodes)
    every_object = node_objects if all_nodes is None else _items(all_nodes)
    scored_names = {str((obj.get("metadata") or {}).get("name")) for obj in node_objects}
    others = [obj for obj in every_object
              if str((obj.get("metadata") or {}).get("name")) not in scored_names]
    existing = [(obj, sched_pod(obj, known)) for obj in _items(pods)
                if ((obj.get("status") or {}).get("phase") not in TERMINAL_PHASES)]
    # keyed by position: tables may hold several unnamed pods on one node
    cluster: ClusterState = cluster_from(
        [node_from_api(obj) for obj in [*node_objects, *others]],
        [((p.namespace, f"{index}/{p.name}"), p) for index, (_, p) in enumerate(existing)])
    feasible = [cluster.nodes[node_from_api(obj).name] for obj in node_objects]
    every = [cluster.nodes[node_from_api(obj).name] for obj in every_object]
    scores = score_feasible(incoming, feasible, every, chosen)
    return Scores(tuple(scores), unmodelled_plugins(incoming, [p for _, p in existing],
                                                    every_object))


__all__ = [
    "NodeScore",
    "ResourceScores",
    "Scores",
    "filter_node",
    "node_admits",
    "plugin_scores",
    "resource_scores",
    "score_feasible",
    "score_nodes",
    "unmodelled_plugins",
    "weighted_totals",
]
