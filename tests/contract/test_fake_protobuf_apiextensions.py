"""Protobuf for apiextensions.k8s.io/v1 (CustomResourceDefinitions) and cached protobuf lists.

A real API server takes and serves CustomResourceDefinitions in protobuf (only custom resources
themselves have no protobuf form); the fake answered 415. The wire form of JSONSchemaProps'
either-or types is apiextensions v1 marshal.go's and generated.proto's, checked here byte by byte.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from kube_elevator.fakes.kube_api.protobuf_wire import (
    PROTOBUF,
    decode_object,
    encode_object,
    iter_fields,
)
from kube_elevator.fakes.kube_api.server import FakeKubeApi

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CLIENT_GO_ACCEPT = f"{PROTOBUF},application/json"

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                       "listKind": "GadgetList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "required": ["size"], "properties": {
                                   "size": {"type": "integer", "default": 3, "minimum": 1},
                                   "mode": {"type": "string", "enum": ["a", "b"]},
                                   "tags": {"type": "array", "items": {"type": "string"}},
                                   "labels": {"type": "object",
                                              "additionalProperties": {"type": "string"}},
                                   "free": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}},
                               "status": {"type": "object"}}}}}]},
}


@pytest.fixture(scope="module")
def kube() -> Iterator[FakeKubeApi]:
    with FakeKubeApi() as api:
        yield api


def _spec(document: dict[str, Any]) -> Any:
    return orjson.loads(orjson.dumps(document["spec"]))


def test_a_crd_in_protobuf_is_taken_served_and_serves_its_resource(kube: FakeKubeApi) -> None:
    created = httpx.post(kube.url + CRDS, content=encode_object(CRD),
                         headers={"Content-Type": PROTOBUF, "Accept": CLIENT_GO_ACCEPT})
    assert created.status_code == 201, created.text
    assert created.headers["content-type"] == PROTOBUF
    assert _spec(decode_object(created.content)) == CRD["spec"]
    as_json = httpx.get(f"{kube.url}{CRDS}/gadgets.example.com").json()
    # As Go's encoding/json writes it: the double `minimum` 1 is `1`, not `1.0`.
    assert orjson.dumps(as_json["spec"], option=orjson.OPT_SORT_KEYS) == \
        orjson.dumps(CRD["spec"], option=orjson.OPT_SORT_KEYS)
    listed = httpx.get(kube.url + CRDS, headers={"Accept": CLIENT_GO_ACCEPT})
    assert listed.headers["content-type"] == PROTOBUF
    (item,) = decode_object(listed.content)["items"]
    assert _spec(item) == CRD["spec"]
    gadget = httpx.post(kube.url + "/apis/example.com/v1/namespaces/default/gadgets",
                        json={"apiVersion": "example.com/v1", "kind": "Gadget",
                              "metadata": {"name": "g"}, "spec": {"size": 2}})
    assert gadget.status_code == 201
    # Custom resources themselves still have no protobuf form (406 for protobuf only).
    assert httpx.get(kube.url + "/apis/example.com/v1/namespaces/default/gadgets/g",
                     headers={"Accept": PROTOBUF}).status_code == 406


def _fields(data: bytes) -> dict[int, list[Any]]:
    found: dict[int, list[Any]] = {}
    for number, _, value in iter_fields(data):
        found.setdefault(number, []).append(value)
    return found


def _open_api_v3_schema(encoded: bytes) -> dict[int, list[Any]]:
    """The fields of spec.versions[0].schema.openAPIV3Schema in a CRD's protobuf: envelope raw
    = 2 > CustomResourceDefinition.spec = 2 > versions = 7 > schema = 4 > openAPIV3Schema = 1."""
    data = _fields(encoded[4:])[2][0]
    for number in (2, 7, 4, 1):
        data = _fields(data)[number][0]
    return _fields(data)


@pytest.mark.parametrize(("schema", "number", "wire"), [
    # additionalProperties = 30, JSONSchemaPropsOrBool {allows = 1}: `false` is allows=false.
    ({"type": "object", "additionalProperties": False}, 30, {1: [0]}),
    # a schema there allows = true and carries it as schema = 2
    ({"type": "object", "additionalProperties": {"type": "string"}}, 30, {1: [1], 2: "string"}),
    # items = 24, JSONSchemaPropsOrArray {schema = 1}: one schema for every item.
    ({"type": "array", "items": {"type": "string"}}, 24, {1: "string"}),
    # enum = 20, repeated JSON {raw = 1}: each value's JSON bytes.
    ({"type": "string", "enum": ["a", 1]}, 20, [{1: [b'"a"']}, {1: [b"1"]}]),
])
def test_json_schema_props_either_or_types_take_generated_protos_wire_form(
        schema: dict[str, Any], number: int, wire: Any) -> None:
    crd = copy.deepcopy(CRD)
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema
    encoded = encode_object(crd)
    values = _open_api_v3_schema(encoded)[number]
    if isinstance(wire, list):
        assert [_fields(v) for v in values] == wire
    else:
        (value,) = values
        got = _fields(value)
        for inner, expected in wire.items():
            if isinstance(expected, str):  # a JSONSchemaProps: its type = 5
                assert _fields(got[inner][0])[5] == [expected.encode()]
            else:
                assert got[inner] == expected
    assert decode_object(encoded)["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == schema


def test_cached_protobuf_lists_follow_every_write(kube: FakeKubeApi) -> None:
    """Each item's encoding is cached by its stored record: a write must show at once, and the
    list must be what encoding the JSON list whole gives, byte for byte."""
    for i in range(3):
        kube.create("pods", {"metadata": {"name": f"cached-{i}", "namespace": "pbcache"},
                             "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    url = kube.url + "/api/v1/namespaces/pbcache/pods"
    for change in range(3):
        kube.patch("pods", "cached-1", {"metadata": {"labels": {"round": str(change)}}},
                   "pbcache")
        protobuf = httpx.get(url, headers={"Accept": CLIENT_GO_ACCEPT})
        as_json = httpx.get(url).json()
        assert protobuf.headers["content-type"] == PROTOBUF
        assert protobuf.content == encode_object(as_json)
        labels = decode_object(protobuf.content)["items"][1]["metadata"]["labels"]
        assert labels == {"round": str(change)}


@pytest.mark.parametrize(("path", "kind", "body"), [
    ("/api/v1/persistentvolumes", "PersistentVolume",
     {"metadata": {"name": "pv-zonal"},
      "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
               "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
               "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                   {"key": "topology.kubernetes.io/zone", "operator": "In",
                    "values": ["us-east-1a"]}]}]}}}}),
    ("/api/v1/namespaces/default/persistentvolumeclaims", "PersistentVolumeClaim",
     {"metadata": {"name": "data-0"},
      "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-zonal",
               "resources": {"requests": {"storage": "10Gi"}}}}),
])
def test_volumes_and_claims_in_protobuf_too(kube: FakeKubeApi, path: str, kind: str,
                                            body: dict[str, Any]) -> None:
    """Every built-in kind the fake serves speaks protobuf (these answered 415 before)."""
    created = httpx.post(kube.url + path,
                         content=encode_object({"apiVersion": "v1", "kind": kind, **body}),
                         headers={"Content-Type": PROTOBUF, "Accept": CLIENT_GO_ACCEPT})
    assert created.status_code == 201, created.text
    spec = decode_object(created.content)["spec"]  # what was sent, and the server's defaults
    assert {key: spec[key] for key in body["spec"]} == body["spec"]
    listed = httpx.get(kube.url + path, headers={"Accept": CLIENT_GO_ACCEPT})
    assert [item["metadata"]["name"] for item in decode_object(listed.content)["items"]] == \
        [body["metadata"]["name"]]
