"""The scheduler's node predicates we reproduce: nodeSelector, required node affinity, taints.

One copy serves the fake cluster's scheduler, the scale-up estimator's template nodes
(CA §1.1: "CA honours nodeSelector and required node affinity ... It ignores preferred
affinity") and PodDisruptionBudget selectors, so a pod the simulator would refuse is a pod the
estimator refuses too. Resources are checked by the callers: each keeps its own free capacity;
the helpers below do the extended-resource part of that check (`fits_extended`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from kube_elevator.tasks.core.api_objects import ExtendedResources, NodeSelectorTerm, Taint, Toleration
from kube_elevator.tasks.core.records import PodRecord
from kube_elevator.tasks.core.selectors import api_requirement


class SchedulableNode(Protocol):
    """What the predicates read of a node: a live `NodeRecord` or a template node."""

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def taints(self) -> Sequence[Taint]: ...

    @property
    def name(self) -> str: ...


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
    return api_requirement(key, operator, values).matches(labels)


def term_matches(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    """One required node-affinity term: its label expressions and its field expressions (the
    only node field is `metadata.name`) all hold; an empty term matches no node."""
    if not term.matchExpressions and not term.matchFields:
        return False
    fields = {"metadata.name": node_name}
    return (all(expression_matches(labels, e.key, e.operator, e.values)
                for e in term.matchExpressions)
            and all(expression_matches(fields, e.key, e.operator, e.values)
                    for e in term.matchFields))


def fits_constraints(pod: PodRecord, node: SchedulableNode) -> bool:
    """nodeSelector, required node affinity (terms OR-ed, expressions AND-ed), taints."""
    labels = node.labels
    if any(labels.get(key) != value for key, value in pod.node_selector.items()):
        return False
    if pod.required_node_terms and not any(
            term_matches(term, labels, node.name) for term in pod.required_node_terms):
        return False
    return all(taint.effect == "PreferNoSchedule" or tolerates(pod.tolerations, taint)
               for taint in node.taints)


# --- extended resources -----------------------------------------------------------------------
# kube-scheduler's NodeResourcesFit checks every resource a pod requests, not only cpu and
# memory: for each requested `nvidia.com/gpu`, hugepages-*, ephemeral-storage or any
# `example.com/foo`, the node's allocatable less what its pods request must cover the request;
# a resource the node does not report counts as 0. CA runs the same filter on its template and
# live nodes, so a GPU pod never "fits" a CPU-only node.


def fits_extended(requests: ExtendedResources, free: Mapping[str, int]) -> bool:
    """Every requested extended resource fits what is left of it on the node."""
    return all(amount <= free.get(name, 0) for name, amount in requests)


def take_extended(free: dict[str, int], requests: ExtendedResources) -> None:
    """Use up the pod's extended requests from a node's free extended resources."""
    for name, amount in requests:
        free[name] = free.get(name, 0) - amount


def sum_extended(requests: Iterable[ExtendedResources]) -> ExtendedResources:
    """The extended requests of several pods, summed per resource."""
    total: dict[str, int] = {}
    for pod_requests in requests:
        for name, amount in pod_requests:
            total[name] = total.get(name, 0) + amount
    return tuple(sorted(total.items()))


def free_extended(allocatable: ExtendedResources, used: ExtendedResources) -> dict[str, int]:
    """A node's extended allocatable less what its pods request (may go negative)."""
    free = dict(allocatable)
    take_extended(free, used)
    return free


__all__ = [
    "SchedulableNode",
    "expression_matches",
    "fits_constraints",
    "fits_extended",
    "free_extended",
    "sum_extended",
    "take_extended",
    "tolerates",
]
