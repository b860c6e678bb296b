"""A body whose field has the wrong JSON type, refused in the words of the decoder that meets it.

The API server decodes a write into its kind's Go struct before anything else, whatever
`fieldValidation` says; a value of the wrong JSON type is not an unknown field but a decoding
failure, and each write path has its own decoder (k8s.io/apiserver pkg/endpoints/handlers):

- create and update (create.go, update.go): sigs.k8s.io/json, a fork of encoding/json, saves
  the first `json: cannot unmarshal <string|number|number 1.5|bool|object|array> into Go struct
  field <Struct>.<json.path.without.indexes> of type <Go type>` and the handler answers 400
  `<Kind> in version "<v>" cannot be handled as a <Kind>: <that>` (transformDecodeError).
  A `[]byte` (ConfigMap `binaryData`, Secret `data`) saves base64's error instead
  (`illegal base64 data at input byte N`, go_base64.py).
  A type with its own UnmarshalJSON answers in its own words and stops the decode (Time,
  Duration: `json: cannot unmarshal number into Go value of type string`; IntOrString: `... of
  type int32`; Quantity: `quantities must match the regular expression ...`).
- JSON and merge patches (patch.go jsonPatcher): the patched object, re-marshalled with sorted
  keys, is decoded the same way; the error is 422 `Invalid` with no kind and no name, one cause
  on `patch` whose bad value is the patched object's JSON.
- strategic merge patches (patch.go smpPatcher): the patched map is converted to the struct by
  apimachinery's runtime/converter.go (`cannot convert int64 to string`, `unrecognized type:
  int32`, `cannot restore slice from map`), the same 422 with the patch map printed as `%+v`.
- server-side apply: structured-merge-diff's typed conversion (typed/validate.go
  validateScalar, helpers.go mapValue/listValue): `.spec.replicas: expected numeric (int or
  float), got string`, in the 500 field_validation.py already words for unknown fields.

The Go types come from the protobuf descriptors (protobuf_schema_*.py, generated from
Kubernetes' Go structs): scalar widths (int32, int64), Quantity, IntOrString, Time, inlined
structs and the struct names the messages use. The descriptors do not carry Go's named string
types; go_named_types.py names them per field (`v1.RestartPolicy`), as reflect prints them.
A named map type (`v1.ResourceList`) is still printed as its underlying type
(`map[string]resource.Quantity`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Any

from kube_elevator.fakes.kube_api.errors import ApiError
from kube_elevator.fakes.kube_api.go_base64 import base64_error
from kube_elevator.fakes.kube_api.go_named_types import GO_NAMED
from kube_elevator.fakes.kube_api.protobuf_wire import SCHEMA, Field, Message, message_for
from kube_elevator.fakes.kube_api.validation.pods import QUANTITY_DECODE_ERROR

_GO_SCALARS = {"string": "string", "bytes": "[]uint8", "int32": "int32", "int64": "int64",
               "uint32": "uint32", "uint64": "uint64", "bool": "bool", "double": "float64",
               "float": "float32"}
_INT_RANGES = {"int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
               "uint32": (0, (1 << 32) - 1), "uint64": (0, (1 << 64) - 1)}
_TEXT_TYPES = frozenset({"meta.Time", "meta.MicroTime", "meta.Duration"})  # a JSON string
_ANY_TYPES = frozenset({"meta.FieldsV1", "runtime.RawExtension", "runtime.Unknown",
                        "apiextensions.JSON", "apiextensions.JSONSchemaPropsOrArray",
                        "apiextensions.JSONSchemaPropsOrBool",
                        "apiextensions.JSONSchemaPropsOrStringArray"})
_QUANTITY, _INT_OR_STRING = "resource.Quantity", "intstr.IntOrString"
_PACKAGES = {"resource": "resource", "intstr": "intstr", "runtime": "runtime"}  # else v1


@dataclass(frozen=True)
class Slot:
    """Where a value is decoded: a struct (`message`), a list or map of `item`, or a leaf
    named by its descriptor type (`int32`, `string`, `meta.Time`, ...)."""

    kind: str  # "struct", "list", "map", "leaf"
    type: str
    item: Slot | None = None
    named: str | None = None  # a leaf's Go named type (`v1.RestartPolicy`), go_named_types.py

    @property
    def go(self) -> str:
        """The Go type as reflect prints it (`[]v1.Container`, `map[string]string`)."""
        if self.item is not None:
            return ("[]" if self.kind == "list" else "map[string]") + self.item.go
        if self.named is not None:
            return self.named
        if self.type in _GO_SCALARS:
            return _GO_SCALARS[self.type]
        alias, _, name = self.type.partition(".")
        return f"{_PACKAGES.get(alias, 'v1')}.{name}"


def _slot(owner: str, field: Field) -> Slot:
    """The slot of `owner`'s (the declaring struct's) `field`."""
    leaf = Slot("struct" if field.type in SCHEMA and field.type not in _SPECIAL else "leaf",
                field.type, named=GO_NAMED.get((owner, field.name)))
    if field.map:
        leaf = Slot("map", field.type, leaf)
    return Slot("list", field.type, leaf) if field.repeated and field.type != "bytes" else leaf


_SPECIAL = _TEXT_TYPES | _ANY_TYPES | {_QUANTITY, _INT_OR_STRING}


@cache
def json_fields(message: str) -> dict[str, Slot]:
    """A message's fields' slots by JSON name, its inlined structs' merged in; in the
    descriptors' field-number order (which is the Go struct's for most messages, not all:
    core.PodSpec's initContainers is number 20)."""
    out: dict[str, Slot] = {}
    for field in SCHEMA[message].fields:
        if field.inline and field.type in SCHEMA:
            for name, slot in json_fields(field.type).items():
                out.setdefault(name, slot)
        else:
            out.setdefault(field.name, _slot(message, field))
    return out


