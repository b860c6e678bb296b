"""A custom resource's `/status` and `/scale`: kubernetes
staging/src/k8s.io/apiextensions-apiserver/test/integration/subresources_test.go
(TestStatusSubresource, TestScaleSubresource, TestValidateOnlyStatus, TestSubresourcesDiscovery,
TestGeneration, TestSubresourcePatch), on NewNoxuSubresourcesCRDs' CRD: versions v1beta1
(storage) and v1, each with status and scale (spec and status replicas, and a label selector
path per version), with AllowAllSchema. Upstream's chained steps are one case per assertion,
each replaying the steps before it.
"""

from __future__ import annotations

from typing import Any

from tests.replay.crd_fixtures import (
    ALLOW_ALL,
    CRDS,
    NAMESPACE,
    NOXU_GROUP,
    NOXU_KIND,
    collection,
    fresh,
    noxu_crd,
    only_in_group,
    version,
)
from tests.replay.model import ABSENT, SUBRESOURCES, Case, Expect, Obj, Request

SOURCE = "staging/src/k8s.io/apiextensions-apiserver/test/integration/subresources_test.go"
_SELECTOR = {"v1beta1": ".status.labelSelector", "v1": ".status.anotherLabelSelector"}


def subresources_crd(schema: Obj = ALLOW_ALL, spec_replicas_path: str = ".spec.replicas") -> Obj:
    return noxu_crd([
        version(v, schema, storage=v == "v1beta1", subresources={
            "status": {}, "scale": {"specReplicasPath": spec_replicas_path,
                                    "statusReplicasPath": ".status.replicas",
                                    "labelSelectorPath": _SELECTOR[v]}})
        for v in ("v1beta1", "v1")])


def subresource_instance(v: str, **spec: Any) -> Obj:
    """NewNoxuSubresourceInstance."""
    return {"apiVersion": f"{NOXU_GROUP}/{v}", "kind": NOXU_KIND,
            "metadata": {"namespace": NAMESPACE, "name": "foo"},
            "spec": {"num": 10, "replicas": 3, **spec}, "status": {"replicas": 7}}


def _versioned(body: Obj, **parts: Any) -> Obj:
    """`body` as read back and changed: its resourceVersion that of the step before."""
    return {**body, "metadata": {**body["metadata"], "resourceVersion": "{rv}"}, **parts}


def _status_cases(v: str) -> list[Case]:
    definition = subresources_crd()
    path = collection(definition, v)
    create = Request("POST", path, subresource_instance(v))
    read = Request("GET", f"{path}/foo")
    status_write = Request("PUT", f"{path}/foo/status", _versioned(
        subresource_instance(v, num=20), status={"replicas": 7, "num": 20}))
    main_write = Request("PUT", f"{path}/foo", _versioned(
        subresource_instance(v, num=40), status={"replicas": 7, "num": 40}))
    test = f"TestStatusSubresource/{v}"
    return [
        Case(f"{test}/no status after create", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, read), Expect(status=200, fields={"status": ABSENT})),
        Case(f"{test}/a status write keeps spec", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, read, status_write),
             Expect(status=200, fields={"spec.num": 10, "status.num": 20})),
        Case(f"{test}/a main write keeps status", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, read, status_write, read, main_write),
             Expect(status=200, fields={"spec.num": 40, "status.num": 20})),
    ]


def _scale_cases(v: str) -> list[Case]:
    definition = subresources_crd()
    path = collection(definition, v)
    selector_field = _SELECTOR[v].lstrip(".").split(".")[1]
    create = Request("POST", path, subresource_instance(v))
    read = Request("GET", f"{path}/foo")
    selector = Request("PUT", f"{path}/foo/status", _versioned(
        subresource_instance(v), status={"replicas": 7, selector_field: "bar"}))
    read_scale = Request("GET", f"{path}/foo/scale")
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale",
             "metadata": {"name": "foo", "namespace": NAMESPACE, "resourceVersion": "{rv}"},
             "spec": {"replicas": 5}, "status": {"replicas": 7, "selector": "baz"}}
    write_scale = Request("PUT", f"{path}/foo/scale", scale)
    too_many = Request("PUT", f"{path}/foo", _versioned(
        subresource_instance(v, replicas=9223372036854775807)))
    test = f"TestScaleSubresource/{v}"
    return [
        Case(f"{test}/specReplicasPath not a path under .spec", SUBRESOURCES, SOURCE, test,
             (Request("DELETE", f"{CRDS}/noxus.{NOXU_GROUP}", tolerate=(404,)),
              Request("POST", CRDS, subresources_crd(spec_replicas_path="foo,bar"))),
             Expect(status=422, reason="Invalid")),
        Case(f"{test}/scale read", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, read, selector, read_scale),
             Expect(status=200, fields={"spec.replicas": 3, "status.selector": "bar"})),
        Case(f"{test}/scale write sets spec, not status", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, read, selector, read_scale, write_scale),
             Expect(status=200, fields={"spec.replicas": 5, "status.selector": "bar"})),
        Case(f"{test}/the object after the scale write", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, read, selector, read_scale, write_scale, read),
             Expect(status=200, fields={"spec.replicas": 5, f"status.{selector_field}": "bar"})),
        Case(f"{test}/replicas past int32 refused", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, read, too_many), Expect(status=422, reason="Invalid")),
    ]


