"""Custom objects validated against their CRD's schema: kubernetes
staging/src/k8s.io/apiextensions-apiserver/test/integration/validation_test.go
(TestForProperValidationErrors, TestCustomResourceValidation, TestCustomResourceItemsValidation,
TestCustomResourceUpdateValidation, TestCustomResourceValidationErrors,
TestCRValidationOnCRDUpdate, TestForbiddenFieldsInSchema).

Upstream still writes these CRDs as apiextensions.k8s.io/v1beta1 (a server converts them); here
they are v1, as a user writes them today, which asks two adaptations: the root's
`additionalProperties: true` (not allowed beside `properties` in v1) becomes
`x-kubernetes-preserve-unknown-fields: true`, the same behaviour; and `delta`, an `anyOf` of a
typed string and a typed number that a v1 (structural) schema cannot say, is an int-or-string
without that `anyOf`, so the "bad delta" case is left out.
"""

from __future__ import annotations

from typing import Any

from tests.replay.crd_fixtures import (
    ALLOW_ALL,
    NAMESPACE,
    NOXU_GROUP,
    NOXU_KIND,
    collection,
    crd,
    crd_patch,
    fresh,
    noxu_crd,
    version,
)
from tests.replay.model import CRD_VALIDATION, Case, Expect, Obj, Request

SOURCE = "staging/src/k8s.io/apiextensions-apiserver/test/integration/validation_test.go"
VERSIONS = ("v1beta1", "v1")


def validation_schema(required: tuple[str, ...] = ("alpha", "beta"), **extra: Any) -> Obj:
    """newNoxuValidationCRDs' schema, in v1 words."""
    return {
        "type": "object", "required": list(required),
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "alpha": {"type": "string", "pattern": "^[a-zA-Z0-9_]*$",
                      "description": "Alpha is an alphanumeric string with underscores"},
            "beta": {"type": "number", "minimum": 10,
                     "description": "Minimum value of beta is 10"},
            "gamma": {"type": "string", "enum": ["foo", "bar", "baz"],
                      "description": "Gamma is restricted to foo, bar and baz"},
            "delta": {"x-kubernetes-int-or-string": True},
        },
        **extra,
    }


def validation_crd(schema: Obj | None = None) -> Obj:
    schema = schema or validation_schema()
    return noxu_crd([version("v1beta1", schema, storage=True),
                     version("v1", {**schema, "description": "test"})])


def instance(version_name: str, name: str = "foo", **fields: Any) -> Obj:
    """newNoxuValidationInstance."""
    body: Obj = {"apiVersion": f"{NOXU_GROUP}/{version_name}", "kind": NOXU_KIND,
                 "metadata": {"namespace": NAMESPACE, "name": name},
                 "alpha": "foo_123", "beta": 10, "gamma": "bar", "delta": "hello"}
    body.update(fields)
    return body


def _proper_errors() -> list[Case]:
    """TestForProperValidationErrors: the noxu fixture without a schema of its own."""
    definition = noxu_crd([version("v1beta1", ALLOW_ALL, storage=True)])
    noxu = {"apiVersion": f"{NOXU_GROUP}/v1beta1", "kind": NOXU_KIND,
            "metadata": {"namespace": NAMESPACE, "name": "foo"},
            "content": {"key": "value"}, "num": {"num1": 9223372036854775807, "num2": 1000000}}
    path = collection(definition, "v1beta1")
    test = "TestForProperValidationErrors"
    return [
        Case(f"{test}/bad version", CRD_VALIDATION, SOURCE, f"{test}/bad version",
             (*fresh(definition), Request("POST", path, {**noxu, "apiVersion":
                                                          f"{NOXU_GROUP}/v2"})),
             Expect(message_contains=(
                 f"the API version in the data ({NOXU_GROUP}/v2) does not match the expected "
                 f"API version ({NOXU_GROUP}/v1beta1)",))),
        Case(f"{test}/bad kind", CRD_VALIDATION, SOURCE, f"{test}/bad kind",
             (*fresh(definition), Request("POST", path, {**noxu, "kind": "SomethingElse"})),
             Expect(message_contains=(
                 f'SomethingElse.{NOXU_GROUP} "foo" is invalid: kind: Invalid value: '
                 f'"SomethingElse": must be {NOXU_KIND}',))),
    ]