def kind_slot(api_version: str, kind: str) -> Slot | None:
    found: Message | None = message_for(api_version, kind)
    return Slot("struct", found.name) if found is not None else None


def json_kind(value: Any) -> str:
    """encoding/json's word for a JSON value's kind."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, dict):
        return "object"
    # a YAML body's timestamps and dates are strings once converted to JSON (sigs.k8s.io/yaml)
    return "array" if isinstance(value, list) else "string"


# encoding/json (create, update, JSON and merge patches) ----------------------------------

class _Stop(Exception):
    """An UnmarshalJSON's own error: it ends the decode and is the answer as it is."""


def _number_fits(value: Any, go_type: str) -> bool:
    if isinstance(value, float):
        return False  # strconv.ParseInt refuses "1.5" and "1.0" alike
    low, high = _INT_RANGES[go_type]
    return bool(low <= value <= high)


def _literal(value: Any) -> str:
    return json.dumps(value)


class GoJsonDecoder:
    """The first type error sigs.k8s.io/json's decoder saves for one body."""

    def __init__(self) -> None:
        self.saved: str | None = None

    def _save(self, value: Any, slot: Slot, struct: str, path: list[str],
              what: str | None = None) -> None:
        if self.saved is None:
            self.saved = (f"json: cannot unmarshal {what or json_kind(value)} into Go struct "
                          f"field {struct}.{'.'.join(path)} of type {slot.go}")

    def decode(self, value: Any, slot: Slot, struct: str, path: list[str]) -> None:
        if value is None:
            return
        if slot.kind == "struct":
            if not isinstance(value, dict):
                self._save(value, slot, struct, path)
                return
            fields = json_fields(slot.type)
            here = slot.type.partition(".")[2]
            for key, item in value.items():
                field = fields.get(key)
                if field is not None:
                    self.decode(item, field, here, [*path, key])
        elif slot.kind in ("list", "map"):
            container = list if slot.kind == "list" else dict
            if not isinstance(value, container):
                self._save(value, slot, struct, path)
                return
            assert slot.item is not None
            for item in (value if isinstance(value, list) else value.values()):
                self.decode(item, slot.item, struct, path)
        else:
            self._leaf(value, slot, struct, path)

    def _leaf(self, value: Any, slot: Slot, struct: str, path: list[str]) -> None:
        kind, go = json_kind(value), slot.type
        if go in _ANY_TYPES:
            return
        if go in _TEXT_TYPES:
            if kind != "string":  # its UnmarshalJSON decodes a Go string first
                raise _Stop(f"json: cannot unmarshal {kind} into Go value of type string")
            return
        if go == _QUANTITY:
            if kind not in ("string", "number"):
                raise _Stop(QUANTITY_DECODE_ERROR)
            return
        if go == _INT_OR_STRING:
            if kind == "string" or (kind == "number" and _number_fits(value, "int32")):
                return
            what = f"number {_literal(value)}" if kind == "number" else kind
            raise _Stop(f"json: cannot unmarshal {what} into Go value of type int32")
        if go in _INT_RANGES:
            if kind == "number" and not _number_fits(value, go):
                self._save(value, slot, struct, path, f"number {_literal(value)}")
            elif kind != "number":
                self._save(value, slot, struct, path)
        elif go in ("double", "float"):
            if kind != "number":
                self._save(value, slot, struct, path)
        elif (go == "bool" and kind != "bool") or (go in ("string", "bytes") and kind != "string"):
            self._save(value, slot, struct, path)
        elif go == "bytes" and self.saved is None:  # literalStore saves base64's own error
            self.saved = base64_error(value)


