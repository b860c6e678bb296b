"""Custom objects defaulted and pruned by their CRD's schema: kubernetes
staging/src/k8s.io/apiextensions-apiserver/test/integration/defaulting_test.go
(TestCustomResourceDefaulting, TestStatusDefaulting) and pruning_test.go (TestPruningCreate,
TestPruningStatus, TestPruningPatch, TestPruningCreatePreservingUnknownFields,
TestPruningEmbeddedResources; TestPruningFromStorage writes to etcd behind the server's back
and has no HTTP equivalent).

Adaptations to apiextensions.k8s.io/v1 (see cases_crd_validation.py): a defaulted property has
a type (`integer`), and the status-defaulting schema keeps unknown fields at its root (its
v1beta1 original did not prune). Upstream's chained steps (a default added to the schema, read
back, removed, read back...) are one case per assertion, each replaying the steps before it.
"""

from __future__ import annotations

from typing import Any

import yaml

from tests.replay.cases_crd_validation import instance, validation_schema
from tests.replay.crd_fixtures import (
    NOXU_GROUP,
    NOXU_KIND,
    collection,
    crd,
    crd_patch,
    fresh,
    noxu_crd,
    version,
)
from tests.replay.model import (
    ABSENT,
    CRD_DEFAULTING,
    CRD_PRUNING,
    PRESENT,
    Case,
    Expect,
    Obj,
    Request,
)

DEFAULTING = "staging/src/k8s.io/apiextensions-apiserver/test/integration/defaulting_test.go"
PRUNING = "staging/src/k8s.io/apiextensions-apiserver/test/integration/pruning_test.go"


def _with_defaults(**defaults: int) -> list[Obj]:
    schema = validation_schema()
    schema["properties"] = {**schema["properties"],
                            **{name: {"type": "integer", "default": value}
                               for name, value in defaults.items()}}
    return [version("v1beta1", schema, storage=True)]


def _defaulting_cases() -> list[Case]:
    """TestCustomResourceDefaulting, one case per check, each after the steps before it."""
    definition = noxu_crd(_with_defaults(default=42))
    path = collection(definition, "v1beta1")
    create = Request("POST", path, instance("v1beta1"))
    read = Request("GET", f"{path}/foo")
    add_second = crd_patch(definition, _with_defaults(default=42, default2=42))
    drop_both = crd_patch(definition, _with_defaults())
    both_43 = crd_patch(definition, _with_defaults(default=43, default2=43))
    # Upstream updates the object without default2 (removed to have it defaulted again).
    without_second = Request("PATCH", f"{path}/foo", {"default2": None},
                             "application/merge-patch+json")
    only_third = crd_patch(definition, _with_defaults(default3=44))
    test = "TestCustomResourceDefaulting"
    chain: tuple[tuple[str, tuple[Request, ...], dict[str, Any]], ...] = (
        ("created with default", (create,), {"default": 42}),
        ("read with default", (create, read), {"default": 42}),
        ("a default added to the schema shows on read", (create, add_second, read),
         {"default": 42, "default2": 42}),
        ("defaults removed: the persisted one stays, the other goes",
         (create, add_second, drop_both, read), {"default": 42, "default2": ABSENT}),
        ("an update persists the new default, the old value stays",
         (create, add_second, drop_both, both_43, without_second),
         {"default": 42, "default2": 43}),
        ("persisted defaults stay when the schema drops them",
         (create, add_second, drop_both, both_43, without_second, only_third, read),
         {"default": 42, "default2": 43, "default3": 44}),
    )
    return [Case(f"{test}/{title}", CRD_DEFAULTING, DEFAULTING, test,
                 (*fresh(definition), *steps), Expect(status=200 if steps[-1] is not create
                                                      else 201, fields=fields))
            for title, steps, fields in chain]


def _status_defaulting_cases() -> list[Case]:
    """TestStatusDefaulting: a status default applies when status is written, not before."""
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "status": {"type": "object", "properties": {
            "num": {"type": "integer", "default": 42}}}}}
    definition = noxu_crd([version("v1beta1", schema, storage=True,
                                   subresources={"status": {}})])
    path = collection(definition, "v1beta1", "default")
    body = {"apiVersion": f"{NOXU_GROUP}/v1beta1", "kind": NOXU_KIND,
            "metadata": {"namespace": "default", "name": "foo"},
            "spec": {"num": 10, "replicas": 3}}
    status_write = {**body, "metadata": {**body["metadata"], "resourceVersion": "{rv}"},
                    "status": {}}
    test = "TestStatusDefaulting"
    return [
        Case(f"{test}/no status on create", CRD_DEFAULTING, DEFAULTING, test,
             (*fresh(definition, None), Request("POST", path, body)),
             Expect(status=201, fields={"status": ABSENT})),
        Case(f"{test}/status defaulted when written", CRD_DEFAULTING, DEFAULTING, test,
             (*fresh(definition, None), Request("POST", path, body),
              Request("PUT", f"{path}/foo/status", status_write)),
             Expect(status=200, fields={"status.num": 42})),
    ]


