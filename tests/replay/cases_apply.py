"""Server-side apply: kubernetes test/integration/apiserver/apply/apply_test.go
(TestApplyAlsoCreates, TestCreateOnApplyFailsWithUID, TestApplyUpdateApplyConflictForced,
TestApplyManagedFields, TestApplyRemovesEmptyManagedFields, TestApplyRequiresFieldManager,
TestApplyRemoveContainerPort). Each case has a namespace of its own (upstream's tests each
start a server). Left out: the Service of TestApplyAlsoCreates (the fake serves no Services).
"""

from __future__ import annotations

from typing import Any

from tests.replay.model import ABSENT, APPLY, PRESENT, Case, Expect, Obj, Request

SOURCE = "test/integration/apiserver/apply/apply_test.go"
APPLY_YAML = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


def _namespace(name: str) -> Request:
    return Request("POST", "/api/v1/namespaces", {"metadata": {"name": name}}, tolerate=(409,))


def _apply(path: str, body: Obj, manager: str | None = "apply_test", **query: str) -> Request:
    params = {**({"fieldManager": manager} if manager else {}), **query}
    return Request("PATCH", path, body, APPLY_YAML, params)


def _deployment(ports: bool = False) -> Obj:
    container: dict[str, Any] = {"name": "nginx", "image": "nginx:latest"}
    if ports:
        container["ports"] = [{"containerPort": 80, "protocol": "TCP"}]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "deployment", "labels": {"app": "nginx"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx"}},
                     "template": {"metadata": {"labels": {"app": "nginx"}},
                                  "spec": {"containers": [container]}}}}


def _cases() -> list[Case]:
    cases: list[Case] = []
    ns = "apply-also-creates"
    pod_path = f"/api/v1/namespaces/{ns}/pods/test-pod"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "test-pod"},
           "spec": {"containers": [{"name": "test-container", "image": "test-image"}]}}
    test = "TestApplyAlsoCreates/pods"
    cases += [
        Case(f"{test}/created", APPLY, SOURCE, test,
             (_namespace(ns), Request("DELETE", pod_path, tolerate=(404,)),
              _apply(pod_path, pod)), Expect(status=201)),
        Case(f"{test}/another manager re-applies without a conflict", APPLY, SOURCE, test,
             (_namespace(ns), Request("DELETE", pod_path, tolerate=(404,)),
              _apply(pod_path, pod), Request("GET", pod_path),
              _apply(pod_path, pod, "apply_test_2")), Expect(status=200)),
    ]
    ns = "apply-uid"
    uid_pod = {**pod, "metadata": {"name": "test-pod-uid",
                                   "uid": "88e00824-7f0e-11e8-94a1-c8d3ffb15800"}}
    cases.append(Case("TestCreateOnApplyFailsWithUID", APPLY, SOURCE,
                      "TestCreateOnApplyFailsWithUID",
                      (_namespace(ns), _apply(f"/api/v1/namespaces/{ns}/pods/test-pod-uid",
                                              uid_pod)),
                      Expect(status=409, reason="Conflict")))
    ns = "apply-conflict"
    deploy = f"/apis/apps/v1/namespaces/{ns}/deployments/deployment"
    set_up = (_namespace(ns), Request("DELETE", deploy, tolerate=(404,)),
              _apply(deploy, _deployment()),
              Request("PATCH", deploy, {"spec": {"replicas": 5}}, MERGE))
    test = "TestApplyUpdateApplyConflictForced"
    cases += [
        Case(f"{test}/conflict", APPLY, SOURCE, test, (*set_up, _apply(deploy, _deployment())),
             Expect(status=409, fields={"details.causes.0": PRESENT})),
        Case(f"{test}/forced", APPLY, SOURCE, test,
             (*set_up, _apply(deploy, _deployment(), force="true")),
             Expect(status=200, fields={"spec.replicas": 3})),
    ]
    ns = "apply-managed-fields"
    cm_path = f"/api/v1/namespaces/{ns}/configmaps/test-cm"
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "test-cm", "namespace": ns, "labels": {"test-label": "test"}},
          "data": {"key": "value"}}
    test = "TestApplyManagedFields"
    cases.append(Case(test, APPLY, SOURCE, test,
                      (_namespace(ns), Request("DELETE", cm_path, tolerate=(404,)),
                       _apply(cm_path, cm),
                       Request("PATCH", cm_path, {"data": {"key": "new value"}}, MERGE,
                               {"fieldManager": "updater"}),
                       Request("GET", cm_path)),
                      Expect(status=200, fields={
                          "data": {"key": "new value"},
                          "metadata.managedFields.0.manager": "apply_test",
                          "metadata.managedFields.0.operation": "Apply",
                          "metadata.managedFields.0.fieldsV1": {
                              "f:metadata": {"f:labels": {"f:test-label": {}}}},
                          "metadata.managedFields.1.manager": "updater",
                          "metadata.managedFields.1.operation": "Update",
                          "metadata.managedFields.1.fieldsV1": {"f:data": {"f:key": {}}},
                          "metadata.managedFields.2": ABSENT})))
    ns = "apply-empty-managed-fields"
    cm_path = f"/api/v1/namespaces/{ns}/configmaps/test-cm"
    bare = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "test-cm", "namespace": ns}}
    test = "TestApplyRemovesEmptyManagedFields"
    cases.append(Case(test, APPLY, SOURCE, test,
                      (_namespace(ns), Request("DELETE", cm_path, tolerate=(404,)),
                       _apply(cm_path, bare), _apply(cm_path, bare), Request("GET", cm_path)),
                      Expect(status=200, fields={"metadata.managedFields": ABSENT})))
    ns = "apply-requires-manager"
    cm_path = f"/api/v1/namespaces/{ns}/configmaps/test-cm"
    bare = {**bare, "metadata": {"name": "test-cm", "namespace": ns}}
    test = "TestApplyRequiresFieldManager"
    cases += [
        Case(f"{test}/without", APPLY, SOURCE, test,
             (_namespace(ns), Request("DELETE", cm_path, tolerate=(404,)),
              _apply(cm_path, bare, None)), Expect(status=400)),
        Case(f"{test}/with", APPLY, SOURCE, test,
             (_namespace(ns), Request("DELETE", cm_path, tolerate=(404,)),
              _apply(cm_path, bare)), Expect(status=201)),
    ]
    ns = "apply-remove-port"
    deploy = f"/apis/apps/v1/namespaces/{ns}/deployments/deployment"
    test = "TestApplyRemoveContainerPort"
    cases.append(Case(test, APPLY, SOURCE, test,
                      (_namespace(ns), Request("DELETE", deploy, tolerate=(404,)),
                       _apply(deploy, _deployment(ports=True)), _apply(deploy, _deployment()),
                       Request("GET", deploy)),
                      Expect(status=200, fields={
                          "spec.template.spec.containers.0.ports": ABSENT})))
    return cases


CASES: list[Case] = _cases()