def decode_error(api_version: str, kind: str, body: Any) -> str | None:
    """The decoder's error for `body` as the kind's Go struct (None: it decodes)."""
    slot = kind_slot(api_version, kind)
    if slot is None or not isinstance(body, dict):
        return None
    decoder = GoJsonDecoder()
    try:
        decoder.decode(body, slot, "", [])
    except _Stop as stop:
        return str(stop)
    return decoder.saved


def cannot_handle(kind: str, version: str, body: dict[str, Any]) -> str:
    """transformDecodeError's words before a decoder's type error (handlers/rest.go): the kind
    and version the decoder read, the request's own (`kind`, `version`) where the body names
    none (the decoder's defaults); `kind` is the type decoded into."""
    read_kind, api_version = body.get("kind"), body.get("apiVersion")
    shown = read_kind if isinstance(read_kind, str) and read_kind else kind
    if isinstance(api_version, str) and api_version:
        version = api_version.rpartition("/")[2]
    return f'{shown} in version "{version}" cannot be handled as a {kind}: '


def patch_refusal(api_version: str, kind: str, patch_kind: str, patch: Any,
                  patched: Any) -> ApiError | None:
    """A patched object whose field has the wrong type: 422 on `patch` with no kind and no
    name (k8s.io/apiserver handlers/patch.go: jsonPatcher decodes the patched JSON, keys
    sorted, and shows it; smpPatcher converts the patched map and shows the patch `%+v`)."""
    if patch_kind == "strategic":
        wrong = converter_error(api_version, kind, patched)
        shown = go_print(patch)
    else:
        wrong = decode_error(api_version, kind, json.loads(json.dumps(patched, sort_keys=True)))
        shown = go_json(patched) if wrong is not None else ""
    if wrong is None:
        return None
    why = f"Invalid value: {json.dumps(shown, ensure_ascii=False)}: {wrong}"
    return ApiError(422, "Invalid", f' "" is invalid: patch: {why}', {"causes": [
        {"reason": "FieldValueInvalid", "message": why, "field": "patch"}]})


def _go_numbers(value: Any) -> Any:
    """Floats as encoding/json writes them: a whole one below 1e21 without its `.0`."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {k: _go_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_numbers(v) for v in value]
    return value


def go_json(value: Any) -> str:
    """Go's json.Marshal of a decoded map: keys sorted, compact, <, > and & escaped."""
    text = json.dumps(_go_numbers(value), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# runtime/converter.go (strategic merge patches) ------------------------------------------

def _reflect_kind(value: Any) -> str:
    """reflect's Kind of a value of an unstructured map (ints are int64, JSON objects maps)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, dict):
        return "map"
    return "slice" if isinstance(value, list) else "string"


def _reflect_type(value: Any) -> str:
    kind = _reflect_kind(value)
    return {"map": "map[string]interface {}", "slice": "[]interface {}"}.get(kind, kind)


def _convert(value: Any, slot: Slot) -> str | None:
    """fromUnstructured's first error for `value` into `slot` (struct fields in the
    descriptors' order, json_fields)."""
    if value is None:
        return None
    if slot.kind == "struct":
        if not isinstance(value, dict):
            return f"cannot restore struct from: {_reflect_kind(value)}"
        for name, field in json_fields(slot.type).items():
            if name in value and (error := _convert(value[name], field)):
                return error
        return None
    if slot.kind in ("list", "map"):
        assert slot.item is not None
        if slot.kind == "list" and not isinstance(value, list):
            return f"cannot restore slice from {_reflect_kind(value)}"
        if slot.kind == "map" and not isinstance(value, dict):
            return f"cannot restore map from {_reflect_kind(value)}"
        for item in (value if isinstance(value, list) else value.values()):
            if error := _convert(item, slot.item):
                return error
        return None
    if slot.type in _SPECIAL:  # their UnmarshalJSON, given the value re-marshalled
        try:
            GoJsonDecoder()._leaf(value, slot, "", [])
        except _Stop as stop:
            return str(stop)
        return None
    return _convert_scalar(value, slot)


def _convert_scalar(value: Any, slot: Slot) -> str | None:
    """The simple kinds: JSON's four groups (bools, integers, floats, strings) do not mix,
    except integers into floats and integral floats into integers."""
    go, kind = slot.go, _reflect_kind(value)
    if go == "[]uint8":  # sliceFromUnstructured: json.Unmarshal of the string re-marshalled
        if kind != "string":
            return f"cannot restore slice from {kind}"
        error = base64_error(value)
        return None if error is None else f"error decoding from json: {error}"
    numeric = slot.type in _INT_RANGES or slot.type in ("double", "float")
    if (numeric and kind == "int64") or (slot.type in ("double", "float") and kind == "float64"):
        return None
    if slot.type in _INT_RANGES and kind == "float64":
        return None if float(value).is_integer() else f"cannot convert float64 to {go}"
    underlying = _GO_SCALARS[slot.type]  # reflect's Kind; `go` may name a named type
    if underlying == "string" and kind == "int64":  # Go converts an int to a string, JSON not
        return f"cannot convert int64 to {go}"  # dt.String(): `v1.RestartPolicy`
    if underlying == kind:
        return None
    return f"unrecognized type: {underlying}"  # dt.Kind()


def converter_error(api_version: str, kind: str, obj: Any) -> str | None:
    slot = kind_slot(api_version, kind)
    return _convert(obj, slot) if slot is not None else None


def go_print(value: Any) -> str:
    """fmt's `%+v` of a decoded JSON value (maps with sorted keys, strings bare)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_print(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_print(v) for v in value) + "]"
    return str(value)


def _go_float(value: float) -> str:
    """`%v` of a float64: strconv's shortest digits, %e when the exponent is under -4 or at
    least 6 (FormatFloat 'g' with precision -1: `1e+06`, `1.5`, `0.0001`, `1e-05`)."""
    if value == 0:
        return "0"
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}[repr(value)]
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    exp10 = len(digits) + exponent - 1
    if exp10 < -4 or exp10 >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        shown = f"{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    else:
        shown = format(Decimal(repr(abs(value))).normalize(), "f")
    return ("-" if sign else "") + shown


# structured-merge-diff (server-side apply) ------------------------------------------------

def _go_sharp(value: Any) -> str:
    """`%#v` of an unstructured value."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(k)}:{_go_sharp(v)}" for k, v in sorted(value.items()))
        return f"map[string]interface {{}}{{{inner}}}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(_go_sharp(v) for v in value) + "}"
    return go_print(value)


