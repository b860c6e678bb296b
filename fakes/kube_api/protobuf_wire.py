"""Kubernetes' protobuf wire format (`application/vnd.kubernetes.protobuf`) <-> JSON-shaped dicts.

What the API server does (k8s.io/apimachinery pkg/runtime/serializer/protobuf): an object is
the magic `k8s\\x00` then a `runtime.Unknown` {1 typeMeta {1 apiVersion, 2 kind}, 2 raw (the
object's own message), 3 contentEncoding, 4 contentType}.  A watch is a stream of 4-byte
big-endian length-prefixed frames, each the bare `metav1.WatchEvent` {1 type, 2 object {1 raw}}
(the stream serializer is the raw one: no magic, no envelope) whose raw object is enveloped.

The messages are descriptor tables (protobuf_schema_*.py, generated from Kubernetes' own
generated.proto and Go types) read by one codec: proto2, fields in number order, maps as
sorted entries {1 key, 2 value}, repeated scalars unpacked (packed ones are read too).  The
JSON side follows Go's encoding/json over the decoded struct: a zero scalar is dropped unless
its Go field is a pointer or has no `omitempty`; an inlined struct (`json:",inline"`) is merged
into its parent.  Types whose JSON is not their message (Time, MicroTime, Duration, Quantity,
IntOrString, FieldsV1, RawExtension) are converted here.  Fields the schema lacks are skipped
and logged once, never fatal.
"""

from __future__ import annotations

import base64
import calendar
import logging
import re
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

import kube_elevator.fakes.kube_api.protobuf_apiextensions as apiext
from kube_elevator.fakes.kube_api.protobuf_schema_apiextensions import MESSAGES as _APIEXT
from kube_elevator.fakes.kube_api.protobuf_schema_core import MESSAGES as _CORE
from kube_elevator.fakes.kube_api.protobuf_schema_groups import MESSAGES as _GROUPS
from kube_elevator.fakes.kube_api.protobuf_schema_meta import MESSAGES as _META

log = logging.getLogger(__name__)

MAGIC = b"k8s\x00"
PROTOBUF = "application/vnd.kubernetes.protobuf"
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
_SCALAR_WIRE = {"string": LENGTH, "bytes": LENGTH, "int32": VARINT, "int64": VARINT,
                "uint32": VARINT, "uint64": VARINT, "bool": VARINT, "double": FIXED64,
                "float": FIXED32}
# The API group/version each schema alias serves; meta's kinds travel under any of them.
ALIAS_VERSIONS = {"core": "v1", "apps": "apps/v1", "coordination": "coordination.k8s.io/v1",
                  "policy": "policy/v1", "events": "events.k8s.io/v1",
                  "autoscaling": "autoscaling/v1", "meta": "meta.k8s.io/v1",
                  "apiextensions": "apiextensions.k8s.io/v1"}
_VERSION_ALIAS = {v: a for a, v in ALIAS_VERSIONS.items()}
# The meta kinds every group version registers (metav1.AddToGroupVersion).
_META_KINDS = frozenset({"Status", "DeleteOptions", "WatchEvent", "List",
                         "PartialObjectMetadata", "PartialObjectMetadataList"})


class ProtobufError(ValueError):
    """A body that is not the protobuf its content type claims, or a kind without a schema."""


@dataclass(frozen=True)
class Field:
    """One field of a message: its number, JSON name and how it is carried."""

    number: int
    name: str
    type: str
    repeated: bool = False
    map: bool = False
    pointer: bool = False
    inline: bool = False
    keep_zero: bool = False  # a pointer, or a Go field without omitempty: "" / 0 / false stay

    @cached_property  # read for every value encoded: computed once per field
    def wire(self) -> int:
        return _SCALAR_WIRE.get(self.type, LENGTH) if not self.map else LENGTH


@dataclass(frozen=True)
class Message:
    name: str
    fields: tuple[Field, ...]
    by_number: dict[int, Field]
    by_name: dict[str, Field]


def _parse_schema(entries: tuple[str, ...]) -> dict[str, Message]:
    messages: dict[str, Message] = {}
    for entry in entries:
        name, _, body = entry.partition("|")
        fields = []
        for token in body.split("; ") if body else ():  # a message may have no fields
            number, json_name, kind = token.split(" ")
            flags = kind[len(kind.rstrip("*?^!")):]
            kind = kind.rstrip("*?^!")
            is_map = kind.startswith("map:")
            fields.append(Field(int(number), json_name, kind.removeprefix("map:"),
                                repeated="*" in flags, map=is_map, pointer="?" in flags,
                                inline="^" in flags, keep_zero="?" in flags or "!" in flags))
        messages[name] = Message(name, tuple(fields), {f.number: f for f in fields},
                                 {f.name: f for f in fields if not f.inline})
    return messages


