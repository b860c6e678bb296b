"""A custom object checked against its CRD's `openAPIV3Schema`, with the errors apiextensions
reports (kube-openapi's validator, its messages converted by apiextensions-apiserver
pkg/apiserver/validation/validation.go `kubeOpenAPIResultToFieldErrors`).

The root's `apiVersion`, `kind` and `metadata` are the generic ObjectMeta code's, not the
schema's; an embedded resource (`x-kubernetes-embedded-resource`) must name its apiVersion and
kind (pkg/apiserver/schema/objectmeta/validation.go)."""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

import orjson

from kube_elevator.fakes.kube_api.crd_schema.field_errors import FieldError
from kube_elevator.fakes.kube_api.crd_schema.formats import format_ok

Schema = dict[str, Any]
_ROOT_KEPT = ("apiVersion", "kind", "metadata")


def json_type(value: Any) -> str:
    """The JSON type of a decoded value, as kube-openapi names it in a type error."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_ok(wanted: str, value: Any) -> bool:
    found = json_type(value)
    return found == wanted or (wanted == "number" and found == "integer")


def _same(value: Any, allowed: Any) -> bool:
    """Equal as JSON values (True is not 1, as Go's DeepEqual of decoded JSON)."""
    return json_type(value) == json_type(allowed) and value == allowed


def child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


@lru_cache(maxsize=256)
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class _Checker:
    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def add(self, path: str, reason: str, value: Any, detail: str) -> None:
        self.errors.append(FieldError(path, reason, value, detail))

    def invalid(self, path: str, value: Any, what: str) -> None:
        """go-openapi's message for most rules: `<path> in body <what>`, FieldValueInvalid."""
        self.add(path, "FieldValueInvalid", value, f"{path} in body {what}")

    def check(self, schema: Schema, value: Any, path: str, root: bool = False) -> None:
        if value is None and schema.get("nullable"):
            return
        typed = self._type(schema, value, path)
        enum = schema.get("enum")
        if isinstance(enum, list) and not any(_same(value, v) for v in enum):
            # NotSupported quotes each allowed value; a non-string one as its JSON text
            self.add(path, "FieldValueNotSupported", value, "supported values: " + ", ".join(
                orjson.dumps(v if isinstance(v, str) else orjson.dumps(v).decode()).decode()
                for v in enum))
        for key in ("allOf", "anyOf", "oneOf", "not"):
            if key in schema:
                self._combined(key, schema[key], value, path)
        if not typed:
            return  # the type's own checks do not apply to a value of another type
        if isinstance(value, str):
            self._string(schema, value, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self._number(schema, value, path)
        elif isinstance(value, list):
            self._array(schema, value, path)
        elif isinstance(value, dict):
            self._object(schema, value, path, root)

    def _type(self, schema: Schema, value: Any, path: str) -> bool:
        if schema.get("x-kubernetes-int-or-string"):
            if json_type(value) in ("integer", "string"):
                return True
            self.add(path, "FieldValueTypeInvalid", json_type(value),
                     f'{path} in body must be of type integer,string: "{json_type(value)}"')
            return False
        wanted = schema.get("type")
        if not wanted or _type_ok(wanted, value):
            return True
        found = json_type(value)
        self.add(path, "FieldValueTypeInvalid", found,
                 f'{path} in body must be of type {wanted}: "{found}"')
        return False

    def _string(self, schema: Schema, value: str, path: str) -> None:
        fmt = schema.get("format")
        if isinstance(fmt, str) and not format_ok(fmt, value):
            self.add(path, "FieldValueTypeInvalid", value,
                     f"{path} in body must be of type {fmt}: {orjson.dumps(value).decode()}")
        length = len(value)
        if isinstance(schema.get("maxLength"), int) and length > schema["maxLength"]:
            self.add(path, "FieldValueTooLong", value,
                     f"may not be more than {schema['maxLength']} bytes")
        if isinstance(schema.get("minLength"), int) and length < schema["minLength"]:
            self.invalid(path, value, f"should be at least {schema['minLength']} chars long")
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and not _pattern(pattern).search(value):
            self.invalid(path, value, f"should match '{pattern}'")

    def _number(self, schema: Schema, value: float, path: str) -> None:
        multiple = schema.get("multipleOf")
        if isinstance(multiple, int | float) and multiple and \
                not math.isclose(value / multiple, round(value / multiple)):
            self.invalid(path, value, f"should be a multiple of {_num(multiple)}")
        high = schema.get("maximum")
        if isinstance(high, int | float):
            if schema.get("exclusiveMaximum") and value >= high:
                self.invalid(path, value, f"should be less than {_num(high)}")
            elif value > high:
                self.invalid(path, value, f"should be less than or equal to {_num(high)}")
        low = schema.get("minimum")
        if isinstance(low, int | float):
            if schema.get("exclusiveMinimum") and value <= low:
                self.invalid(path, value, f"should be greater than {_num(low)}")
            elif value < low:
                self.invalid(path, value, f"should be greater than or equal to {_num(low)}")

    def _array(self, schema: Schema, value: list[Any], path: str) -> None:
        if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
            self.add(path, "FieldValueTooMany", len(value),
                     f"must have at most {schema['maxItems']} items")
        if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
            self.invalid(path, "", f"should have at least {schema['minItems']} items")
        seen: list[bytes] = [orjson.dumps(v, option=orjson.OPT_SORT_KEYS) for v in value]
        if schema.get("uniqueItems") and len(set(seen)) < len(seen):
            self.invalid(path, "", "shouldn't contain duplicates")
        self._list_type(schema, value, path, seen)
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                self.check(items, item, f"{path}[{i}]")

    def _list_type(self, schema: Schema, value: list[Any], path: str, seen: list[bytes]) -> None:
        """`x-kubernetes-list-type` set and map: no two items alike, or alike in their keys
        (pkg/apiserver/schema/listtype/validation.go): `Duplicate value` at the second."""
        kind = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys") or ()
        if kind == "set":
            marks = seen
        elif kind == "map" and keys:
            marks = [orjson.dumps({k: v.get(k) for k in keys if k in v},
                                  option=orjson.OPT_SORT_KEYS) if isinstance(v, dict) else b""
                     for v in value]
        else:
            return
        first: set[bytes] = set()
        for i, mark in enumerate(marks):
            if mark in first:
                item = value[i]
                shown = {k: item.get(k) for k in keys if k in item} \
                    if kind == "map" and isinstance(item, dict) else item
                self.add(f"{path}[{i}]", "FieldValueDuplicate", shown, "")
            first.add(mark)

    def _object(self, schema: Schema, value: dict[str, Any], path: str, root: bool) -> None:
        props: Schema = schema.get("properties") or {}
        for name in schema.get("required") or ():
            absent = name not in value or (
                value[name] is None and not (props.get(name) or {}).get("nullable"))
            if absent and not (root and name in _ROOT_KEPT):
                self.add(child(path, name), "FieldValueRequired", None, "")
        count = len(value) - (sum(1 for k in _ROOT_KEPT if k in value) if root else 0)
        if isinstance(schema.get("maxProperties"), int) and count > schema["maxProperties"]:
            self.add(path, "FieldValueTooMany", count,
                     f"must have at most {schema['maxProperties']} items")
        if isinstance(schema.get("minProperties"), int) and count < schema["minProperties"]:
            self.invalid(path, "", f"should have at least {schema['minProperties']} properties")
        if schema.get("x-kubernetes-embedded-resource"):
            for name in ("apiVersion", "kind"):
                if not value.get(name):
                    self.add(child(path, name), "FieldValueRequired", None,
                             "must not be empty")
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            if root and name in _ROOT_KEPT:
                continue
            if name in props:
                self.check(props[name], item, child(path, name))
            elif isinstance(extra, dict):
                self.check(extra, item, child(path, name))

    def _combined(self, key: str, branches: Any, value: Any, path: str) -> None:
        """allOf/anyOf/oneOf/not: value validations only in a structural schema."""
        # go-openapi names the value in quotes and reports at no path (`<nil>`), as
        # validation_test.go's "user-provided anyOf/allOf" cases show.
        if key == "not":
            if isinstance(branches, dict) and not _errors_of(branches, value, path):
                self.add("<nil>", "FieldValueInvalid", "",
                         f'"{path}" must not validate the schema (not)')
            return
        if not isinstance(branches, list):
            return
        results = [_errors_of(b, value, path) for b in branches if isinstance(b, dict)]
        if key == "allOf" and any(results):
            none = ". None validated" if all(results) else ""
            self.add("<nil>", "FieldValueInvalid", "",
                     f'"{path}" must validate all the schemas (allOf){none}')
            for errs in results:
                self.errors.extend(errs)
        elif key == "anyOf" and results and all(results):
            self.add("<nil>", "FieldValueInvalid", "",
                     f'"{path}" must validate at least one schema (anyOf)')
            self.errors.extend(results[0])
        elif key == "oneOf" and sum(not errs for errs in results) != 1:
            found = "Found none valid" if all(results) else "Found more than one valid"
            self.add("<nil>", "FieldValueInvalid", "",
                     f'"{path}" must validate one and only one schema (oneOf). {found}')


def _errors_of(schema: Schema, value: Any, path: str) -> list[FieldError]:
    checker = _Checker()
    checker.check(schema, value, path)
    return checker.errors


def validation_errors(schema: Schema, obj: Any) -> list[FieldError]:
    """What the API server refuses in `obj` (a whole custom object) under `schema`."""
    checker = _Checker()
    checker.check(schema, obj, "", root=True)
    return checker.errors


__all__ = ["child", "json_type", "validation_errors"]
