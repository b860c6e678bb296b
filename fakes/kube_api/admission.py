"""What the API server's default admission plugins add to a Pod, after the API defaults: on
create, the ServiceAccount plugin's `default` account (plugin/pkg/admission/serviceaccount),
DefaultTolerationSeconds' not-ready and unreachable NoExecute tolerations of 300 s
(plugin/pkg/admission/defaulttolerationseconds), and the Priority plugin's priority and
preemption policy (plugin/pkg/admission/priority). On update (of the pod itself, not a
subresource) DefaultTolerationSeconds adds its tolerations again (it handles Create and
Update) and Priority keeps the stored priority and policy a body leaves out; ServiceAccount
mutates creates only. A plugin can be disabled by name, as kube-apiserver's
`--disable-admission-plugins` does (`elevator fake-cluster --disable-admission-plugins`;
upstream's integration tests run with ServiceAccount disabled).

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
SERVICE_ACCOUNT, DEFAULT_TOLERATION_SECONDS_PLUGIN, PRIORITY = (
    "ServiceAccount", "DefaultTolerationSeconds", "Priority")
PLUGINS = (SERVICE_ACCOUNT, DEFAULT_TOLERATION_SECONDS_PLUGIN, PRIORITY)


def _tolerates(tolerations: list[Any], key: str) -> bool:
    """DefaultTolerationSeconds' test: a toleration of `key` (or of every key) for NoExecute
    (or every effect) is already there."""
    return any(isinstance(t, dict) and (t.get("key") in (key, None, ""))
               and (t.get("effect") in ("NoExecute", None, "")) for t in tolerations)


def pod_admitted(pod: Obj, old: Obj | None = None,
                 disabled: frozenset[str] = frozenset()) -> Obj:
    """`pod` (already API-defaulted) as the default admission plugins leave it on create
    (`old` None) or on update (`old` the stored pod); `disabled` names plugins turned off."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return pod
    spec = dict(spec)
    if old is None and SERVICE_ACCOUNT not in disabled and not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = "default"
        spec["serviceAccount"] = "default"
    if DEFAULT_TOLERATION_SECONDS_PLUGIN not in disabled:
        tolerations = list(spec.get("tolerations") or [])
        for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
            if not _tolerates(tolerations, key):
                tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
        spec["tolerations"] = tolerations
    if PRIORITY not in disabled:
        if old is None:
            priority_class = spec.get("priorityClassName") or ""
            if priority_class in SYSTEM_PRIORITIES:
                spec.setdefault("priority", SYSTEM_PRIORITIES[priority_class])
            elif not priority_class:
                spec.setdefault("priority", 0)
            spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        else:  # admitPod on Update: "ensure the existing priority is preserved"
            stored_spec = old.get("spec")
            before: Obj = stored_spec if isinstance(stored_spec, dict) else {}
            for kept in ("priority", "preemptionPolicy"):
                if spec.get(kept) is None and before.get(kept) is not None:
                    spec[kept] = before[kept]
    return {**pod, "spec": spec}


def admitted(plural: str, obj: Obj, old: Obj | None = None,
             disabled: frozenset[str] = frozenset()) -> Obj:
    """`obj` as the default admission plugins leave it (only Pods change)."""
    return pod_admitted(obj, old, disabled) if plural == "pods" else obj


__all__ = ["DEFAULT_TOLERATION_SECONDS", "NOT_READY_TAINT", "PLUGINS", "SYSTEM_PRIORITIES",
           "UNREACHABLE_TAINT", "admitted", "pod_admitted"]