SCHEMA: dict[str, Message] = _parse_schema(_META + _CORE + _GROUPS + _APIEXT)


def message_for(api_version: str, kind: str) -> Message | None:
    """The message of a kind (`v1`, `Pod` -> core.Pod); Status, DeleteOptions and the other
    meta kinds under any group version, as every group registers them."""
    alias = _VERSION_ALIAS.get(api_version)
    found = SCHEMA.get(f"{alias}.{kind}") if alias else None
    return found or (SCHEMA.get(f"meta.{kind}") if kind in _META_KINDS else None)


# Wire primitives ---------------------------------------------------------------------------

def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:  # tags, lengths and small numbers: most of what is written
        return _ONE_BYTE[value]
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE = tuple(bytes((i,)) for i in range(0x80))


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _length(number: int, payload: bytes) -> bytes:
    return _tag(number, LENGTH) + _varint(len(payload)) + payload


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint longer than 10 bytes")


def iter_fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(number, wire type, value) of each field: an int for varints and fixed, bytes for
    length-delimited."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == VARINT:
            value, pos = _read_varint(data, pos)
        elif wire == LENGTH:
            size, pos = _read_varint(data, pos)
            if pos + size > end:
                raise ProtobufError(f"field {number}: length {size} runs past the message")
            value, pos = data[pos:pos + size], pos + size
        elif wire in (FIXED64, FIXED32):
            width = 8 if wire == FIXED64 else 4
            if pos + width > end:
                raise ProtobufError(f"field {number}: truncated fixed-width value")
            value, pos = data[pos:pos + width], pos + width
        else:
            raise ProtobufError(f"field {number}: unsupported wire type {wire}")
        if number == 0:
            raise ProtobufError("field number 0 is not valid")
        yield number, wire, value


# Scalars ---------------------------------------------------------------------------------

def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _scalar_from_wire(kind: str, wire: int, value: Any) -> Any:
    if kind == "string":
        return bytes(value).decode("utf-8")
    if kind == "bytes":
        return base64.b64encode(value).decode("ascii")
    if kind == "bool":
        return bool(value)
    if kind == "int32":
        return _signed(value, 32)
    if kind == "int64":
        return _signed(value, 64)
    if kind in ("double", "float"):  # Go's encoding/json writes a whole float as `1`, not `1.0`
        number = struct.unpack("<d" if kind == "double" else "<f", value)[0]
        return int(number) if number.is_integer() and abs(number) < 1e21 else number
    return int(value)  # uint32, uint64


def _scalar_to_wire(kind: str, value: Any) -> bytes:
    if kind == "string":
        text = value if isinstance(value, str) else orjson.dumps(value).decode() \
            if isinstance(value, dict | list) else str(value)
        encoded = text.encode("utf-8")
        return _varint(len(encoded)) + encoded
    if kind == "bytes":
        raw = base64.b64decode(value) if isinstance(value, str) else bytes(value)
        return _varint(len(raw)) + raw
    if kind == "bool":
        return b"\x01" if value else b"\x00"
    if kind == "double":
        return struct.pack("<d", float(value))
    if kind == "float":
        return struct.pack("<f", float(value))
    return _varint(int(value))


def _is_zero(value: Any) -> bool:
    return value is False or value == 0 or value == ""


# Types whose JSON is not their message -----------------------------------------------------

_RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?"
                      r"(?:([Zz])|([+-])(\d\d):?(\d\d))$")


