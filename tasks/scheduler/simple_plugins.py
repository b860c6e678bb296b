"""TaintToleration, NodeAffinity and NodeUnschedulable (filter and score), NodePorts and
VolumeZone (filters), kube-scheduler v1.35, and helper/normalize_score.go, which the first two
normalise with.

* tainttoleration/taint_toleration.go: the filter refuses a node with a NoSchedule or NoExecute
  taint the pod does not tolerate (helper.DoNotScheduleTaintsFilterFunc); the score counts the
  node's PreferNoSchedule taints not tolerated by the pod's tolerations with effect
  PreferNoSchedule or none, and NormalizeScore reverses it (fewest intolerable taints: 100).
* nodeaffinity/node_affinity.go: the filter is the nodeSelector and the required terms
  (component-helpers nodeaffinity.GetRequiredNodeAffinity); the score is the sum of the weights
  of the preferred terms the node matches, normalised (the best node: 100). PreScore skips the
  plugin when the pod has no preferred term.
  PreScore's terms are parsed as labels.NewRequirement parses them: an invalid key or value is
  the plugin's error (`SchedulingError`), not a term that matches nothing.
* nodeports/node_ports.go: a node whose pods use one of the pod's host ports (same protocol,
  and the same IP or either side 0.0.0.0: framework.HostPortInfo.CheckConflict) is refused.
* volumezone/volume_zone.go: a node carrying a zone or region label must carry, for each zone
  label of the pod's bound PVs, one of the PV's values (a beta label of the PV matched against
  the node's GA label when the node lacks the beta one); a node without any is not refused.
* nodeunschedulable/node_unschedulable.go: a cordoned node takes only pods that tolerate
  `node.kubernetes.io/unschedulable:NoSchedule`.

Tolerations are matched as k8s.io/api core/v1 Toleration.ToleratesTaint (tasks.core.scheduling
`tolerates`: the two differ only on an empty key with Equal, which the API server refuses).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from kube_elevator.tasks.core.api_objects import Taint, Toleration
from kube_elevator.tasks.core.records import NodeRecord
from kube_elevator.tasks.core.scheduling import term_matches, tolerates
from kube_elevator.tasks.core.selectors import aggregated, requirement_errors
from kube_elevator.tasks.scheduler.objects import (
    GA_LABEL,
    ZONE_LABELS,
    HostPort,
    PreferredTerm,
    SchedPod,
    SchedulingError,
    VolumeZone,
)

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
DO_NOT_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")
PREFER_NO_SCHEDULE = "PreferNoSchedule"


# --- helper/normalize_score.go ------------------------------------------------------------------


def default_normalize_score(max_priority: int, reverse: bool, scores: list[int]) -> list[int]:
    """DefaultNormalizeScore: scale [0, max(scores)] to [0, max_priority], reversed on request;
    all zero stays zero (or becomes max_priority when reversed)."""
    max_count = max((score for score in scores if score > 0), default=0)
    if max_count == 0:
        return [max_priority] * len(scores) if reverse else list(scores)
    normalized = []
    for score in scores:
        score = max_priority * score // max_count
        normalized.append(max_priority - score if reverse else score)
    return normalized


# --- nodeunschedulable, tainttoleration ---------------------------------------------------------


def schedulable(pod: SchedPod, node: NodeRecord) -> bool:
    """NodeUnschedulable's filter."""
    return not node.unschedulable or tolerates(pod.tolerations, UNSCHEDULABLE_TAINT)


def tolerates_do_not_schedule(tolerations: Sequence[Toleration],
                              taints: Sequence[Taint]) -> bool:
    """TaintToleration's filter: every NoSchedule and NoExecute taint is tolerated."""
    return all(taint.effect not in DO_NOT_SCHEDULE_EFFECTS or tolerates(tolerations, taint)
               for taint in taints)


