"""Value validation of the built-in kinds the fake serves, with the API server's 422 answers
(kubernetes pkg/apis/*/validation, apimachinery's object-meta and name checks).  One module per
concern: `field` (the errors and the Status), `names` (the formats), `meta` (ObjectMeta),
`meta_update` (what an update may do to metadata), `pods` (pod specs) with `pod_env`,
`pod_volumes`, `probes`, `pod_scheduling` and `security_context` (its parts), `pod_update`
(what a Pod update may change), `nodes`, `volumes` (PersistentVolumes and claims), `secrets`,
`workload_update` (what an apps/v1 update may change), `kinds` (the rest).
Custom resources and CustomResourceDefinitions are apiextensions' (`fakes/kube_api/crds.py`)."""

from __future__ import annotations

from collections.abc import Callable

from kube_elevator.fakes.kube_api.errors import BadRequest
from kube_elevator.fakes.kube_api.resources import Obj, ResourceType
from kube_elevator.fakes.kube_api.validation.ephemeral import (
    SUBRESOURCE as EPHEMERAL,
)
from kube_elevator.fakes.kube_api.validation.ephemeral import (
    ephemeral_create_errors,
    ephemeral_update_errors,
)
from kube_elevator.fakes.kube_api.validation.field import FieldError, InvalidObject
from kube_elevator.fakes.kube_api.validation.kinds import (
    configmap_errors,
    configmap_update_errors,
    events_v1_errors,
    lease_errors,
    pdb_errors,
    workload_errors,
)
from kube_elevator.fakes.kube_api.validation.meta import meta_errors
from kube_elevator.fakes.kube_api.validation.meta_update import meta_update_errors
from kube_elevator.fakes.kube_api.validation.nodes import node_errors, node_update_errors
from kube_elevator.fakes.kube_api.validation.pod_update import pod_update_errors
from kube_elevator.fakes.kube_api.validation.pods import MalformedQuantity, pod_spec_errors
from kube_elevator.fakes.kube_api.validation.secrets import secret_errors, secret_update_errors
from kube_elevator.fakes.kube_api.validation.volumes import (
    pv_errors,
    pv_update_errors,
    pvc_errors,
    pvc_update_errors,
)
from kube_elevator.fakes.kube_api.validation.workload_update import (
    selector_update_errors,
    statefulset_update_errors,
)


def _none(_: Obj) -> list[FieldError]:
    return []


# The spec checks per built-in resource; metadata is checked for every one of them.
SPEC_CHECKS: dict[str, Callable[[Obj], list[FieldError]]] = {
    "pods": lambda pod: pod_spec_errors(pod.get("spec"), "spec"),
    "nodes": node_errors,
    "events": _none,
    "leases": lease_errors,
    "deployments": lambda obj: workload_errors("Deployment", obj),
    "replicasets": lambda obj: workload_errors("ReplicaSet", obj),
    "statefulsets": lambda obj: workload_errors("StatefulSet", obj),
    "configmaps": configmap_errors,
    "secrets": secret_errors,
    "namespaces": _none,
    "persistentvolumes": pv_errors,
    "persistentvolumeclaims": pvc_errors,
    "poddisruptionbudgets": pdb_errors,
}

# What an update may change, per resource (the HTTP writes'; the in-process control plane's
# binding and status writes are exempt).
UPDATE_CHECKS: dict[str, Callable[[Obj, Obj], list[FieldError]]] = {
    "pods": pod_update_errors,
    "nodes": node_update_errors,
    "persistentvolumes": pv_update_errors,
    "persistentvolumeclaims": pvc_update_errors,
    "secrets": secret_update_errors,
    "configmaps": configmap_update_errors,
    "deployments": selector_update_errors,
    "replicasets": selector_update_errors,
    "statefulsets": statefulset_update_errors,
}
# The kinds whose status is validated too (ValidateNodeResources), so a status write is
# checked again.
_STATUS_CHECKED = frozenset({"nodes"})


# The metadata the checks read; on an update whose other parts are as stored, only what
# changed is checked again (the rules are the same, so the answer is: a cost saving for the
# simulator's many writes).
_META_PARTS = ("name", "generateName", "namespace", "labels", "annotations", "finalizers",
               "ownerReferences")


def _changed(old: Obj | None, new: Obj, meta_parts: tuple[str, ...] | None,
             status: bool = False) -> bool:
    if old is None:
        return True
    if meta_parts is not None:
        before, after = old.get("metadata") or {}, new.get("metadata") or {}
        return any(before.get(part) != after.get(part) for part in meta_parts)
    return any(old.get(key) != new.get(key) for key in set(old) | set(new)
               if key != "metadata" and (status or key != "status"))


def validate(rt: ResourceType, obj: Obj, old: Obj | None, *, pod_update_rule: bool,
             subresource: str | None = None) -> None:
    """Raise the API server's error for `obj` (defaulted), a create when `old` is None:
    `InvalidObject` (422) listing every cause, or `BadRequest` (400) for a body it cannot
    decode.  `pod_update_rule` off lets the in-process writers (the simulator's scheduler and
    kubelet) bind and change pods, and mark objects deleted, as the control plane does."""
    check = SPEC_CHECKS.get(rt.plural)
    if check is None or rt.custom:
        return
    if rt.plural == "events":
        # Core v1 events skip ObjectMeta validation, for old clients; events.k8s.io/v1 ones
        # get it and the strict checks (ValidateEventCreate).
        if rt.group != "events.k8s.io":
            return
        check = events_v1_errors
    try:
        errors = meta_errors(rt, obj) if _changed(old, obj, _META_PARTS) else []
        if old is None or _changed(old, obj, None, rt.plural in _STATUS_CHECKED):
            errors += check(obj)
        if rt.plural == "pods" and old is None:
            errors += ephemeral_create_errors(obj)
        if rt.plural == "pods" and old is not None and subresource == EPHEMERAL:
            errors += ephemeral_update_errors(old, obj)  # and not the pod update rule
        elif old is not None and pod_update_rule:
            errors += meta_update_errors(old, obj)
            update_check = UPDATE_CHECKS.get(rt.plural)
            if update_check is not None:
                errors += update_check(old, obj)
    except MalformedQuantity as exc:
        raise BadRequest(f'{rt.kind} in version "{rt.version}" cannot be handled as a '
                         f"{rt.kind}: {exc}") from None
    if errors:
        meta = obj.get("metadata")
        name = str(meta.get("name") or "") if isinstance(meta, dict) else ""
        raise InvalidObject(rt, name, errors)


__all__ = ["SPEC_CHECKS", "UPDATE_CHECKS", "InvalidObject", "validate"]
