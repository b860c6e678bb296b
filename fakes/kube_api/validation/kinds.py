"""The specs of the other built-in kinds served, as the API server checks them: ConfigMap
keys (ValidateConfigMap), Lease (pkg/apis/coordination/validation ValidateLeaseSpec), PodDisruptionBudget
(pkg/apis/policy/validation ValidatePodDisruptionBudgetSpec), and the apps/v1 workloads
(pkg/apis/apps/validation ValidateDeploymentSpec, ValidateReplicaSetSpec,
ValidateStatefulSetSpec, ValidatePodTemplateSpecForReplicaSet)."""

from __future__ import annotations

import re
from typing import Any

from kube_elevator.fakes.kube_api.go_base64 import Base64Error, go_base64_decode
from kube_elevator.fakes.kube_api.resources import Obj
from kube_elevator.fakes.kube_api.validation.field import (
    FieldError,
    GoValue,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
)
from kube_elevator.fakes.kube_api.validation.meta import label_selector_errors, labels_errors
from kube_elevator.fakes.kube_api.validation.pods import (
    RESTART_POLICIES,
    pod_spec_errors,
)
from kube_elevator.tasks.core.name_formats import (
    max_len_error,
    percent,
    qualified_name,
    regex_error,
)
from kube_elevator.tasks.core.selectors import selector_from_api

_NONNEGATIVE = "must be greater than or equal to 0"
_UNHEALTHY_POLICIES = ("AlwaysAllow", "IfHealthyBudget")
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY = re.compile(_CONFIG_KEY_FMT)
MAX_DATA_BYTES = 1024 * 1024  # core.MaxSecretSize, a ConfigMap's limit too
IMMUTABLE_WHEN_SET = "field is immutable when `immutable` is set"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _nonnegative(value: Any, path: str) -> list[FieldError]:
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [invalid(path, value, _NONNEGATIVE)]
    return []


def config_key_errors(path: str, key: str) -> list[FieldError]:
    """IsConfigMapKey (apimachinery util/validation): a ConfigMap's or a Secret's data key."""
    errors: list[FieldError] = []
    if len(key.encode()) > 253:
        errors.append(invalid(path, key, max_len_error(253)))
    if not _CONFIG_KEY.fullmatch(key) or not key.isascii():
        errors.append(invalid(path, key, regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or "
            "'.'", _CONFIG_KEY_FMT, "key.name", "KEY_NAME", "key-name")))
    if key == ".":
        errors.append(invalid(path, key, "must not be '.'"))
    elif key == "..":
        errors.append(invalid(path, key, "must not be '..'"))
    elif key.startswith(".."):
        errors.append(invalid(path, key, "must not start with '..'"))
    return errors


def configmap_errors(configmap: Obj) -> list[FieldError]:
    """ValidateConfigMap: keys are config keys (IsConfigMapKey), a key of `data` not also in
    `binaryData` (reported on `data`), and 1 MiB in all (core.MaxSecretSize; the error's
    field is `field.NewPath("")`, which prints as `[]`)."""
    errors: list[FieldError] = []
    data, binary = _dict(configmap.get("data")), _dict(configmap.get("binaryData"))
    total_bytes = 0
    for key, value in data.items():
        errors += config_key_errors(f"data[{key}]", key)
        if key in binary:
            errors.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        total_bytes += len(value.encode()) if isinstance(value, str) else 0
    for key, value in binary.items():
        errors += config_key_errors(f"binaryData[{key}]", key)
        total_bytes += len(decoded_bytes(value))
    if total_bytes > MAX_DATA_BYTES:
        errors.append(too_long("[]", MAX_DATA_BYTES))
    return errors


def configmap_update_errors(old: Obj, new: Obj) -> list[FieldError]:
    """ValidateConfigMapUpdate: once `immutable: true`, `immutable`, `data` and `binaryData`
    stay as they are."""
    if old.get("immutable") is not True:
        return []
    errors: list[FieldError] = []
    if new.get("immutable") is not True:
        errors.append(forbidden("immutable", IMMUTABLE_WHEN_SET))
    for bag in ("data", "binaryData"):
        if _dict(new.get(bag)) != _dict(old.get(bag)):
            errors.append(forbidden(bag, IMMUTABLE_WHEN_SET))
    return errors


