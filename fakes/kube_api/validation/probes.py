"""A container's probes and lifecycle hooks as the API server checks them (kubernetes
pkg/apis/core/validation/validation.go validateLivenessProbe, validateReadinessProbe,
validateStartupProbe, validateProbe, validateHandler, validateExecAction,
validateHTTPGetAction, ValidatePortNumOrName, validateLifecycle; validateInitContainers for
what an init container may set).

A probe names exactly one handler (`Required value: must specify a handler type`; a second is
`Forbidden: may not specify more than 1 handler type`), its numbers are not negative, a
liveness or startup probe's successThreshold is 1.  The checks run on the defaulted probe
(SetDefaults_Probe and SetDefaults_HTTPGetAction fill thresholds, period, path and scheme).
Not modelled: a sleep action's bound by the grace period, httpGet header names."""

from __future__ import annotations

from typing import Any

from kube_elevator.fakes.kube_api.validation.field import (
    FieldError,
    forbidden,
    invalid,
    not_supported,
    required,
)
from kube_elevator.tasks.core.name_formats import port_name, port_number

PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")  # handlerFromProbe
LIFECYCLE_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")  # handlerFromLifecycle
MORE_THAN_ONE_HANDLER = "may not specify more than 1 handler type"
_HTTP_SCHEMES = ("HTTP", "HTTPS")
_NONNEGATIVE = "must be greater than or equal to 0"
_PROBE_COUNTS = ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold",
                 "failureThreshold")
NOT_FOR_INIT = "may not be set for init containers without restartPolicy=Always"
_HOOK_KEYS = ("restartPolicy", "lifecycle", *PROBES)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def port_errors(port: Any, path: str) -> list[FieldError]:
    """ValidatePortNumOrName: a number in range or an IANA service name (absent is 0)."""
    if isinstance(port, str):
        return [invalid(path, port, msg) for msg in port_name(port)]
    number = port if isinstance(port, int) and not isinstance(port, bool) else 0
    return [invalid(path, number, msg) for msg in port_number(number)]


def _action_errors(kind: str, action: dict[str, Any], path: str) -> list[FieldError]:
    if kind == "exec":
        return [] if action.get("command") else [required(f"{path}.command")]
    if kind == "httpGet":
        errors = [] if action.get("path") else [required(f"{path}.path")]
        errors += port_errors(action.get("port"), f"{path}.port")
        scheme = action.get("scheme") or ""
        if scheme not in _HTTP_SCHEMES:
            errors.append(not_supported(f"{path}.scheme", scheme, _HTTP_SCHEMES))
        return errors
    if kind in ("tcpSocket", "grpc"):
        return port_errors(action.get("port"), f"{path}.port")
    return []


def handler_errors(handler: dict[str, Any], kinds: tuple[str, ...],
                   path: str) -> list[FieldError]:
    """validateHandler: exactly one of `kinds`, and that one's own checks."""
    errors: list[FieldError] = []
    count = 0
    for kind in kinds:
        action = handler.get(kind)
        if action is None:
            continue
        if count:
            errors.append(forbidden(f"{path}.{kind}", MORE_THAN_ONE_HANDLER))
            continue
        count += 1
        errors.extend(_action_errors(kind, _dict(action), f"{path}.{kind}"))
    if not count:
        errors.append(required(path, "must specify a handler type"))
    return errors


def probe_errors(kind: str, probe: dict[str, Any], path: str) -> list[FieldError]:
    """validateProbe and the per-kind rules."""
    errors = handler_errors(probe, PROBE_HANDLERS, path)
    for count in _PROBE_COUNTS:
        value = probe.get(count)
        if isinstance(value, int) and value < 0:
            errors.append(invalid(f"{path}.{count}", value, _NONNEGATIVE))
    grace = probe.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace <= 0:
        errors.append(invalid(f"{path}.terminationGracePeriodSeconds", grace,
                              "must be greater than 0"))
    if kind == "readinessProbe":
        if grace is not None:
            errors.append(invalid(f"{path}.terminationGracePeriodSeconds", grace,
                                  "must not be set for readinessProbes"))
    elif probe.get("successThreshold", 1) != 1:
        errors.append(invalid(f"{path}.successThreshold", probe["successThreshold"], "must be 1"))
    return errors


def lifecycle_errors(lifecycle: dict[str, Any], path: str) -> list[FieldError]:
    """validateLifecycle."""
    errors: list[FieldError] = []
    for hook in ("postStart", "preStop"):
        if lifecycle.get(hook) is not None:
            errors.extend(handler_errors(_dict(lifecycle[hook]), LIFECYCLE_HANDLERS,
                                         f"{path}.{hook}"))
    return errors


def container_hook_errors(container: dict[str, Any], at: str, init: bool) -> list[FieldError]:
    """A container's lifecycle and probes, and its restartPolicy: a regular container may not
    set one; an init container's is `Always` (a sidecar) or absent, and only a sidecar may have
    hooks and probes (validateContainers, validateInitContainers)."""
    if not any(key in container for key in _HOOK_KEYS):
        return []  # the common case: a container with none of them
    errors: list[FieldError] = []
    restart = container.get("restartPolicy")
    if init and restart is not None and restart != "Always":
        errors.append(not_supported(f"{at}.restartPolicy", restart, ("Always",)))
    if init and restart != "Always":
        errors.extend(forbidden(f"{at}.{name}", NOT_FOR_INIT)
                      for name in ("lifecycle", *PROBES) if container.get(name) is not None)
        return errors
    if container.get("lifecycle") is not None:
        errors.extend(lifecycle_errors(_dict(container["lifecycle"]), f"{at}.lifecycle"))
    for kind in PROBES:
        if container.get(kind) is not None:
            errors.extend(probe_errors(kind, _dict(container[kind]), f"{at}.{kind}"))
    if not init and restart is not None:
        errors.append(forbidden(f"{at}.restartPolicy", "may not be set for non-init containers"))
    return errors


__all__ = ["LIFECYCLE_HANDLERS", "MORE_THAN_ONE_HANDLER", "NOT_FOR_INIT", "PROBES",
           "PROBE_HANDLERS", "container_hook_errors", "handler_errors", "lifecycle_errors",
           "port_errors", "probe_errors"]
