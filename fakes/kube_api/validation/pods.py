"""A pod spec as the API server checks it (kubernetes pkg/apis/core/validation/validation.go,
v1.32: ValidatePodSpec, validateContainers, validateContainerCommon, validateContainerPorts,
ValidateResourceRequirements, validateRestartPolicy, validateDNSPolicy, ValidateTolerations,
validatePullPolicy; the hostname and subdomain DNS labels).  Volumes and mounts, env, probes,
node affinity and topology spread, and security contexts are their own modules'.  The checks
run on the defaulted object, as upstream's do."""

from __future__ import annotations

from typing import Any

from kube_elevator.fakes.kube_api.validation.field import (
    FieldError,
    GoValue,
    duplicate,
    invalid,
    not_supported,
    required,
)
from kube_elevator.fakes.kube_api.validation.meta import labels_errors
from kube_elevator.fakes.kube_api.validation.pod_env import env_errors, env_from_errors
from kube_elevator.fakes.kube_api.validation.pod_scheduling import (
    affinity_errors,
    topology_spread_errors,
)
from kube_elevator.fakes.kube_api.validation.pod_volumes import volume_errors, volume_mount_errors
from kube_elevator.fakes.kube_api.validation.probes import container_hook_errors
from kube_elevator.fakes.kube_api.validation.security_context import (
    container_security_context_errors,
    pod_security_context_errors,
)
from kube_elevator.tasks.core.name_formats import (
    dns1123_label,
    dns1123_subdomain,
    label_value,
    port_name,
    port_number,
    qualified_name,
)
from kube_elevator.tasks.core.quantity import canonical_quantity, parse_quantity

RESTART_POLICIES = ("Always", "OnFailure", "Never")  # validateRestartPolicy's order
DNS_POLICIES = ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")  # sets.List
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
PROTOCOLS = ("SCTP", "TCP", "UDP")
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")
# IsStandardContainerResourceName; hugepages-<size> too.
_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def _overcommit_allowed(name: str) -> bool:
    """IsOvercommitAllowed: a native resource (no domain, or kubernetes.io's), not hugepages."""
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith("hugepages-")


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def taint_effect_errors(effect: Any, allow_empty: bool, path: str) -> list[FieldError]:
    """validateTaintEffect."""
    if not effect:
        return [] if allow_empty else [required(path)]
    if effect not in TAINT_EFFECTS:
        return [not_supported(path, effect, TAINT_EFFECTS)]
    return []