def decoded_bytes(text: Any) -> bytes:
    """A `[]byte` value's bytes (one that does not decode was refused before validation)."""
    if not isinstance(text, str):
        return b""
    try:
        return go_base64_decode(text)
    except Base64Error:
        return text.encode()


def events_v1_errors(event: Obj) -> list[FieldError]:
    """ValidateEventCreate's strict part for events.k8s.io/v1 (pkg/apis/core/validation/
    events.go): eventTime, type, and the reporting fields an event's writer must name.  Core v1
    events get only the legacy checks, none of which the fake makes."""
    errors: list[FieldError] = []
    if not event.get("eventTime"):
        errors.append(required("eventTime"))
    kind_of = event.get("type") or ""
    if kind_of not in ("Normal", "Warning"):
        errors.append(invalid("type", "", f"has invalid value: {kind_of}"))
    controller = event.get("reportingController") or ""
    if not controller:
        errors.append(required("reportingController"))
    errors.extend(invalid("reportingController", controller, msg)
                  for msg in qualified_name(str(controller)))
    for name in ("reportingInstance", "action", "reason"):
        if not event.get(name):
            errors.append(required(name))
    return errors


def lease_errors(lease: Obj) -> list[FieldError]:
    """ValidateLeaseSpec."""
    spec = _dict(lease.get("spec"))
    errors: list[FieldError] = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        errors.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    errors.extend(_nonnegative(spec.get("leaseTransitions"), "spec.leaseTransitions"))
    if spec.get("preferredHolder") and not spec.get("strategy"):
        errors.append(forbidden("spec.preferredHolder",
                                "may only be specified if `strategy` is defined"))
    return errors


def _int_or_percent(value: Any, path: str) -> list[FieldError]:
    """ValidatePositiveIntOrPercent and IsNotMoreThan100Percent."""
    if isinstance(value, str):
        msgs = percent(value)
        if msgs:
            return [invalid(path, value, msg) for msg in msgs]
        if int(value[:-1]) > 100:
            return [invalid(path, value, "must not be greater than 100%")]
        return []
    return _nonnegative(value, path)