def parse_rfc3339(text: str) -> tuple[int, int]:
    """(Unix seconds, nanoseconds) of an RFC 3339 time."""
    m = _RFC3339.match(text.strip())
    if not m:
        raise ProtobufError(f"not an RFC 3339 time: {text!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    nanos = int((m.group(7) or "0")[:9].ljust(9, "0"))
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    if m.group(9):
        offset = int(m.group(10)) * 3600 + int(m.group(11)) * 60
        seconds -= offset if m.group(9) == "+" else -offset
    return seconds, nanos


def _timestamp(data: bytes) -> tuple[int, int]:
    seconds = nanos = 0
    for number, _, value in iter_fields(data):
        if number == 1:
            seconds = _signed(value, 64)
        elif number == 2:
            nanos = _signed(value, 32)
    return seconds, nanos


def _format_time(seconds: int, nanos: int | None) -> str:
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{base}.{nanos // 1000:06d}Z" if nanos is not None else base + "Z"


_DURATION_UNITS = (("h", 3600 * 10**9), ("m", 60 * 10**9), ("s", 10**9), ("ms", 10**6),
                   ("us", 10**3), ("µs", 10**3), ("ns", 1))


def format_duration(nanos: int) -> str:
    """Go's time.Duration.String() for the values API objects carry."""
    if nanos == 0:
        return "0s"
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    if nanos < 10**9:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if nanos >= size:
                return f"{sign}{_trim(nanos / size)}{unit}"
    hours, rest = divmod(nanos, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = f"{hours}h{minutes}m" if hours else (f"{minutes}m" if minutes else "")
    return f"{sign}{text}{_trim(rest / 10**9)}s"


def _trim(number: float) -> str:
    return f"{number:.9f}".rstrip("0").rstrip(".")


def parse_duration(text: str) -> int:
    """Nanoseconds of a Go duration string (`1h30m`, `90s`, `1.5s`)."""
    body, sign = (text[1:], -1) if text.startswith("-") else (text.lstrip("+"), 1)
    if body == "0":
        return 0
    total, pos = 0, 0
    pattern = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|us|µs|ns|m|s)")
    while pos < len(body):
        m = pattern.match(body, pos)
        if not m:
            raise ProtobufError(f"not a duration: {text!r}")
        total += round(float(m.group(1)) * dict(_DURATION_UNITS)[m.group(2)])
        pos = m.end()
    if not body:
        raise ProtobufError(f"not a duration: {text!r}")
    return sign * total


def _special_from_wire(kind: str, data: bytes) -> Any:
    if kind in apiext.APIEXTENSIONS_SPECIAL:
        return apiext.from_wire(kind, data, lambda raw: list(iter_fields(raw)), _decode_props)
    if kind in ("meta.Time", "meta.MicroTime"):
        if not data:
            return None  # the zero time: JSON null
        seconds, nanos = _timestamp(data)
        return _format_time(seconds, nanos if kind == "meta.MicroTime" else None)
    fields = {number: value for number, _, value in iter_fields(data)}
    if kind == "resource.Quantity":
        return bytes(fields.get(1, b"")).decode()
    if kind == "intstr.IntOrString":
        if fields.get(1, 0) == 1:
            return bytes(fields.get(3, b"")).decode()
        return _signed(fields.get(2, 0), 32)
    if kind == "meta.Duration":
        return format_duration(_signed(fields.get(1, 0), 64))
    raw = bytes(fields.get(1, b""))  # FieldsV1, RawExtension
    if not raw:
        return None if kind == "runtime.RawExtension" else {}
    if raw.startswith(MAGIC):
        return decode_object(raw)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ProtobufError(f"{kind}: raw bytes are neither JSON nor protobuf") from None


def _special_to_wire(kind: str, value: Any) -> bytes:
    if kind in apiext.APIEXTENSIONS_SPECIAL:
        return apiext.to_wire(kind, value, _encode_props, _length)
    if kind in ("meta.Time", "meta.MicroTime"):
        seconds, nanos = parse_rfc3339(str(value))
        # metav1.Time carries whole seconds only (ProtoTime drops the nanoseconds).
        return _tag(1, VARINT) + _varint(seconds) + _tag(2, VARINT) + _varint(
            nanos // 1000 * 1000 if kind == "meta.MicroTime" else 0)
    if kind == "resource.Quantity":
        return _length(1, str(value).encode())
    if kind == "intstr.IntOrString":
        if isinstance(value, int):
            return _tag(1, VARINT) + b"\x00" + _tag(2, VARINT) + _varint(value) + _length(3, b"")
        return _tag(1, VARINT) + b"\x01" + _tag(2, VARINT) + b"\x00" + _length(
            3, str(value).encode())
    if kind == "meta.Duration":
        return _tag(1, VARINT) + _varint(parse_duration(str(value)))
    return _length(1, orjson.dumps(value))  # FieldsV1, RawExtension: JSON bytes


_SPECIAL = frozenset({"meta.Time", "meta.MicroTime", "meta.Duration", "meta.FieldsV1",
                      "runtime.RawExtension", "resource.Quantity", "intstr.IntOrString",
                      *apiext.APIEXTENSIONS_SPECIAL})


def _decode_props(raw: bytes) -> Any:
    return decode_message(SCHEMA["apiextensions.JSONSchemaProps"], raw)


def _encode_props(props: Any) -> bytes:
    return encode_message(SCHEMA["apiextensions.JSONSchemaProps"], props)


# Messages ------------------------------------------------------------------------------

_reported: set[tuple[str, str]] = set()


def _report(message: str, what: str, why: str) -> None:
    if (message, what) not in _reported:
        _reported.add((message, what))
        log.warning("protobuf: %s %s %s; skipped", message, what, why)


def _value_from_wire(field: Field, wire: int, value: Any, path: str) -> Any:
    if field.type in _SPECIAL:
        return _special_from_wire(field.type, value)
    if field.type in SCHEMA:
        return decode_message(SCHEMA[field.type], value, path)
    return _scalar_from_wire(field.type, wire, value)


def decode_message(message: Message, data: bytes, path: str = "") -> dict[str, Any]:
    """One message's bytes as the dict Go's JSON encoder would write for it."""
    out: dict[str, Any] = {}
    for number, wire, value in iter_fields(data):
        field = message.by_number.get(number)
        if field is None:
            _report(message.name, f"field {number} (wire type {wire})", "is not in the schema")
            continue
        where = f"{path}.{field.name}" if path else field.name
        if field.map:
            if wire != LENGTH:
                raise ProtobufError(f"{where}: a map entry must be length-delimited")
            entry = dict((n, (w, v)) for n, w, v in iter_fields(value))
            key = bytes(entry.get(1, (LENGTH, b""))[1]).decode()
            value_wire, raw = entry.get(2, (field.wire, b"" if field.wire == LENGTH else 0))
            out.setdefault(field.name, {})[key] = _value_from_wire(field, value_wire, raw, where)
            continue
        if wire != field.wire:
            if field.repeated and wire == LENGTH and field.wire != LENGTH:
                out.setdefault(field.name, []).extend(_unpack(field, value))
                continue
            raise ProtobufError(f"{where}: wire type {wire}, but the schema's "
                                f"{field.type} needs {field.wire}")
        decoded = _value_from_wire(field, wire, value, where)
        if field.inline:
            out.update(decoded)
        elif field.repeated:
            out.setdefault(field.name, []).append(decoded)
        else:
            out[field.name] = decoded
    for field in message.fields:
        current = out.get(field.name)
        if field.name in out and not field.repeated and not field.map and (
                current is None or (not field.keep_zero and field.type in _SCALAR_WIRE
                                    and _is_zero(current))):
            del out[field.name]
    return out


def _unpack(field: Field, data: bytes) -> list[Any]:
    values, pos = [], 0
    while pos < len(data):
        if field.wire == VARINT:
            raw, pos = _read_varint(data, pos)
            values.append(_scalar_from_wire(field.type, VARINT, raw))
        else:
            width = 8 if field.wire == FIXED64 else 4
            values.append(_scalar_from_wire(field.type, field.wire, data[pos:pos + width]))
            pos += width
    return values


def _value_to_wire(field: Field, value: Any, path: str) -> bytes:
    """The field's payload (after its tag)."""
    if field.type in _SPECIAL:
        payload = _special_to_wire(field.type, value)
        return _varint(len(payload)) + payload
    if field.type in SCHEMA:
        if not isinstance(value, dict):
            raise ProtobufError(f"{path}: expected an object for {field.type}, "
                                f"got {type(value).__name__}")
        payload = encode_message(SCHEMA[field.type], value, path)
        return _varint(len(payload)) + payload
    return _scalar_to_wire(field.type, value)


def encode_message(message: Message, obj: dict[str, Any], path: str = "",
                   top_level: bool = False, inlined: bool = False) -> bytes:
    """A JSON-shaped dict as the message's bytes, fields in number order (`inlined`: `obj`
    is the parent's, whose own keys the parent checks)."""
    out = bytearray()
    for field in message.fields:
        where = f"{path}.{field.name}" if path else field.name
        if field.inline:
            out += _length(field.number,
                           encode_message(SCHEMA[field.type], obj, path, inlined=True))
            continue
        value = obj.get(field.name)
        if value is None:
            if not (field.pointer or field.repeated or field.map):
                out += _tag(field.number, field.wire) + _zero(field)
            continue
        if field.map:
            if not isinstance(value, dict):
                raise ProtobufError(f"{where}: expected an object (a map)")
            for key in sorted(value):
                if value[key] is None:
                    continue
                entry = _length(1, str(key).encode()) + _tag(2, field.wire) \
                    + _value_to_wire(field, value[key], f"{where}.{key}")
                out += _length(field.number, entry)
        elif field.repeated:
            if not isinstance(value, list):
                raise ProtobufError(f"{where}: expected a list")
            for item in value:
                out += _tag(field.number, field.wire) + _value_to_wire(field, item, where)
        else:
            out += _tag(field.number, field.wire) + _value_to_wire(field, value, where)
    for key in () if inlined else obj.keys() - _known_names(message):
        if not (top_level and key in ("apiVersion", "kind")):
            _report(message.name, f"key {key!r}", "is not in the schema (not sent)")
    return bytes(out)


_ZEROS: dict[str, bytes] = {}


def _zero(field: Field) -> bytes:
    """What Go writes for a non-pointer field left at its zero value: gogo's generated
    Marshal emits every one (proto2), so our bytes are Go's byte for byte."""
    zero = _ZEROS.get(field.type)
    if zero is None:
        zero = _ZEROS[field.type] = _zero_payload(field)
    return zero


def _zero_payload(field: Field) -> bytes:
    if field.type in ("meta.Time", "meta.MicroTime"):
        return b"\x00"  # the zero time marshals to nothing
    if field.type == "resource.Quantity":
        return _value_to_wire(field, "0", field.name)
    if field.type == "intstr.IntOrString":
        return _value_to_wire(field, 0, field.name)
    if field.type in ("meta.Duration", "meta.FieldsV1", "runtime.RawExtension"):
        payload = _tag(1, VARINT) + b"\x00" if field.type == "meta.Duration" else b""
        return _varint(len(payload)) + payload
    if field.type in SCHEMA:
        return _value_to_wire(field, {}, field.name)
    return _scalar_to_wire(field.type, "" if field.type in ("string", "bytes") else 0)


_KNOWN: dict[str, frozenset[str]] = {}


def _known_names(message: Message) -> frozenset[str]:
    names = _KNOWN.get(message.name)
    if names is None:
        found = set(message.by_name)
        for field in message.fields:
            if field.inline:
                found |= _known_names(SCHEMA[field.type])
        names = _KNOWN[message.name] = frozenset(found)
    return names


# Envelopes ---------------------------------------------------------------------------

def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    """`k8s\\x00` + runtime.Unknown, as the server's protobuf serializer writes it."""
    type_meta = _length(1, api_version.encode()) + _length(2, kind.encode())
    return MAGIC + _length(1, type_meta) + _length(2, raw) + _length(3, b"") + _length(4, b"")


def open_envelope(data: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, raw) of an enveloped object."""
    if not data.startswith(MAGIC):
        raise ProtobufError("the body does not start with the protobuf magic 'k8s\\x00'")
    api_version = kind = ""
    raw = b""
    for number, wire, value in iter_fields(data[len(MAGIC):]):
        if number == 1 and wire == LENGTH:
            for n, _, v in iter_fields(value):
                if n == 1:
                    api_version = bytes(v).decode()
                elif n == 2:
                    kind = bytes(v).decode()
        elif number == 2 and wire == LENGTH:
            raw = bytes(value)
        elif number == 3 and wire == LENGTH and value:
            raise ProtobufError(f"content encoding {bytes(value).decode()!r} is not supported")
    return api_version, kind, raw


def decode_object(data: bytes) -> dict[str, Any]:
    """An enveloped object as a JSON-shaped dict with its apiVersion and kind."""
    api_version, kind, raw = open_envelope(data)
    message = message_for(api_version, kind)
    if message is None:
        raise ProtobufError(f"no protobuf schema for kind {kind!r} of {api_version!r}")
    return {"apiVersion": api_version, "kind": kind, **decode_message(message, raw)}


def encode_object(obj: dict[str, Any]) -> bytes:
    """A JSON-shaped object with apiVersion and kind, enveloped."""
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    message = message_for(api_version, kind)
    if message is None:
        raise ProtobufError(f"no protobuf schema for kind {kind!r} of {api_version!r}")
    return envelope(api_version, kind, encode_message(message, obj, top_level=True))


def encode_watch_frame(event_type: str, obj: dict[str, Any]) -> bytes:
    """One watch event as a length-prefixed frame: a bare WatchEvent around the enveloped
    object (the stream serializer adds no envelope of its own)."""
    event = _length(1, event_type.encode()) + _length(2, _length(1, encode_object(obj)))
    return struct.pack(">I", len(event)) + event


def decode_watch_frames(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Split a protobuf watch stream into (type, object) pairs (the client's side)."""
    events, pos = [], 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack(">I", data[pos:pos + 4])
        frame, pos = data[pos + 4:pos + 4 + size], pos + 4 + size
        if len(frame) < size:
            raise ProtobufError("truncated watch frame")
        fields = {number: value for number, _, value in iter_fields(frame)}
        raw = {n: v for n, _, v in iter_fields(fields.get(2, b""))}.get(1, b"")
        events.append((bytes(fields.get(1, b"")).decode(), decode_object(bytes(raw))))
    return events
