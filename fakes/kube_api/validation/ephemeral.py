"""Ephemeral containers: never on create, only added through `pods/{name}/ephemeralcontainers`
(pkg/apis/core/validation/validation.go ValidatePodCreate, ValidatePodEphemeralContainersUpdate;
pkg/registry/core/pod/strategy.go podEphemeralContainersStrategy, which takes nothing but the
new list from the body)."""

from __future__ import annotations

from typing import Any

from kube_elevator.fakes.kube_api.resources import Obj
from kube_elevator.fakes.kube_api.validation.field import FieldError, forbidden

SUBRESOURCE = "ephemeralcontainers"
_PATH = "spec.ephemeralContainers"


def _containers(pod: Obj) -> list[Any]:
    spec = pod.get("spec")
    found = spec.get("ephemeralContainers") if isinstance(spec, dict) else None
    return found if isinstance(found, list) else []


def ephemeral_create_errors(pod: Obj) -> list[FieldError]:
    """ValidatePodCreate: a new pod has none."""
    return [forbidden(_PATH, "cannot be set on create")] if _containers(pod) else []


def ephemeral_update_errors(old: Obj, new: Obj) -> list[FieldError]:
    """ValidatePodEphemeralContainersUpdate: each existing one stays, unchanged."""
    by_name = {c.get("name"): c for c in _containers(new) if isinstance(c, dict)}
    errors: list[FieldError] = []
    for was in _containers(old):
        if not isinstance(was, dict):
            continue
        now = by_name.get(was.get("name"))
        if now is None:
            errors.append(forbidden(_PATH, f"existing ephemeral containers "
                                           f"\"{was.get('name')}\" may not be removed\n"))
        elif now != was:
            errors.append(forbidden(_PATH, f"existing ephemeral containers "
                                           f"\"{was.get('name')}\" may not be changed\n"))
    return errors


def with_ephemeral_containers(old: Obj, new: Obj) -> Obj:
    """The stored pod with only the body's ephemeral containers taken."""
    spec = dict(old.get("spec") or {})
    containers = _containers(new)
    if containers:
        spec["ephemeralContainers"] = containers
    else:
        spec.pop("ephemeralContainers", None)
    return {**old, "spec": spec}


__all__ = ["SUBRESOURCE", "ephemeral_create_errors", "ephemeral_update_errors",
           "with_ephemeral_containers"]