def _smd(value: Any, slot: Slot, path: str, out: list[str]) -> None:
    """validatingObjectWalker's errors, every one (typed/validate.go, helpers.go)."""
    if value is None:
        return
    shown = "&{" + go_print(value) + "}"
    if slot.kind in ("struct", "map"):
        if not isinstance(value, dict):
            out.append(f"{path}: expected map, got {shown}")
        elif slot.kind == "struct":
            fields = json_fields(slot.type)
            for key, item in value.items():
                if (field := fields.get(key)) is not None:
                    _smd(item, field, f"{path}.{key}", out)
        else:
            assert slot.item is not None
            for key, item in value.items():
                _smd(item, slot.item, f"{path}.{key}", out)
    elif slot.kind == "list":
        assert slot.item is not None
        if not isinstance(value, list):
            out.append(f"{path}: expected list, got {shown}")
            return
        for i, item in enumerate(value):
            named = isinstance(item, dict) and isinstance(item.get("name"), str)
            _smd(item, slot.item, f'{path}[name="{item["name"]}"]' if named else f"{path}[{i}]",
                 out)
    elif slot.type in _ANY_TYPES:
        return
    elif slot.type in (_QUANTITY, _INT_OR_STRING):  # untyped scalars
        if isinstance(value, dict | list):
            out.append(f"{path}: expected any scalar, got {shown}")
    elif slot.type in _INT_RANGES or slot.type in ("double", "float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            out.append(f"{path}: expected numeric (int or float), got {_reflect_type(value)}")
    elif slot.type == "bool":
        if not isinstance(value, bool):
            out.append(f"{path}: expected boolean, got {shown}")
    elif isinstance(value, bool | int | float | dict | list):  # strings, bytes, times
        out.append(f"{path}: expected string, got &value.valueUnstructured{{Value:"
                   f"{_go_sharp(value)}}}")


def apply_type_errors(api_version: str, kind: str, config: Any) -> list[str]:
    """The typed conversion's type errors for an apply configuration."""
    slot = kind_slot(api_version, kind)
    out: list[str] = []
    if slot is not None:
        _smd(config, slot, "", out)
    return out


__all__ = ["GoJsonDecoder", "Slot", "apply_type_errors", "cannot_handle", "converter_error",
           "decode_error", "go_json", "go_print", "json_fields", "json_kind", "kind_slot",
           "patch_refusal"]