def toleration_errors(tolerations: Any, path: str) -> list[FieldError]:
    """ValidateTolerations."""
    errors: list[FieldError] = []
    for index, toleration in enumerate(_list(tolerations)):
        at = f"{path}[{index}]"
        toleration = _dict(toleration)
        key, operator = toleration.get("key") or "", toleration.get("operator") or ""
        value, effect = toleration.get("value") or "", toleration.get("effect") or ""
        if key:
            errors.extend(invalid(f"{at}.key", key, msg) for msg in qualified_name(key))
        if not key and operator != "Exists":
            errors.append(invalid(f"{at}.operator", operator,
                                  "operator must be Exists when `key` is empty, which means "
                                  "\"match all values and all keys\""))
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errors.append(invalid(f"{at}.effect", effect,
                                  "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if operator in ("Equal", ""):
            msgs = label_value(str(value))
            if msgs:
                errors.append(invalid(f"{at}.operator", value, ";".join(msgs)))
        elif operator == "Exists":
            if value:
                errors.append(invalid(f"{at}.operator", GoValue(_toleration_go(toleration)),
                                      "value must be empty when `operator` is 'Exists'"))
        else:
            errors.append(not_supported(f"{at}.operator", operator, TOLERATION_OPERATORS))
        errors.extend(taint_effect_errors(effect, True, f"{at}.effect"))
    return errors


def _toleration_go(toleration: dict[str, Any]) -> str:
    seconds = toleration.get("tolerationSeconds")
    return (f'core.Toleration{{Key:"{toleration.get("key") or ""}", '
            f'Operator:"{toleration.get("operator") or ""}", '
            f'Value:"{toleration.get("value") or ""}", '
            f'Effect:"{toleration.get("effect") or ""}", '
            f'TolerationSeconds:{"<nil>" if seconds is None else f"(*int64)({seconds})"}}}')


def port_errors(ports: Any, path: str) -> list[FieldError]:
    """validateContainerPorts: names IANA_SVC_NAME and unique, numbers in 1-65535, protocol."""
    errors: list[FieldError] = []
    names: set[str] = set()
    for index, port in enumerate(_list(ports)):
        at, port = f"{path}[{index}]", _dict(port)
        name = port.get("name") or ""
        if name:
            msgs = port_name(name)
            if msgs:
                errors.extend(invalid(f"{at}.name", name, msg) for msg in msgs)
            elif name in names:
                errors.append(duplicate(f"{at}.name", name))
            else:
                names.add(name)
        number = port.get("containerPort") or 0
        if not number:
            errors.append(required(f"{at}.containerPort"))
        elif isinstance(number, int):
            errors.extend(invalid(f"{at}.containerPort", number, msg)
                          for msg in port_number(number))
        host = port.get("hostPort") or 0
        if host and isinstance(host, int):
            errors.extend(invalid(f"{at}.hostPort", host, msg) for msg in port_number(host))
        protocol = port.get("protocol") or ""
        if not protocol:
            errors.append(required(f"{at}.protocol"))
        elif protocol not in PROTOCOLS:
            errors.append(not_supported(f"{at}.protocol", protocol, PROTOCOLS))
    return errors


def _resource_name_errors(name: str, path: str) -> list[FieldError]:
    """validateContainerResourceName."""
    errors = [invalid(path, name, msg) for msg in qualified_name(name)]
    if "/" not in name and name not in _CONTAINER_RESOURCES and not name.startswith("hugepages-"):
        errors.append(invalid(path, name, "must be a standard resource for containers"))
    return errors


class MalformedQuantity(ValueError):
    """A quantity the API server cannot decode: a 400 before any validation."""


QUANTITY_DECODE_ERROR = ("quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


def quantity_errors(name: str, text: Any, path: str) -> tuple[list[FieldError], Any]:
    """ValidateResourceQuantityValue: not negative; extended resources whole numbers."""
    try:
        value = parse_quantity(str(text))
    except ValueError:
        raise MalformedQuantity(QUANTITY_DECODE_ERROR) from None
    if value < 0:
        return [invalid(path, canonical_quantity(str(text)),
                        "must be greater than or equal to 0")], value
    if "/" in name and not name.startswith("kubernetes.io/") and value.denominator != 1:
        return [invalid(path, canonical_quantity(str(text)), "must be an integer")], value
    return [], value


def resource_errors(resources: Any, path: str) -> list[FieldError]:
    """ValidateResourceRequirements: names, quantities, requests at most limits (equal for
    resources that may not be overcommitted), a limit for such a resource."""
    resources = _dict(resources)
    limits, requests = _dict(resources.get("limits")), _dict(resources.get("requests"))
    errors: list[FieldError] = []
    limit_values: dict[str, Any] = {}
    for name, text in limits.items():
        at = f"{path}.limits[{name}]"
        errors.extend(_resource_name_errors(name, at))
        found, limit_values[name] = quantity_errors(name, text, at)
        errors.extend(found)
    for name, text in requests.items():
        at = f"{path}.requests[{name}]"
        errors.extend(_resource_name_errors(name, at))
        found, value = quantity_errors(name, text, at)
        errors.extend(found)
        limit = limit_values.get(name)
        overcommit = _overcommit_allowed(name)
        if name in limits:
            if value is None or limit is None:
                continue
            shown, limit_shown = canonical_quantity(str(text)), canonical_quantity(
                str(limits[name]))
            if value != limit and not overcommit:
                errors.append(invalid(f"{path}.requests", shown,
                                      f"must be equal to {name} limit of {limit_shown}"))
            elif value > limit:
                errors.append(invalid(f"{path}.requests", shown,
                                      f"must be less than or equal to {name} limit of "
                                      f"{limit_shown}"))
        elif not overcommit:
            errors.append(required(f"{path}.limits",
                                   "Limit must be set for non overcommitable resources"))
    return errors


def container_errors(containers: Any, path: str, names: set[str], volumes: set[str],
                     init: bool = False) -> list[FieldError]:
    """validateContainers / validateInitContainers: validateContainerCommon's checks (`volumes`
    the names a mount may use), then the hooks and probes."""
    errors: list[FieldError] = []
    for index, container in enumerate(_list(containers)):
        at, container = f"{path}[{index}]", _dict(container)
        name = container.get("name") or ""
        if not name:
            errors.append(required(f"{at}.name"))
        else:
            errors.extend(invalid(f"{at}.name", name, msg) for msg in dns1123_label(name))
            if name in names:
                errors.append(duplicate(f"{at}.name", name))
            names.add(name)
        if not container.get("image"):
            errors.append(required(f"{at}.image"))
        errors.extend(one_of(container.get("terminationMessagePolicy"),
                             f"{at}.terminationMessagePolicy", TERMINATION_MESSAGE_POLICIES))
        errors.extend(port_errors(container.get("ports"), f"{at}.ports"))
        if container.get("env"):
            errors.extend(env_errors(container["env"], f"{at}.env"))
        if container.get("envFrom"):
            errors.extend(env_from_errors(container["envFrom"], f"{at}.envFrom"))
        if container.get("volumeMounts"):
            errors.extend(volume_mount_errors(container["volumeMounts"], volumes,
                                              f"{at}.volumeMounts"))
        errors.extend(one_of(container.get("imagePullPolicy"), f"{at}.imagePullPolicy",
                             PULL_POLICIES))
        errors.extend(resource_errors(container.get("resources"), f"{at}.resources"))
        if container.get("securityContext"):
            errors.extend(container_security_context_errors(container["securityContext"],
                                                            f"{at}.securityContext"))
        errors.extend(container_hook_errors(container, at, init))
    return errors


def one_of(value: Any, path: str, supported: list[str] | tuple[str, ...]) -> list[FieldError]:
    """A required enum (a policy defaulting fills): Required when empty, else one of `supported`."""
    if not value:
        return [required(path)]
    return [] if value in supported else [not_supported(path, value, supported)]


def pod_spec_errors(spec: Any, path: str) -> list[FieldError]:
    """ValidatePodSpec's checks the fake makes."""
    if not isinstance(spec, dict):
        return [required(path)]
    volumes, errors = volume_errors(spec.get("volumes"), f"{path}.volumes")
    names: set[str] = set()
    errors.extend(container_errors(spec.get("initContainers"), f"{path}.initContainers", names,
                                   volumes, init=True))
    if not _list(spec.get("containers")):
        errors.append(required(f"{path}.containers"))
    errors.extend(container_errors(spec.get("containers"), f"{path}.containers", names, volumes))
    errors.extend(one_of(spec.get("restartPolicy"), f"{path}.restartPolicy", RESTART_POLICIES))
    errors.extend(one_of(spec.get("dnsPolicy"), f"{path}.dnsPolicy", DNS_POLICIES))
    errors.extend(labels_errors(spec.get("nodeSelector"), f"{path}.nodeSelector"))
    if spec.get("securityContext"):
        errors.extend(pod_security_context_errors(spec["securityContext"],
                                                  f"{path}.securityContext"))
    if spec.get("affinity"):
        errors.extend(affinity_errors(spec["affinity"], f"{path}.affinity"))
    if spec.get("topologySpreadConstraints"):
        errors.extend(topology_spread_errors(spec["topologySpreadConstraints"],
                                             f"{path}.topologySpreadConstraints"))
    node_name = spec.get("nodeName") or ""
    if node_name:
        errors.extend(invalid(f"{path}.nodeName", node_name, msg)
                      for msg in dns1123_subdomain(node_name))
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not 1 <= deadline <= 2**31 - 1:
        errors.append(invalid(f"{path}.activeDeadlineSeconds", deadline,
                              "must be between 1 and 2147483647, inclusive"))
    for dns_name in ("hostname", "subdomain"):  # both DNS labels (ValidateDNS1123Label)
        value = spec.get(dns_name) or ""
        if value:
            errors.extend(invalid(f"{path}.{dns_name}", value, msg)
                          for msg in dns1123_label(str(value)))
    errors.extend(toleration_errors(spec.get("tolerations"), f"{path}.tolerations"))
    priority_class = spec.get("priorityClassName") or ""
    if priority_class:  # ValidatePriorityClassName: a DNS subdomain
        errors.extend(invalid(f"{path}.priorityClassName", priority_class, msg)
                      for msg in dns1123_subdomain(str(priority_class)))
    preemption = spec.get("preemptionPolicy")
    if preemption is not None:  # ValidatePreemptionPolicy
        errors.extend(one_of(preemption, f"{path}.preemptionPolicy", PREEMPTION_POLICIES))
    return errors


__all__ = [
    "DNS_POLICIES",
    "PROTOCOLS",
    "PULL_POLICIES",
    "QUANTITY_DECODE_ERROR",
    "RESTART_POLICIES",
    "TAINT_EFFECTS",
    "TOLERATION_OPERATORS",
    "MalformedQuantity",
    "container_errors",
    "pod_spec_errors",
    "port_errors",
    "quantity_errors",
    "resource_errors",
    "taint_effect_errors",
    "toleration_errors",
]
