"""The CRD schema layers as one call each for the store: a CRD's schemas checked at install,
a custom object pruned, defaulted and validated on each write, defaulted on each read.

Order of a write, as apiextensions' decoder and registry do it: unknown fields pruned
(pruning/algorithm.go), defaults applied (defaulting/algorithm.go), then the schema's value
validations and CEL rules (validation/validation.go, cel/validation.go). An update is
ratcheted as with CRDValidationRatcheting (on by default since 1.30): an error in a value the
update left as it was is not reported."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kube_elevator.fakes.kube_api.crd_schema.cel import cel_errors, has_rules, rule_errors
from kube_elevator.fakes.kube_api.crd_schema.defaulting import defaulted, has_defaults
from kube_elevator.fakes.kube_api.crd_schema.field_errors import FieldError, invalid
from kube_elevator.fakes.kube_api.crd_schema.pruning import meta_pruned, pruned
from kube_elevator.fakes.kube_api.crd_schema.structural import structural_errors
from kube_elevator.fakes.kube_api.crd_schema.validate import validation_errors
from kube_elevator.fakes.kube_api.errors import ApiError

Obj = dict[str, Any]
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_ABSENT = object()


@dataclass(frozen=True)
class VersionSchema:
    """One served version's `openAPIV3Schema`, and what it asks of reads and writes."""

    schema: Obj
    defaults: bool
    rules: bool


def crd_refusal(crd: Obj) -> ApiError | None:
    """The 422 apiextensions answers a CRD whose schemas it does not accept, else None."""
    spec: Obj = crd["spec"] if isinstance(crd.get("spec"), dict) else {}
    errs: list[FieldError] = []
    for i, version in enumerate(spec.get("versions") or ()):
        if not isinstance(version, dict):
            continue
        path = f"spec.versions[{i}].schema.openAPIV3Schema"
        schema = (version.get("schema") or {}).get("openAPIV3Schema") \
            if isinstance(version.get("schema"), dict) else None
        found = structural_errors(schema, path)
        errs += found
        if not found:
            errs += rule_errors(schema, path)
        errs += _scale_path_errors(version, f"spec.versions[{i}].subresources.scale")
    if not errs:
        return None
    name = (crd.get("metadata") or {}).get("name") or ""
    return invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, errs)


_SIMPLE_PATH = re.compile(r"^(\.[a-zA-Z_][a-zA-Z0-9_-]*)+$")


def _scale_path_errors(version: Obj, path: str) -> list[FieldError]:
    """ValidateCustomResourceDefinitionSubresources: the scale subresource's paths are simple
    JSON paths, the replicas under .spec and .status, the selector under either."""
    scale = (version.get("subresources") or {}).get("scale") \
        if isinstance(version.get("subresources"), dict) else None
    if not isinstance(scale, dict):
        return []
    errs: list[FieldError] = []
    for key, roots, words in (
            ("specReplicasPath", (".spec.",), "should be a json path under .spec"),
            ("statusReplicasPath", (".status.",), "should be a json path under .status"),
            ("labelSelectorPath", (".spec.", ".status."),
             "should be a json path under either .spec or .status")):
        value = scale.get(key)
        if value is None or (key == "labelSelectorPath" and value == ""):
            if key != "labelSelectorPath":
                errs.append(FieldError(f"{path}.{key}", "FieldValueRequired"))
            continue
        if not isinstance(value, str) or not _SIMPLE_PATH.match(value):
            errs.append(invalid_value(f"{path}.{key}", value,
                                      "must be a simple json path starting with ."))
        elif not value.startswith(roots):
            errs.append(invalid_value(f"{path}.{key}", value, words))
    return errs


def invalid_value(field: str, value: Any, detail: str) -> FieldError:
    return FieldError(field, "FieldValueInvalid", value, detail)


def version_schemas(crd: Obj) -> dict[str, VersionSchema]:
    """Each version's schema (versions without one are left out)."""
    found: dict[str, VersionSchema] = {}
    for version in (crd.get("spec") or {}).get("versions") or ():
        schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema")
        if isinstance(schema, dict) and version.get("name"):
            found[version["name"]] = VersionSchema(schema, has_defaults(schema),
                                                   has_rules(schema))
    return found


def _at(obj: Any, path: str) -> Any:
    """The value at a field path (`spec.items[0].name`), `_ABSENT` when there is none."""
    cur = obj
    for name, index in _STEP.findall(path):
        if name:
            cur = cur.get(name, _ABSENT) if isinstance(cur, dict) else _ABSENT
        else:
            cur = cur[int(index)] if isinstance(cur, list) and int(index) < len(cur) \
                else _ABSENT
        if cur is _ABSENT:
            return cur
    return cur


# Schema errors that keep the CEL rules from running: the object is too broken to evaluate.
_BLOCKING = frozenset({"FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong",
                       "FieldValueTooMany", "FieldValueTypeInvalid"})
NOT_CHECKED = ("some validation rules were not checked because the object was invalid; "
               "correct the existing errors to complete validation")


def _ratcheted(errs: list[FieldError], out: Obj, old: Obj | None) -> list[FieldError]:
    """Ratcheting: what an update did not change is not held against it."""
    if old is None:
        return errs
    return [e for e in errs if _at(out, e.field) != _at(old, e.field)
            or _at(old, e.field) is _ABSENT]


def admitted(vs: VersionSchema, kind: str, group: str, name: str, obj: Obj,
             old: Obj | None) -> Obj:
    """`obj` as stored: pruned and defaulted; raises the 422 when it breaks its schema."""
    out: Obj = meta_pruned(pruned(obj, vs.schema, root=True), vs.schema, root=True)
    # Defaults, and nulls the schema does not allow dropped (PruneNonNullableNullsWithoutDefaults
    # runs with the pruning in the decoder: a null is dropped, not refused).
    out = defaulted(out, vs.schema)
    errs = _ratcheted(validation_errors(vs.schema, out), out, old)
    if vs.rules:
        if any(e.reason in _BLOCKING for e in errs):  # hasBlockingErr (customresource/
            errs.append(FieldError("<nil>", "FieldValueInvalid", None, NOT_CHECKED))  # strategy)
        else:
            errs += _ratcheted(cel_errors(vs.schema, out, old) if old is not None else
                               cel_errors(vs.schema, out), out, old)
    if errs:
        raise invalid(kind, group, name, errs)
    return out


def read_defaulted(vs: VersionSchema, obj: Obj) -> Obj:
    """`obj` as a read serves it: with the defaults its schema has now."""
    return defaulted(obj, vs.schema) if vs.defaults else obj


__all__ = ["VersionSchema", "admitted", "crd_refusal", "read_defaulted", "version_schemas"]