_ERRORS: tuple[tuple[str, dict[str, Any] | None, tuple[str, ...]], ...] = (
    ("bad alpha", {"alpha": "foo_123!"}, ("alpha in body should match '^[a-zA-Z0-9_]*$'",)),
    ("bad beta", {"beta": 5}, ("beta in body should be greater than or equal to 10",)),
    ("bad gamma", {"gamma": "qux"},
     ('gamma: Unsupported value: "qux": supported values: "foo", "bar", "baz"',)),
    ("absent alpha and beta", None, ("alpha: Required value", "beta: Required value")),
)


def _schema_cases() -> list[Case]:
    definition = validation_crd()
    cases: list[Case] = []
    for v in VERSIONS:
        path = collection(definition, v)
        test = f"TestCustomResourceValidation/{v}"
        cases.append(Case(test, CRD_VALIDATION, SOURCE, test,
                          (*fresh(definition), Request("POST", path, instance(v))),
                          Expect(status=201, fields={"alpha": "foo_123", "beta": 10})))
        # Upstream replaces the whole object (no resourceVersion) without alpha and beta.
        invalidated = {"apiVersion": f"{NOXU_GROUP}/v1beta1", "kind": NOXU_KIND,
                       "metadata": {"namespace": NAMESPACE, "name": "foo"},
                       "gamma": "bar", "delta": "hello"}
        test = f"TestCustomResourceUpdateValidation/{v}"
        cases.append(Case(test, CRD_VALIDATION, SOURCE, test,
                          (*fresh(definition), Request("POST", path, instance(v)),
                           Request("GET", f"{path}/foo"),
                           Request("PUT", f"{path}/foo", {**invalidated,
                                                          "apiVersion": f"{NOXU_GROUP}/{v}"})),
                          Expect(status=422, reason="Invalid")))
        for title, change, words in _ERRORS:
            body = instance(v, **(change or {}))
            if change is None:
                body = {key: value for key, value in body.items()
                        if key not in ("alpha", "beta")}
            test = f"TestCustomResourceValidationErrors/{title}/{v}"
            cases.append(Case(test, CRD_VALIDATION, SOURCE, test,
                              (*fresh(definition), Request("POST", path, body)),
                              Expect(status=422, reason="Invalid", message_contains=words)))
        # A stricter schema refuses the instance; relaxed, the same instance is taken.
        strict = validation_schema(("alpha", "beta", "epsilon"))
        strict_crd = noxu_crd([version("v1beta1", strict, storage=True), version("v1", strict)])
        relaxed = [version("v1beta1", validation_schema(), storage=True),
                   version("v1", validation_schema())]
        test = f"TestCRValidationOnCRDUpdate/{v}"
        cases.append(Case(f"{test}/rejected", CRD_VALIDATION, SOURCE, test,
                          (*fresh(strict_crd), Request("POST", path, instance(v))),
                          Expect(status=422, reason="Invalid",
                                 message_contains=("epsilon: Required value",))))
        cases.append(Case(f"{test}/accepted once relaxed", CRD_VALIDATION, SOURCE, test,
                          (*fresh(strict_crd), crd_patch(strict_crd, relaxed),
                           Request("POST", path, instance(v))),
                          Expect(status=201)))
    return cases


