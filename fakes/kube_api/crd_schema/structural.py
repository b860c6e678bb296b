"""Whether a CRD's `openAPIV3Schema` is one apiextensions accepts: structural
(k8s.io/apiextensions-apiserver pkg/apiserver/schema/validation.go `ValidateStructural`) and
within the v1 rules of pkg/apis/apiextensions/validation/validation.go
(`ValidateCustomResourceDefinitionOpenAPISchema`): no `$ref`, no `uniqueItems`,
`x-kubernetes-preserve-unknown-fields` true or absent, list types with their keys, defaults
that pass the schema. The errors come sorted by their text, as ValidateStructural sorts them."""

from __future__ import annotations

import re
from typing import Any

from kube_elevator.fakes.kube_api.crd_schema.field_errors import OMIT, FieldError
from kube_elevator.fakes.kube_api.crd_schema.validate import validation_errors

Schema = dict[str, Any]
_ROOT, _ITEM, _FIELD = "root", "item", "field"
_JUNCTORS = ("allOf", "anyOf", "oneOf")
# What a value validation (under allOf/anyOf/oneOf/not) may not say, and the words for each
# (validateNestedValueValidation).
_FORBIDDEN_NESTED = (
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
    ("x-kubernetes-list-map-keys", "must be empty to be structural"),
    ("x-kubernetes-list-type", "must be undefined to be structural"),
)
_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]


def _forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, "FieldValueForbidden", OMIT, detail)


def _required(path: str, detail: str) -> FieldError:
    return FieldError(path, "FieldValueRequired", OMIT, detail)


def _bad(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, "FieldValueInvalid", value, detail)


def _invariants(s: Schema, level: str, path: str) -> list[FieldError]:
    """validateStructuralInvariants, with the v1 API rules on the same node."""
    errs: list[FieldError] = []
    kind = s.get("type") or ""
    items = s.get("items")
    if kind == "array" and items is None:
        errs.append(_required(f"{path}.items", "must be specified"))
    if isinstance(items, dict):
        errs += _invariants(items, _ITEM, f"{path}.items")
    elif isinstance(items, list):
        errs.append(_forbidden(f"{path}.items", "items must be a schema object and not an "
                                                 "array"))
    props: Schema = s.get("properties") or {}
    for name, prop in props.items():
        if isinstance(prop, dict):
            errs += _invariants(prop, _FIELD, f"{path}.properties[{name}]")
    extra = s.get("additionalProperties")
    if extra is not None:
        if level == _ROOT:
            errs.append(_forbidden(f"{path}.additionalProperties", "must not be used at the root"))
        if props:
            errs.append(_forbidden(f"{path}.additionalProperties",
                                   "additionalProperties and properties are mutual exclusive"))
        if extra is False:
            errs.append(_forbidden(f"{path}.additionalProperties",
                                   "additionalProperties cannot be set to false"))
        if isinstance(extra, dict):
            errs += _invariants(extra, _FIELD, f"{path}.additionalProperties")
    preserve, int_or_string = s.get("x-kubernetes-preserve-unknown-fields"), \
        s.get("x-kubernetes-int-or-string")
    embedded = s.get("x-kubernetes-embedded-resource")
    if preserve is False:
        errs.append(_bad(f"{path}.x-kubernetes-preserve-unknown-fields", False,
                         "must be true or undefined"))
    if int_or_string and preserve:
        errs.append(_bad(f"{path}.x-kubernetes-preserve-unknown-fields", True,
                         "must be false if x-kubernetes-int-or-string is true"))
    if int_or_string and embedded:
        errs.append(_bad(f"{path}.x-kubernetes-embedded-resource", True,
                         "must be false if x-kubernetes-int-or-string is true"))
    errs += _value_validation(s, level, path)
    if embedded and kind != "object":
        errs.append(_required(f"{path}.type", "must be object if x-kubernetes-embedded-resource "
                                               "is true") if not kind else
                    _bad(f"{path}.type", kind,
                         "must be object if x-kubernetes-embedded-resource is true"))
    elif not kind and not int_or_string and not preserve:
        errs.append(_required(f"{path}.type", {
            _ROOT: "must not be empty at the root",
            _ITEM: "must not be empty for specified array items",
            _FIELD: "must not be empty for specified object fields"}[level]))
    if embedded and extra is not None:
        errs.append(_forbidden(f"{path}.additionalProperties",
                               "must not be used if x-kubernetes-embedded-resource is set"))
    if level == _ROOT and kind and kind != "object":
        errs.append(_bad(f"{path}.type", kind, "must be object at the root"))
    if level == _ROOT or embedded:
        for name, wanted in (("kind", "string"), ("apiVersion", "string"),
                             ("metadata", "object")):
            prop = props.get(name)
            if isinstance(prop, dict) and prop.get("type", "") != wanted:
                errs.append(_bad(f"{path}.properties[{name}].type", prop.get("type", ""),
                                 f"must be {wanted}"))
    metadata = props.get("metadata")
    if level == _ROOT and isinstance(metadata, dict):
        extra_keys = set(metadata) - {"type", "default", "properties"}
        names = set(metadata.get("properties") or {})
        if extra_keys or not names <= {"name", "generateName"}:
            errs.append(_forbidden(f"{path}.properties[metadata]",
                                   "must not specify anything other than name and generateName, "
                                   "but metadata is implicitly specified"))
    if embedded and not preserve and not props:
        errs.append(_required(f"{path}.properties", "must not be empty if "
                              "x-kubernetes-embedded-resource is true without "
                              "x-kubernetes-preserve-unknown-fields"))
    errs += _api_rules(s, path)
    return errs


