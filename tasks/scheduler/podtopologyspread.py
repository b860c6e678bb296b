"""PodTopologySpread's score, kube-scheduler v1.35, system or List defaulting.

Follows pkg/scheduler/framework/plugins/podtopologyspread/:
* plugin.go: `systemDefaultConstraints` (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway),
  used with `defaultingType: System`, kube-scheduler's default; `defaultingType: List` takes
  the profile's `defaultConstraints` instead (and then a node must carry every topology key);
* common.go: `buildDefaultConstraints` (the defaults, with helper.DefaultSelector's selector,
  none when it is empty), `filterTopologySpreadConstraints` (matchLabelKeys merged, the node
  inclusion policies defaulted to Honor affinity, Ignore taints), `countPodsMatchSelector`
  (same namespace, not terminating; an empty selector counts nothing),
  `matchNodeInclusionPolicies`;
* scoring.go: `initPreScoreState`, `PreScore` (counts over every node, not just the candidates),
  `Score` (count x log(domains + 2) + maxSkew - 1, rounded half away from zero), `NormalizeScore`
  (100 x (max + min - score) / max). System default constraints do not require every topology
  key on a node (`requireAllTopologies`), so a node without a zone label is still spread by
  hostname, and the nodes without it form one domain "".

The filter (DoNotSchedule constraints) is `podtopologyspread_filter`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kube_elevator.tasks.core.api_objects import Taint
from kube_elevator.tasks.core.gomath import go_log, go_round
from kube_elevator.tasks.core.selectors import LabelRequirement, LabelSelector
from kube_elevator.tasks.scheduler.noderesources import MAX_NODE_SCORE
from kube_elevator.tasks.scheduler.objects import (
    HONOR,
    IGNORE,
    SCHEDULE_ANYWAY,
    SchedPod,
    SpreadConstraint,
)
from kube_elevator.tasks.scheduler.simple_plugins import required_affinity_matches, tolerates_do_not_schedule

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SYSTEM_DEFAULT_CONSTRAINTS = (
    SpreadConstraint(3, HOSTNAME, SCHEDULE_ANYWAY, None),
    SpreadConstraint(5, ZONE, SCHEDULE_ANYWAY, None),
)


@dataclass(frozen=True, slots=True)
class Constraint:
    """topologySpreadConstraint: a constraint with its selector parsed (None: labels.Nothing)
    and its inclusion policies resolved."""

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


class SpreadNode(Protocol):
    """What the plugin reads of a node: its object, and how many of its pods a selector
    matches (countPodsMatchSelector)."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def taints(self) -> Sequence[Taint]: ...

    def count_matching(self, selector: LabelSelector | None, namespace: str) -> int: ...


def filter_constraints(constraints: Sequence[SpreadConstraint], pod_labels: Mapping[str, str],
                       action: str) -> list[Constraint]:
    """filterTopologySpreadConstraints: the constraints of one `whenUnsatisfiable`, each with
    the pod's values of its matchLabelKeys ANDed to its selector (a null selector stays null)."""
    result = []
    for constraint in constraints:
        if constraint.when_unsatisfiable != action:
            continue
        selector = constraint.selector
        matched = {key: pod_labels[key] for key in constraint.match_label_keys
                   if key in pod_labels}
        if matched and selector is not None:
            selector = LabelSelector((*(LabelRequirement(key, "=", (value,))
                                        for key, value in sorted(matched.items())),
                                      *selector.requirements))
        result.append(Constraint(constraint.max_skew, constraint.topology_key, selector,
                                 constraint.node_affinity_policy or HONOR,
                                 constraint.node_taints_policy or IGNORE))
    return result


def default_constraints(pod: SchedPod, defaults: Sequence[SpreadConstraint] | None,
                        action: str) -> list[Constraint]:
    """buildDefaultConstraints: the profile's default constraints of one `whenUnsatisfiable`
    (None: the system defaults) with the pod's default selector; none when it is empty."""
    if pod.default_selector is None or not pod.default_selector.requirements:
        return []
    constraints = filter_constraints(
        SYSTEM_DEFAULT_CONSTRAINTS if defaults is None else defaults, pod.labels, action)
    return [Constraint(c.max_skew, c.topology_key, pod.default_selector,
                       c.node_affinity_policy, c.node_taints_policy)
            for c in constraints]


def soft_constraints(pod: SchedPod, defaults: Sequence[SpreadConstraint] | None = None
                     ) -> tuple[list[Constraint], bool]:
    """The ScheduleAnyway constraints the score uses and whether a node must carry every
    topology key: the pod's own (all keys required), else the defaults with the pod's
    default selector (keys required for a `List` of defaults, not for the system's), or none
    when that selector is empty."""
    if pod.spread_constraints:
        return filter_constraints(pod.spread_constraints, pod.labels, SCHEDULE_ANYWAY), True
    return default_constraints(pod, defaults, SCHEDULE_ANYWAY), defaults is not None


