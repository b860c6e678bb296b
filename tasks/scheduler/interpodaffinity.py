"""InterPodAffinity (filter and score), kube-scheduler v1.35.

Follows pkg/scheduler/framework/plugins/interpodaffinity/:
* filtering.go: PreFilter counts, per topology pair (key, value of a node label), the existing
  pods whose required anti-affinity terms match the incoming pod
  (`getExistingAntiAffinityCounts`, over the nodes holding pods with required anti-affinity),
  and the existing pods matching the incoming pod's required affinity terms (all of them: a
  pod counts for affinity only when it matches every term) and anti-affinity terms
  (`getIncomingAffinityAntiAffinityCounts`). PreFilter skips when none of the three applies.
  Filter: `satisfyPodAffinity` (every term's topology key on the node and a matching pod in
  its domain; or, when no pod in the cluster matches and the pod matches its own terms, the
  first of a group that wants to be together may land anywhere with the keys),
  `satisfyPodAntiAffinity`, `satisfyExistingPodsAntiAffinity` (no label of the node names a
  pair counted above).
* scoring.go: PreScore sums, per topology pair, the weights of the incoming pod's preferred
  terms that existing pods match (anti-affinity negative), and the existing pods' required
  affinity terms (weight `hardPodAffinityWeight`, default 1), preferred affinity and
  anti-affinity terms that the incoming pod matches; with no preferred term of its own only the
  nodes' pods with affinity are read, and with no pair counted the plugin skips. Score is the
  sum of the pairs the node carries; NormalizeScore maps [min, max] to [0, 100] (float64,
  truncated).

Namespaces: a term's namespaceSelector is matched against the namespace's labels
(`mergeAffinityTermNamespacesIfNotEmpty` lists the namespaces it selects); an empty selector
is every namespace. `matchLabelKeys` and `mismatchLabelKeys` are merged into the selector by the
API server when the pod is created, so the scheduler (and this model) never reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kube_elevator.tasks.scheduler.noderesources import MAX_NODE_SCORE
from kube_elevator.tasks.scheduler.objects import (
    AffinityTerm,
    NamespaceLabels,
    SchedPod,
    WeightedAffinityTerm,
)
from kube_elevator.tasks.scheduler.state import NodeState

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1  # InterPodAffinityArgs.hardPodAffinityWeight

TopologyPair = tuple[str, str]


def _matches(term: AffinityTerm, pod: SchedPod, namespaces: NamespaceLabels) -> bool:
    return term.matches(pod.namespace, pod.labels, namespaces)


def matches_all(terms: Sequence[AffinityTerm], pod: SchedPod,
                namespaces: NamespaceLabels) -> bool:
    """podMatchesAllAffinityTerms: false for no terms."""
    return bool(terms) and all(_matches(term, pod, namespaces) for term in terms)


@dataclass
class PreFilterState:
    """filtering.go preFilterState."""

    pod: SchedPod
    existing_anti: dict[TopologyPair, int] = field(default_factory=dict)
    affinity: dict[TopologyPair, int] = field(default_factory=dict)
    anti: dict[TopologyPair, int] = field(default_factory=dict)


def _add(counts: dict[TopologyPair, int], pair: TopologyPair, value: int) -> None:
    total = counts.get(pair, 0) + value
    if total:
        counts[pair] = total
    else:
        counts.pop(pair, None)


def pre_filter(pod: SchedPod, nodes: Iterable[NodeState], namespaces: NamespaceLabels,
               existing_anti: bool = True) -> PreFilterState | None:
    """PreFilter; None is its Skip. `existing_anti` False says no pod in the cluster has
    required anti-affinity (the scheduler counts them), which spares the walk."""
    affinity = pod.affinity
    required = affinity.required if affinity is not None else ()
    required_anti = affinity.required_anti if affinity is not None else ()
    state = PreFilterState(pod)
    if not existing_anti and not required and not required_anti:
        return None
    for node in nodes:
        labels = node.labels
        if existing_anti:
            for other in node.affinity_pods.values():
                assert other.affinity is not None
                for term in other.affinity.required_anti:
                    value = labels.get(term.topology_key)
                    if value is not None and _matches(term, pod, namespaces):
                        _add(state.existing_anti, (term.topology_key, value), 1)
        if not required and not required_anti:
            continue
        for other in node.pods.values():
            if required and matches_all(required, other, namespaces):
                for term in required:
                    value = labels.get(term.topology_key)
                    if value is not None:
                        _add(state.affinity, (term.topology_key, value), 1)
            for term in required_anti:
                value = labels.get(term.topology_key)
                if value is not None and _matches(term, other, namespaces):
                    _add(state.anti, (term.topology_key, value), 1)
    if not state.existing_anti and not required and not required_anti:
        return None
    return state


def satisfies(state: PreFilterState, labels: Mapping[str, str],
              namespaces: NamespaceLabels) -> bool:
    """Filter: the pod's affinity, its anti-affinity, then the existing pods' anti-affinity."""
    affinity = state.pod.affinity
    if affinity is not None:
        pods_exist = True
        for term in affinity.required:
            value = labels.get(term.topology_key)
            if value is None:
                return False  # all topology labels must exist on the node
            if state.affinity.get((term.topology_key, value), 0) <= 0:
                pods_exist = False
        if not pods_exist and not (not state.affinity and matches_all(
                affinity.required, state.pod, namespaces)):
            return False
        if state.anti:
            for term in affinity.required_anti:
                value = labels.get(term.topology_key)
                if value is not None and state.anti.get((term.topology_key, value), 0) > 0:
                    return False
    if state.existing_anti:
        return not any(state.existing_anti.get(pair, 0) > 0 for pair in labels.items())
    return True


# --- scoring ------------------------------------------------------------------------------------


ScoreMap = dict[str, dict[str, int]]  # topology key -> value -> score


def _process(score_map: ScoreMap, term: AffinityTerm, weight: int, pod: SchedPod,
             namespaces: NamespaceLabels, labels: Mapping[str, str]) -> None:
    """scoreMap.processTerm."""
    if _matches(term, pod, namespaces):
        value = labels.get(term.topology_key)
        if value is not None:
            values = score_map.setdefault(term.topology_key, {})
            values[value] = values.get(value, 0) + weight


def _process_weighted(score_map: ScoreMap, terms: Sequence[WeightedAffinityTerm], sign: int,
                      pod: SchedPod, namespaces: NamespaceLabels,
                      labels: Mapping[str, str]) -> None:
    for weighted in terms:
        _process(score_map, weighted.term, weighted.weight * sign, pod, namespaces, labels)


def pre_score(pod: SchedPod, nodes: Iterable[NodeState], namespaces: NamespaceLabels,
              hard_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT,
              ignore_preferred_of_existing: bool = False,
              any_with_affinity: bool = True) -> ScoreMap | None:
    """PreScore over every node of the cluster; None is its Skip. `any_with_affinity` False
    says no pod in the cluster has pod (anti-)affinity."""
    affinity = pod.affinity
    preferred = affinity.preferred if affinity is not None else ()
    preferred_anti = affinity.preferred_anti if affinity is not None else ()
    has_constraints = bool(preferred or preferred_anti)
    if not has_constraints and (ignore_preferred_of_existing or not any_with_affinity):
        return None
    score_map: ScoreMap = {}
    for node in nodes:
        labels = node.labels
        if not labels:
            continue
        others = node.pods.values() if has_constraints else node.affinity_pods.values()
        for other in others:
            _process_weighted(score_map, preferred, 1, other, namespaces, labels)
            _process_weighted(score_map, preferred_anti, -1, other, namespaces, labels)
            theirs = other.affinity
            if theirs is None:
                continue
            if hard_weight > 0:
                for term in theirs.required:
                    _process(score_map, term, hard_weight, pod, namespaces, labels)
            _process_weighted(score_map, theirs.preferred, 1, pod, namespaces, labels)
            _process_weighted(score_map, theirs.preferred_anti, -1, pod, namespaces, labels)
    return score_map or None


def score(score_map: ScoreMap, labels: Mapping[str, str]) -> int:
    """Score: the pairs' sums for the labels the node carries."""
    total = 0
    for key, values in score_map.items():
        value = labels.get(key)
        if value is not None:
            total += values.get(value, 0)
    return total


def normalize(scores: Sequence[int]) -> list[int]:
    """NormalizeScore: MaxNodeScore x (score - min) / (max - min), 0 when all are equal."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    spread = high - low
    if spread <= 0:
        return [0] * len(scores)
    return [int(float(MAX_NODE_SCORE) * (float(value - low) / float(spread)))
            for value in scores]


__all__ = [
    "DEFAULT_HARD_POD_AFFINITY_WEIGHT",
    "PreFilterState",
    "ScoreMap",
    "matches_all",
    "normalize",
    "pre_filter",
    "pre_score",
    "satisfies",
    "score",
]
