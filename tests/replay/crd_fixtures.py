"""CustomResourceDefinitions and objects as upstream's apiextensions fixtures build them
(staging/src/k8s.io/apiextensions-apiserver/test/integration/fixtures/resources.go: the "noxu"
CRD, its instances), and the set-up steps each case starts with.

Each upstream test function starts its own server; a case here starts from a clean CRD instead:
it deletes the CRD (and so its objects) and creates it again, so the cases can run in any order
against one `elevator fake-cluster`."""

from __future__ import annotations

from typing import Any

from tests.replay.model import Obj, Request

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NOXU_KIND = "WishIHadChosenNoxu"
NOXU_GROUP = "mygroup.example.com"
NAMESPACE = "not-the-default"
ALLOW_ALL = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}  # AllowAllSchema


def version(name: str, schema: Obj, *, storage: bool = False, **extra: Any) -> Obj:
    return {"name": name, "served": True, "storage": storage,
            "schema": {"openAPIV3Schema": schema}, **extra}


def crd(plural: str, group: str, kind: str, versions: list[Obj], *,
        scope: str = "Namespaced", singular: str = "", list_kind: str = "") -> Obj:
    names: Obj = {"plural": plural, "singular": singular or kind.lower(), "kind": kind,
                  "listKind": list_kind or f"{kind}List"}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope, "names": names, "versions": versions}}


def noxu_crd(versions: list[Obj], group: str = NOXU_GROUP) -> Obj:
    """NewNoxu...CustomResourceDefinition: namespaced `noxus` of kind WishIHadChosenNoxu."""
    body = crd("noxus", group, NOXU_KIND, versions, singular="nonenglishnoxu",
               list_kind="NoxuItemList")
    body["spec"]["names"]["shortNames"] = ["foo", "bar", "abc", "def"]
    return body


# The groups the table's CRDs use. Upstream gives two groups CRDs of one plural (the fake serves
# both, as TestFieldValidation/setupCRD twice checks); a case first deletes the CRDs of its
# plural in every group, so it starts from upstream's state whatever ran before it.
GROUPS = ("mygroup.example.com", "schema.example.com", "schemaless.example.com",
          "tests.example.com", "first.example.com", "second.example.com")


# Every plural the table gives mygroup.example.com: a discovery case lists the group alone.
MYGROUP_PLURALS = ("noxus", "structurals", "invalidstructuralmetadatas",
                   "validstructuralmetadatas", "invalidtransitionrules", "validtransitionrules",
                   "defaultmapkeytransitionrules")


def only_in_group(plural: str) -> tuple[Request, ...]:
    """Set-up: the group's other CRDs deleted (upstream's server holds one CRD)."""
    return tuple(Request("DELETE", f"{CRDS}/{other}.{NOXU_GROUP}", tolerate=(404,))
                 for other in MYGROUP_PLURALS if other != plural)


def fresh(definition: Obj, namespace: str | None = NAMESPACE) -> tuple[Request, ...]:
    """Set-up: the CRD deleted (with its objects) and created again, and the namespace."""
    plural = definition["spec"]["names"]["plural"]
    steps = (*(Request("DELETE", f"{CRDS}/{plural}.{group}", tolerate=(404,))
               for group in GROUPS), Request("POST", CRDS, definition))
    if namespace is not None:
        steps += (Request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}},
                          tolerate=(409,)),)
    return steps


def collection(definition: Obj, version_name: str, namespace: str | None = NAMESPACE) -> str:
    spec = definition["spec"]
    where = f"/namespaces/{namespace}" if spec["scope"] == "Namespaced" and namespace else ""
    return f"/apis/{spec['group']}/{version_name}{where}/{spec['names']['plural']}"


def crd_patch(definition: Obj, versions: list[Obj]) -> Request:
    """A merge patch of the CRD's versions (a list: replaced whole), as upstream's
    UpdateCustomResourceDefinitionWithRetry changes a schema in place."""
    return Request("PATCH", f"{CRDS}/{definition['metadata']['name']}",
                   {"spec": {"versions": versions}}, "application/merge-patch+json")
