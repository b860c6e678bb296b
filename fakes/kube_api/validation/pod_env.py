"""A container's `env` and `envFrom` as the API server checks them (kubernetes
pkg/apis/core/validation/validation.go ValidateEnv, validateEnvVarValueFrom,
validateObjectFieldSelector, validateContainerResourceFieldSelector, validateConfigMapKeySelector,
validateSecretKeySelector, ValidateEnvFrom).

Names follow the relaxed rule (apimachinery util/validation IsRelaxedEnvVarName: printable ASCII
but '='): the RelaxedEnvironmentVariableValidation gate is beta and on in 1.32, the version the
fake reports (pkg/features/kube_features.go), so `MY.VAR-1` and `1X` are accepted and `A=B`
is not.  Not modelled: a resourceFieldRef's divisor, the config-key format of a key selector's
`key` (only its presence)."""

from __future__ import annotations

import re
from typing import Any

from kube_elevator.fakes.kube_api.validation.field import (
    FieldError,
    invalid,
    not_supported,
    required,
)
from kube_elevator.tasks.core.name_formats import name_is_dns_subdomain, qualified_name

RELAXED_ENV_NAME = ("a valid environment variable name must consist only of printable ASCII "
                    "characters other than '='")
_VALUE_FROM_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
_ONE_OF_VALUE_FROM = ("must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` "
                      "or `secretKeyRef`")
_NOT_WITH_VALUE = "may not be specified when `value` is not empty"
_MORE_THAN_ONE = "may not have more than one field specified at a time"
# validEnvDownwardAPIFieldPathExpressions (sets.List order: sorted).
ENV_FIELD_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
                   "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP",
                   "status.podIPs")
# The labels pkg/apis/core/pods ConvertDownwardAPIFieldLabel converts (`spec.host` is an old
# client's spec.nodeName); any other is "field label not supported".
_CONVERTIBLE = frozenset({"metadata.annotations", "metadata.labels", "metadata.name",
                          "metadata.namespace", "metadata.uid", "spec.nodeName",
                          "spec.restartPolicy", "spec.serviceAccountName", "spec.schedulerName",
                          "status.phase", "status.hostIP", "status.hostIPs", "status.podIP",
                          "status.podIPs", "spec.host"})
# validContainerResourceFieldPathExpressions, and the hugepages prefixes allowed besides.
RESOURCE_FIELD_PATHS = ("limits.cpu", "limits.ephemeral-storage", "limits.memory",
                        "requests.cpu", "requests.ephemeral-storage", "requests.memory")
_HUGEPAGES_PREFIXES = ("limits.hugepages-", "requests.hugepages-")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


_RELAXED_NAME = re.compile("[ -<>-~]*")  # printable ASCII (0x20-0x7e) but '=' (0x3d)


def relaxed_env_name(name: str) -> tuple[str, ...]:
    """IsRelaxedEnvVarName (an empty name is refused before, as Required)."""
    return () if _RELAXED_NAME.fullmatch(name) else (RELAXED_ENV_NAME,)


def _subscripted(path: str) -> tuple[str, str] | None:
    """fieldpath.SplitMaybeSubscriptedPath: `metadata.labels['key']` -> (path, key)."""
    if not path.endswith("']"):
        return None
    head, sep, subscript = path[:-2].partition("['")
    return (head, subscript) if sep else None


def _field_ref_errors(ref: dict[str, Any], path: str) -> list[FieldError]:
    """validateObjectFieldSelector with the env's expressions."""
    version, field_path = ref.get("apiVersion") or "", ref.get("fieldPath") or ""
    if not version:
        return [required(f"{path}.apiVersion")]
    if not field_path:
        return [required(f"{path}.fieldPath")]
    split = _subscripted(str(field_path))
    if version != "v1":
        detail = f"unsupported pod version: {version}"
    elif split is not None and split[0] not in ("metadata.annotations", "metadata.labels"):
        detail = f"field label does not support subscript: {field_path}"
    elif split is None and field_path not in _CONVERTIBLE:
        detail = f"field label not supported: {field_path}"
    else:
        detail = ""
    if detail:
        return [invalid(f"{path}.fieldPath", field_path, f"error converting fieldPath: {detail}")]
    if split is not None:
        key = split[1].lower() if split[0] == "metadata.annotations" else split[1]
        return [invalid(path, key, msg) for msg in qualified_name(key)]
    converted = "spec.nodeName" if field_path == "spec.host" else field_path
    if converted not in ENV_FIELD_PATHS:
        return [not_supported(f"{path}.fieldPath", converted, ENV_FIELD_PATHS)]
    return []


