"""A stored object's JSON as the Go value the API server compares: its struct fields (zero when
absent), pointers, nil and empty slices and maps, the types reflect names, for go_cmp_diff.py.

The fields and their types come from the protobuf descriptors (protobuf_wire.SCHEMA), in their
field-number order; a Go struct's own order can differ (core.PodSpec's `initContainers` is
field 20, second in the struct), which only moves the identical fields cmp.Diff counts around a
change. Go field names are the JSON names with the first word capitalised as Go spells its
initialisms (`dnsPolicy` -> `DNSPolicy`, `fsType` -> `FSType`); an inlined struct is the
embedded field named after its type (`LocalObjectReference: {Name: "x"}`), as the API's Go
types embed it. The internal types the server compares print in package `core`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any

from kube_elevator.fakes.kube_api.go_named_types import GO_NAMED
from kube_elevator.fakes.kube_api.protobuf_wire import SCHEMA, Field
from kube_elevator.tasks.core.quantity import parse_quantity

_INITIALISMS = frozenset({"api", "aws", "cidr", "csi", "dns", "fc", "fs", "gce", "grpc", "http",
                          "id", "ip", "ipc", "iqn", "nfs", "os", "pid", "rbd", "se", "tcp",
                          "tty", "udp", "uid", "url"})
_IRREGULAR = {"cephfs": "CephFS", "iscsi": "ISCSI", "storageos": "StorageOS", "wwids": "WWIDs"}
# v1 fields the internal struct does not have (pkg/apis/core/types.go PodSpec: no
# DeprecatedServiceAccount; conversion drops it).
_V1_ONLY = frozenset({("core.PodSpec", "serviceAccount")})
_SCALARS = {"string": "string", "bytes": "[]uint8", "int32": "int32", "int64": "int64",
            "uint32": "uint32", "uint64": "uint64", "bool": "bool", "double": "float64",
            "float": "float32"}
_PACKAGES = {"core": "core", "meta": "v1", "resource": "resource", "intstr": "intstr",
             "runtime": "runtime", "apps": "apps", "policy": "policy"}
_BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_QUANTITY_PARTS = re.compile(r"^(?P<sign>[+-]?)0*(?P<num>\d*)(?:\.(?P<denom>\d*))?(?P<suffix>.*)$")
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12,
                      "P": 15, "E": 18}


def go_field_name(json_name: str) -> str:
    """The Go field behind a JSON name (`dnsPolicy` -> `DNSPolicy`, `hostPID` -> `HostPID`)."""
    if json_name in _IRREGULAR:
        return _IRREGULAR[json_name]
    head = len(json_name)
    for index, char in enumerate(json_name):
        if char.isupper():
            head = index
            break
    first, rest = json_name[:head], json_name[head:]
    if first in _INITIALISMS:
        return first.upper() + rest
    return json_name[:1].upper() + json_name[1:]


@dataclass(frozen=True)
class GoValue:
    """One Go value: `kind` is struct, slice, map, ptr or a scalar's reflect kind (string,
    int32, bool, ...); `nil` for a nil pointer, slice or map; `leaf` marks a struct compared
    as one value (Quantity's Equal method) with `compared` its comparable form."""

    kind: str
    type: str  # as reflect's Type.String() prints it: core.Container, []core.Container
    scalar: Any = None
    items: tuple[tuple[str, GoValue], ...] = ()  # fields, elements ("" keys) or entries
    nil: bool = False
    leaf: bool = False
    compared: Any = None
    stringer_keys: bool = False  # map keys with a String method print `s"cpu"`
    elem: GoValue | None = field(default=None)

    @property
    def zero(self) -> bool:
        if self.kind in ("slice", "map", "ptr"):
            return self.nil
        if self.kind == "struct":
            return all(value.zero for _, value in self.items)
        return self.scalar in ("", 0)  # 0 is also False and 0.0


def _type_name(type_: str) -> str:
    if type_ in _SCALARS:
        return _SCALARS[type_]
    alias, _, name = type_.partition(".")
    return f"{_PACKAGES.get(alias, 'v1')}.{name}"


def _scalar(type_: str, value: Any) -> GoValue:
    go = _SCALARS.get(type_, "string")
    if go == "bool":
        return GoValue("bool", "bool", bool(value) if value is not None else False)
    if go.startswith(("int", "uint")):
        return GoValue(go, go, int(value) if isinstance(value, int | float) else 0)
    if go.startswith("float"):
        return GoValue(go, go, float(value) if isinstance(value, int | float) else 0.0)
    return GoValue("string", go, value if isinstance(value, str) else "")


def _quantity_value(amount: Fraction, digits: int, scale: int, text: str, fmt: str) -> GoValue:
    return GoValue("struct", "resource.Quantity", leaf=True, compared=amount, items=(
        ("i", GoValue("struct", "resource.int64Amount", items=(
            ("value", GoValue("int64", "int64", digits)),
            ("scale", GoValue("int32", "resource.Scale", scale))))),
        ("s", GoValue("string", "string", text)),
        ("Format", GoValue("string", "resource.Format", fmt))))


def _quantity(value: Any) -> GoValue:
    """resource.Quantity as fmt sees it, after ParseQuantity (apimachinery
    api/resource/quantity.go): its int64Amount `i` (digits and a power of ten), the input
    kept as `s` when it is already canonical, its Format; compared by value (its Equal)."""
    text = str(value).strip() if value is not None else ""
    if not text:
        return _quantity_value(Fraction(0), 0, 0, "", "")
    if text == "0":
        return _quantity_value(Fraction(0), 0, 0, "0", "DecimalSI")
    amount = parse_quantity(text)
    match = _QUANTITY_PARTS.match(text)
    assert match is not None  # parse_quantity accepted it
    sign, num, denom, suffix = match["sign"], match["num"] or "0", match["denom"] or "", \
        match["suffix"]
    if suffix in _BINARY_SUFFIXES:
        fmt, exponent = "BinarySI", 10 * (_BINARY_SUFFIXES.index(suffix) + 1)
        scale, mantissa = 0, 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1 if not denom else -1
    else:
        exponential = suffix[:1] in ("e", "E")
        fmt = "DecimalExponent" if exponential else "DecimalSI"
        exponent = int(suffix[1:]) if exponential else _DECIMAL_EXPONENTS.get(suffix, 0)
        scale, mantissa = exponent, 1
        precision = 18 - (len(num) + len(denom))  # maxInt64Factors
    shifted = num + denom
    scale -= len(denom)
    digits = int(shifted) * mantissa
    if precision >= 0 and scale >= -9 and digits < 1 << 63:  # the int64 fast path
        if fmt == "BinarySI":
            canonical = exponent % 10 == 0 and int(shifted) & 0x07 != 0
        else:
            canonical = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
        return _quantity_value(amount, -digits if sign == "-" else digits, scale,
                               text if canonical else "", fmt)
    # the inf.Dec slow path: `d` holds the value (rounded up to nanos), printed by its String
    nanos = -(-abs(amount) * 10**9 // 1) * (-1 if amount < 0 else 1)  # inf.RoundUp to 9
    decimal = format(Decimal(int(nanos)).scaleb(-9, Context(prec=400)), "f")  # all 9 places
    if fmt == "BinarySI" and 0 < abs(amount) < 1:
        fmt = "DecimalSI"
    return GoValue("struct", "resource.Quantity", leaf=True, compared=amount, items=(
        ("d", GoValue("struct", "resource.infDecAmount", items=(
            ("Dec", GoValue("stringer", "*inf.Dec", decimal)),))),
        ("Format", GoValue("string", "resource.Format", fmt))))


def _int_or_string(value: Any) -> GoValue:
    is_text = isinstance(value, str)
    return GoValue("struct", "intstr.IntOrString", items=(
        ("Type", GoValue("int", "intstr.Type", 1 if is_text else 0)),
        ("IntVal", GoValue("int32", "int32", 0 if is_text or value is None else int(value))),
        ("StrVal", GoValue("string", "string", value if is_text else ""))))


def _element(type_: str, value: Any, named: str | None = None) -> GoValue:
    if type_ == "resource.Quantity":
        return _quantity(value)
    if type_ == "intstr.IntOrString":
        return _int_or_string(value)
    if type_ in SCHEMA and type_.startswith(("core.", "meta.", "apps.", "policy.")):
        return struct_value(type_, value if isinstance(value, dict) else {})
    if type_ in _SCALARS:
        scalar = _scalar(type_, value)
        return replace(scalar, type=named) if named is not None else scalar
    # Time, RawExtension and the other JSON-shaped leaves: compared and printed as given
    return GoValue("string", _type_name(type_), "" if value is None else str(value))


def _named(owner: str, spec: Field) -> str | None:
    """The field's Go named type in the internal package the server compares (core's
    `v1.Protocol` is `core.Protocol` there; metav1's and pkg/types' keep their names)."""
    named = GO_NAMED.get((owner, spec.name))
    alias = owner.partition(".")[0]
    if named is None or alias not in ("core", "apps", "policy"):
        return named
    return f"{alias}.{named.partition('.')[2]}"


def _field_value(owner: str, spec: Field, value: Any) -> GoValue:
    named = _named(owner, spec)
    element_type = named or _type_name(spec.type)
    if spec.map:
        quantities = spec.type == "resource.Quantity"
        type_ = "core.ResourceList" if quantities else f"map[string]{element_type}"
        if not isinstance(value, dict):
            return GoValue("map", type_, nil=True, stringer_keys=quantities)
        return GoValue("map", type_, stringer_keys=quantities, items=tuple(
            (key, _element(spec.type, item)) for key, item in sorted(value.items())))
    if spec.repeated and spec.type != "bytes":
        if not isinstance(value, list):
            return GoValue("slice", f"[]{element_type}", nil=True)
        return GoValue("slice", f"[]{element_type}",
                       items=tuple(("", _element(spec.type, item, named)) for item in value))
    if spec.pointer:
        if value is None:
            return GoValue("ptr", f"*{element_type}", nil=True)
        return GoValue("ptr", f"*{element_type}", elem=_element(spec.type, value, named))
    return _element(spec.type, value, named)


def struct_value(message: str, obj: dict[str, Any]) -> GoValue:
    """`obj` (a JSON object) as the Go struct `message` (`core.PodSpec`)."""
    fields: list[tuple[str, GoValue]] = []
    for spec in SCHEMA[message].fields:
        if (message, spec.name) in _V1_ONLY:
            continue
        if spec.inline and spec.type in SCHEMA:
            fields.append((spec.type.partition(".")[2], struct_value(spec.type, obj)))
        else:
            fields.append((go_field_name(spec.name),
                           _field_value(message, spec, obj.get(spec.name))))
    return GoValue("struct", _type_name(message), items=tuple(fields))


__all__ = ["GoValue", "go_field_name", "struct_value"]
