"""The scheduler's node predicates we reproduce: nodeSelector, required node affinity, taints.

One copy serves the fake cluster's scheduler, the scale-up estimator's template nodes
(CA §1.1: "CA honours nodeSelector and required node affinity ... It ignores preferred
affinity") and PodDisruptionBudget selectors, so a pod the simulator would refuse is a pod the
estimator refuses too. Resources are checked by the callers: each keeps its own free capacity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from tasks.resources import PodRecord, Taint, Toleration


class SchedulableNode(Protocol):
    """What the predicates read of a node: a live `NodeRecord` or a template node."""

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def taints(self) -> Sequence[Taint]: ...


def tolerates(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    """Kubernetes: a toleration matches key (or Exists with no key), value (Equal) and effect."""
    for toleration in tolerations:
        key_matches = toleration.key == taint.key or (toleration.key == ""
                                                      and toleration.operator == "Exists")
        value_matches = toleration.operator == "Exists" or toleration.value == taint.value
        effect_matches = toleration.effect in ("", taint.effect)
        if key_matches and value_matches and effect_matches:
            return True
    return False


def expression_matches(labels: Mapping[str, str], key: str, operator: str,
                       values: Sequence[str]) -> bool:
    """One `matchExpressions` requirement (node affinity and label selectors share these)."""
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and values:
        try:
            node_value, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return node_value > bound if operator == "Gt" else node_value < bound
    return False


def fits_constraints(pod: PodRecord, node: SchedulableNode) -> bool:
    """nodeSelector, required node affinity (terms OR-ed, expressions AND-ed), taints."""
    labels = node.labels
    if any(labels.get(key) != value for key, value in pod.node_selector.items()):
        return False
    if pod.required_node_terms and not any(
            all(expression_matches(labels, e.key, e.operator, e.values)
                for e in term.matchExpressions)
            for term in pod.required_node_terms):
        return False
    return all(taint.effect == "PreferNoSchedule" or tolerates(pod.tolerations, taint)
               for taint in node.taints)


__all__ = ["SchedulableNode", "expression_matches", "fits_constraints", "tolerates"]
