"""Pod and container security contexts as the API server checks their ids (kubernetes
pkg/apis/core/validation/validation.go validatePodSpecSecurityContext, ValidateSecurityContext;
apimachinery util/validation IsValidUserID, IsValidGroupID: 0 to MaxInt32).  Not modelled:
sysctls, seccomp and AppArmor profiles, capabilities, the privileged/escalation pairing."""

from __future__ import annotations

from typing import Any

from kube_elevator.fakes.kube_api.validation.field import FieldError, invalid
from kube_elevator.tasks.core.name_formats import inclusive_range_error

MAX_ID = 2**31 - 1  # math.MaxInt32, maxUserID and maxGroupID
ID_RANGE = inclusive_range_error(0, MAX_ID)


def _id_errors(value: Any, path: str) -> list[FieldError]:
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= MAX_ID:
        return [invalid(path, value, ID_RANGE)]
    return []


def pod_security_context_errors(context: Any, path: str) -> list[FieldError]:
    """validatePodSpecSecurityContext's id checks, in its order."""
    if not isinstance(context, dict) or not context:
        return []
    errors: list[FieldError] = []
    for name in ("fsGroup", "runAsUser", "runAsGroup"):
        errors.extend(_id_errors(context.get(name), f"{path}.{name}"))
    groups = context.get("supplementalGroups")
    for index, gid in enumerate(groups if isinstance(groups, list) else ()):
        errors.extend(_id_errors(gid, f"{path}.supplementalGroups[{index}]"))
    return errors


def container_security_context_errors(context: Any, path: str) -> list[FieldError]:
    """ValidateSecurityContext's id checks."""
    if not isinstance(context, dict) or not context:
        return []
    errors = _id_errors(context.get("runAsUser"), f"{path}.runAsUser")
    errors.extend(_id_errors(context.get("runAsGroup"), f"{path}.runAsGroup"))
    return errors


__all__ = ["ID_RANGE", "MAX_ID", "container_security_context_errors",
           "pod_security_context_errors"]
