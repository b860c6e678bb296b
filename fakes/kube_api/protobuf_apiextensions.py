"""apiextensions.k8s.io/v1's types whose JSON is not their message, for the protobuf codec.

A CustomResourceDefinition's schema (JSONSchemaProps) holds four of them; their JSON forms are
k8s.io/apiextensions-apiserver pkg/apis/apiextensions/v1 marshal.go's:
- JSON {1 raw}: the raw bytes are the JSON value itself (`default`, `enum`, `example`);
- JSONSchemaPropsOrArray {1 schema, 2 jSONSchemas}: the array when it has items, else the schema;
- JSONSchemaPropsOrBool {1 allows, 2 schema}: the schema when set, else the boolean;
- JSONSchemaPropsOrStringArray {1 schema, 2 property}: the strings when any, else the schema.
The codec (protobuf_wire.py) calls these with its own field reader, length writer and message
coder for JSONSchemaProps, so this module imports nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

APIEXTENSIONS_SPECIAL = frozenset({
    "apiextensions.JSON", "apiextensions.JSONSchemaPropsOrArray",
    "apiextensions.JSONSchemaPropsOrBool", "apiextensions.JSONSchemaPropsOrStringArray"})

Fields = Callable[[bytes], list[tuple[int, int, Any]]]  # (number, wire type, value) of each
Coder = Callable[[Any], Any]  # JSONSchemaProps dict <-> its message bytes
Length = Callable[[int, bytes], bytes]  # a length-delimited field: tag, length, payload


def from_wire(kind: str, data: bytes, fields: Fields, decode_props: Coder) -> Any:
    """The JSON value of one of the four types' message bytes."""
    found = fields(data)
    if kind == "apiextensions.JSON":
        raw = next((bytes(v) for n, _, v in found if n == 1), b"")
        return orjson.loads(raw) if raw else None
    schema = next((decode_props(bytes(v)) for n, _, v in found
                   if n == (2 if kind.endswith("OrBool") else 1)), None)
    if kind.endswith("OrBool"):
        allows = next((bool(v) for n, _, v in found if n == 1), False)
        return schema if schema is not None else allows
    many = [v for n, _, v in found if n == 2]
    if kind.endswith("OrArray") and many:
        return [decode_props(bytes(v)) for v in many]
    if kind.endswith("OrStringArray") and many:
        return [bytes(v).decode() for v in many]
    return schema


def to_wire(kind: str, value: Any, encode_props: Coder, _length: Length) -> bytes:
    """One of the four types' message bytes for its JSON value."""
    if kind == "apiextensions.JSON":
        return _length(1, orjson.dumps(value))
    if kind.endswith("OrBool"):
        if isinstance(value, dict):  # a schema allows: UnmarshalJSON sets Allows too
            return b"\x08\x01" + _length(2, encode_props(value))
        return b"\x08" + (b"\x01" if value else b"\x00")
    if isinstance(value, list):
        if kind.endswith("OrArray"):
            return b"".join(_length(2, encode_props(item)) for item in value)
        return b"".join(_length(2, str(item).encode()) for item in value)
    return _length(1, encode_props(value)) if isinstance(value, dict) else b""


__all__ = ["APIEXTENSIONS_SPECIAL", "from_wire", "to_wire"]
