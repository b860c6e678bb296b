"""What the API server's default admission plugins add to a Pod on create, after the API
defaults: the ServiceAccount plugin's `default` account
(plugin/pkg/admission/serviceaccount), DefaultTolerationSeconds' not-ready and unreachable
NoExecute tolerations of 300 s (plugin/pkg/admission/defaulttolerationseconds), and the
Priority plugin's priority and preemption policy (plugin/pkg/admission/priority).

Not modelled: the ServiceAccount plugin's token volume and mounts, and its refusal of a pod whose
account does not exist (the fake serves no ServiceAccounts); PriorityClasses (none are served:
a pod naming a class other than the two system ones keeps the priority it gives)."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

DEFAULT_TOLERATION_SECONDS = 300
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
# The system PriorityClasses every cluster has (pkg/apis/scheduling SystemPriorityClasses).
SYSTEM_PRIORITIES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def _tolerates(tolerations: list[Any], key: str) -> bool:
    """DefaultTolerationSeconds' test: a toleration of `key` (or of every key) for NoExecute
    (or every effect) is already there."""
    return any(isinstance(t, dict) and (t.get("key") in (key, None, ""))
               and (t.get("effect") in ("NoExecute", None, "")) for t in tolerations)


def pod_admitted(pod: Obj) -> Obj:
    """`pod` (already API-defaulted) as the default admission plugins leave it on create."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return pod
    spec = dict(spec)
    if not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = "default"
        spec["serviceAccount"] = "default"
    tolerations = list(spec.get("tolerations") or [])
    for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
        if not _tolerates(tolerations, key):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
    spec["tolerations"] = tolerations
    priority_class = spec.get("priorityClassName") or ""
    if priority_class in SYSTEM_PRIORITIES:
        spec.setdefault("priority", SYSTEM_PRIORITIES[priority_class])
    elif not priority_class:
        spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    return {**pod, "spec": spec}


def admitted(plural: str, obj: Obj) -> Obj:
    """`obj` as the default admission plugins leave it on create (only Pods change)."""
    return pod_admitted(obj) if plural == "pods" else obj


__all__ = ["DEFAULT_TOLERATION_SECONDS", "NOT_READY_TAINT", "SYSTEM_PRIORITIES",
           "UNREACHABLE_TAINT", "admitted", "pod_admitted"]