def _validate_only_status_cases(v: str) -> list[Case]:
    at_most_10 = {"type": "object", "properties": {"num": {"type": "integer", "maximum": 10}}}
    definition = subresources_crd({"type": "object", "properties": {
        "spec": at_most_10, "status": at_most_10}})
    path = collection(definition, v)
    created = subresource_instance(v)
    created["status"]["num"] = 10
    create = Request("POST", path, created)
    spec_15 = Request("PUT", f"{path}/foo/status", _versioned(
        {**created, "spec": {"num": 15}, "status": {}}))
    status_15 = Request("PUT", f"{path}/foo/status", _versioned(
        {**created, "spec": {"num": 15}, "status": {"num": 15}}))
    test = f"TestValidateOnlyStatus/{v}"
    return [
        Case(f"{test}/a status write does not validate spec", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, spec_15), Expect(status=200)),
        Case(f"{test}/a status write validates status", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, spec_15, status_15),
             Expect(status=422, message_contains=("Invalid value",))),
    ]


def _discovery_case(v: str) -> Case:
    definition = subresources_crd()
    verbs = ["get", "patch", "update"]
    test = f"TestSubresourcesDiscovery/{v}"
    return Case(test, SUBRESOURCES, SOURCE, test,
                (*only_in_group("noxus"), *fresh(definition),
                 Request("GET", f"/apis/{NOXU_GROUP}/{v}")),
                Expect(status=200, fields={
                    "resources.0.name": "noxus", "resources.3": ABSENT,
                    "resources.1.name": "noxus/status", "resources.1.namespaced": True,
                    "resources.1.kind": NOXU_KIND, "resources.1.verbs": verbs,
                    "resources.2.name": "noxus/scale", "resources.2.group": "autoscaling",
                    "resources.2.version": "v1", "resources.2.namespaced": True,
                    "resources.2.kind": "Scale", "resources.2.verbs": verbs}))


def _generation_cases(v: str) -> list[Case]:
    definition = subresources_crd()
    path = collection(definition, v)
    create = Request("POST", path, subresource_instance(v))
    read = Request("GET", f"{path}/foo")
    status_write = Request("PUT", f"{path}/foo/status", _versioned(
        subresource_instance(v), status={"replicas": 7, "num": 20}))
    spec_write = Request("PUT", f"{path}/foo", _versioned(subresource_instance(v, num=20)))
    test = f"TestGeneration/{v}"
    return [
        Case(f"{test}/1 after create", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, read), Expect(fields={"metadata.generation": 1})),
        Case(f"{test}/a status write keeps it", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, read, status_write),
             Expect(status=200, fields={"metadata.generation": 1})),
        Case(f"{test}/a spec write raises it", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, read, status_write, read, spec_write),
             Expect(status=200, fields={"metadata.generation": 2})),
    ]


def _patch_cases(v: str) -> list[Case]:
    definition = subresources_crd()
    path = collection(definition, v)
    create = Request("POST", path, subresource_instance(v))
    merge = "application/merge-patch+json"
    status_patch = Request("PATCH", f"{path}/foo/status",
                           {"spec": {"num": 999}, "status": {"num": 999}}, merge)
    empty = Request("PATCH", f"{path}/foo/status", {}, merge)
    scale_patch = Request("PATCH", f"{path}/foo/scale",
                          {"spec": {"replicas": 7}, "status": {"replicas": 7}}, merge)
    test = f"TestSubresourcePatch/{v}"
    return [
        Case(f"{test}/status patch", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, status_patch),
             Expect(status=200, fields={"status.num": 999, "spec.num": 10})),
        Case(f"{test}/the same patch again keeps the resourceVersion", SUBRESOURCES, SOURCE,
             test, (*fresh(definition), create, status_patch, status_patch),
             Expect(status=200, fields={"status.num": 999, "spec.num": 10},
                    resource_version_kept=True)),
        Case(f"{test}/an empty patch keeps the resourceVersion", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, status_patch, empty),
             Expect(status=200, fields={"status.num": 999, "spec.num": 10},
                    resource_version_kept=True)),
        Case(f"{test}/scale patch", SUBRESOURCES, SOURCE, test,
             (*fresh(definition), create, status_patch, scale_patch),
             Expect(status=200, fields={"spec.replicas": 7, "status.replicas": 0})),
    ]


CASES: list[Case] = [
    case for v in ("v1beta1", "v1") for case in (
        *_status_cases(v), *_scale_cases(v), *_validate_only_status_cases(v),
        _discovery_case(v), *_generation_cases(v), *_patch_cases(v))]
