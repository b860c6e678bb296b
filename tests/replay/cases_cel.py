"""CEL validation rules (`x-kubernetes-validations`) of a CRD: kubernetes
test/integration/apiserver/crd_validation_expressions_test.go (TestCustomResourceValidators,
TestCustomResourceValidatorsWithBlockingErrors). Its schemas are re-expressed as Python data;
each case starts from its CRD made afresh (crdWithSchema: cluster-scoped, v1beta1, with a
status subresource). Left out: the feature-gate-off test and the non-structural CRD written to
etcd behind the server's back (no HTTP equivalent).
"""

from __future__ import annotations

import copy
from typing import Any

from tests.replay.crd_fixtures import CRDS, GROUPS, crd, version
from tests.replay.model import CEL, Case, Expect, Obj, Request

SOURCE = "test/integration/apiserver/crd_validation_expressions_test.go"
GROUP = "mygroup.example.com"
NOT_CHECKED = ("some validation rules were not checked because the object was invalid; "
               "correct the existing errors to complete validation")


def _rules(*rules: str) -> list[Obj]:
    return [{"rule": rule} for rule in rules]


def _validators(blocking: bool = False) -> Obj:
    """structuralSchemaWithValidators (and, `blocking`, structuralSchemaWithBlockingErr)."""
    item: Obj = {"type": "object", "required": ["k"], "maxProperties": 12, "properties": {
        "k": {"type": "string", "maxLength": 3}, "v": {"type": "string", "maxLength": 3}}}
    extra: Obj = {"type": "string", "x-kubernetes-validations": _rules(
        "self.startsWith('anything')")}
    float_map: Obj = {"type": "object", "additionalProperties": {"type": "number"},
                      "x-kubernetes-validations": _rules("self.all(k, self[k] >= 0.2)")}
    assoc: Obj = {"type": "array", "maxItems": 10, "items": item,
                  "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                  "x-kubernetes-validations": _rules("self.exists(e, e.k == 'a' && e.v == '1')")}
    if blocking:
        extra["maxLength"] = 0
        float_map["maxProperties"] = 2
        assoc["maxItems"] = 1
        assoc["items"] = {"type": "object", "maxItems": 1, "required": ["k", "v"],
                          "properties": {"k": {"type": "string"}, "v": {"type": "string"}}}
    return {
        "description": "CRD with CEL validators", "type": "object",
        "x-kubernetes-validations": _rules(
            "self.spec.x + self.spec.y >= (has(self.status) ? self.status.z : 0)"),
        "properties": {
            "spec": {"type": "object", "properties": {
                "x": {"type": "integer", "default": 0}, "y": {"type": "integer", "default": 0},
                "extra": extra, "floatMap": float_map, "assocList": assoc,
                "limit": {"nullable": True, "x-kubernetes-int-or-string": True,
                          "x-kubernetes-validations": _rules("type(self) == int && self == 123")},
            }},
            "status": {"type": "object", "properties": {"z": {"type": "integer", "default": 0}}},
        },
    }


def _with_metadata_rule(rule: str) -> Obj:
    return {"description": "CRD with CEL validators", "type": "object",
            "x-kubernetes-validations": _rules(rule), "properties": {
                "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
                "spec": {"type": "object", "properties": {}},
                "status": {"type": "object", "properties": {}}}}


def _transition(spec: Obj) -> Obj:
    return {"description": "CRD with CEL validators", "type": "object", "properties": {
        "spec": spec, "status": {"type": "object", "properties": {}}}}


_VALID_TRANSITION = _transition({
    "type": "object", "properties": {"someImmutableThing": {"type": "string"},
                                     "somethingElse": {"type": "string"}},
    "x-kubernetes-validations": _rules("self.someImmutableThing == oldSelf.someImmutableThing")})
_INVALID_TRANSITION = _transition({"type": "object", "properties": {"list": {
    "type": "array", "items": {"type": "string",
                               "x-kubernetes-validations": _rules("self == oldSelf")}}}})
_MAP_KEY_TRANSITION = _transition({"type": "object", "properties": {"list": {
    "type": "array", "x-kubernetes-list-map-keys": ["k1", "k2"],
    "x-kubernetes-list-type": "map", "maxItems": 100,
    "items": {"type": "object", "required": ["k1"],
              "properties": {"k1": {"type": "string"},
                             "k2": {"type": "string", "default": "DEFAULT"},
                             "v": {"type": "string", "maxLength": 200}},
              "x-kubernetes-validations": _rules("self.v == oldSelf.v")}}}})


def _crd_with(kind: str, schema: Obj) -> Obj:
    """crdWithSchema."""
    return crd(f"{kind.lower()}s", GROUP, kind,
               [version("v1beta1", schema, storage=True, subresources={"status": {}})],
               scope="Cluster")


def _fresh(definition: Obj) -> tuple[Request, ...]:
    plural = definition["spec"]["names"]["plural"]
    return (*(Request("DELETE", f"{CRDS}/{plural}.{group}", tolerate=(404,))
              for group in GROUPS), Request("POST", CRDS, definition))


def _object(kind: str, spec: Obj, name: str = "cr-1", **parts: Any) -> Obj:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": kind, "metadata": {"name": name},
            "spec": spec, **parts}