_FOO_SCHEMA = "type: object\nproperties:\n  alpha:\n    type: string\n  beta:\n    type: number\n"
_PRESERVING_SCHEMA = """
type: object
x-kubernetes-preserve-unknown-fields: true
properties:
  alpha: {type: string}
  beta: {type: number}
  preserving:
    type: object
    x-kubernetes-preserve-unknown-fields: true
    properties:
      preserving: {type: object, x-kubernetes-preserve-unknown-fields: true}
      pruning: {type: object}
  pruning:
    type: object
    properties:
      preserving: {type: object, x-kubernetes-preserve-unknown-fields: true}
      pruning: {type: object}
"""
_EMBEDDED_SCHEMA = """
type: object
properties:
  embeddedPruning:
    type: object
    x-kubernetes-embedded-resource: true
    properties:
      specified: {type: string}
  embeddedPreserving:
    type: object
    x-kubernetes-embedded-resource: true
    x-kubernetes-preserve-unknown-fields: true
  embeddedNested:
    type: object
    x-kubernetes-embedded-resource: true
    x-kubernetes-preserve-unknown-fields: true
    properties:
      embeddedPruning:
        type: object
        x-kubernetes-embedded-resource: true
        properties:
          specified: {type: string}
"""


def _foo_crd(schema_yaml: str) -> Obj:
    """pruningFixture: cluster-scoped `foos` with a status subresource."""
    return crd("foos", "tests.example.com", "Foo",
               [version("v1beta1", yaml.safe_load(schema_yaml), storage=True,
                        subresources={"status": {}})], scope="Cluster", list_kind="FooList")


def _embedded(**extra: Any) -> Obj:
    return {"apiVersion": "foo/v1", "kind": "Foo",
            "metadata": {"name": "foo", "unspecified": "bar"}, "unspecified": "bar", **extra}


def _pruning_cases() -> list[Case]:
    foo: Obj = {"kind": "Foo", "apiVersion": "tests.example.com/v1beta1",
                "metadata": {"name": "foo"}}
    with_unknown = {**foo, "unspecified": "bar", "alpha": "abc", "beta": 42.0,
                    "metadata": {"name": "foo", "unspecified": "bar", "labels": {"foo": "bar"}}}
    checks = {"unspecified": ABSENT, "alpha": "abc", "beta": 42, "metadata.unspecified": ABSENT,
              "metadata.labels.foo": "bar"}
    simple = _foo_crd(_FOO_SCHEMA)
    path = collection(simple, "v1beta1", None)
    status_crd = _foo_crd("type: object\nproperties:\n  status:\n" + "\n".join(
        "    " + line for line in _FOO_SCHEMA.splitlines()) + "\n")
    status_write = {**foo, "metadata": {"name": "foo", "unspecified": "bar",
                                        "resourceVersion": "{rv}"},
                    "status": {"unspecified": "bar", "alpha": "abc", "beta": 42.0}}
    nested = {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
              "pruning": {"unspecified": "bar"}, "preserving": {"unspecified": "bar"}}
    preserving = _foo_crd(_PRESERVING_SCHEMA)
    kept = ("unspecified", "alpha", "beta", "metadata.labels.foo", "pruning.pruning",
            "pruning.preserving", "pruning.preserving.unspecified", "preserving.unspecified",
            "preserving.unspecifiedObject", "preserving.unspecifiedObject.unspecified",
            "preserving.pruning", "preserving.preserving", "preserving.preserving.unspecified")
    gone = ("metadata.unspecified", "pruning.unspecified", "pruning.unspecifiedObject",
            "pruning.unspecifiedObject.unspecified", "pruning.pruning.unspecified",
            "preserving.pruning.unspecified")
    embedded = _foo_crd(_EMBEDDED_SCHEMA)
    embedded_body = {**foo,
                     "embeddedPruning": _embedded(specified="bar"),
                     "embeddedPreserving": _embedded(),
                     "embeddedNested": _embedded(embeddedPruning=_embedded(specified="bar"))}
    bare = {"apiVersion": "foo/v1", "kind": "Foo", "metadata": {"name": "foo"}}
    return [
        Case("TestPruningCreate", CRD_PRUNING, PRUNING, "TestPruningCreate",
             (*fresh(simple, None), Request("POST", path, with_unknown)),
             Expect(status=201, fields=checks)),
        Case("TestPruningStatus", CRD_PRUNING, PRUNING, "TestPruningStatus",
             (*fresh(status_crd, None), Request("POST", path, foo),
              Request("PUT", f"{path}/foo/status", status_write)),
             Expect(status=200, fields={"status.unspecified": ABSENT, "status.alpha": "abc",
                                        "status.beta": 42, "metadata.unspecified": ABSENT})),
        Case("TestPruningPatch", CRD_PRUNING, PRUNING, "TestPruningPatch",
             (*fresh(simple, None), Request("POST", path, foo),
              Request("PATCH", f"{path}/foo", {
                  "alpha": "abc", "beta": 42.0, "unspecified": "bar",
                  "metadata": {"unspecified": "bar", "labels": {"foo": "bar"}}},
                  "application/merge-patch+json")),
             Expect(status=200, fields=checks)),
        Case("TestPruningCreatePreservingUnknownFields", CRD_PRUNING, PRUNING,
             "TestPruningCreatePreservingUnknownFields",
             (*fresh(preserving, None),
              Request("POST", path, {**with_unknown, "pruning": nested, "preserving": nested})),
             Expect(status=201, fields={**{p: PRESENT for p in kept},
                                        **{p: ABSENT for p in gone}})),
        Case("TestPruningEmbeddedResources", CRD_PRUNING, PRUNING,
             "TestPruningEmbeddedResources",
             (*fresh(embedded, None), Request("POST", path, embedded_body)),
             Expect(status=201, fields={
                 "embeddedPruning": {**bare, "specified": "bar"},
                 "embeddedPreserving": {**bare, "unspecified": "bar"},
                 "embeddedNested": {**bare, "unspecified": "bar",
                                    "embeddedPruning": {**bare, "specified": "bar"}}})),
    ]


CASES: list[Case] = [*_defaulting_cases(), *_status_defaulting_cases(), *_pruning_cases()]