def _has_keys(labels: Mapping[str, str], constraints: Sequence[Constraint]) -> bool:
    """nodeLabelsMatchSpreadConstraints."""
    return all(c.topology_key in labels for c in constraints)


def included(constraint: Constraint, pod: SchedPod, node: SpreadNode) -> bool:
    """matchNodeInclusionPolicies."""
    if constraint.node_affinity_policy == HONOR and not required_affinity_matches(
            pod, node.labels, node.name):
        return False
    return constraint.node_taints_policy != HONOR or tolerates_do_not_schedule(
        pod.tolerations, node.taints)


def topology_normalizing_weight(size: int) -> float:
    """log(size + 2), Go's log: a constraint over fewer domains weighs less per pod."""
    return go_log(float(size + 2))


@dataclass
class PreScoreState:
    constraints: list[Constraint]
    ignored: set[str]
    counts: list[dict[str, int]]  # per constraint: topology value -> matching pods
    weights: list[float]


def pre_score(pod: SchedPod, filtered: Sequence[SpreadNode],
              all_nodes: Sequence[SpreadNode],
              defaults: Sequence[SpreadConstraint] | None = None) -> PreScoreState | None:
    """PreScore and initPreScoreState; None is the plugin's Skip (no constraint).
    `defaults`: the profile's `List` of default constraints, None for the system's."""
    if not all_nodes:
        return None
    constraints, require_all = soft_constraints(pod, defaults)
    if not constraints:
        return None
    state = PreScoreState(constraints, set(), [{} for _ in constraints], [])
    sizes = [0] * len(constraints)
    for node in filtered:
        labels = node.labels
        if require_all and not _has_keys(labels, constraints):
            state.ignored.add(node.name)
            continue
        for index, constraint in enumerate(constraints):
            if constraint.topology_key == HOSTNAME:  # per-node counts come in Score
                continue
            value = labels.get(constraint.topology_key, "")
            if value not in state.counts[index]:
                state.counts[index][value] = 0
                sizes[index] += 1
    for index, constraint in enumerate(constraints):
        size = sizes[index]
        if constraint.topology_key == HOSTNAME:
            size = len(filtered) - len(state.ignored)
        state.weights.append(topology_normalizing_weight(size))
    for node in all_nodes:
        labels = node.labels
        if require_all and not _has_keys(labels, constraints):
            continue
        for index, constraint in enumerate(constraints):
            if not included(constraint, pod, node):
                continue
            counts = state.counts[index]
            value = labels.get(constraint.topology_key, "")
            if value not in counts:
                continue
            counts[value] += node.count_matching(constraint.selector, pod.namespace)
    return state


def score(state: PreScoreState, pod: SchedPod, node: SpreadNode) -> int:
    """Score: per constraint whose key the node has, the matching pods of its domain (of the
    node itself for hostname) times the constraint's weight, plus maxSkew - 1."""
    if node.name in state.ignored:
        return 0
    total = 0.0
    labels = node.labels
    for index, constraint in enumerate(state.constraints):
        value = labels.get(constraint.topology_key)
        if value is None:
            continue
        if constraint.topology_key == HOSTNAME:
            count = node.count_matching(constraint.selector, pod.namespace)
        else:
            count = state.counts[index][value]
        total += float(count) * state.weights[index] + float(constraint.max_skew - 1)
    return go_round(total)


def normalize(state: PreScoreState, names: Sequence[str], scores: Sequence[int]) -> list[int]:
    """NormalizeScore: the fewest matching pods score 100; ignored nodes 0."""
    valid = [s for name, s in zip(names, scores, strict=True) if name not in state.ignored]
    min_score = min(valid, default=0)
    max_score = max((s for s in valid if s > 0), default=0)
    result = []
    for name, value in zip(names, scores, strict=True):
        if name in state.ignored:
            result.append(0)
        elif max_score == 0:
            result.append(MAX_NODE_SCORE)
        else:
            result.append(MAX_NODE_SCORE * (max_score + min_score - value) // max_score)
    return result


__all__ = [
    "HOSTNAME",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "ZONE",
    "Constraint",
    "PreScoreState",
    "SpreadNode",
    "default_constraints",
    "filter_constraints",
    "included",
    "normalize",
    "pre_score",
    "score",
    "soft_constraints",
    "topology_normalizing_weight",
]
