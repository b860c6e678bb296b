"""The Go renderings the fake API's decoding errors quote (fakes/kube_api/decode_types.py): fmt's
`%v` of a float64 (strconv.FormatFloat 'g', -1: Go's ftoa_test.go shortest cases), `%+v` of a
decoded map, encoding/json's numbers, and the Go type names read from the protobuf descriptors."""

from __future__ import annotations

import pytest

from kube_elevator.fakes.kube_api.decode_types import (
    Slot,
    decode_error,
    go_json,
    go_print,
    json_fields,
)


@pytest.mark.parametrize(("value", "shown"), [
    (1.5, "1.5"), (30.0, "30"), (100000.0, "100000"), (1000000.0, "1e+06"),
    (1234567.0, "1.234567e+06"), (0.0001, "0.0001"), (0.00001, "1e-05"), (-2.5, "-2.5"),
    (1e21, "1e+21"), (0.0, "0"), (123456.5, "123456.5"),
])
def test_floats_print_as_fmt_v(value: float, shown: str) -> None:
    assert go_print(value) == shown


def test_a_map_prints_as_fmt_plus_v() -> None:
    assert go_print({"spec": {"b": [1, "x", None, True], "a": 1.5}}) == \
        "map[spec:map[a:1.5 b:[1 x <nil> true]]]"


def test_json_numbers_and_escapes_as_encoding_json() -> None:
    assert go_json({"b": 30.0, "a": "<&>", "c": 1.5}) == \
        '{"a":"\\u003c\\u0026\\u003e","b":30,"c":1.5}'


def test_go_types_from_the_descriptors() -> None:
    ports = json_fields("core.Container")["ports"]
    assert ports.kind == "list" and ports.item is not None
    assert ports.item.type == "core.ContainerPort"
    assert Slot("list", "core.ContainerPort", Slot("struct", "core.ContainerPort")).go == \
        "[]v1.ContainerPort"
    assert Slot("map", "string", Slot("leaf", "string")).go == "map[string]string"
    assert Slot("leaf", "resource.Quantity").go == "resource.Quantity"
    # an inlined struct's fields are its parent's (LocalObjectReference in a key selector)
    assert "name" in json_fields("core.ConfigMapKeySelector")


def test_the_first_type_error_is_the_one_reported() -> None:
    body = {"spec": {"replicas": "1", "paused": "no"}}
    assert decode_error("apps/v1", "Deployment", body) == (
        "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of "
        "type int32")
    assert decode_error("apps/v1", "Deployment", {"spec": {"replicas": None}}) is None
    assert decode_error("example.com/v1", "Gadget", {"spec": 1}) is None


@pytest.mark.parametrize(("message", "field", "go"), [
    ("core.PodSpec", "restartPolicy", "v1.RestartPolicy"),
    ("core.Toleration", "effect", "v1.TaintEffect"),
    ("meta.ObjectMeta", "uid", "types.UID"),
    ("core.PodSpec", "nodeName", "string"),
])
def test_a_named_string_type_prints_its_name(message: str, field: str, go: str) -> None:
    """go_named_types.py: reflect prints `v1.RestartPolicy`, not its underlying `string`
    (k8s.io/api core/v1/types.go `type RestartPolicy string`)."""
    assert json_fields(message)[field].go == go


def test_a_slice_of_a_named_type_prints_the_element_for_an_element() -> None:
    add = json_fields("core.Capabilities")["add"]
    assert (add.go, add.item.go if add.item else None) == ("[]v1.Capability", "v1.Capability")
    # an inlined struct's named field is found through its parent (EphemeralContainerCommon)
    assert json_fields("core.EphemeralContainer")["imagePullPolicy"].go == "v1.PullPolicy"
