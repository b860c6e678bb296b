"""DefaultPreemption, kube-scheduler v1.35: which pods a pending pod of higher priority evicts.

Follows pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go and
framework/preemption/preemption.go:
* PodEligibleToPreemptOthers: not a pod with `preemptionPolicy: Never`;
* nodesWherePreemptionMightHelp: the nodes whose filters failed for a reason that removing
  pods may cure (NodeResourcesFit, NodePorts, anti-affinity, a spread's skew), not those refused
  for good (NodeUnschedulable, TaintToleration, NodeAffinity, a not-Ready node, VolumeZone, a
  missing topology key, unsatisfied required pod affinity);
* SelectVictimsOnNode: remove every pod of lower priority; if the pod still does not fit, the
  node is no candidate; else reprieve the removed pods, most important first (higher priority,
  then the earlier start: util.MoreImportantPod), those whose PodDisruptionBudget would be
  violated before the others, each kept when the pod still fits with it back; the rest are the
  victims. A node with no lower-priority pod, or where the pod fits with none removed, is no
  candidate ("expected at least one victim pod");
* pickOneNodeForPreemption: the fewest budget violations, then the lowest highest victim
  priority, the smallest sum of victim priorities (each shifted by MaxInt32 + 1), the fewest
  victims, the latest earliest start among the highest-priority victims, then the first node.

Left out: the random offset and the candidate cap (`max(10 %, 100)` nodes) upstream uses past
100 nodes (every node is examined here), extenders, and the nominated-node dance: the caller
evicts the victims and binds the pod at once (their graceful termination is not modelled).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube_elevator.tasks.core.timefmt import parse_time
from kube_elevator.tasks.scheduler import interpodaffinity
from kube_elevator.tasks.scheduler.framework import (
    TERMINAL_PHASES,
    cluster_filters,
    filter_node,
    node_admits,
    snapshot_of,
)
from kube_elevator.tasks.scheduler.objects import NO_NAMESPACES, NamespaceLabels, SchedPod
from kube_elevator.tasks.scheduler.profiles import Profile, profile_named
from kube_elevator.tasks.scheduler.simple_plugins import volume_zones_match
from kube_elevator.tasks.scheduler.state import Key, NodeState

MAX_INT32 = 2**31 - 1

StartTime = Callable[[Key], float]  # a bound pod's status.startTime (Unix seconds)
Violates = Callable[[Key, SchedPod], bool]  # evicting it would break its disruption budget


@dataclass(frozen=True)
class Victims:
    """One candidate node and the pods the preemptor would evict there, most important first."""

    node: str
    pods: tuple[tuple[Key, SchedPod], ...]
    pdb_violations: int = 0


def eligible(pod: SchedPod, lowest_priority: int | None) -> bool:
    """PodEligibleToPreemptOthers, and a pod of lower priority to evict somewhere."""
    return (not pod.preempt_never and lowest_priority is not None
            and lowest_priority < pod.priority)


def might_help(pod: SchedPod, node: NodeState, namespaces: NamespaceLabels,
               affinity: interpodaffinity.PreFilterState | None) -> bool:
    """nodesWherePreemptionMightHelp: the node refused the pod for a resolvable reason."""
    if not node_admits(pod, node) or pod.volume_error:
        return False
    labels = node.labels
    if pod.volume_zones and not volume_zones_match(pod.volume_zones, labels):
        return False
    spread_keys = [c.topology_key for c in pod.spread_constraints
                   if c.when_unsatisfiable == "DoNotSchedule"]
    if any(key not in labels for key in spread_keys):
        return False
    if affinity is not None and pod.affinity is not None and pod.affinity.required:
        together = interpodaffinity.PreFilterState(affinity.pod, {}, affinity.affinity, {})
        if not interpodaffinity.satisfies(together, labels, namespaces):
            return False
    return True


def _importance(start_time: StartTime) -> Callable[[tuple[Key, SchedPod]], tuple[int, float]]:
    """util.MoreImportantPod as a sort key: higher priority, then the earlier start."""
    return lambda item: (-item[1].priority, start_time(item[0]))


def select_victims_on_node(pod: SchedPod, node: NodeState, fits: Callable[[NodeState], bool],
                           start_time: StartTime, violates: Violates | None = None,
                           can_evict: Callable[[Key], bool] | None = None) -> Victims | None:
    """SelectVictimsOnNode (a dry run: the node's pods are as they were on return)."""
    potential = [(key, other) for key, other in node.pods.items()
                 if other.priority < pod.priority and (can_evict is None or can_evict(key))]
    if not potential:
        return None
    for key, _ in potential:
        node.remove_pod(key)
    victims: list[tuple[Key, SchedPod]] = []
    violating_count = 0
    try:
        if not fits(node):
            return None
        potential.sort(key=_importance(start_time))
        violating = [item for item in potential if violates is not None and violates(*item)]
        others = [item for item in potential if item not in violating]
        for group, counts in ((violating, True), (others, False)):
            for key, other in group:
                node.add_pod(key, other)
                if not fits(node):
                    node.remove_pod(key)
                    victims.append((key, other))
                    violating_count += counts
        if violating and others:
            victims.sort(key=_importance(start_time))
    finally:
        for key, other in victims:
            node.add_pod(key, other)
        for key, other in potential:
            if key not in node.pods:
                node.add_pod(key, other)
    if not victims:
        return None
    return Victims(node.name, tuple(victims), violating_count)


def _earliest_start(victims: Victims, start_time: StartTime) -> float:
    """util.GetEarliestPodStartTime: the earliest start among the highest-priority victims."""
    highest = victims.pods[0][1].priority
    return min(start_time(key) for key, pod in victims.pods if pod.priority == highest)


def pick_one_node(candidates: Sequence[Victims], start_time: StartTime) -> Victims | None:
    """pickOneNodeForPreemption: each criterion keeps the best-scoring candidates."""
    criteria: list[Callable[[Victims], float]] = [
        lambda v: -v.pdb_violations,
        lambda v: -v.pods[0][1].priority,
        lambda v: -sum(pod.priority + MAX_INT32 + 1 for _, pod in v.pods),
        lambda v: -len(v.pods),
        lambda v: _earliest_start(v, start_time),
    ]
    remaining = list(candidates)
    for criterion in criteria:
        if len(remaining) <= 1:
            break
        best = max(criterion(v) for v in remaining)
        remaining = [v for v in remaining if criterion(v) == best]
    return remaining[0] if remaining else None


def find_victims(pod: SchedPod, nodes: Sequence[NodeState], profile: Profile,
                 start_time: StartTime, *, namespaces: NamespaceLabels = NO_NAMESPACES,
                 affinity_counts: Sequence[int] | None = None,
                 lowest_priority: int | None = None, violates: Violates | None = None,
                 can_evict: Callable[[Key], bool] | None = None) -> Victims | None:
    """DefaultPreemption's PostFilter for a pod no node took: the node and the victims, or
    None when preemption cannot help. `nodes` are every node of the cluster, in order."""
    if not eligible(pod, lowest_priority):
        return None

    def fits(node: NodeState) -> bool:
        return filter_node(pod, node, cluster_filters(pod, nodes, profile, namespaces))

    current = cluster_filters(pod, nodes, profile, namespaces, affinity_counts)
    affinity = current.affinity if current is not None else None
    candidates = []
    for node in nodes:
        if not might_help(pod, node, namespaces, affinity):
            continue
        found = select_victims_on_node(pod, node, fits, start_time, violates, can_evict)
        if found is not None:
            candidates.append(found)
    return pick_one_node(candidates, start_time)


def preempt(pod: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]] | Mapping[str, Any],
            pods: Iterable[Mapping[str, Any]] | Mapping[str, Any] = (),
            profile: str | Profile = "default", *,
            workloads: Iterable[Mapping[str, Any]] | Mapping[str, Any] = (),
            namespaces: Iterable[Mapping[str, Any]] | Mapping[str, Any] = (),
            volumes: Iterable[Mapping[str, Any]] | Mapping[str, Any] = (),
            violating: Iterable[str] = ()) -> tuple[str, list[str]] | None:
    """The node DefaultPreemption would nominate `pod` to and the names of the pods it would
    evict there (most important first), over API objects as `score_nodes` takes them; pods'
    `status.startTime` orders equal priorities; `violating` names pods whose eviction would
    break a PodDisruptionBudget. None when preemption cannot help."""
    chosen = profile_named(profile) if isinstance(profile, str) else profile
    snap = snapshot_of(pod, nodes, pods, None, workloads, namespaces, volumes)
    starts: dict[Key, float] = {}
    names: dict[Key, str] = {}
    running = [obj for obj in _listed(pods)
               if (obj.get("status") or {}).get("phase") not in TERMINAL_PHASES]
    for index, obj in enumerate(running):
        key = (str((obj.get("metadata") or {}).get("namespace") or ""),
               f"{index}/{(obj.get('metadata') or {}).get('name') or ''}")
        starts[key] = parse_time((obj.get("status") or {}).get("startTime")) or 0.0
        names[key] = str((obj.get("metadata") or {}).get("name") or "")
    breaking = set(violating)
    found = find_victims(
        snap.pod, snap.every, chosen, lambda key: starts.get(key, 0.0),
        namespaces=snap.namespaces, affinity_counts=snap.cluster.affinity_counts,
        lowest_priority=min(snap.cluster.priorities, default=None),
        violates=lambda key, _: names.get(key, "") in breaking)
    if found is None:
        return None
    return found.node, [names[key] for key, _ in found.pods]


def _listed(objects: Iterable[Mapping[str, Any]] | Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if isinstance(objects, Mapping):
        return list(objects.get("items") or ())
    return list(objects)


__all__ = [
    "Victims",
    "eligible",
    "find_victims",
    "might_help",
    "pick_one_node",
    "preempt",
    "select_victims_on_node",
]
