"""CRD schemas as apiextensions enforces them, over HTTP with the official client (and kubectl):
custom objects validated against `openAPIV3Schema` with the API server's 422, pruned, defaulted
on write and on read; CEL rules; `/status` and `/scale` keep their rules.

Tables re-expressed from kubernetes staging/src/k8s.io/apiextensions-apiserver
pkg/apiserver/validation/validation_test.go (TestValidateCustomResource), pkg/apiserver/schema/
pruning/algorithm_test.go (TestPrune) and pkg/apiserver/schema/defaulting/algorithm_test.go
(TestDefault): each upstream schema sits at `spec.value` of a custom object (so every path gains
`spec.`), and a node that has no type upstream is given one (object for properties, array for
items) or, when it is a leaf, `x-kubernetes-preserve-unknown-fields` (a real server refuses a
typeless node: the schema must be structural)."""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.tools import needs_kubectl

Obj = dict[str, Any]
GROUP = "schema.example.com"
_PLURALS = (f"thing{i}s" for i in itertools.count())  # singular: thing{i}


@pytest.fixture(scope="module")
def api_client(api: FakeKubeApi) -> Iterator[client.ApiClient]:
    with api.api_client() as c:
        yield c


@pytest.fixture
def objects(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


def crd(plural: str, spec_schema: Obj, *, root: Obj | None = None,
        subresources: Obj | None = None) -> Obj:
    schema = root or {"type": "object", "properties": {"spec": spec_schema,
                                                       "status": {"type": "object",
                                                                  "properties": {
                                                                      "ready": {"type": "integer"},
                                                                  }}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": plural[:-1], "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": subresources or {},
                                   "schema": {"openAPIV3Schema": schema}}]}}


def install(api_client: client.ApiClient, spec_schema: Obj, **kw: Any) -> str:
    plural = next(_PLURALS)
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition(
        crd(plural, spec_schema, **kw))
    return plural


def thing(name: str, spec: Any) -> Obj:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": name},
            "spec": spec}


def create(objects: client.CustomObjectsApi, plural: str, body: Obj) -> Obj:
    created: Obj = objects.create_namespaced_custom_object(GROUP, "v1", "default", plural, body)
    return created


def refusal(exc: ApiException) -> tuple[Obj, list[str]]:
    """The Status and its causes as `<field>: <message>`, sorted (as upstream's tests list)."""
    status: Obj = json.loads(exc.body)
    return status, sorted(f"{c['field']}: {c['message']}" for c in status["details"]["causes"])


def typed(schema: Any) -> Any:
    """An upstream test schema made structural (see the module's docstring)."""
    if not isinstance(schema, dict):
        return schema
    out = {k: typed(v) if k in ("items", "additionalProperties") else v
           for k, v in schema.items()}
    if "properties" in out:
        out["properties"] = {k: typed(v) for k, v in out["properties"].items()}
    if not out.get("type") and not out.get("x-kubernetes-int-or-string") \
            and not out.get("x-kubernetes-preserve-unknown-fields"):
        if "properties" in out or "additionalProperties" in out:
            out["type"] = "object"
        elif "items" in out:
            out["type"] = "array"
        else:
            out["x-kubernetes-preserve-unknown-fields"] = True
    return out


# Validation: TestValidateCustomResource ------------------------------------------------------

_OBJECT_FIELD = {"type": "object", "properties": {"field": {"type": "object"}}}
_INT_OR_STRING = {"type": "object", "properties": {"field": {"x-kubernetes-int-or-string": True}}}


def _type_error(found: str, wanted: str = "object") -> str:
    return (f'spec.field: Invalid value: "{found}": spec.field in body must be of type '
            f'{wanted}: "{found}"')