def _items_case() -> Case:
    """TestCustomResourceItemsValidation: `items` and `type` as property names, and items
    schemas without a type of their own."""
    obj_array = {"type": "array", "items": {"type": "object"}}
    schema: Obj = {"type": "object", "properties": {
        "items-no-type": {"type": "object", "properties": {"items": obj_array}},
        "items-items-no-type": {"type": "object", "properties": {"items": {
            "type": "array", "items": {"type": "array", "items": {"type": "object"}}}}},
        "items-properties-items-no-type": {"type": "object", "properties": {"items": {
            "type": "array", "items": {"type": "object", "properties": {"items": obj_array}}}}},
        "type-array-no-items": {"type": "object", "properties": {"type": {"type": "string"}}},
        "items-and-type": {"type": "object", "properties": {
            "type": {"type": "string"}, "items": obj_array}},
        "default-with-items-and-no-type": {"type": "object", "default": {"items": []},
                                           "properties": {"type": {"type": "string"},
                                                          "items": obj_array}},
        "issue-84880": {"type": "object", "properties": {"volumes": {
            "type": "array", "items": {"type": "object", "properties": {"downwardAPI": {
                "type": "object", "properties": {"items": {
                    "type": "array", "items": {"type": "object", "required": ["path"],
                                               "properties": {"path": {"type": "string"}}}}}}}}}}},
    }}
    definition = crd("foos", "tests.example.com", "Foo",
                     [version("v1beta1", schema, storage=True)], scope="Cluster",
                     list_kind="Foolist")
    body = {"apiVersion": "tests.example.com/v1beta1", "kind": "Foo",
            "metadata": {"name": "foo"},
            "items-no-type": {"items": [{}]},
            "items-items-no-type": {"items": [[{}]]},
            "items-properties-items-no-type": {"items": [{"items": [{}]}]},
            "type-array-no-items": {"type": "array"},
            "items-and-type": {"items": [{}], "type": "array"},
            "issue-84880": {"volumes": [{"downwardAPI": {"items": [{"path": "annotations"}]}}]}}
    test = "TestCustomResourceItemsValidation"
    return Case(test, CRD_VALIDATION, SOURCE, test,
                (*fresh(definition, None),
                 Request("POST", collection(definition, "v1beta1", None), body)),
                Expect(status=201, fields={"default-with-items-and-no-type": {"items": []}}))


def _forbidden_cases() -> list[Case]:
    """TestForbiddenFieldsInSchema: additionalProperties false, uniqueItems true and a $ref
    are refused at install; without them the CRD is taken."""
    base = validation_schema()
    zeta = {"type": "array", "items": {"type": "string"}}
    variants: tuple[tuple[str, Obj, int], ...] = (
        ("additionalProperties false", {**base, "additionalProperties": False}, 422),
        ("uniqueItems true", {**base, "properties": {**base["properties"],
                                                      "zeta": {**zeta, "uniqueItems": True}}},
         422),
        ("$ref", {**base, "$ref": "#/definition/zeta",
                  "properties": {**base["properties"], "zeta": zeta}}, 422),
        ("none of them", {**base, "properties": {**base["properties"], "zeta": zeta}}, 201),
    )
    cases = []
    for title, schema, status in variants:
        definition = noxu_crd([version("v1beta1", schema, storage=True), version("v1", schema)])
        name = definition["metadata"]["name"]
        test = f"TestForbiddenFieldsInSchema/{title}"
        cases.append(Case(test, CRD_VALIDATION, SOURCE, test,
                          (Request("DELETE", f"/apis/apiextensions.k8s.io/v1/"
                                   f"customresourcedefinitions/{name}", tolerate=(404,)),
                           Request("POST", "/apis/apiextensions.k8s.io/v1/"
                                   "customresourcedefinitions", definition)),
                          Expect(status=status)))
    return cases


CASES: list[Case] = [*_proper_errors(), *_schema_cases(), _items_case(), *_forbidden_cases()]


def _same_plural_case() -> Case:
    """field_validation_test.go TestFieldValidation's set-up: two CRDs with the plural `noxus`
    in two groups (setupCRD for schema.example.com and schemaless.example.com), both served:
    names conflict only within a group (NamingConditionController)."""
    first = noxu_crd([version("v1beta1", ALLOW_ALL, storage=True)], group="first.example.com")
    second = noxu_crd([version("v1beta1", ALLOW_ALL, storage=True)], group="second.example.com")
    test = "TestFieldValidation/setupCRD twice"
    return Case(test, CRD_VALIDATION, "test/integration/apiserver/field_validation_test.go",
                test, (*fresh(first, None),
                       Request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                               second),
                       Request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                               "noxus.second.example.com")),
                Expect(status=200, fields={"status.acceptedNames.plural": "noxus"}))


CASES.append(_same_plural_case())