def _updated(body: Obj, **parts: Any) -> Obj:
    """`body` as written back after the step before: its resourceVersion, parts replaced."""
    return {**copy.deepcopy(body), "metadata": {**body["metadata"], "resourceVersion": "{rv}"},
            **parts}


_VALID_SPEC: Obj = {"x": 2, "y": 2, "extra": "anything?", "floatMap": {"key1": 0.2, "key2": 0.3},
                    "assocList": [{"k": "a", "v": "1"}], "limit": None}


def _validator_cases() -> list[Case]:
    test = "TestCustomResourceValidators/Structural schema"
    definition = _crd_with("Structural", _validators())
    path = f"/apis/{GROUP}/v1beta1/structurals"
    valid = _object("Structural", _VALID_SPEC)
    create = Request("POST", path, valid)
    cases = [
        Case(f"{test}/valid data created", CEL, SOURCE, test,
             (*_fresh(definition), Request("POST", path, _object(
                 "Structural", {"x": 2, "y": 2, "limit": 123}))), Expect(status=201)),
        Case(f"{test}/invalid create refused", CEL, SOURCE, test,
             (*_fresh(definition), Request("POST", path, _object(
                 "Structural", {"x": -1, "y": 0}))),
             Expect(status=422, message_contains=("failed rule: self.spec.x + self.spec.y",))),
        Case(f"{test}/valid create with every field", CEL, SOURCE, test,
             (*_fresh(definition), create), Expect(status=201)),
    ]
    for title, spec in (("spec vs. status default value", {"x": 3, "y": -4}),
                        ("nested string field", {"extra": "something"}),
                        ("nested array", {"floatMap": {"key1": 0.1, "key2": 0.2}}),
                        ("nested associative list", {"assocList": [{"k": "a", "v": "2"}]})):
        cases.append(Case(f"{test}/update refused: {title}", CEL, SOURCE, test,
                          (*_fresh(definition), create,
                           Request("PUT", f"{path}/cr-1", _updated(valid, spec=spec))),
                          Expect(status=422, message_contains=("failed rule",))))
    for z, expect in ((5, Expect(status=422, message_contains=(
            "failed rule: self.spec.x + self.spec.y",))), (3, Expect(status=200))):
        cases.append(Case(f"{test}/status update z={z}", CEL, SOURCE, test,
                          (*_fresh(definition), create,
                           Request("PUT", f"{path}/cr-1/status",
                                   _updated(valid, status={"z": z}))), expect))
    return cases


