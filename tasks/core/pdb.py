"""PodDisruptionBudgets as plain records: what the drain, the plan and the fake API read of them.

`pdb_from_api` reads a `policy/v1` object; a selector matches as the API server's does
(matchLabels AND matchExpressions; absent selects nothing, empty selects the namespace).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kube_elevator.tasks.core.records import PodRecord
from kube_elevator.tasks.core.selectors import Expression, LabelSelector, label_selector


@dataclass(frozen=True)
class PodDisruptionBudget:
    """The part of a `policy/v1` PDB the drain reads.

    `selector` None (absent) selects no pod; an empty selector selects every pod of the
    namespace (policy/v1 semantics).

    Example:
        >>> pod = ke.PodRecord("web-0", "default", node_name="", phase="Pending",
        ...     cpu_request_milli=500, memory_request_bytes=2**30)
        >>> budget = ke.PodDisruptionBudget("default", "web", ke.LabelSelector(), disruptions_allowed=0)
        >>> budget.selects(pod)
        True
    """

    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int

    def selects(self, pod: PodRecord) -> bool:
        return (pod.namespace == self.namespace and self.selector is not None
                and self.selector.matches(pod.labels))


def _selector(raw: Any, where: str) -> LabelSelector | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: spec.selector must be an object")
    labels = raw.get("matchLabels") or {}
    expressions = raw.get("matchExpressions") or []
    if not isinstance(labels, dict) or not isinstance(expressions, list):
        raise ValueError(f"{where}: spec.selector has a malformed matchLabels or matchExpressions")
    parsed: list[Expression] = []
    for expression in expressions:
        if not isinstance(expression, dict) or "key" not in expression:
            raise ValueError(f"{where}: spec.selector.matchExpressions entries need a key")
        parsed.append((str(expression["key"]), str(expression.get("operator", "")),
                       tuple(str(v) for v in expression.get("values") or ())))
    return label_selector({str(k): str(v) for k, v in labels.items()}, parsed)


def pdb_from_api(obj: Mapping[str, Any]) -> PodDisruptionBudget:
    """A `policy/v1` PodDisruptionBudget as the API returns it; ValueError if malformed."""
    metadata = obj.get("metadata") or {}
    namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
    where = f"PodDisruptionBudget {namespace}/{name}"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allowed = status.get("disruptionsAllowed", 0)
    if not isinstance(allowed, int) or isinstance(allowed, bool):
        raise ValueError(f"{where}: status.disruptionsAllowed must be an integer")
    return PodDisruptionBudget(namespace, name, _selector(spec.get("selector"), where), allowed)


def matching_pdbs(pod: PodRecord, pdbs: Iterable[PodDisruptionBudget]) -> list[PodDisruptionBudget]:
    return [pdb for pdb in pdbs if pdb.selects(pod)]


def remaining_pdbs(pdbs: Sequence[PodDisruptionBudget], evicted: Iterable[PodRecord],
                   ) -> tuple[PodDisruptionBudget, ...]:
    """The budgets left once these pods are evicted (CA's RemainingPdbTracker.RemovePods), so
    nodes drained in the same pass share them."""
    evicted = list(evicted)
    return tuple(replace(pdb, disruptions_allowed=pdb.disruptions_allowed
                         - sum(1 for pod in evicted if pdb.selects(pod))) for pdb in pdbs)