VALIDATION_CASES: list[tuple[str, Obj, Any, list[str]]] = [
    # "!nullable"
    # (upstream's null case is refused by the validator alone; over HTTP the decoder drops a
    # null the schema does not allow first: test_a_null_the_schema_does_not_allow_is_dropped)
    *[("!nullable", _OBJECT_FIELD, {"field": value}, [_type_error(found)])
      for value, found in (("foo", "string"), (42, "integer"), (True, "boolean"),
                           (1.2, "number"), ([], "array"))],
    ("!nullable", _OBJECT_FIELD, {"field": {}}, []),
    # "nullable"
    ("nullable", {"type": "object", "properties": {"field": {"type": "object", "nullable": True}}},
     {"field": None}, []),
    ("nullable", {"type": "object", "properties": {"field": {"type": "object", "nullable": True}}},
     {"field": 42}, [_type_error("integer")]),
    # "x-kubernetes-int-or-string"
    ("x-kubernetes-int-or-string", _INT_OR_STRING, {"field": 42}, []),
    ("x-kubernetes-int-or-string", _INT_OR_STRING, {"field": "foo"}, []),
    *[("x-kubernetes-int-or-string", _INT_OR_STRING, {"field": value},
       [_type_error(found, "integer,string")])
      for value, found in ((True, "boolean"), (1.2, "number"), ({}, "object"), ([], "array"))],
    # "nullable, x-kubernetes-int-or-string and user-provided anyOf"
    ("int-or-string and anyOf", {"type": "object", "properties": {"field": {
        "nullable": True, "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}]}}},
     {"field": True}, sorted([
         '<nil>: Invalid value: "": "spec.field" must validate at least one schema (anyOf)',
         _type_error("boolean", "integer,string"), _type_error("boolean", "integer")])),
    # "required field"
    ("required field", {"type": "object", "required": ["field"], "properties": {"field": {
        "type": "object", "required": ["nested"],
        "properties": {"nested": {"x-kubernetes-preserve-unknown-fields": True}}}}},
     {}, ["spec.field: Required value"]),
    ("required field", {"type": "object", "required": ["field"], "properties": {"field": {
        "type": "object", "required": ["nested"],
        "properties": {"nested": {"x-kubernetes-preserve-unknown-fields": True}}}}},
     {"field": {}}, ["spec.field.nested: Required value"]),
    # "enum"
    ("enum", {"type": "object", "properties": {"field": {
        "type": "object", "required": ["nestedint", "nestedstring"], "properties": {
            "nestedint": {"type": "integer", "enum": [1, 2]},
            "nestedstring": {"type": "string", "enum": ["a", "b"]}}}}},
     {"field": {"nestedint": "x", "nestedstring": True}}, sorted([
         'spec.field.nestedint: Invalid value: "string": spec.field.nestedint in body must be '
         'of type integer: "string"',
         'spec.field.nestedint: Unsupported value: "x": supported values: "1", "2"',
         'spec.field.nestedstring: Invalid value: "boolean": spec.field.nestedstring in body '
         'must be of type string: "boolean"',
         'spec.field.nestedstring: Unsupported value: true: supported values: "a", "b"'])),
    # The other value validations kube-openapi words (go-openapi errors/schema.go)
    ("minimum", {"type": "object", "properties": {"field": {"type": "integer", "minimum": 1}}},
     {"field": 0}, ["spec.field: Invalid value: 0: spec.field in body should be greater than "
                    "or equal to 1"]),
    ("exclusiveMinimum", {"type": "object", "properties": {"field": {
        "type": "integer", "minimum": 1, "exclusiveMinimum": True}}},
     {"field": 1}, ["spec.field: Invalid value: 1: spec.field in body should be greater than 1"]),
    ("maximum", {"type": "object", "properties": {"field": {"type": "number", "maximum": 2.5}}},
     {"field": 3}, ["spec.field: Invalid value: 3: spec.field in body should be less than or "
                    "equal to 2.5"]),
    ("exclusiveMaximum", {"type": "object", "properties": {"field": {
        "type": "integer", "maximum": 5, "exclusiveMaximum": True}}},
     {"field": 5}, ["spec.field: Invalid value: 5: spec.field in body should be less than 5"]),
    ("pattern", {"type": "object", "properties": {"field": {"type": "string",
                                                             "pattern": "^[a-z]+$"}}},
     {"field": "A1"}, ["spec.field: Invalid value: \"A1\": spec.field in body should match "
                       "'^[a-z]+$'"]),
    ("minLength", {"type": "object", "properties": {"field": {"type": "string", "minLength": 3}}},
     {"field": "ab"}, ['spec.field: Invalid value: "ab": spec.field in body should be at least '
                       '3 chars long']),
    ("maxLength", {"type": "object", "properties": {"field": {"type": "string", "maxLength": 2}}},
     {"field": "abc"}, ["spec.field: Too long: may not be more than 2 bytes"]),
    ("minItems", {"type": "object", "properties": {"field": {
        "type": "array", "minItems": 2, "items": {"type": "string"}}}},
     {"field": ["a"]}, ['spec.field: Invalid value: "": spec.field in body should have at least '
                        '2 items']),
    ("maxItems", {"type": "object", "properties": {"field": {
        "type": "array", "maxItems": 1, "items": {"type": "string"}}}},
     {"field": ["a", "b"]}, ["spec.field: Too many: 2: must have at most 1 items"]),
    ("minProperties", {"type": "object", "properties": {"field": {
        "type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}}}},
     {"field": {}}, ['spec.field: Invalid value: "": spec.field in body should have at least 1 '
                     'properties']),
    ("maxProperties", {"type": "object", "properties": {"field": {
        "type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}}}},
     {"field": {"a": "1", "b": "2"}}, ["spec.field: Too many: 2: must have at most 1 items"]),
    ("format date-time", {"type": "object", "properties": {"field": {
        "type": "string", "format": "date-time"}}},
     {"field": "yesterday"}, ['spec.field: Invalid value: "yesterday": spec.field in body must '
                              'be of type date-time: "yesterday"']),
    ("format date-time", {"type": "object", "properties": {"field": {
        "type": "string", "format": "date-time"}}}, {"field": "2024-01-02T03:04:05Z"}, []),
    ("list-type set", {"type": "object", "properties": {"field": {
        "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}},
     {"field": ["a", "b", "a"]}, ['spec.field[2]: Duplicate value: "a"']),
    ("embedded resource", {"type": "object", "properties": {"field": {
        "type": "object", "x-kubernetes-embedded-resource": True,
        "x-kubernetes-preserve-unknown-fields": True}}},
     {"field": {"apiVersion": "v1"}}, ["spec.field.kind: Required value: must not be empty"]),
]


@pytest.mark.parametrize(("case", "schema", "spec", "expected"), VALIDATION_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(VALIDATION_CASES)])
def test_custom_objects_are_validated_against_the_schema(
        api_client: client.ApiClient, objects: client.CustomObjectsApi, case: str, schema: Obj,
        spec: Any, expected: list[str]) -> None:
    plural = install(api_client, schema)
    if not expected:
        create(objects, plural, thing("ok", spec))
        return
    with pytest.raises(ApiException) as raised:
        create(objects, plural, thing("bad", spec))
    status, causes = refusal(raised.value)
    assert raised.value.status == 422
    assert status["reason"] == "Invalid"
    assert causes == expected
    listed = expected[0] if len(expected) == 1 else None
    if listed:
        assert status["message"] == f'Thing.{GROUP} "bad" is invalid: {listed}'
    assert status["details"] == {**status["details"], "name": "bad", "group": GROUP,
                                 "kind": "Thing"}


def test_a_null_the_schema_does_not_allow_is_dropped(
        api_client: client.ApiClient, objects: client.CustomObjectsApi) -> None:
    """apiextensions' decoder prunes such nulls (PruneNonNullableNullsWithoutDefaults) before
    validating; a nullable field keeps its null."""
    plural = install(api_client, {"type": "object", "properties": {
        "field": {"type": "object"}, "port": {"x-kubernetes-int-or-string": True},
        "maybe": {"type": "string", "nullable": True}}})
    created = create(objects, plural, thing("n", {"field": None, "port": None, "maybe": None}))
    assert created["spec"] == {"maybe": None}


def test_the_servers_words_for_a_wrong_type(api_client: client.ApiClient,
                                            objects: client.CustomObjectsApi) -> None:
    plural = install(api_client, {"type": "object", "properties": {
        "replicas": {"type": "integer"}}})
    with pytest.raises(ApiException) as raised:
        create(objects, plural, thing("w", {"replicas": "string"}))
    assert json.loads(raised.value.body)["message"] == (
        f'Thing.{GROUP} "w" is invalid: spec.replicas: Invalid value: "string": spec.replicas '
        'in body must be of type integer: "string"')


def test_an_update_is_validated_and_ratcheted(api_client: client.ApiClient,
                                              objects: client.CustomObjectsApi,
                                              api: FakeKubeApi) -> None:
    plural = install(api_client, {"type": "object", "properties": {
        "a": {"type": "integer", "maximum": 3}, "b": {"type": "integer", "maximum": 3}}})
    api.crd_schema_layers = False  # store one that breaks the rule, as before a CRD tightened
    try:
        create(objects, plural, thing("old", {"a": 9, "b": 1}))
    finally:
        api.crd_schema_layers = True
    objects.patch_namespaced_custom_object(GROUP, "v1", "default", plural, "old",
                                           {"spec": {"b": 2}})  # a unchanged: allowed
    with pytest.raises(ApiException) as raised:
        objects.patch_namespaced_custom_object(GROUP, "v1", "default", plural, "old",
                                               {"spec": {"b": 4}})
    assert refusal(raised.value)[1] == [
        "spec.b: Invalid value: 4: spec.b in body should be less than or equal to 3"]


# Pruning: TestPrune ----------------------------------------------------------------------------

PRUNING_CASES: list[tuple[str, Obj, Any, Any]] = [
    ("object array object",
     {"properties": {"array": {"items": {"properties": {"a": {}, "c": {}}}},
                     "specified": {"properties": {"a": {}, "c": {}}}}},
     {"array": [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}], "unspecified": {"a": 1},
      "specified": {"a": 1, "b": 2, "c": 3}},
     {"array": [{"a": 1}, {}, {"a": 1, "c": 3}], "specified": {"a": 1, "c": 3}}),
    ("nested x-kubernetes-preserve-unknown-fields",
     {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
         "alpha": {"type": "string"}, "beta": {"type": "number"},
         "pruning": {"type": "object", "properties": {
             "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
             "pruning": {"type": "object"}}},
         "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {
                            "preserving": {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True},
                            "pruning": {"type": "object"}}},
         "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
             "type": "object", "x-kubernetes-preserve-unknown-fields": True,
             "additionalProperties": {"type": "object", "properties": {
                 "specified": {"type": "object"}}}},
         "preservingAdditionalPropertiesKeyPruneValues": {
             "type": "object", "additionalProperties": {"type": "object", "properties": {
                 "specified": {"type": "object"}}}}}},
     {"unspecified": "bar", "alpha": "abc", "beta": 42.5,
      "unspecifiedObject": {"unspecified": "bar"},
      "pruning": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
                  "pruning": {"unspecified": "bar"}, "apiVersion": "unknown",
                  "preserving": {"unspecified": "bar"}},
      "preserving": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
                     "pruning": {"unspecified": "bar"}, "preserving": {"unspecified": "bar"}},
      "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
          "foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}},
      "preservingAdditionalPropertiesKeyPruneValues": {
          "foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}}},
     {"unspecified": "bar", "alpha": "abc", "beta": 42.5,
      "unspecifiedObject": {"unspecified": "bar"},
      "pruning": {"pruning": {}, "preserving": {"unspecified": "bar"}},
      "preserving": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
                     "pruning": {}, "preserving": {"unspecified": "bar"}},
      "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
          "foo": {"specified": {}}},
      "preservingAdditionalPropertiesKeyPruneValues": {"foo": {"specified": {}}}}),
    ("x-kubernetes-embedded-resource",
     {"type": "object", "properties": {
         "pruned": {"type": "object", "x-kubernetes-embedded-resource": True,
                    "properties": {"spec": {"type": "object"}}},
         "preserving": {"type": "object", "x-kubernetes-embedded-resource": True,
                        "x-kubernetes-preserve-unknown-fields": True}}},
     {"apiVersion": "foo/v1", "unspecified": "bar",
      "pruned": {"apiVersion": "foo/v1", "kind": "Foo", "unspecified": "bar",
                 "metadata": {"name": "instance"}, "spec": {"unspecified": "bar"}},
      "preserving": {"apiVersion": "foo/v1", "kind": "Foo", "unspecified": "bar",
                     "metadata": {"name": "instance"}, "spec": {"unspecified": "bar"}}},
     {"pruned": {"apiVersion": "foo/v1", "kind": "Foo", "metadata": {"name": "instance"},
                 "spec": {}},
      "preserving": {"apiVersion": "foo/v1", "kind": "Foo", "unspecified": "bar",
                     "metadata": {"name": "instance"}, "spec": {"unspecified": "bar"}}}),
]


@pytest.mark.parametrize(("case", "schema", "spec", "expected"), PRUNING_CASES,
                         ids=[c[0] for c in PRUNING_CASES])
def test_unknown_fields_are_pruned(api_client: client.ApiClient, objects: client.CustomObjectsApi,
                                   case: str, schema: Obj, spec: Any, expected: Any) -> None:
    plural = install(api_client, typed(schema))
    created = create(objects, plural, thing("p", spec))
    assert created["spec"] == expected
    read = objects.get_namespaced_custom_object(GROUP, "v1", "default", plural, "p")
    assert read["spec"] == expected


# Defaulting: TestDefault -----------------------------------------------------------------------

DEFAULTING_CASES: list[tuple[str, Obj, Any, Any]] = [
    ("object array", {"items": {"properties": {"a": {"default": "A"}, "b": {"default": "B"},
                                               "c": {"default": "C"}}}},
     [{"a": 1}, {"b": 1}, {"c": 1}],
     [{"a": 1, "b": "B", "c": "C"}, {"a": "A", "b": 1, "c": "C"}, {"a": "A", "b": "B", "c": 1}]),
    ("object array object",
     {"properties": {
         "array": {"items": {"properties": {"a": {"default": "A"}, "b": {"default": "B"}}}},
         "object": {"properties": {"a": {"default": "N"}, "b": {"default": "O"}}},
         "additionalProperties": {"additionalProperties": {"properties": {
             "a": {"default": "alpha"}, "b": {"default": "beta"}}}},
         "foo": {"default": "bar"}}},
     {"array": [{"a": 1}, {"b": 2}], "object": {"a": 1},
      "additionalProperties": {"x": {"a": 1}, "y": {"b": 2}}},
     {"array": [{"a": 1, "b": "B"}, {"a": "A", "b": 2}], "object": {"a": 1, "b": "O"},
      "additionalProperties": {"x": {"a": 1, "b": "beta"}, "y": {"a": "alpha", "b": 2}},
      "foo": "bar"}),
    ("empty and null", {"items": {"properties": {"a": {"default": "A"}}}},
     [{}, {"a": 1}, {"a": 0}, {"a": ""}, {"a": None}, {"a": []}, {"a": {}}],
     [{"a": "A"}, {"a": 1}, {"a": 0}, {"a": ""}, {"a": "A"}, {"a": []}, {"a": {}}]),
    ("null in non-nullable list", {"items": {"default": "A"}}, [None], ["A"]),
    ("null in non-nullable object", {"properties": {"a": {"default": "A"}}}, {"a": None},
     {"a": "A"}),
    ("null in nullable object", {"properties": {"a": {"nullable": True, "default": "A"}}},
     {"a": None}, {"a": None}),
    ("null in non-nullable object with additionalProperties",
     {"additionalProperties": {"default": "A"}}, {"a": None}, {"a": "A"}),
]


@pytest.mark.parametrize(("case", "schema", "value", "expected"), DEFAULTING_CASES,
                         ids=[c[0] for c in DEFAULTING_CASES])
def test_defaults_are_applied_on_create(api_client: client.ApiClient,
                                        objects: client.CustomObjectsApi, case: str,
                                        schema: Obj, value: Any, expected: Any) -> None:
    plural = install(api_client, {"type": "object", "properties": {"value": typed(schema)}})
    created = create(objects, plural, thing("d", {"value": value}))
    assert created["spec"]["value"] == expected


def test_defaults_apply_on_update_and_on_read(api_client: client.ApiClient,
                                              objects: client.CustomObjectsApi,
                                              api: FakeKubeApi) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    spec = {"type": "object", "properties": {"replicas": {"type": "integer"},
                                             "mode": {"type": "string"}}}
    plural = install(api_client, spec)
    create(objects, plural, thing("r", {"replicas": 1}))
    stored = ext.read_custom_resource_definition(f"{plural}.{GROUP}")
    body = client.ApiClient().sanitize_for_serialization(stored)
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["mode"]["default"] = "fast"
    ext.replace_custom_resource_definition(f"{plural}.{GROUP}", body)
    read = objects.get_namespaced_custom_object(GROUP, "v1", "default", plural, "r")
    assert read["spec"] == {"replicas": 1, "mode": "fast"}  # read: defaulted, not stored
    listed = objects.list_namespaced_custom_object(GROUP, "v1", "default", plural)["items"]
    assert listed[0]["spec"]["mode"] == "fast"
    stream = watch.Watch()
    for event in stream.stream(objects.list_namespaced_custom_object, GROUP, "v1", "default",
                               plural, resource_version="0", timeout_seconds=5):
        assert event["object"]["spec"] == {"replicas": 1, "mode": "fast"}  # watch: a read too
        stream.stop()
    updated = objects.patch_namespaced_custom_object(GROUP, "v1", "default", plural, "r",
                                                     {"spec": {"mode": None, "replicas": 2}})
    assert updated["spec"] == {"replicas": 2, "mode": "fast"}  # a null takes the default


# /status and /scale ---------------------------------------------------------------------------

def test_status_and_scale_keep_their_rules_under_a_schema(
        api_client: client.ApiClient, objects: client.CustomObjectsApi) -> None:
    plural = install(api_client, {"type": "object", "properties": {
        "replicas": {"type": "integer", "minimum": 0, "maximum": 5}}},
        subresources={"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                              "statusReplicasPath": ".status.ready"}})
    body = {**thing("s", {"replicas": 1}), "status": {"ready": 7}}
    created = create(objects, plural, body)
    assert "status" not in created  # status is written through /status only
    status = objects.patch_namespaced_custom_object_status(
        GROUP, "v1", "default", plural, "s", {"spec": {"replicas": 3}, "status": {"ready": 2}})
    assert status["spec"]["replicas"] == 1 and status["status"]["ready"] == 2
    with pytest.raises(ApiException) as raised:
        objects.patch_namespaced_custom_object_status(
            GROUP, "v1", "default", plural, "s", {"status": {"ready": "two"}})
    assert refusal(raised.value)[1] == [
        'status.ready: Invalid value: "string": status.ready in body must be of type integer: '
        '"string"']
    with pytest.raises(ApiException) as raised:
        objects.patch_namespaced_custom_object_scale(GROUP, "v1", "default", plural, "s",
                                                     {"spec": {"replicas": 9}})
    assert raised.value.status == 422
    scaled = objects.patch_namespaced_custom_object_scale(GROUP, "v1", "default", plural, "s",
                                                          {"spec": {"replicas": 4}})
    assert scaled["spec"]["replicas"] == 4


# CEL --------------------------------------------------------------------------------------------

_RANGE = {"type": "object", "properties": {"minReplicas": {"type": "integer"},
                                           "maxReplicas": {"type": "integer"}},
          "x-kubernetes-validations": [{"rule": "self.minReplicas <= self.maxReplicas",
                                        "message": "minReplicas must not exceed maxReplicas"}]}


def test_cel_rules_are_evaluated(api_client: client.ApiClient,
                                 objects: client.CustomObjectsApi) -> None:
    pytest.importorskip("celpy")
    plural = install(api_client, _RANGE)
    create(objects, plural, thing("fine", {"minReplicas": 1, "maxReplicas": 2}))
    with pytest.raises(ApiException) as raised:
        create(objects, plural, thing("bad", {"minReplicas": 3, "maxReplicas": 2}))
    assert refusal(raised.value)[1] == [
        'spec: Invalid value: "object": minReplicas must not exceed maxReplicas']
    immutable = install(api_client, {"type": "object", "properties": {"field": {
        "type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}})
    create(objects, immutable, thing("t", {"field": "x"}))  # a transition rule: not on create
    with pytest.raises(ApiException) as raised:
        objects.patch_namespaced_custom_object(GROUP, "v1", "default", immutable, "t",
                                               {"spec": {"field": "y"}})
    assert refusal(raised.value)[1] == [
        'spec.field: Invalid value: "string": failed rule: self == oldSelf']


def test_a_crd_with_cel_rules_is_refused_without_a_cel_library(
        api_client: client.ApiClient, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "celpy", None)  # as if cel-python were not installed
    with pytest.raises(ApiException) as raised:
        install(api_client, _RANGE)
    status, causes = refusal(raised.value)
    assert raised.value.status == 422
    assert status["reason"] == "Invalid"
    assert causes == [
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0]: "
        "Forbidden: CEL validation rules (x-kubernetes-validations) are not supported by this "
        "fake API server without the cel-python package (pip install "
        "'kube-elevator[cel]')"]


# kubectl ----------------------------------------------------------------------------------------

@needs_kubectl
def test_kubectl_sees_the_servers_refusal(api: FakeKubeApi, api_client: client.ApiClient,
                                          tmp_path: Any) -> None:
    plural = install(api_client, {"type": "object", "required": ["replicas"], "properties": {
        "replicas": {"type": "integer", "maximum": 3}}})
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")

    def kubectl(*args: str, body: Obj) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir",
                               str(tmp_path / "cache"), *args, "--validate=false", "-f", "-"],
                              input=yaml.safe_dump(body), capture_output=True, text=True,
                              timeout=scaled(60), check=False)

    done = kubectl("create", body={**thing("k", {"replicas": 4, "extra": 1}),
                                   "metadata": {"name": "k", "namespace": "default"}})
    assert done.returncode != 0
    assert ('The Thing "k" is invalid: spec.replicas: Invalid value: 4: spec.replicas in body '
            "should be less than or equal to 3") in done.stderr
    done = kubectl("create", body={**thing("k", {"replicas": 2, "extra": 1}),
                                   "metadata": {"name": "k", "namespace": "default"}})
    assert done.returncode == 0, done.stderr
    assert api.get(plural, "k", namespace="default")["spec"] == {"replicas": 2}  # pruned