def _install_and_transition_cases() -> list[Case]:
    test = "TestCustomResourceValidators"
    cases = [
        Case(f"{test}/a rule on metadata other than name refused", CEL, SOURCE, test,
             _fresh(_crd_with("InvalidStructuralMetadata",
                              _with_metadata_rule("self.metadata.labels.size() > 0"))),
             Expect(status=422, message_contains=("undefined field 'labels'",))),
        Case(f"{test}/a rule on metadata.name taken", CEL, SOURCE, test,
             _fresh(_crd_with("ValidStructuralMetadata",
                              _with_metadata_rule("self.metadata.name.size() > 3"))),
             Expect(status=201)),
        Case(f"{test}/oldSelf on an uncorrelatable part refused", CEL, SOURCE, test,
             _fresh(_crd_with("InvalidTransitionRule", _INVALID_TRANSITION)),
             Expect(status=422, message_contains=(
                 "oldSelf cannot be used on the uncorrelatable portion of the schema",))),
    ]
    definition = _crd_with("ValidTransitionRule", _VALID_TRANSITION)
    path = f"/apis/{GROUP}/v1beta1/validtransitionrules"
    original = _object("ValidTransitionRule", {"someImmutableThing": "original",
                                               "somethingElse": "original"})
    for title, changed, expect in (
            ("another field may change", "somethingElse", Expect(status=200)),
            ("the immutable one may not", "someImmutableThing", Expect(
                status=422, message_contains=(
                    "failed rule: self.someImmutableThing == oldSelf.someImmutableThing",)))):
        spec = {**original["spec"], changed: "new value"}
        cases.append(Case(f"{test}/Schema with valid transition rule/{title}", CEL, SOURCE,
                          test, (*_fresh(definition), Request("POST", path, original),
                                 Request("PUT", f"{path}/cr-1", _updated(original, spec=spec))),
                          expect))
    definition = _crd_with("DefaultMapKeyTransitionRule", _MAP_KEY_TRANSITION)
    path = f"/apis/{GROUP}/v1beta1/defaultmapkeytransitionrules"
    created = _object("DefaultMapKeyTransitionRule", {"list": [{"k1": "x", "v": "value"}]})
    cases.append(Case(f"{test}/Schema with default map key transition rule", CEL, SOURCE, test,
                      (*_fresh(definition), Request("POST", path, created),
                       Request("PUT", f"{path}/cr-1", _updated(created, spec={"list": [
                           {"k1": "x", "k2": "DEFAULT", "v": "new value"}]}))),
                      Expect(status=422, message_contains=("failed rule: self.v == oldSelf.v",))))
    return cases


def _blocking_cases() -> list[Case]:
    test = "TestCustomResourceValidatorsWithBlockingErrors/Structural schema"
    definition = _crd_with("Structural", _validators(blocking=True))
    path = f"/apis/{GROUP}/v1beta1/structurals"
    two = {"key1": 0.2, "key2": 0.3}
    refused = Expect(status=422, message_contains=(NOT_CHECKED,))
    table: tuple[tuple[str, Obj, Expect], ...] = (
        ("valid data created", {"x": 2, "y": 2, "limit": 123}, Expect(status=201)),
        ("invalid create refused", {"x": -1, "y": 0}, Expect(status=422, message_contains=(
            "failed rule: self.spec.x + self.spec.y",))),
        ("MaxLength", {"x": 2, "y": 2, "extra": "skipValidation?", "floatMap": two,
                       "limit": None}, refused),
        ("MaxItems", {"x": 2, "y": 2, "floatMap": two,
                      "assocList": [{"k": "a", "v": "1"}, {"a": "a"}], "limit": None}, refused),
        ("MaxProperties", {"x": 2, "y": 2, "floatMap": {**two, "key3": 0.4},
                           "assocList": [{"k": "a", "v": "1"}], "limit": None}, refused),
        ("missing required field", {"x": 2, "y": 2, "floatMap": two,
                                    "assocList": [{"k": "1"}], "limit": None}, refused),
        ("type", {"x": 2, "y": 2, "floatMap": two, "assocList": [{"k": "a", "v": True}],
                  "limit": None}, refused),
    )
    return [Case(f"{test}/{title}", CEL, SOURCE, test,
                 (*_fresh(definition), Request("POST", path, _object("Structural", spec))),
                 expect) for title, spec, expect in table]


CASES: list[Case] = [*_validator_cases(), *_install_and_transition_cases(), *_blocking_cases()]