def pdb_errors(pdb: Obj) -> list[FieldError]:
    """ValidatePodDisruptionBudgetSpec."""
    spec = _dict(pdb.get("spec"))
    errors: list[FieldError] = []
    low, high = spec.get("minAvailable"), spec.get("maxUnavailable")
    if low is not None and high is not None:
        errors.append(invalid("spec", GoValue("policy.PodDisruptionBudgetSpec{...}"),
                              "minAvailable and maxUnavailable cannot be both set"))
    if low is not None:
        errors.extend(_int_or_percent(low, "spec.minAvailable"))
    if high is not None:
        errors.extend(_int_or_percent(high, "spec.maxUnavailable"))
    errors.extend(label_selector_errors(spec.get("selector"), "spec.selector"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _UNHEALTHY_POLICIES:
        errors.append(not_supported("spec.unhealthyPodEvictionPolicy", policy,
                                    _UNHEALTHY_POLICIES))
    return errors


def _template_errors(spec: dict[str, Any], kind: str) -> list[FieldError]:
    """ValidatePodTemplateSpecForReplicaSet: the selector matches the template's labels, the
    pod spec is valid, restartPolicy Always, no activeDeadlineSeconds.  A StatefulSet's
    template (ValidatePodTemplateSpecForStatefulSet) has its labels checked but not its pod
    spec: upstream leaves that out ("currently this will check volumes, which we know will
    fail": the containers mount the volumeClaimTemplates, which are not in `volumes`), and
    ValidateStatefulSetSpec adds the restartPolicy and activeDeadlineSeconds rules."""
    template = spec.get("template")
    if not isinstance(template, dict):
        return [required("spec.template")]
    errors: list[FieldError] = []
    labels = _dict(_dict(template.get("metadata")).get("labels"))
    selector = selector_from_api(spec.get("selector"))
    if selector is not None and not selector.empty and not selector.matches(labels):
        errors.append(invalid("spec.template.metadata.labels", labels,
                              "`selector` does not match template `labels`"))
    errors.extend(labels_errors(labels, "spec.template.metadata.labels"))
    pod_spec = template.get("spec")
    stateful = kind == "StatefulSet"
    if not stateful:
        errors.extend(pod_spec_errors(pod_spec, "spec.template.spec"))
    restart = _dict(pod_spec).get("restartPolicy")
    if restart != "Always" and (stateful or restart in RESTART_POLICIES):
        errors.append(not_supported("spec.template.spec.restartPolicy", restart or "",
                                    ("Always",)))
    deadline = _dict(pod_spec).get("activeDeadlineSeconds")
    if deadline is not None:
        path, detail = ("spec.template.spec.activeDeadlineSeconds",
                        f"activeDeadlineSeconds in {kind} is not Supported")
        errors.append(forbidden(path, detail) if stateful else invalid(path, deadline, detail))
    return errors


def _selector_required(spec: dict[str, Any], kind: str) -> list[FieldError]:
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        return [required("spec.selector")]
    errors = label_selector_errors(selector, "spec.selector")
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        errors.append(invalid("spec.selector", GoValue("&v1.LabelSelector{}"),
                              f"empty selector is invalid for {kind.lower()}"))
    return errors


def workload_errors(kind: str, obj: Obj) -> list[FieldError]:
    """Deployment, ReplicaSet and StatefulSet specs."""
    spec = _dict(obj.get("spec"))
    errors = _nonnegative(spec.get("replicas"), "spec.replicas")
    errors.extend(_selector_required(spec, kind))
    errors.extend(_template_errors(spec, "ReplicaSet" if kind != "StatefulSet" else kind))
    errors.extend(_nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    errors.extend(_nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit"))
    if kind == "Deployment":
        deadline, ready = spec.get("progressDeadlineSeconds"), spec.get("minReadySeconds") or 0
        if isinstance(deadline, int) and not isinstance(deadline, bool):
            errors.extend(_nonnegative(deadline, "spec.progressDeadlineSeconds"))
            if isinstance(ready, int) and deadline <= ready:  # ValidateDeploymentSpec
                errors.append(invalid("spec.progressDeadlineSeconds", deadline,
                                      "must be greater than minReadySeconds"))
        strategy = _dict(spec.get("strategy"))
        kind_of = strategy.get("type")
        if kind_of not in ("Recreate", "RollingUpdate"):
            errors.append(not_supported("spec.strategy.type", kind_of or "",
                                        ("Recreate", "RollingUpdate")))
        elif kind_of == "Recreate" and strategy.get("rollingUpdate") is not None:
            errors.append(forbidden("spec.strategy.rollingUpdate",
                                    "may not be specified when strategy `type` is 'Recreate'"))
        rolling = _dict(strategy.get("rollingUpdate"))
        for name in ("maxUnavailable", "maxSurge"):
            if rolling.get(name) is not None:
                errors.extend(_int_or_percent(rolling[name],
                                              f"spec.strategy.rollingUpdate.{name}"))
        if kind_of == "RollingUpdate" and rolling.get("maxUnavailable") in (0, "0%") and \
                rolling.get("maxSurge") in (0, "0%"):
            errors.append(invalid("spec.strategy.rollingUpdate.maxUnavailable",
                                  rolling["maxUnavailable"],
                                  "may not be 0 when `maxSurge` is 0"))
    elif kind == "StatefulSet":
        policy = spec.get("podManagementPolicy")
        if policy not in ("OrderedReady", "Parallel"):
            errors.append(not_supported("spec.podManagementPolicy", policy or "",
                                        ("OrderedReady", "Parallel")))
        update = _dict(spec.get("updateStrategy")).get("type")
        if update not in ("RollingUpdate", "OnDelete"):
            errors.append(not_supported("spec.updateStrategy.type", update or "",
                                        ("RollingUpdate", "OnDelete")))
    return errors


__all__ = ["MAX_DATA_BYTES", "config_key_errors", "configmap_errors", "configmap_update_errors",
           "decoded_bytes", "events_v1_errors", "label_selector_errors",
           "lease_errors",
           "pdb_errors", "workload_errors"]
