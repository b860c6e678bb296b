"""ObjectMeta as the API server checks it: the name per kind, generateName, namespace, labels,
annotations (keys and total size), finalizers, owner references
(staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go ValidateObjectMetaAccessor,
ValidateAnnotations; apimachinery/pkg/apis/meta/v1/validation ValidateLabels)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kube_elevator.fakes.kube_api.resources import Obj, ResourceType
from kube_elevator.fakes.kube_api.validation.field import (
    FieldError,
    forbidden,
    invalid,
    required,
    too_long,
)
from kube_elevator.fakes.kube_api.validation.meta_update import owner_reference_errors
from kube_elevator.tasks.core.name_formats import (
    label_value,
    name_is_dns_label,
    name_is_dns_subdomain,
    qualified_name,
)

NameCheck = Callable[[str, bool], tuple[str, ...]]
TOTAL_ANNOTATION_SIZE_BYTES = 256 * (1 << 10)  # TotalAnnotationSizeLimitB
_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
# ValidateXName per kind: Namespace names are DNS labels (ValidateNamespaceName); the other
# kinds served take a DNS subdomain (ValidatePodName, ValidateNodeName, ValidateConfigMapName,
# ValidateDeploymentName, ValidateLeaseName, ValidatePodDisruptionBudgetName, ...).
_NAME_CHECKS: dict[str, NameCheck] = {"namespaces": name_is_dns_label}


def name_check(rt: ResourceType) -> NameCheck:
    return _NAME_CHECKS.get(rt.plural, name_is_dns_subdomain)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def labels_errors(labels: Any, path: str) -> list[FieldError]:
    """ValidateLabels: each key a qualified name, each value a label value; the field is the
    map itself (`metadata.labels`), as upstream reports it."""
    errors: list[FieldError] = []
    if not isinstance(labels, dict):
        return errors
    for key, value in labels.items():
        errors.extend(invalid(path, key, msg) for msg in qualified_name(str(key)))
        if isinstance(value, str):
            errors.extend(invalid(path, value, msg) for msg in label_value(value))
    return errors


def label_selector_errors(selector: Any, path: str) -> list[FieldError]:
    """ValidateLabelSelector: matchLabels as labels, matchExpressions' operators and values."""
    selector = _dict(selector)
    errors = labels_errors(selector.get("matchLabels"), f"{path}.matchLabels")
    expressions = selector.get("matchExpressions")
    for index, expression in enumerate(expressions if isinstance(expressions, list) else []):
        at, expression = f"{path}.matchExpressions[{index}]", _dict(expression)
        operator, values = expression.get("operator") or "", expression.get("values") or []
        if operator in ("In", "NotIn") and not values:
            errors.append(required(f"{at}.values",
                                   "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist") and values:
            errors.append(forbidden(f"{at}.values", "may not be specified when `operator` is "
                                    "'Exists' or 'DoesNotExist'"))
        elif operator not in _SELECTOR_OPERATORS:
            errors.append(invalid(f"{at}.operator", operator, "not a valid selector operator"))
        key = str(expression.get("key") or "")
        errors.extend(invalid(f"{at}.key", key, msg) for msg in qualified_name(key))
    return errors


def annotations_errors(annotations: Any, path: str) -> list[FieldError]:
    """ValidateAnnotations: keys are qualified names compared lowercased; the keys and values
    together at most 256 KiB."""
    errors: list[FieldError] = []
    if not isinstance(annotations, dict):
        return errors
    size = 0
    for key, value in annotations.items():
        errors.extend(invalid(path, key, msg) for msg in qualified_name(str(key).lower()))
        size += len(str(key).encode()) + len(str(value).encode())
    if size > TOTAL_ANNOTATION_SIZE_BYTES:
        errors.append(too_long(path, TOTAL_ANNOTATION_SIZE_BYTES))
    return errors


def meta_errors(rt: ResourceType, obj: Obj) -> list[FieldError]:
    """ValidateObjectMetaAccessor for a built-in kind (the name already generated from
    generateName, as the registry does before validating)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return []
    check = name_check(rt)
    errors: list[FieldError] = []
    generate = meta.get("generateName") or ""
    if isinstance(generate, str) and generate:
        errors.extend(invalid("metadata.generateName", generate, msg)
                      for msg in check(generate, True))
    name = meta.get("name") or ""
    if not name:
        errors.append(required("metadata.name", "name or generateName is required"))
    else:
        errors.extend(invalid("metadata.name", name, msg) for msg in check(str(name), False))
    namespace = meta.get("namespace") or ""
    if rt.namespaced:
        if namespace:
            errors.extend(invalid("metadata.namespace", namespace, msg)
                          for msg in name_is_dns_label(str(namespace), False))
    elif namespace:
        errors.append(forbidden("metadata.namespace", "not allowed on this type"))
    errors.extend(labels_errors(meta.get("labels"), "metadata.labels"))
    errors.extend(annotations_errors(meta.get("annotations"), "metadata.annotations"))
    for index, finalizer in enumerate(meta.get("finalizers") or ()):
        if isinstance(finalizer, str):
            errors.extend(invalid(f"metadata.finalizers[{index}]", finalizer, msg)
                          for msg in qualified_name(finalizer))
    errors.extend(owner_reference_errors(meta))
    return errors


__all__ = ["TOTAL_ANNOTATION_SIZE_BYTES", "annotations_errors", "label_selector_errors",
           "labels_errors", "meta_errors", "name_check"]
