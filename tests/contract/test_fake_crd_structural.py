"""A CRD whose schema is not structural, or breaks apiextensions' v1 rules, is refused at create
with the API server's 422, over HTTP with the official client.

The rules and their words: kubernetes staging/src/k8s.io/apiextensions-apiserver
pkg/apiserver/schema/validation.go (ValidateStructural: validateStructuralInvariants,
validateNestedValueValidation) and pkg/apis/apiextensions/validation/validation.go; the cases
follow pkg/apiserver/schema/validation_test.go's kinds (a typeless field, a typed value
validation, metadata beyond name and generateName, an array without items, ...)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube_elevator.fakes.kube_api.server import FakeKubeApi

Obj = dict[str, Any]
GROUP = "structural.example.com"
ROOT = "spec.versions[0].schema.openAPIV3Schema"
_PLURALS = (f"shapes{i}" for i in itertools.count())


@pytest.fixture(scope="module")
def ext(api: FakeKubeApi) -> Iterator[client.ApiextensionsV1Api]:
    with api.api_client() as c:
        yield client.ApiextensionsV1Api(c)


def crd(plural: str, schema: Any) -> Obj:
    version: Obj = {"name": "v1", "served": True, "storage": True}
    if schema is not None:
        version["schema"] = {"openAPIV3Schema": schema}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     # a kind of its own: two CRDs of one group may not share one
                     # (naming_controller.go KindConflict)
                     "names": {"plural": plural, "kind": plural.capitalize()},
                     "versions": [version]}}


def _spec(schema: Obj) -> Obj:
    return {"type": "object", "properties": {"spec": schema}}


REFUSED: list[tuple[str, Any, list[str]]] = [
    ("a field without a type", _spec({"type": "object", "properties": {"a": {}}}),
     [f"{ROOT}.properties[spec].properties[a].type: Required value: must not be empty for "
      "specified object fields"]),
    ("array items without a type", _spec({"type": "array", "items": {}}),
     [f"{ROOT}.properties[spec].items.type: Required value: must not be empty for specified "
      "array items"]),
    ("no type at the root", {"properties": {"spec": {"type": "object"}}},
     [f"{ROOT}.type: Required value: must not be empty at the root"]),
    ("a string at the root", {"type": "string"},
     [f'{ROOT}.type: Invalid value: "string": must be object at the root']),
    ("an array without items", _spec({"type": "array"}),
     [f"{ROOT}.properties[spec].items: Required value: must be specified"]),
    ("a type in a value validation", _spec({"type": "object", "anyOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}}],
        "properties": {"a": {"type": "string"}}}),
     [f"{ROOT}.properties[spec].anyOf[0].properties[a].type: Forbidden: must be empty to be "
      "structural",
      f"{ROOT}.properties[spec].anyOf[0].type: Forbidden: must be empty to be structural"]),
    ("a default in a value validation", _spec({"type": "object", "allOf": [{"default": {}}]}),
     [f"{ROOT}.properties[spec].allOf[0].default: Forbidden: must be undefined to be "
      "structural"]),
    ("metadata beyond name and generateName", {"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}},
     [f"{ROOT}.properties[metadata]: Forbidden: must not specify anything other than name and "
      "generateName, but metadata is implicitly specified"]),
    ("additionalProperties with properties", _spec({
        "type": "object", "properties": {"a": {"type": "string"}},
        "additionalProperties": {"type": "string"}}),
     [f"{ROOT}.properties[spec].additionalProperties: Forbidden: additionalProperties and "
      "properties are mutual exclusive"]),
    ("x-kubernetes-preserve-unknown-fields false", _spec({
        "type": "object", "x-kubernetes-preserve-unknown-fields": False}),
     [f"{ROOT}.properties[spec].x-kubernetes-preserve-unknown-fields: Invalid value: false: "
      "must be true or undefined"]),
    ("an embedded resource that is not an object", _spec({
        "type": "string", "x-kubernetes-embedded-resource": True}),
     [f'{ROOT}.properties[spec].type: Invalid value: "string": must be object if '
      "x-kubernetes-embedded-resource is true",
      f"{ROOT}.properties[spec].properties: Required value: must not be empty if "
      "x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"]),
    ("uniqueItems", _spec({"type": "array", "uniqueItems": True, "items": {"type": "string"}}),
     [f"{ROOT}.properties[spec].uniqueItems: Forbidden: uniqueItems cannot be set to true "
      "since the runtime complexity becomes quadratic"]),
    ("a map list without keys", _spec({"type": "array", "x-kubernetes-list-type": "map",
                                       "items": {"type": "object"}}),
     [f"{ROOT}.properties[spec].x-kubernetes-list-map-keys: Required value: must not be empty "
      "if x-kubernetes-list-type is map"]),
    ("a default of the wrong type", _spec({"type": "object", "properties": {
        "replicas": {"type": "integer", "default": "one"}}}),
     [f'{ROOT}.properties[spec].properties[replicas].default: Invalid value: "string": '
      'default in body must be of type integer: "string"']),
    ("no schema", None, [f"{ROOT}: Required value: schemas are required"]),
]


@pytest.mark.parametrize(("case", "schema", "expected"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_schema_apiextensions_does_not_accept_is_refused(
        ext: client.ApiextensionsV1Api, api: FakeKubeApi, case: str, schema: Any,
        expected: list[str]) -> None:
    plural = next(_PLURALS)
    with pytest.raises(ApiException) as raised:
        ext.create_custom_resource_definition(crd(plural, schema))
    status: Obj = json.loads(raised.value.body)
    assert raised.value.status == 422
    assert sorted(f"{c['field']}: {c['message']}" for c in status["details"]["causes"]) == \
        sorted(expected)
    if len(expected) == 1:
        assert status["message"] == (f'CustomResourceDefinition.apiextensions.k8s.io '
                                     f'"{plural}.{GROUP}" is invalid: {expected[0]}')
    assert (f"{plural}.{GROUP}") not in {
        c["metadata"]["name"] for c in api.list("customresourcedefinitions")}
    assert all(r.plural != plural for r in api._types.values())


ACCEPTED: list[tuple[str, Obj]] = [
    ("preserve-unknown-fields at the root", {"type": "object",
                                             "x-kubernetes-preserve-unknown-fields": True}),
    ("int-or-string without a type", _spec({"type": "object", "properties": {
        "port": {"x-kubernetes-int-or-string": True}}})),
    ("int-or-string with its anyOf", _spec({"type": "object", "properties": {"port": {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}]}}})),
    ("metadata naming name only", {"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string",
                                                               "maxLength": 10}}}}}),
    ("an embedded resource", _spec({"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": True,
        "x-kubernetes-preserve-unknown-fields": True}}})),
]


@pytest.mark.parametrize(("case", "schema"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_a_structural_schema_is_accepted(ext: client.ApiextensionsV1Api, case: str,
                                         schema: Obj) -> None:
    plural = next(_PLURALS)
    created = ext.create_custom_resource_definition(crd(plural, schema))
    assert {c.type: c.status for c in created.status.conditions}["Established"] == "True"


def test_the_switch_turns_the_layers_off(ext: client.ApiextensionsV1Api,
                                         api: FakeKubeApi) -> None:
    api.crd_schema_layers = False
    try:
        plural = next(_PLURALS)
        ext.create_custom_resource_definition(crd(plural, _spec({"properties": {"a": {}}})))
    finally:
        api.crd_schema_layers = True
    assert f"{plural}.{GROUP}" in {c["metadata"]["name"]
                                   for c in api.list("customresourcedefinitions")}
