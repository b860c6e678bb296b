"""Recorded requests, legacy faults, routes, and the PodDisruptionBudget rules evictions honour."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube_elevator.fakes.kube_api.errors import Invalid
from kube_elevator.fakes.kube_api.objects import _metadata
from kube_elevator.fakes.kube_api.resources import Obj, ObjList, ResourceType
from kube_elevator.tasks.core.selectors import selector_from_api

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the server answered, for tests that count or inspect calls.

    Example:
        ```python
        with FakeKubeApi() as api:
            ...                                       # the code under test, on api.url
            patches = [r for r in api.requests if r.verb == "patch" and r.resource == "nodes"]
        ```
    """

    verb: str  # Kubernetes verb: get list watch create update patch delete ("" otherwise)
    resource: str  # plural resource name, "" for discovery and unknown paths
    namespace: str | None
    name: str | None
    subresource: str | None
    query: dict[str, str]
    status: int
    method: str = "GET"
    path: str = "/"
    user_agent: str = ""  # which client sent it (an API server's audit log keeps it too)

    @property
    def full_resource(self) -> str:
        """`pods/eviction` style name, as used by `fail_next`."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


# A held fault's count: no test makes this many requests, so it holds until cleared.
HELD = 2**62


@dataclass
class _Fault:
    verb: str
    resource: str
    remaining: int
    status: int = 0
    delay: float = 0.0
    name: str | None = None

    def matches(self, verb: str, resource: str, name: str | None) -> bool:
        return (
            self.remaining > 0
            and self.verb in ("*", verb)
            and self.resource in ("*", resource)
            and (self.name is None or self.name == name)
        )


_FAULT_MESSAGES = {
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: injected failure",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted",
}
_TRUE = frozenset({"1", "t", "T", "true", "True", "TRUE"})
_VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete",
                    "deletecollection", "*"})


@dataclass
class _Route:
    """A parsed resource URL."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


# PodDisruptionBudgets ------------------------------------------------------------------

PDB_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
PDB_MULTIPLE = ("This pod has more than one PodDisruptionBudget, which the eviction "
                "subresource does not support.")
_PERCENT_RE = re.compile(r"^[0-9]+%$")
_UNHEALTHY_POLICIES = ("IfHealthyBudget", "AlwaysAllow")


def _selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """`metav1.LabelSelector` semantics: every matchLabels pair and matchExpression holds.

    A missing selector selects nothing and `{}` selects everything (policy/v1 rules).
    """
    parsed = selector_from_api(selector)
    return parsed is not None and parsed.matches(labels)


def _selector_empty(selector: Any) -> bool:
    """No selector or `{}`: the eviction subresource ignores such a budget, as the real one."""
    return not isinstance(selector, dict) or not (selector.get("matchLabels")
                                                  or selector.get("matchExpressions"))


def _scaled(value: Any, total: int) -> int:
    """`intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)`; values are
    validated on write, so a string here is a percentage."""
    if isinstance(value, str):
        return -(-int(value[:-1]) * total // 100)
    return int(value)


def _pod_healthy(pod: Obj) -> bool:
    """Whether the disruption controller counts `pod` as healthy: Running and Ready.

    Simplification: a Running pod with no `Ready` condition at all also counts as healthy,
    so simulated pods need not carry conditions (the real controller wants Ready=True).
    """
    if _metadata(pod).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return not ready or ready[0].get("status") == "True"


def _ignores_budgets(pod: Obj) -> bool:
    """`canIgnorePDB`: pending, finished and terminating pods are evicted without a check."""
    return (pod.get("status") or {}).get("phase") in ("Pending", "Succeeded", "Failed") \
        or bool(_metadata(pod).get("deletionTimestamp"))


def _check_int_or_percent(rt: ResourceType, name: str, fld: str, value: Any) -> None:
    """`ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`, as on a real server."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise Invalid(rt, name, fld, "FieldValueInvalid",
                      f"Invalid value: {value!r}: must be an integer or percentage (e.g '5%')")
    if isinstance(value, int):
        if value < 0:
            raise Invalid(rt, name, fld, "FieldValueInvalid",
                          f"Invalid value: {value}: must be greater than or equal to 0")
        return
    if not _PERCENT_RE.match(value):
        raise Invalid(rt, name, fld, "FieldValueInvalid",
                      f'Invalid value: "{value}": a valid percent string must be a numeric '
                      "string followed by an ending '%' (e.g. '1%',  or '93%', regex used "
                      "for validation is '[0-9]+%')")
    if int(value[:-1]) > 100:
        raise Invalid(rt, name, fld, "FieldValueInvalid",
                      f'Invalid value: "{value}": must not be greater than 100%')


def _check_pdb(rt: ResourceType, name: str, pdb: Obj) -> None:
    """Reject the budgets a real API server rejects, so status maths can trust the spec."""
    spec = pdb.get("spec") or {}
    if not isinstance(spec, dict):
        raise Invalid(rt, name, "spec", "FieldValueInvalid", "Invalid value: must be an object")
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        raise Invalid(rt, name, "spec.minAvailable", "FieldValueInvalid",
                      f"Invalid value: {min_available!r}: minAvailable and maxUnavailable "
                      "cannot be both set")
    if min_available is not None:
        _check_int_or_percent(rt, name, "spec.minAvailable", min_available)
    if max_unavailable is not None:
        _check_int_or_percent(rt, name, "spec.maxUnavailable", max_unavailable)
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _UNHEALTHY_POLICIES:
        raise Invalid(rt, name, "spec.unhealthyPodEvictionPolicy", "FieldValueNotSupported",
                      f'Unsupported value: "{policy}": supported values: '
                      '"AlwaysAllow", "IfHealthyBudget"')


def pdb_status(pdb: Obj, pods: ObjList) -> Obj:
    """What the disruption controller would write: counts over the non-finished pods the
    budget selects (expected pods are those pods, not the owning controllers' scale)."""
    spec = pdb.get("spec") or {}
    selector = spec.get("selector")
    expected = healthy = 0
    for pod in pods:
        labels = _metadata(pod).get("labels") or {}
        if not _selector_matches(selector, labels):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        expected += 1
        healthy += _pod_healthy(pod)
    if spec.get("maxUnavailable") is not None:
        desired = max(expected - _scaled(spec["maxUnavailable"], expected), 0)
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = 0
    return {"observedGeneration": _metadata(pdb).get("generation", 1),
            "disruptionsAllowed": max(healthy - desired, 0), "currentHealthy": healthy,
            "desiredHealthy": desired, "expectedPods": expected}


def eviction_blocked_by(pdb: Obj, pods: ObjList, pod: Obj) -> tuple[int, int] | None:
    """Whether the budget refuses evicting `pod` (the Eviction API's 429): None when allowed,
    else (desired, current) healthy pods for the message."""
    spec = pdb.get("spec") or {}
    status = pdb_status(pdb, pods)
    current, desired = status["currentHealthy"], status["desiredHealthy"]
    # An unhealthy pod costs the budget nothing: AlwaysAllow lets it go, and the default
    # IfHealthyBudget does while the budget is met.
    if not _pod_healthy(pod) and (spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
                                  or current >= desired > 0):
        return None
    return (desired, current) if status["disruptionsAllowed"] == 0 else None


# The server ---------------------------------------------------------------------------
