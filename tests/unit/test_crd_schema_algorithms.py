"""The CRD schema algorithms as functions, on upstream's own tables (schemas that need not be
structural, so cases the HTTP tests cannot send):

- pruning: kubernetes staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning/
  algorithm_test.go (TestPrune), re-expressed;
- defaulting: .../pkg/apiserver/schema/defaulting/algorithm_test.go (TestDefault), re-expressed
  (our `defaulted` also drops a null the schema does not allow when it has no default, as
  PruneNonNullableNullsWithoutDefaults does after it);
- a CRD refused whole, in-process, with a ValueError naming the rule."""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.fakes.kube_api.crd_schema.defaulting import defaulted
from kube_elevator.fakes.kube_api.crd_schema.pruning import pruned, unknown_field_paths
from kube_elevator.fakes.kube_api.server import FakeKubeApi

# name, value, schema, root, expected object, expected pruned paths
PRUNE: list[tuple[str, Any, Any, bool, Any, list[str]]] = [
    ("empty", None, None, False, None, []),
    ("scalar", 4, {}, False, 4, []),
    ("scalar array", [1, 2], {"items": {}}, False, [1, 2], []),
    ("object array", [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}],
     {"items": {"properties": {"a": {}, "c": {}}}}, False,
     [{"a": 1}, {}, {"a": 1, "c": 3}], ["[1].b", "[2].b"]),
    ("object array object",
     {"array": [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}], "unspecified": {"a": 1},
      "specified": {"a": 1, "b": 2, "c": 3}},
     {"properties": {"array": {"items": {"properties": {"a": {}, "c": {}}}},
                     "specified": {"properties": {"a": {}, "c": {}}}}}, False,
     {"array": [{"a": 1}, {}, {"a": 1, "c": 3}], "specified": {"a": 1, "c": 3}},
     ["array[1].b", "array[2].b", "specified.b", "unspecified"]),
    ("additionalProperties with schema", {"a": 1, "b": 1, "c": {"a": 1, "b": 2, "c": {"a": 1}}},
     {"properties": {"a": {}, "c": {"additionalProperties": {"type": "integer"}}}}, False,
     {"a": 1, "c": {"a": 1, "b": 2, "c": {}}}, ["b", "c.c.a"]),
    # (upstream's "additionalProperties with bool" is left out: a CRD with
    # `additionalProperties: false` is refused at install, so no object meets it here.)
    ("x-kubernetes-embedded-resource, with root=true",
     {"apiVersion": "foo/v1", "kind": "Foo", "metadata": {"name": "instance"},
      "unspecified": "bar",
      "pruned": {"apiVersion": "foo/v1", "kind": "Foo", "unspecified": "bar",
                 "metadata": {"name": "instance"}, "spec": {"unspecified": "bar"}}},
     {"type": "object", "properties": {"pruned": {
         "type": "object", "x-kubernetes-embedded-resource": True,
         "properties": {"spec": {"type": "object"}}}}}, True,
     {"apiVersion": "foo/v1", "kind": "Foo", "metadata": {"name": "instance"},
      "pruned": {"apiVersion": "foo/v1", "kind": "Foo", "metadata": {"name": "instance"},
                 "spec": {}}},
     ["pruned.spec.unspecified", "pruned.unspecified", "unspecified"]),
]


@pytest.mark.parametrize(("name", "value", "schema", "root", "expected", "paths"), PRUNE,
                         ids=[c[0] for c in PRUNE])
def test_prune(name: str, value: Any, schema: Any, root: bool, expected: Any,
               paths: list[str]) -> None:
    if schema is None:  # upstream: a nil schema prunes every field; here no schema, no pruning
        assert pruned(value, schema) == value
        return
    assert pruned(value, schema, root=root) == expected
    assert sorted(unknown_field_paths(value, schema, root=root)) == paths


DEFAULT: list[tuple[str, Any, Any, Any]] = [
    ("empty", None, None, None),
    ("scalar", 4, {"default": "foo"}, 4),
    ("scalar array", [1, 2], {"items": {"default": "foo"}}, [1, 2]),
    ("object array", [{"a": 1}, {"b": 1}, {"c": 1}],
     {"items": {"properties": {"a": {"default": "A"}, "b": {"default": "B"},
                               "c": {"default": "C"}}}},
     [{"a": 1, "b": "B", "c": "C"}, {"a": "A", "b": 1, "c": "C"}, {"a": "A", "b": "B", "c": 1}]),
    ("empty and null", [{}, {"a": 1}, {"a": 0}, {"a": 0.0}, {"a": ""}, {"a": None}, {"a": []},
                        {"a": {}}],
     {"items": {"properties": {"a": {"default": "A"}}}},
     [{"a": "A"}, {"a": 1}, {"a": 0}, {"a": 0.0}, {"a": ""}, {"a": "A"}, {"a": []}, {"a": {}}]),
    ("null in nullable list", [None],
     {"nullable": True, "items": {"properties": {"a": {"default": "A"}}}}, [None]),
    ("null in non-nullable list", [None], {"items": {"default": "A"}}, ["A"]),
    ("null in nullable object", {"a": None},
     {"properties": {"a": {"nullable": True, "default": "A"}}}, {"a": None}),
    ("null in non-nullable object", {"a": None}, {"properties": {"a": {"default": "A"}}},
     {"a": "A"}),
    ("null in nullable object with additionalProperties", {"a": None},
     {"additionalProperties": {"nullable": True, "default": "A"}}, {"a": None}),
    ("null in non-nullable object with additionalProperties", {"a": None},
     {"additionalProperties": {"default": "A"}}, {"a": "A"}),
    ("null unknown field", {"a": None}, {"additionalProperties": True}, {"a": None}),
]


@pytest.mark.parametrize(("name", "value", "schema", "expected"), DEFAULT,
                         ids=[c[0] for c in DEFAULT])
def test_default(name: str, value: Any, schema: Any, expected: Any) -> None:
    before = repr(value)
    assert defaulted(value, schema) == expected
    assert repr(value) == before  # the caller's value is not modified


def test_install_crd_refuses_a_non_structural_schema_with_a_value_error() -> None:
    api = FakeKubeApi()  # not started: the store alone
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {
                                      "type": "object", "properties": {"spec": {}}}}}]}}
    with pytest.raises(ValueError, match=r"properties\[spec\]\.type: Required value: must not "
                                         r"be empty for specified object fields"):
        api.install_crd(crd)
    assert "widgets" not in api._types