def _api_rules(s: Schema, path: str) -> list[FieldError]:
    """The v1 API's own checks of one node (validation.go, `validateCustomResource...`)."""
    errs: list[FieldError] = []
    if "$ref" in s:
        errs.append(_forbidden(f"{path}.$ref", "$ref is not supported"))
    if s.get("uniqueItems"):
        errs.append(_forbidden(f"{path}.uniqueItems", "uniqueItems cannot be set to true since "
                                                       "the runtime complexity becomes quadratic"))
    list_type = s.get("x-kubernetes-list-type")
    if list_type is not None:
        if list_type not in ("atomic", "set", "map"):
            errs.append(FieldError(f"{path}.x-kubernetes-list-type", "FieldValueNotSupported",
                                   list_type, 'supported values: "atomic", "set", "map"'))
        elif s.get("type") != "array":
            errs.append(_bad(f"{path}.type", s.get("type", ""),
                             "must be array if x-kubernetes-list-type is specified"))
        elif list_type == "map" and not s.get("x-kubernetes-list-map-keys"):
            errs.append(_required(f"{path}.x-kubernetes-list-map-keys",
                                  "must not be empty if x-kubernetes-list-type is map"))
    if "default" in s:
        # A default must pass the schema it defaults (validation/defaults.go); the
        # checker names the value `default`, the field path is the schema's.
        node = {k: v for k, v in s.items() if k != "default"}
        for err in validation_errors({"properties": {"default": node}}, {"default": s["default"]}):
            errs.append(FieldError(f"{path}.default" + err.field.removeprefix("default"),
                                   err.reason, err.value, err.detail))
    return errs


def _value_validation(s: Schema, level: str, path: str) -> list[FieldError]:
    """validateValueValidation: what allOf/anyOf/oneOf/not may say, and patterns that compile."""
    errs: list[FieldError] = []
    skip_any_of = s.get("anyOf") == _INT_OR_STRING_ANY_OF
    all_of = s.get("allOf") or []
    skip_first_all_of_any_of = bool(all_of) and isinstance(all_of[0], dict) and \
        all_of[0].get("anyOf") == _INT_OR_STRING_ANY_OF
    for key in _JUNCTORS:
        for i, nested in enumerate(s.get(key) or ()):
            if key == "anyOf" and skip_any_of:
                continue
            if isinstance(nested, dict):
                skip = key == "allOf" and i == 0 and skip_first_all_of_any_of
                errs += _nested(nested, level, f"{path}.{key}[{i}]", skip)
    if isinstance(s.get("not"), dict):
        errs += _nested(s["not"], level, f"{path}.not", False)
    pattern = s.get("pattern")
    if isinstance(pattern, str):
        try:
            re.compile(pattern)
        except re.error as exc:
            errs.append(_bad(f"{path}.pattern", pattern,
                             f"must be a valid regular expression, but isn't: {exc}"))
    return errs


def _nested(v: Schema, level: str, path: str, skip_any_of: bool) -> list[FieldError]:
    """validateNestedValueValidation."""
    inner = {k: val for k, val in v.items() if not (skip_any_of and k == "anyOf")}
    errs = _value_validation(inner, level, path)
    if isinstance(v.get("items"), dict):
        errs += _nested(v["items"], level, f"{path}.items", False)
    for name, prop in (v.get("properties") or {}).items():
        if isinstance(prop, dict):
            errs += _nested(prop, _FIELD, f"{path}.properties[{name}]", False)
    for key, detail in _FORBIDDEN_NESTED:
        if key in v and v[key] not in (None, False, "", []) and not (
                skip_any_of and key == "type"):
            errs.append(_forbidden(f"{path}.{key}", detail))
    if "metadata" in (v.get("properties") or {}):
        errs.append(_forbidden(f"{path}.properties[metadata]",
                               "must not be specified in a nested context"))
    return errs


def structural_errors(schema: Any, path: str) -> list[FieldError]:
    """Why apiextensions refuses `schema` (the openAPIV3Schema at `path`), sorted; [] if it
    is accepted."""
    if not isinstance(schema, dict):
        return [_required(path, "schemas are required")]
    return sorted(_invariants(schema, _ROOT, path), key=str)


__all__ = ["structural_errors"]
