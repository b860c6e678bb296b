"""PodTopologySpread's filter (DoNotSchedule constraints), kube-scheduler v1.35.

Follows pkg/scheduler/framework/plugins/podtopologyspread/filtering.go:
* PreFilter (`calPreFilterState`): the pod's DoNotSchedule constraints (matchLabelKeys merged
  into the selector, node inclusion policies defaulted to nodeAffinityPolicy Honor and
  nodeTaintsPolicy Ignore: common.go `filterTopologySpreadConstraints`), else the profile's
  defaults when the pod has none (`buildDefaultConstraints`: the system defaults are all
  ScheduleAnyway, so only a `List` of defaults can add one). Over every node that carries all
  the constraints' topology keys, per constraint the node inclusion policies decide whether it
  counts: its matching pods (same namespace, not terminating) are added to its domain's count
  (`TpPairToMatchNum`); the domains are those counted, and their minimum is the critical path.
  No constraint: the plugin skips.
* Filter: the node must carry every topology key; per constraint, the pods already in its
  domain, plus one when the pod matches its own selector, less the global minimum (0 when
  fewer domains than `minDomains` exist), must not exceed `maxSkew`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kube_elevator.tasks.scheduler.objects import DO_NOT_SCHEDULE, SchedPod, SpreadConstraint
from kube_elevator.tasks.scheduler.podtopologyspread import (
    Constraint,
    SpreadNode,
    default_constraints,
    filter_constraints,
    included,
)


@dataclass
class PreFilterState:
    """filtering.go preFilterState: the constraints, the matching pods per (key, value), the
    domains per key and the minimum count per key (its critical path)."""

    constraints: list[Constraint]
    min_domains: list[int]
    counts: dict[tuple[str, str], int]
    domains: dict[str, int]
    minimum: dict[str, int]


def hard_constraints(pod: SchedPod,
                     defaults: Sequence[SpreadConstraint] | None) -> tuple[list[Constraint],
                                                                           list[int]]:
    """The DoNotSchedule constraints and their minDomains (1 when unset)."""
    own = [c for c in pod.spread_constraints if c.when_unsatisfiable == DO_NOT_SCHEDULE]
    if pod.spread_constraints:
        return (filter_constraints(own, pod.labels, DO_NOT_SCHEDULE),
                [c.min_domains or 1 for c in own])
    constraints = default_constraints(pod, defaults, DO_NOT_SCHEDULE)
    return constraints, [1] * len(constraints)


def pre_filter(pod: SchedPod, nodes: Iterable[SpreadNode],
               defaults: Sequence[SpreadConstraint] | None = None) -> PreFilterState | None:
    """calPreFilterState over every node of the cluster; None is the plugin's Skip."""
    constraints, min_domains = hard_constraints(pod, defaults)
    if not constraints:
        return None
    counts: dict[tuple[str, str], int] = {}
    keys = [c.topology_key for c in constraints]
    for node in nodes:
        labels = node.labels
        if not all(key in labels for key in keys):
            continue
        for constraint in constraints:
            if not included(constraint, pod, node):
                continue
            pair = (constraint.topology_key, labels[constraint.topology_key])
            counts[pair] = counts.get(pair, 0) + node.count_matching(constraint.selector,
                                                                     pod.namespace)
    domains: dict[str, int] = {}
    minimum: dict[str, int] = {}
    for (key, _), count in counts.items():
        domains[key] = domains.get(key, 0) + 1
        minimum[key] = min(minimum.get(key, count), count)
    return PreFilterState(constraints, min_domains, counts, domains, minimum)


def satisfies(state: PreFilterState, pod: SchedPod, labels: Mapping[str, str]) -> bool:
    """Filter on one node (its labels)."""
    for constraint, min_domains in zip(state.constraints, state.min_domains, strict=True):
        key = constraint.topology_key
        value = labels.get(key)
        if value is None:
            return False  # ErrReasonNodeLabelNotMatch
        minimum = state.minimum.get(key, 0)
        if state.domains.get(key, 0) < min_domains:
            minimum = 0
        self_match = 1 if constraint.selector is not None and constraint.selector.matches(
            pod.labels) else 0
        if state.counts.get((key, value), 0) + self_match - minimum > constraint.max_skew:
            return False  # ErrReasonConstraintsNotMatch
    return True


__all__ = ["PreFilterState", "hard_constraints", "pre_filter", "satisfies"]
