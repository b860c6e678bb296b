"""Field selectors on a CRD's selectable fields: kubernetes
staging/src/k8s.io/apiextensions-apiserver/test/integration/fieldselector_test.go
(TestSelectableFields, its list and deleteCollection subtests, for the v1 version).

Adaptation: upstream's fixture also serves v1beta1 (the colour renamed `hue`) through a conversion
webhook, which the fake does not call; the CRD here serves v1 only, and the v1beta1 cases are
left out.
"""

from __future__ import annotations

from tests.replay.crd_fixtures import CRDS, GROUPS, crd, version
from tests.replay.model import CRD_FIELD_SELECTORS, Case, Expect, Obj, Request

SOURCE = "staging/src/k8s.io/apiextensions-apiserver/test/integration/fieldselector_test.go"
SHIRTS = "/apis/tests.example.com/v1/shirts"
ALL = frozenset({"shirt1", "shirt2", "shirt3"})

_SCHEMA: Obj = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "color": {"type": "string"}, "quantity": {"type": "integer"},
    "size": {"type": "string", "enum": ["S", "M", "L", "XL"]},
    "branded": {"type": "boolean"}}}}}
SHIRT_CRD = crd("shirts", "tests.example.com", "Shirt", [version(
    "v1", _SCHEMA, storage=True, selectableFields=[
        {"jsonPath": ".spec.color"}, {"jsonPath": ".spec.quantity"}, {"jsonPath": ".spec.size"},
        {"jsonPath": ".spec.branded"}])], scope="Cluster")


def _shirt(name: str, **spec: object) -> Obj:
    return {"kind": "Shirt", "apiVersion": "tests.example.com/v1", "metadata": {"name": name},
            "spec": spec}


_SET_UP = (
    *(Request("DELETE", f"{CRDS}/shirts.{group}", tolerate=(404,)) for group in GROUPS),
    Request("POST", CRDS, SHIRT_CRD),
    Request("POST", SHIRTS, _shirt("shirt1", color="blue", quantity=2, size="S", branded=True)),
    Request("POST", SHIRTS, _shirt("shirt2", color="blue", quantity=3, size="M", branded=False)),
    Request("POST", SHIRTS, _shirt("shirt3", color="green", quantity=2, branded=False)),
)

# (selector, the shirts it selects)
_SELECTED: tuple[tuple[str, frozenset[str]], ...] = (
    ("spec.color=blue", frozenset({"shirt1", "shirt2"})),
    ("spec.quantity=2", frozenset({"shirt1", "shirt3"})),
    ("spec.size=M", frozenset({"shirt2"})),
    ("spec.branded=false", frozenset({"shirt2", "shirt3"})),
    ("spec.color=blue,spec.quantity=2", frozenset({"shirt1"})),
    ("spec.color=blue,spec.branded=false", frozenset({"shirt2"})),
)
_UNSUPPORTED = "spec.nosuchfield=xyz"


def _cases() -> list[Case]:
    cases: list[Case] = []
    for selector, selected in _SELECTED:
        test = f"TestSelectableFields/list/v1/{selector}"
        cases.append(Case(test, CRD_FIELD_SELECTORS, SOURCE, test,
                          (*_SET_UP, Request("GET", SHIRTS, query={"fieldSelector": selector})),
                          Expect(status=200, names=selected)))
        test = f"TestSelectableFields/deleteCollection/v1/{selector}"
        cases.append(Case(test, CRD_FIELD_SELECTORS, SOURCE, test,
                          (*_SET_UP, Request("DELETE", SHIRTS, query={"fieldSelector": selector}),
                           Request("GET", SHIRTS)),
                          Expect(status=200, names=ALL - selected)))
    for verb in ("list", "deleteCollection"):
        test = f"TestSelectableFields/{verb}/v1/{_UNSUPPORTED}"
        method = "GET" if verb == "list" else "DELETE"
        cases.append(Case(test, CRD_FIELD_SELECTORS, SOURCE, test,
                          (*_SET_UP, Request(method, SHIRTS,
                                             query={"fieldSelector": _UNSUPPORTED})),
                          Expect(status=400, message_contains=(
                              "field label not supported: spec.nosuchfield",))))
    return cases


CASES: list[Case] = _cases()
