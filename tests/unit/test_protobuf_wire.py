"""The protobuf codec against bytes built here from Kubernetes' published field numbers
(generated.proto of k8s.io/api and k8s.io/apimachinery), and against bodies client-go sent."""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Any

import pytest

from kube_elevator.fakes.kube_api.protobuf_wire import (
    SCHEMA,
    ProtobufError,
    decode_message,
    decode_object,
    decode_watch_frames,
    encode_message,
    encode_object,
    encode_watch_frame,
    format_duration,
    parse_duration,
)

CAPTURED = Path(__file__).parent.parent / "data" / "clientgo_protobuf"


# A protobuf writer of the test's own, so the expectations do not come from the codec.
def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = b""
    while value > 0x7F:
        out += bytes([value & 0x7F | 0x80])
        value >>= 7
    return out + bytes([value])


def num(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def ld(field: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return varint(field << 3 | 2) + varint(len(data)) + data


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    """k8s\\0 + runtime.Unknown{1 typeMeta{1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding,
    4 contentType} (k8s.io/apimachinery pkg/runtime/generated.proto)."""
    return b"k8s\x00" + ld(1, ld(1, api_version) + ld(2, kind)) + ld(2, raw) + ld(3, "") + ld(4, "")


# coordination/v1: Lease{1 metadata, 2 spec}; LeaseSpec{1 holderIdentity, 2 leaseDurationSeconds,
# 3 acquireTime, 4 renewTime, 5 leaseTransitions}; MicroTime{1 seconds, 2 nanos};
# ObjectMeta{1 name, 3 namespace, 6 resourceVersion, 11 labels (entries {1 key, 2 value})}.
LEASE_BYTES = envelope("coordination.k8s.io/v1", "Lease", (
    ld(1, ld(1, "leader") + ld(3, "kube-system") + ld(6, "42") + ld(11, ld(1, "a") + ld(2, "b")))
    + ld(2, ld(1, "me") + num(2, 15) + ld(4, num(1, 1_700_000_000) + num(2, 123_456_000))
         + num(5, 0))))
LEASE = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
         "metadata": {"name": "leader", "namespace": "kube-system", "resourceVersion": "42",
                      "labels": {"a": "b"}},
         "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                  "renewTime": "2023-11-14T22:13:20.123456Z", "leaseTransitions": 0}}


def test_lease_from_published_field_numbers() -> None:
    assert decode_object(LEASE_BYTES) == LEASE


def test_lease_encodes_to_the_published_fields() -> None:
    fields = _fields(encode_object(LEASE)[4:])
    assert fields[1] == [ld(1, "coordination.k8s.io/v1") + ld(2, "Lease")]  # typeMeta
    assert fields[3] == [b""] and fields[4] == [b""]  # contentEncoding, contentType
    lease = _fields(fields[2][0])
    spec = _fields(lease[2][0])
    assert spec[1] == [b"me"] and spec[2] == [15] and spec[5] == [0]
    assert _fields(spec[4][0]) == {1: [1_700_000_000], 2: [123_456_000]}
    assert 3 not in spec  # acquireTime is a pointer left unset
    meta = _fields(lease[1][0])
    assert meta[1] == [b"leader"] and meta[11] == [ld(1, "a") + ld(2, "b")]
    assert meta[2] == [b""]  # generateName: gogo writes every non-pointer string, even empty


def _fields(data: bytes) -> dict[int, list[Any]]:
    """A minimal reader: field number -> values (ints for varints, bytes otherwise)."""
    out: dict[int, list[Any]] = {}
    pos = 0
    while pos < len(data):
        key, pos = _read(data, pos)
        if key & 7 == 0:
            value, pos = _read(data, pos)
        else:
            assert key & 7 == 2, f"unexpected wire type {key & 7}"
            size, pos = _read(data, pos)
            value, pos = data[pos:pos + size], pos + size
        out.setdefault(key >> 3, []).append(value)
    return out


def _read(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


# core/v1 Node{1 metadata, 2 spec, 3 status}; NodeSpec{3 providerID, 4 unschedulable, 5 taints};
# Taint{1 key, 2 value, 3 effect}; NodeStatus{1 capacity: map<string, Quantity>};
# Quantity{1 string}.
NODE_BYTES = envelope("v1", "Node", (
    ld(1, ld(1, "n1"))
    + ld(2, ld(3, "aws:///i-1") + num(4, 1) + ld(5, ld(1, "k") + ld(2, "") + ld(3, "NoSchedule")))
    + ld(3, ld(1, ld(1, "cpu") + ld(2, ld(1, "4"))) + ld(1, ld(1, "memory") + ld(2, ld(1, "1Gi"))))))


def test_node_with_taint_and_quantities() -> None:
    assert decode_object(NODE_BYTES) == {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "spec": {"providerID": "aws:///i-1", "unschedulable": True,
                 "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "4", "memory": "1Gi"}},
    }


def test_zero_values_follow_go_json() -> None:
    """A zero scalar is kept where Go's JSON keeps it (a pointer, no omitempty), else dropped."""
    # apps/v1 DeploymentSpec{1 replicas *int32, 5 minReadySeconds int32 omitempty, 7 paused bool}
    spec = decode_message(SCHEMA["apps.DeploymentSpec"], num(1, 0) + num(5, 0) + num(7, 0))
    assert spec["replicas"] == 0
    assert "minReadySeconds" not in spec and "paused" not in spec
    # core/v1 Container{1 name string, no omitempty}
    assert decode_message(SCHEMA["core.Container"], ld(1, "")) == {"name": ""}
    # meta/v1 DeleteOptions{1 gracePeriodSeconds *int64}
    assert decode_message(SCHEMA["meta.DeleteOptions"], num(1, 0)) == {"gracePeriodSeconds": 0}
    # ObjectMeta{8 creationTimestamp}: the zero Time marshals to an empty message, JSON null
    assert decode_message(SCHEMA["meta.ObjectMeta"], ld(8, b"") + num(7, 0)) == {}


def test_negative_int32_and_int64() -> None:
    # ContainerPort{3 containerPort int32}; ObjectMeta{10 deletionGracePeriodSeconds *int64}
    assert decode_message(SCHEMA["core.ContainerPort"], num(3, -1)) == {"containerPort": -1}
    assert num(3, -1) in encode_message(SCHEMA["core.ContainerPort"], {"containerPort": -1})
    assert num(3, -1) == b"\x18" + b"\xff" * 9 + b"\x01"  # sign-extended to ten bytes
    meta = decode_message(SCHEMA["meta.ObjectMeta"], num(10, -5))
    assert meta == {"deletionGracePeriodSeconds": -5}


def test_int_or_string() -> None:
    """intstr.IntOrString{1 type (0 int, 1 string), 2 intVal, 3 strVal} as its JSON scalar."""
    # core/v1 HTTPGetAction{2 port IntOrString}
    as_int = ld(2, num(1, 0) + num(2, 8080) + ld(3, ""))
    as_str = ld(2, num(1, 1) + num(2, 0) + ld(3, "http"))
    message = SCHEMA["core.HTTPGetAction"]
    assert decode_message(message, as_int)["port"] == 8080
    assert decode_message(message, as_str)["port"] == "http"
    assert as_int in encode_message(message, {"port": 8080})
    assert as_str in encode_message(message, {"port": "http"})


def test_inline_struct_is_flattened(caplog: pytest.LogCaptureFixture) -> None:
    """core/v1 Volume{1 name, 2 volumeSource (inline in JSON)}; VolumeSource{2 emptyDir};
    EmptyDirVolumeSource{1 medium string}, which Go writes even when empty."""
    data = ld(1, "scratch") + ld(2, ld(2, ld(1, "")))
    volume = decode_message(SCHEMA["core.Volume"], data)
    assert volume == {"name": "scratch", "emptyDir": {}}
    caplog.set_level(logging.WARNING)
    assert encode_message(SCHEMA["core.Volume"], volume) == data
    assert "not in the schema" not in caplog.text


def test_packed_repeated_scalars_are_read() -> None:
    """PodSecurityContext{4 supplementalGroups repeated int64}: gogo writes them unpacked,
    a proto3-minded writer packs them; both read the same."""
    message = SCHEMA["core.PodSecurityContext"]
    unpacked = num(4, 1) + num(4, 300)
    packed = ld(4, varint(1) + varint(300))
    assert decode_message(message, unpacked) == decode_message(message, packed) == {
        "supplementalGroups": [1, 300]}
    assert encode_message(message, {"supplementalGroups": [1, 300]}).startswith(unpacked)


def test_unknown_fields_are_skipped_and_reported(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    data = ld(1, "n1") + ld(999, "future") + num(998, 7)
    assert decode_message(SCHEMA["meta.ObjectMeta"], data) == {"name": "n1"}
    assert "meta.ObjectMeta field 999 (wire type 2) is not in the schema" in caplog.text
    encode_message(SCHEMA["meta.ObjectMeta"], {"name": "n1", "notAField": 1})
    assert "meta.ObjectMeta key 'notAField' is not in the schema" in caplog.text


@pytest.mark.parametrize(("data", "why"), [
    (b"{}", "magic"),
    (b"k8s\x00" + ld(1, ld(1, "v1") + ld(2, "Nope")) + ld(2, b""), "no protobuf schema"),
    (envelope("v1", "Node", b"\x0a\x05ab"), "runs past the message"),
    (envelope("v1", "Node", num(1, 3)), "wire type 0"),
], ids=["json-body", "unknown-kind", "truncated", "wrong-wire-type"])
def test_bad_bodies_raise_one_clear_error(data: bytes, why: str) -> None:
    with pytest.raises(ProtobufError, match=why):
        decode_object(data)


def test_status_and_delete_options_under_any_group_version() -> None:
    status = {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
              "message": 'pods "x" not found', "reason": "NotFound",
              "details": {"name": "x", "kind": "pods"}, "code": 404}
    assert decode_object(encode_object(status)) == {**status, "metadata": {}}
    # meta/v1 DeleteOptions{1 gracePeriodSeconds, 4 propagationPolicy}, sent as policy/v1's
    options = envelope("policy/v1", "DeleteOptions", num(1, 30) + ld(4, "Foreground"))
    assert decode_object(options)["propagationPolicy"] == "Foreground"
    # policy/v1 Eviction{1 metadata, 2 deleteOptions}
    eviction = envelope("policy/v1", "Eviction", ld(1, ld(1, "p") + ld(3, "ns"))
                        + ld(2, num(1, 0)))
    assert decode_object(eviction) == {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "ns"},
        "deleteOptions": {"gracePeriodSeconds": 0}}


def test_watch_frame_is_length_prefixed_bare_watch_event() -> None:
    """apimachinery's protobuf stream serializer is the raw one: each frame is a 4-byte
    big-endian length and a metav1.WatchEvent{1 type, 2 object: RawExtension{1 raw}} whose raw
    is the enveloped object."""
    frame = encode_watch_frame("ADDED", LEASE)
    event = ld(1, "ADDED") + ld(2, ld(1, envelope("coordination.k8s.io/v1", "Lease",
                                                    _lease_raw(frame))))
    assert frame == struct.pack(">I", len(event)) + event
    assert decode_watch_frames(frame + frame) == [("ADDED", LEASE), ("ADDED", LEASE)]


def _lease_raw(frame: bytes) -> bytes:
    event = _fields(frame[4:])
    unknown = _fields(_fields(event[2][0])[1][0][4:])
    return bytes(unknown[2][0])


@pytest.mark.parametrize(("nanos", "text"), [
    (0, "0s"), (1_500_000_000, "1.5s"), (90 * 10**9, "1m30s"), (3600 * 10**9, "1h0m0s"),
    (2_000_000, "2ms"), (-5 * 10**9, "-5s"),
])
def test_go_durations(nanos: int, text: str) -> None:
    assert format_duration(nanos) == text
    assert parse_duration(text) == nanos


@pytest.mark.parametrize("name", sorted(p.name for p in CAPTURED.glob("*.pb")))
def test_client_go_bodies_decode_and_reencode(name: str) -> None:
    """What client-go v0.32.3 sent decodes to the object it built; re-encoded, it is the same
    bytes, except fields Kubernetes added after v0.32 (written at their zero value)."""
    data = (CAPTURED / name).read_bytes()
    obj = decode_object(data)
    again = encode_object(obj)
    if name == "pod-create.pb":
        assert obj["spec"]["containers"] == [{"name": "c", "image": "busybox", "resources": {
            "requests": {"cpu": "100m"}}}]
        pod_status = _fields(_fields(_fields(again[4:])[2][0])[3][0])
        assert pod_status[17] == [0]  # PodStatus.observedGeneration, new in 1.33
        return
    assert again == data
    expected = {
        "node-create.pb": ("Node", lambda o: o["status"]["capacity"] == {
            "cpu": "4", "memory": "16Gi", "pods": "110"}),
        "node-update-taint.pb": ("Node", lambda o: o["spec"]["taints"] == [
            {"key": "atlassian.com/escalator", "value": "1", "effect": "NoSchedule"}]),
        "delete-options.pb": ("DeleteOptions", lambda o: o["gracePeriodSeconds"] == 0),
        "lease-acquire.pb": ("Lease", lambda o: o["spec"]["leaseTransitions"] == 0
                             and o["spec"]["renewTime"].endswith("Z")),
        "lease-release.pb": ("Lease", lambda o: o["spec"]["holderIdentity"] == ""
                             and o["spec"]["leaseDurationSeconds"] == 1),
        "event-create.pb": ("Event", lambda o: o["involvedObject"]["kind"] == "Lease"
                            and o["reason"] == "Probe"),
    }[name]
    assert obj["kind"] == expected[0]
    assert expected[1](obj), obj