def prefer_no_schedule_tolerations(tolerations: Sequence[Toleration]) -> tuple[Toleration, ...]:
    """getAllTolerationPreferNoSchedule: tolerations with effect PreferNoSchedule or none."""
    return tuple(t for t in tolerations if t.effect in ("", PREFER_NO_SCHEDULE))


def intolerable_taints(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    """countIntolerableTaintsPreferNoSchedule: the score before NormalizeScore."""
    return sum(1 for taint in taints
               if taint.effect == PREFER_NO_SCHEDULE and not tolerates(tolerations, taint))


# --- nodeaffinity -------------------------------------------------------------------------------


def required_affinity_matches(pod: SchedPod, labels: Mapping[str, str], node_name: str) -> bool:
    """RequiredNodeAffinity.Match: the nodeSelector, and one of the required terms (OR-ed,
    their expressions AND-ed; an empty term matches nothing)."""
    if any(labels.get(key) != value for key, value in pod.node_selector.items()):
        return False
    return not pod.required_terms or any(term_matches(term, labels, node_name)
                                         for term in pod.required_terms)


def preferred_terms(pod: SchedPod,
                    added: Sequence[PreferredTerm] = ()) -> tuple[PreferredTerm, ...]:
    """The terms NodeAffinity scores with: the profile's addedAffinity first, then the pod's;
    a term of weight 0 or without requirements is dropped (NewPreferredSchedulingTerms)."""
    return tuple(p for p in (*added, *pod.preferred_terms)
                 if p.weight != 0 and (p.term.matchExpressions or p.term.matchFields))


NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@lru_cache(maxsize=4096)
def check_preferred_terms(terms: tuple[PreferredTerm, ...]) -> None:
    """NewPreferredSchedulingTerms' parsing: each term's label expressions as
    nodeSelectorRequirementsAsSelector reads them; an invalid one raises `SchedulingError`
    naming it (`[0].matchExpressions[0].key: Invalid value: ...`)."""
    for index, preferred in enumerate(terms):
        for position, expression in enumerate(preferred.term.matchExpressions):
            # labels.NewRequirement with field.WithPath("[i].matchExpressions[j]"): its field
            # errors, the value Go-quoted (TestNodeAffinityPriority's "invalid key")
            errors = requirement_errors(expression.key, expression.operator, expression.values,
                                        NODE_SELECTOR_OPERATORS,
                                        path=f"[{index}].matchExpressions[{position}]")
            if errors:
                raise SchedulingError(aggregated(errors))


def preferred_affinity_score(terms: Sequence[PreferredTerm], labels: Mapping[str, str],
                             node_name: str) -> int:
    """PreferredSchedulingTerms.Score: the weights of the terms the node matches."""
    return sum(p.weight for p in terms if term_matches(p.term, labels, node_name))


# --- nodeports, volumezone ----------------------------------------------------------------------


def ports_conflict(used: Mapping[HostPort, int], wanted: Sequence[HostPort]) -> bool:
    """fitsPorts' negation: one of the wanted host ports is taken on the node."""
    if not used:
        return False
    for ip, protocol, port in wanted:
        if ip == "0.0.0.0":
            if any(p == port and proto == protocol for _, proto, p in used):
                return True
        elif ("0.0.0.0", protocol, port) in used or (ip, protocol, port) in used:
            return True
    return False


def volume_zones_match(zones: Sequence[VolumeZone], labels: Mapping[str, str]) -> bool:
    """VolumeZone's Filter for a pod whose PVs carry `zones`."""
    if not any(label in labels for label in ZONE_LABELS):
        return True
    for key, values in zones:
        value = labels.get(key)
        if value is None:
            value = labels.get(GA_LABEL.get(key, key))
        if value is None or value not in values:
            return False
    return True


__all__ = [
    "check_preferred_terms",
    "default_normalize_score",
    "intolerable_taints",
    "ports_conflict",
    "prefer_no_schedule_tolerations",
    "preferred_affinity_score",
    "preferred_terms",
    "required_affinity_matches",
    "schedulable",
    "tolerates_do_not_schedule",
    "volume_zones_match",
]