def _resource_ref_errors(ref: dict[str, Any], path: str) -> list[FieldError]:
    resource = ref.get("resource") or ""
    if not resource:
        return [required(f"{path}.resource")]
    if resource in RESOURCE_FIELD_PATHS or str(resource).startswith(_HUGEPAGES_PREFIXES):
        return []
    return [not_supported(f"{path}.resource", resource, RESOURCE_FIELD_PATHS)]


def _key_ref_errors(ref: dict[str, Any], path: str) -> list[FieldError]:
    """validateConfigMapKeySelector / validateSecretKeySelector: the name a DNS subdomain
    (an empty one too fails it), a key."""
    name = str(ref.get("name") or "")
    errors = [invalid(f"{path}.name", name, msg) for msg in name_is_dns_subdomain(name, False)]
    if not ref.get("key"):
        errors.append(required(f"{path}.key"))
    return errors


_SOURCE_CHECKS = {"fieldRef": _field_ref_errors, "resourceFieldRef": _resource_ref_errors,
                  "configMapKeyRef": _key_ref_errors, "secretKeyRef": _key_ref_errors}


def _value_from_errors(item: dict[str, Any], path: str) -> list[FieldError]:
    """validateEnvVarValueFrom: exactly one source, and no `value` beside it."""
    value_from = item.get("valueFrom")
    if not isinstance(value_from, dict):
        return []
    errors: list[FieldError] = []
    count = 0
    for source in _VALUE_FROM_SOURCES:
        ref = value_from.get(source)
        if ref is not None:
            count += 1
            errors.extend(_SOURCE_CHECKS[source](_dict(ref), f"{path}.{source}"))
    if count == 0:
        errors.append(invalid(path, "", _ONE_OF_VALUE_FROM))
    elif item.get("value"):
        errors.append(invalid(path, "", _NOT_WITH_VALUE))
    elif count > 1:
        errors.append(invalid(path, "", _MORE_THAN_ONE))
    return errors


def env_errors(env: Any, path: str) -> list[FieldError]:
    """ValidateEnv."""
    if not isinstance(env, list):
        return []
    errors: list[FieldError] = []
    for index, item in enumerate(env):
        item = _dict(item)
        name = item.get("name") or ""
        if item.get("valueFrom") is None and isinstance(name, str) and name and \
                _RELAXED_NAME.fullmatch(name):
            continue  # the common case: a plain name and value, nothing to report
        at = f"{path}[{index}]"
        if not name:
            errors.append(required(f"{at}.name"))
        else:
            errors.extend(invalid(f"{at}.name", name, msg)
                          for msg in relaxed_env_name(str(name)))
        if item.get("valueFrom") is not None:
            errors.extend(_value_from_errors(item, f"{at}.valueFrom"))
    return errors


def env_from_errors(env_from: Any, path: str) -> list[FieldError]:
    """ValidateEnvFrom: a relaxed prefix, exactly one of configMapRef and secretRef (the
    count's errors name the list, not the item, as upstream's do)."""
    if not isinstance(env_from, list):
        return []
    errors: list[FieldError] = []
    for index, item in enumerate(env_from):
        at, item = f"{path}[{index}]", _dict(item)
        prefix = item.get("prefix") or ""
        if prefix:
            errors.extend(invalid(f"{at}.prefix", prefix, msg)
                          for msg in relaxed_env_name(str(prefix)))
        count = 0
        for source in ("configMapRef", "secretRef"):
            ref = item.get(source)
            if ref is None:
                continue
            count += 1
            name = str(_dict(ref).get("name") or "")
            if not name:
                errors.append(required(f"{at}.{source}.name"))
            else:
                errors.extend(invalid(f"{at}.{source}.name", name, msg)
                              for msg in name_is_dns_subdomain(name, True))
        if count == 0:
            errors.append(invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif count > 1:
            errors.append(invalid(path, "", _MORE_THAN_ONE))
    return errors


__all__ = ["ENV_FIELD_PATHS", "RELAXED_ENV_NAME", "RESOURCE_FIELD_PATHS", "env_errors",
           "env_from_errors", "relaxed_env_name"]
