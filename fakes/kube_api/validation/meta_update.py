"""What an update may do to ObjectMeta, for every built-in kind, and owner references.

The registry first repairs what a client may leave out (k8s.io/apiserver pkg/registry/rest
update.go BeforeUpdate): an empty `uid` takes the stored one, `creationTimestamp` is always the
stored one, a stored `deletionTimestamp` wins, a stored `deletionGracePeriodSeconds` fills an
empty one.  What is left to differ is refused by ValidateObjectMetaAccessorUpdate
(staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go) with `field is immutable`:
a new `uid`, a `deletionTimestamp` set by an update, a changed grace period.  (`name` and
`namespace` never get this far over HTTP: a body naming another object is a 400 first.)
Owner references are checked on create and update alike (ValidateOwnerReferences).

A PUT without `metadata.resourceVersion` is an unconditional update, which the generic store
refuses for the kinds whose strategy says AllowUnconditionalUpdate() false: of those served,
PodDisruptionBudgets (pkg/registry/policy/poddisruptionbudget/strategy.go); registry/generic/
registry/store.go Update words it with the resource as the kind and the version as a uint64:
`poddisruptionbudgets.policy "x" is invalid: metadata.resourceVersion: Invalid value: 0x0:
must be specified for an update`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kube_elevator.fakes.kube_api.errors import ApiError
from kube_elevator.fakes.kube_api.resources import Obj, ResourceType
from kube_elevator.fakes.kube_api.validation.field import (
    FieldError,
    GoValue,
    aggregate_message,
    invalid,
)

IMMUTABLE = "field is immutable"
# The served plurals whose strategy's AllowUnconditionalUpdate() is false.
CONDITIONAL_UPDATE_ONLY = frozenset({"poddisruptionbudgets"})
_BANNED_OWNERS = frozenset({("v1", "Event")})  # BannedOwners: core v1 Events own nothing


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def go_time(text: Any) -> GoValue | Any:
    """metav1.Time as `%s` prints it (time.Time.String): `2025-01-02 03:04:05 +0000 UTC`."""
    if not isinstance(text, str):
        return text
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    offset = when.strftime("%z") or "+0000"
    zone = "UTC" if text.endswith("Z") else offset
    fraction = f".{when.microsecond:06d}".rstrip("0") if when.microsecond else ""
    return GoValue(when.strftime("%Y-%m-%d %H:%M:%S") + f"{fraction} {offset} {zone}")


def meta_update_errors(old: Obj, new: Obj) -> list[FieldError]:
    """ValidateObjectMetaAccessorUpdate's immutable fields, after BeforeUpdate's repairs."""
    before, after = _meta(old), _meta(new)
    errors: list[FieldError] = []
    uid = after.get("uid") or ""
    if uid and uid != (before.get("uid") or ""):
        errors.append(invalid("metadata.uid", uid, IMMUTABLE))
    if not before.get("deletionTimestamp") and after.get("deletionTimestamp"):
        errors.append(invalid("metadata.deletionTimestamp",
                              go_time(after["deletionTimestamp"]), IMMUTABLE))
    grace_before = before.get("deletionGracePeriodSeconds")
    grace_after = after.get("deletionGracePeriodSeconds")
    if grace_after is None:
        grace_after = grace_before
    if grace_after != grace_before:
        errors.append(invalid("metadata.deletionGracePeriodSeconds", grace_after, IMMUTABLE))
    return errors


def _owner_go(ref: dict[str, Any]) -> GoValue:
    fields = ", ".join(f'{go}:"{ref.get(key) or ""}"' for go, key in (
        ("APIVersion", "apiVersion"), ("Kind", "kind"), ("Name", "name"), ("UID", "uid")))
    return GoValue(f"v1.OwnerReference{{{fields}}}")


def owner_reference_errors(meta: dict[str, Any]) -> list[FieldError]:
    """ValidateOwnerReferences: apiVersion with a version, kind, name and uid given, not an
    Event, at most one controller."""
    path = "metadata.ownerReferences"
    errors: list[FieldError] = []
    found = meta.get("ownerReferences")
    refs: list[Any] = found if isinstance(found, list) else []
    controller = ""
    for ref in refs:
        if not isinstance(ref, dict):
            continue
        api_version, kind = str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
        version = api_version.rpartition("/")[2]
        if not version:
            errors.append(invalid(f"{path}.apiVersion", api_version,
                                  "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                errors.append(invalid(f"{path}.{key}", str(ref.get(key) or ""),
                                      "must not be empty"))
        if (api_version, kind) in _BANNED_OWNERS:
            errors.append(invalid(path, _owner_go(ref),
                                  f"/{version}, Kind={kind} is disallowed from being an owner"))
        if ref.get("controller") is True:
            current = f"{kind}/{ref.get('name') or ''}"
            if controller:
                shown = GoValue("[]v1.OwnerReference{" + ", ".join(
                    _owner_go(r) for r in refs if isinstance(r, dict)) + "}")
                errors.append(invalid(path, shown, "Only one reference can have Controller set "
                                      f'to true. Found "true" in references for {controller} '
                                      f"and {current}"))
            else:
                controller = current
    return errors


def unconditional_update_errors(rt: ResourceType, body: Obj) -> list[FieldError]:
    """The generic store's refusal of a PUT without a resourceVersion, for the kinds that
    need one."""
    if rt.plural in CONDITIONAL_UPDATE_ONLY and not _meta(body).get("resourceVersion"):
        return [invalid("metadata.resourceVersion", GoValue("0x0"),
                        "must be specified for an update")]
    return []


def resource_invalid(rt: ResourceType, name: str, errors: list[FieldError]) -> ApiError:
    """NewInvalid with the resource where the kind goes, as the generic store words it."""
    qualified = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    details: Obj = {"name": name, "group": rt.group, "kind": rt.plural, "causes": [
        {"reason": e.type, "message": e.body(), "field": e.field} for e in errors]}
    return ApiError(422, "Invalid",
                    f'{qualified} "{name}" is invalid: {aggregate_message(errors)}', details)


__all__ = ["CONDITIONAL_UPDATE_ONLY", "IMMUTABLE", "go_time", "meta_update_errors",
           "owner_reference_errors", "resource_invalid", "unconditional_update_errors"]
