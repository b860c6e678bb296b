"""Drive `fakes.kube_api.FakeKubeApi` with the real `kubernetes` client (and kubectl).

No mocks: every HTTP test goes through urllib3 and uvicorn, so what passes here is what
code under test will see.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.errors import Conflict, NotFound
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.fakes.kube_api.tables import human_duration
from kube_elevator.tasks.core.selectors import SelectorError, parse_field_selector, parse_label_selector
from tests.tools import needs_kubectl

Obj = dict[str, Any]
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture(scope="module")
def api_client(api: FakeKubeApi) -> Iterator[client.ApiClient]:
    """The official client on the module's server."""
    with api.api_client() as c:
        yield c


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def apps(api_client: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


@pytest.fixture
def coord(api_client: client.ApiClient) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(api_client)


@pytest.fixture
def ns(request: pytest.FixtureRequest) -> str:
    """A namespace of the test's own, so tests sharing the server do not see each other."""
    # A DNS label, as a real server requires: cut to 63, then no dash at either end.
    return re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:63].strip("-")


def pod(name: str, ns: str, *, labels: dict[str, str] | None = None, node: str = "",
        phase: str | None = None) -> Obj:
    body: Obj = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    if node:
        body["spec"]["nodeName"] = node
    if phase:
        body["status"] = {"phase": phase}
    return body


def deployment(name: str, ns: str, containers: list[Obj], **pod_spec: Any) -> Obj:
    """A Deployment whose pod template holds `containers`: the patch tests change a template,
    which a real server lets change (a Pod's containers it does not, ValidatePodUpdate)."""
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": containers, **pod_spec}}}}


def status_of(exc: ApiException) -> Obj:
    body = json.loads(exc.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"
    assert body["status"] == "Failure" and body["code"] == exc.status
    return body


def names(items: list[Any]) -> list[str]:
    return [i.metadata.name if hasattr(i, "metadata") else i["metadata"]["name"] for i in items]


# Discovery -----------------------------------------------------------------------------


def test_discovery_documents(api_client: client.ApiClient) -> None:
    version = client.VersionApi(api_client).get_code()
    assert version.major == "1" and version.git_version.startswith("v1.")
    core_resources = {r.name: r for r in client.CoreV1Api(api_client).get_api_resources()
                      .resources}
    assert core_resources["pods"].short_names == ["po"]
    assert core_resources["pods"].namespaced and not core_resources["nodes"].namespaced
    assert core_resources["pods/eviction"].group == "policy"
    assert core_resources["events"].short_names == ["ev"]
    assert "watch" in core_resources["nodes"].verbs
    groups = {g.name for g in client.ApisApi(api_client).get_api_versions().groups}
    assert groups == {"apiextensions.k8s.io", "apps", "coordination.k8s.io", "events.k8s.io",
                      "policy"}
    apps = {r.name: r for r in client.AppsV1Api(api_client).get_api_resources().resources}
    assert apps["deployments"].short_names == ["deploy"]
    assert apps["deployments/scale"].kind == "Scale"
    leases = client.CoordinationV1Api(api_client).get_api_resources().resources
    assert [r.name for r in leases] == ["leases"]


def test_aggregated_discovery_request_gets_plain_json(api: FakeKubeApi,
                                                      api_client: client.ApiClient) -> None:
    accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json")
    resp = api_client.call_api("GET", f"{api.url}/apis", header_params={"Accept": accept})
    resp.read()
    assert resp.status == 200
    assert resp.getheader("content-type") == "application/json"
    assert orjson.loads(resp.data)["kind"] == "APIGroupList"


def test_unknown_paths_and_methods(api: FakeKubeApi, api_client: client.ApiClient) -> None:
    for path in ("/api/v1/widgets", "/apis/apps/v1/namespaces/x/daemonsets",
                 "/api/v1/nodes/n/eviction", "/api/v1/pods/p"):
        resp = api_client.call_api("GET", api.url + path)
        resp.read()
        assert resp.status == 404, path
        assert orjson.loads(resp.data)["reason"] == "NotFound"
    resp = api_client.call_api("POST", api.url + "/api/v1/namespaces/x/pods/p",
                               header_params={"Content-Type": "application/json"}, body={})
    resp.read()
    assert resp.status == 405


# CRUD ------------------------------------------------------------------------------------


def test_pod_create_get_list_replace_delete(core: client.CoreV1Api, ns: str) -> None:
    created = core.create_namespaced_pod(ns, client.V1Pod(
        metadata=client.V1ObjectMeta(name="web-1", labels={"app": "web"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")])))
    meta = created.metadata
    assert meta.namespace == ns and meta.uid and int(meta.resource_version) > 0
    assert created.status.phase == "Pending"
    raw = core.read_namespaced_pod("web-1", ns, _preload_content=False)
    got = orjson.loads(raw.data)
    assert got["kind"] == "Pod" and got["apiVersion"] == "v1"
    assert RFC3339.match(got["metadata"]["creationTimestamp"])
    assert got["metadata"]["uid"] == meta.uid

    assert names(core.list_namespaced_pod(ns).items) == ["web-1"]
    created.spec.containers[0].image = "nginx:2"
    replaced = core.replace_namespaced_pod("web-1", ns, created)
    assert replaced.spec.containers[0].image == "nginx:2"
    assert int(replaced.metadata.resource_version) > int(meta.resource_version)
    assert replaced.metadata.uid == meta.uid

    deleted = core.delete_namespaced_pod("web-1", ns)
    assert deleted.metadata.name == "web-1"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("web-1", ns)
    assert err.value.status == 404
    body = status_of(err.value)
    assert body["reason"] == "NotFound"
    assert body["message"] == 'pods "web-1" not found'
    assert body["details"] == {"name": "web-1", "kind": "pods"}
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod("web-1", ns)
    assert err.value.status == 404


def test_delete_of_non_pod_returns_success_status(core: client.CoreV1Api) -> None:
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="gone-node")))
    raw = core.delete_node("gone-node", _preload_content=False)
    body = orjson.loads(raw.data)
    assert body["kind"] == "Status" and body["status"] == "Success"
    assert body["details"]["name"] == "gone-node"


def test_list_items_carry_no_kind_but_the_list_does(api: FakeKubeApi, core: client.CoreV1Api,
                                                    ns: str) -> None:
    api.create("pods", pod("a", ns))
    body = orjson.loads(core.list_namespaced_pod(ns, _preload_content=False).data)
    assert body["kind"] == "PodList" and body["apiVersion"] == "v1"
    assert int(body["metadata"]["resourceVersion"]) >= 1
    assert "continue" not in body["metadata"]
    assert [sorted(i) for i in body["items"]] == [["metadata", "spec", "status"]]


def test_create_keeps_given_creation_timestamp_and_fills_the_rest(
        api: FakeKubeApi, core: client.CoreV1Api, ns: str) -> None:
    body = pod("old", ns)
    body["metadata"]["creationTimestamp"] = "2020-02-03T04:05:06Z"
    via_http = core.create_namespaced_pod(ns, body, _preload_content=False)
    assert orjson.loads(via_http.data)["metadata"]["creationTimestamp"] == "2020-02-03T04:05:06Z"
    in_process = api.create("pods", {"metadata": {"name": "new"},
                                     "spec": {"containers": [{"name": "c", "image": "i"}]}},
                            namespace=ns)
    assert RFC3339.match(in_process["metadata"]["creationTimestamp"])
    assert in_process["metadata"]["namespace"] == ns
    assert in_process["kind"] == "Pod"


def test_generate_name(core: client.CoreV1Api, ns: str) -> None:
    created = core.create_namespaced_pod(ns, {"metadata": {"generateName": "job-"},
                                              "spec": {"containers": [{"name": "c",
                                                                       "image": "i"}]}})
    assert re.match(r"^job-[a-z0-9]{5}$", created.metadata.name)


def test_create_errors(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(ns, pod("dup", ns))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("dup", ns))
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "AlreadyExists"
    assert status_of(err.value)["message"] == 'pods "dup" already exists'

    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, {"metadata": {}, "spec": {"containers": []}})
    assert err.value.status == 422
    body = status_of(err.value)
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "metadata.name"

    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("Not_Valid", ns))
    assert err.value.status == 422

    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("elsewhere", "other-namespace"))
    assert err.value.status == 400


def test_update_errors(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(ns, pod("u", ns))
    with pytest.raises(ApiException) as err:  # name in body differs from the URL
        core.replace_namespaced_pod("u", ns, pod("v", ns))
    assert err.value.status == 400
    assert "does not match the name on the URL" in status_of(err.value)["message"]
    with pytest.raises(ApiException) as err:  # pods are not created by PUT
        core.replace_namespaced_pod("absent", ns, pod("absent", ns))
    assert err.value.status == 404


def test_every_write_bumps_the_resource_version(api: FakeKubeApi, core: client.CoreV1Api,
                                                ns: str) -> None:
    seen = [api.resource_version]
    seen.append(int(core.create_namespaced_pod(ns, pod("rv", ns)).metadata.resource_version))
    seen.append(int(core.patch_namespaced_pod("rv", ns, {"metadata": {"labels": {"x": "1"}}})
                    .metadata.resource_version))
    node = api.create("nodes", {"metadata": {"name": f"{ns}-node"}})
    seen.append(int(node["metadata"]["resourceVersion"]))
    core.delete_namespaced_pod("rv", ns)
    seen.append(api.resource_version)
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    # A write that changes nothing keeps the version, as on the real server.
    same = api.patch("nodes", f"{ns}-node", {"metadata": {"labels": None}})
    assert same["metadata"]["resourceVersion"] == node["metadata"]["resourceVersion"]


# Optimistic concurrency -----------------------------------------------------------------


def test_replace_with_stale_resource_version_conflicts(core: client.CoreV1Api) -> None:
    node = core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="conflicted")))
    stale = node.metadata.resource_version
    node.metadata.labels = {"first": "yes"}
    fresh = core.replace_node("conflicted", node)
    assert fresh.metadata.resource_version != stale
    node.metadata.labels = {"second": "yes"}
    node.metadata.resource_version = stale
    with pytest.raises(ApiException) as err:
        core.replace_node("conflicted", node)
    assert err.value.status == 409
    body = status_of(err.value)
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on nodes "conflicted": the object has been modified; '
        "please apply your changes to the latest version and try again")
    assert core.read_node("conflicted").metadata.labels == {"first": "yes"}


def test_merge_patch(core: client.CoreV1Api, apps: client.AppsV1Api, ns: str) -> None:
    core.create_namespaced_pod(ns, pod("m", ns, labels={"keep": "1", "drop": "1"}))
    patched = core.patch_namespaced_pod(
        "m", ns, {"metadata": {"labels": {"drop": None, "new": "2"}}},
        _content_type="application/merge-patch+json")
    assert patched.metadata.labels == {"keep": "1", "new": "2"}
    apps.create_namespaced_deployment(ns, deployment("m", ns, [{"name": "main", "image": "i"}]))
    patched_deployment = apps.patch_namespaced_deployment(
        "m", ns, {"spec": {"template": {"spec": {"containers": [{"name": "other",
                                                                  "image": "x"}]}}}},
        _content_type="application/merge-patch+json")
    # RFC 7386 replaces lists whole.
    assert [c.name for c in patched_deployment.spec.template.spec.containers] == ["other"]
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("m", ns, {"metadata": {"resourceVersion": "1",
                                                         "labels": {"late": "1"}}},
                                  _content_type="application/merge-patch+json")
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"
    current = patched.metadata.resource_version
    ok = core.patch_namespaced_pod("m", ns, {"metadata": {"resourceVersion": current,
                                                          "labels": {"late": "1"}}},
                                   _content_type="application/merge-patch+json")
    assert ok.metadata.labels["late"] == "1"


def test_strategic_merge_patch(api: FakeKubeApi, core: client.CoreV1Api, apps: client.AppsV1Api,
                               ns: str) -> None:
    node_name = f"{ns}-n"
    api.create("nodes", {"metadata": {"name": node_name},
                         "spec": {"taints": [{"key": "a", "effect": "NoSchedule"},
                                             {"key": "b", "effect": "NoExecute"}]},
                         "status": {"conditions": [{"type": "Ready", "status": "True"},
                                                   {"type": "DiskPressure", "status": "False"}]}})
    # The client sends dict bodies as strategic merge patches.
    node = core.patch_node(node_name, {"spec": {"taints": [{"key": "c", "effect": "NoSchedule"}],
                                                "unschedulable": True}})
    assert [t.key for t in node.spec.taints] == ["c"]  # replaced whole, like the real server
    assert node.spec.unschedulable is True
    node = core.patch_node_status(node_name, {"status": {"conditions": [
        {"type": "Ready", "status": "False"}]}})
    assert [(c.type, c.status) for c in node.status.conditions] == [
        ("Ready", "False"), ("DiskPressure", "False")]  # merged by type

    body = deployment("s", ns, [
        {"name": "c1", "image": "one", "env": [{"name": "A", "value": "1"}]},
        {"name": "c2", "image": "two"}], tolerations=[{"key": "t1"}, {"key": "t2"}])
    body["metadata"]["finalizers"] = ["example.com/f1"]
    api.create("deployments", body)

    def template_patch(spec: Obj, **metadata: Any) -> Obj:
        return {"metadata": metadata, "spec": {"template": {"spec": spec}}}

    patched = apps.patch_namespaced_deployment("s", ns, template_patch(
        {"containers": [{"name": "c1", "env": [{"name": "B", "value": "2"}]},
                        {"name": "c2", "image": "two:v2"},
                        {"name": "c3", "image": "three"}],
         "tolerations": [{"key": "t3"}]}, finalizers=["example.com/f2"]))
    by_name = {c.name: c for c in patched.spec.template.spec.containers}
    assert list(by_name) == ["c1", "c2", "c3"]
    assert by_name["c1"].image == "one"
    assert [(e.name, e.value) for e in by_name["c1"].env] == [("A", "1"), ("B", "2")]
    assert by_name["c2"].image == "two:v2"
    assert [t.key for t in patched.spec.template.spec.tolerations] == ["t3"]
    assert patched.metadata.finalizers == ["example.com/f1", "example.com/f2"]
    patched = apps.patch_namespaced_deployment("s", ns, template_patch(
        {"containers": [{"name": "c1", "$patch": "delete"}]}, labels={"x": "y"}))
    assert [c.name for c in patched.spec.template.spec.containers] == ["c2", "c3"]
    patched = apps.patch_namespaced_deployment("s", ns, template_patch(
        {"containers": [{"$patch": "replace"}, {"name": "only", "image": "i"}]}))
    assert [c.name for c in patched.spec.template.spec.containers] == ["only"]
    patched = apps.patch_namespaced_deployment("s", ns, {"metadata": {"labels": {
        "$patch": "replace", "z": "1"}}})
    assert patched.metadata.labels == {"z": "1"}
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("s", ns, {"metadata": {"resourceVersion": "2"}})
    assert err.value.status == 409


def test_json_patch(core: client.CoreV1Api, apps: client.AppsV1Api, ns: str) -> None:
    core.create_namespaced_pod(ns, pod("j", ns, labels={"a": "1"}))
    body = deployment("j", ns, [{"name": "main", "image": "busybox"}])
    body["metadata"]["labels"] = {"a": "1"}
    apps.create_namespaced_deployment(ns, body)
    containers = "/spec/template/spec/containers"
    patched = apps.patch_namespaced_deployment("j", ns, [
        {"op": "add", "path": "/metadata/labels/b", "value": "2"},
        {"op": "replace", "path": f"{containers}/0/image", "value": "busybox:2"},
        {"op": "remove", "path": "/metadata/labels/a"},
        {"op": "add", "path": f"{containers}/-", "value": {"name": "side", "image": "s"}},
        {"op": "copy", "from": "/metadata/labels/b", "path": "/metadata/labels/c"},
        {"op": "test", "path": "/metadata/name", "value": "j"},
    ])
    assert patched.metadata.labels == {"b": "2", "c": "2"}
    assert [c.image for c in patched.spec.template.spec.containers] == ["busybox:2", "s"]
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("j", ns, [{"op": "test", "path": "/metadata/name",
                                             "value": "k"}])
    assert err.value.status == 422
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("j", ns, [{"op": "remove", "path": "/spec/nothing"}])
    assert err.value.status == 422
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("j", ns, [{"op": "replace", "path": "/metadata/resourceVersion",
                                             "value": "1"}])
    assert err.value.status == 409


def test_update_keeps_identity_and_status_subresource_only_touches_status(
        api: FakeKubeApi, core: client.CoreV1Api, ns: str) -> None:
    created = api.create("pods", pod("ident", ns, node="n1"))
    body = api.get("pods", "ident", ns)
    body["metadata"]["uid"] = "forged"  # refused as a real server refuses it (objectmeta.go)
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_pod("ident", ns, body)
    assert err.value.status == 422
    assert [c["field"] for c in status_of(err.value)["details"]["causes"]] == ["metadata.uid"]
    body["metadata"]["uid"] = ""  # an empty uid and any creationTimestamp: the stored ones
    body["metadata"]["creationTimestamp"] = "2001-01-01T00:00:00Z"
    replaced = core.replace_namespaced_pod("ident", ns, body, _preload_content=False)
    meta = orjson.loads(replaced.data)["metadata"]
    assert meta["uid"] == created["metadata"]["uid"]
    assert meta["creationTimestamp"] == created["metadata"]["creationTimestamp"]

    current = api.get("pods", "ident", ns)
    current["spec"]["nodeName"] = "elsewhere"
    current["status"] = {"phase": "Running"}
    core.replace_namespaced_pod_status("ident", ns, current)
    stored = api.get("pods", "ident", ns)
    assert stored["status"] == {"phase": "Running"}
    assert stored["spec"]["nodeName"] == "n1"


def test_delete_preconditions(core: client.CoreV1Api, ns: str) -> None:
    created = core.create_namespaced_pod(ns, pod("d", ns))
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod("d", ns, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(resource_version="1")))
    assert err.value.status == 409
    assert "precondition" in status_of(err.value)["message"]
    core.delete_namespaced_pod("d", ns, body=client.V1DeleteOptions(
        preconditions=client.V1Preconditions(resource_version=created.metadata.resource_version,
                                             uid=created.metadata.uid)))
    assert core.list_namespaced_pod(ns).items == []


# Selectors -----------------------------------------------------------------------------


def test_label_selectors(api: FakeKubeApi, core: client.CoreV1Api, ns: str) -> None:
    api.create("pods", pod("web", ns, labels={"app": "web", "tier": "front", "n": "3"}))
    api.create("pods", pod("api", ns, labels={"app": "api", "tier": "back", "n": "7"}))
    api.create("pods", pod("db", ns, labels={"app": "db"}))
    api.create("pods", pod("bare", ns))
    cases = {
        "app=web": ["web"],
        "app==api": ["api"],
        "app!=web": ["api", "bare", "db"],
        "app in (web,db)": ["db", "web"],
        "app notin (web)": ["api", "bare", "db"],
        "tier": ["api", "web"],
        "!tier": ["bare", "db"],
        "app,tier=back": ["api"],
        "tier, app in (web, api), app!=api": ["web"],
        "n>4": ["api"],
        "n<4": ["web"],
        "": ["api", "bare", "db", "web"],
    }
    for selector, expected in cases.items():
        got = sorted(names(core.list_namespaced_pod(ns, label_selector=selector).items))
        assert got == expected, selector
        assert sorted(names(api.list("pods", ns, label_selector=selector))) == expected
    for bad in ("app in web", "app=(x)", "a b", "app in ()", ",", "=x"):
        with pytest.raises(ApiException) as err:
            core.list_namespaced_pod(ns, label_selector=bad)
        assert err.value.status == 400, bad
        assert status_of(err.value)["reason"] == "BadRequest"


def test_field_selectors(api: FakeKubeApi, core: client.CoreV1Api, ns: str) -> None:
    n1, n2 = f"{ns}-n1", f"{ns}-n2"  # node names of this test's own
    api.create("pods", pod("a", ns, node=n1, phase="Running"))
    api.create("pods", pod("b", ns, node=n2, phase="Succeeded"))
    api.create("pods", pod("c", ns))
    cases = {
        f"spec.nodeName={n1}": ["a"],
        f"spec.nodeName=={n2}": ["b"],
        "spec.nodeName=": ["c"],
        f"spec.nodeName!={n1}": ["b", "c"],
        "status.phase!=Succeeded,status.phase!=Failed": ["a", "c"],
        "metadata.name=b": ["b"],
        f"metadata.namespace={ns}": ["a", "b", "c"],
        "metadata.namespace=elsewhere": [],
    }
    for selector, expected in cases.items():
        got = sorted(names(core.list_namespaced_pod(ns, field_selector=selector).items))
        assert got == expected, selector
    everywhere = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={n1}").items
    assert [(p.metadata.namespace, p.metadata.name) for p in everywhere] == [(ns, "a")]
    for bad in ("spec.unknown=x", "status.podIPs=x"):
        with pytest.raises(ApiException) as err:
            core.list_namespaced_pod(ns, field_selector=bad)
        assert err.value.status == 400
        assert status_of(err.value)["message"] == f"field label not supported: {bad[:-2]}"
    with pytest.raises(ApiException) as err:
        core.list_node(field_selector="metadata.namespace=x")  # nodes are cluster-scoped
    assert err.value.status == 400
    unschedulable = api.create("nodes", {"metadata": {"name": f"{ns}-cordoned"},
                                         "spec": {"unschedulable": True}})
    got = names(core.list_node(field_selector="spec.unschedulable=true").items)
    assert unschedulable["metadata"]["name"] in got
    assert f"{ns}-cordoned" not in names(
        core.list_node(field_selector="spec.unschedulable=false").items)


def test_selector_parser_directly() -> None:
    selector = parse_label_selector("a.io/b=c, d notin (e,f)")
    assert selector.matches({"a.io/b": "c"})
    assert not selector.matches({"a.io/b": "c", "d": "f"})
    with pytest.raises(SelectorError):
        parse_label_selector("a=b,")
    fields = parse_field_selector(r"metadata.name=a\,b", ["metadata.name"])
    assert fields.matches(lambda f: "a,b") and not fields.matches(lambda f: "a")
    with pytest.raises(SelectorError):
        parse_field_selector("nonsense", ["metadata.name"])


# Paging ----------------------------------------------------------------------------------


def test_paging_returns_each_pod_once_in_order(api: FakeKubeApi, core: client.CoreV1Api,
                                               ns: str) -> None:
    for i in range(2500):
        api.create("pods", pod(f"p-{i:05d}", ns, labels={"even": str(i % 2 == 0).lower()}))
    seen: list[str] = []
    token: str | None = None
    pages = 0
    while True:
        raw = core.list_namespaced_pod(ns, limit=700, _continue=token, _preload_content=False)
        body = orjson.loads(raw.data)
        pages += 1
        seen.extend(names(body["items"]))
        meta = body["metadata"]
        assert meta["resourceVersion"]
        token = meta.get("continue")
        if token is None:
            assert "remainingItemCount" not in meta
            break
        assert meta["remainingItemCount"] == 2500 - len(seen)
    assert pages == 4
    assert seen == [f"p-{i:05d}" for i in range(2500)]

    # Typed client, with a label selector: every even pod exactly once.
    evens: list[str] = []
    token = None
    while True:
        page = core.list_namespaced_pod(ns, limit=400, _continue=token, label_selector="even=true")
        evens.extend(names(page.items))
        token = page.metadata._continue
        if not token:
            break
    assert evens == [f"p-{i:05d}" for i in range(0, 2500, 2)]
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod(ns, limit=10, _continue="not-a-token")
    assert err.value.status == 400


def test_all_namespace_listing_orders_by_namespace_then_name(
        api: FakeKubeApi, coord: client.CoordinationV1Api, ns: str) -> None:
    for namespace in (f"{ns}-b", f"{ns}-a"):
        for name in ("y", "x"):
            api.create("leases", {"metadata": {"name": name}, "spec": {}}, namespace=namespace)
    items = []
    token = None
    while True:
        page = coord.list_lease_for_all_namespaces(limit=1, _continue=token)
        items.extend((i.metadata.namespace, i.metadata.name) for i in page.items)
        token = page.metadata._continue
        if not token:
            break
    mine = [i for i in items if i[0].startswith(ns)]
    assert mine == [(f"{ns}-a", "x"), (f"{ns}-a", "y"), (f"{ns}-b", "x"), (f"{ns}-b", "y")]
    assert items == sorted(items)


# Subresources ----------------------------------------------------------------------------


def test_eviction(api: FakeKubeApi, core: client.CoreV1Api, ns: str) -> None:
    api.create("pods", pod("free", ns))
    api.create("pods", pod("guarded", ns))
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="free", namespace=ns))
    core.create_namespaced_pod_eviction("free", ns, eviction)
    assert names(core.list_namespaced_pod(ns).items) == ["guarded"]

    api.set_eviction_blocked(ns, "guarded", True)
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="guarded", namespace=ns))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("guarded", ns, eviction)
    assert err.value.status == 429
    body = status_of(err.value)
    assert body["reason"] == "TooManyRequests"
    assert "disruption budget" in body["message"]
    assert names(core.list_namespaced_pod(ns).items) == ["guarded"]
    api.set_eviction_blocked(ns, "guarded", False)
    core.create_namespaced_pod_eviction("guarded", ns, eviction)
    assert core.list_namespaced_pod(ns).items == []
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("guarded", ns, eviction)
    assert err.value.status == 404


def test_deployment_scale(api: FakeKubeApi, apps: client.AppsV1Api, ns: str) -> None:
    apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}},
    })
    api.patch("deployments", "web", {"status": {"replicas": 2}}, namespace=ns)
    scale = apps.read_namespaced_deployment_scale("web", ns)
    assert scale.kind == "Scale" and scale.api_version == "autoscaling/v1"
    assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (2, 2, "app=web")

    patched = apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 5}})
    assert patched.spec.replicas == 5
    deployment = apps.read_namespaced_deployment("web", ns)
    assert deployment.spec.replicas == 5 and deployment.metadata.generation == 2

    stale = scale.metadata.resource_version
    scale.spec.replicas = 1
    with pytest.raises(ApiException) as err:
        apps.replace_namespaced_deployment_scale("web", ns, scale)
    assert err.value.status == 409
    scale.metadata.resource_version = None
    assert apps.replace_namespaced_deployment_scale("web", ns, scale).spec.replicas == 1
    assert apps.read_namespaced_deployment("web", ns).metadata.resource_version != stale
    with pytest.raises(ApiException) as err:
        apps.read_namespaced_deployment_scale("absent", ns)
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'deployments.apps "absent" not found'


def test_leases(coord: client.CoordinationV1Api, ns: str) -> None:
    lease = coord.create_namespaced_lease(ns, client.V1Lease(
        metadata=client.V1ObjectMeta(name="leader"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15)))
    stale = lease.metadata.resource_version
    lease.spec.holder_identity = "b"
    renewed = coord.replace_namespaced_lease("leader", ns, lease)
    assert renewed.spec.holder_identity == "b"
    lease.spec.holder_identity = "c"
    lease.metadata.resource_version = stale
    with pytest.raises(ApiException) as err:
        coord.replace_namespaced_lease("leader", ns, lease)
    assert err.value.status == 409
    assert status_of(err.value)["message"].startswith(
        'Operation cannot be fulfilled on leases.coordination.k8s.io "leader"')
    assert coord.read_namespaced_lease("leader", ns).spec.holder_identity == "b"
    # Leases, unlike pods, may be created by PUT.
    made = coord.replace_namespaced_lease("other", ns, client.V1Lease(
        metadata=client.V1ObjectMeta(name="other"), spec=client.V1LeaseSpec(holder_identity="z")))
    assert made.metadata.uid
    assert sorted(names(coord.list_namespaced_lease(ns).items)) == ["leader", "other"]


def test_events(api: FakeKubeApi, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_event(ns, {
        "metadata": {"name": "e1"}, "reason": "ScaleUp", "type": "Normal",
        "involvedObject": {"kind": "Node", "name": "n1"}, "source": {"component": "elevator"}})
    api.create("events", {"metadata": {"name": "e2"}, "reason": "Other",
                          "involvedObject": {"kind": "Pod", "name": "p"}}, namespace=ns)
    assert names(core.list_namespaced_event(ns, field_selector="involvedObject.kind=Node,"
                                            "source=elevator").items) == ["e1"]
    assert names(core.list_namespaced_event(ns, field_selector="reason=Other").items) == ["e2"]
    everywhere = core.list_event_for_all_namespaces(field_selector="reason=ScaleUp").items
    assert (ns, "e1") in [(e.metadata.namespace, e.metadata.name) for e in everywhere]


# Server-side printing ---------------------------------------------------------------


def test_table_responses_for_kubectl_get(api: FakeKubeApi, api_client: client.ApiClient,
                                         ns: str) -> None:
    api.create("pods", {"metadata": {"name": "t1", "namespace": ns},
                        "spec": {"nodeName": "n1", "containers": [{"name": "a", "image": "i"},
                                                                  {"name": "b", "image": "i"}]},
                        "status": {"phase": "Running", "podIP": "10.0.0.9",
                                   "containerStatuses": [{"name": "a", "ready": True,
                                                          "restartCount": 3},
                                                         {"name": "b", "ready": False}]}})
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    resp = api_client.call_api("GET", f"{api.url}/api/v1/namespaces/{ns}/pods?limit=500",
                               header_params={"Accept": accept})
    resp.read()
    table = orjson.loads(resp.data)
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    columns = [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0]
    assert columns == ["Name", "Ready", "Status", "Restarts", "Age"]
    [row] = table["rows"]
    assert row["cells"][:4] == ["t1", "1/2", "Running", "3"]
    assert row["cells"][5:7] == ["10.0.0.9", "n1"]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["namespace"] == ns


def test_human_duration_matches_kubectl() -> None:
    cases = {5: "5s", 119: "119s", 125: "2m5s", 600: "10m", 3 * 3600 + 60: "3h1m",
             30 * 3600: "30h", 3 * 86400 + 7200: "3d2h", 40 * 86400: "40d",
             3 * 365 * 86400: "3y"}
    for seconds, expected in cases.items():
        assert human_duration(seconds) == expected, seconds


# Fault injection ----------------------------------------------------------------------


def test_fail_next_lists(api: FakeKubeApi, core: client.CoreV1Api, ns: str) -> None:
    api.create("pods", pod("f", ns))
    api.fail_next("list", "pods", count=2, status=500)
    before = len(api.requests)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.list_namespaced_pod(ns)
        assert err.value.status == 500
        assert status_of(err.value)["reason"] == "InternalError"
    core.read_namespaced_pod("f", ns)  # a get is not a list: untouched
    assert names(core.list_namespaced_pod(ns).items) == ["f"]
    served = [(r.verb, r.resource, r.namespace, r.status) for r in api.requests[before:]]
    assert served == [("list", "pods", ns, 500), ("list", "pods", ns, 500),
                      ("get", "pods", ns, 200), ("list", "pods", ns, 200)]


def test_fail_next_429_by_name_and_wildcards(api: FakeKubeApi, core: client.CoreV1Api,
                                             ns: str) -> None:
    api.create("pods", pod("a", ns))
    api.create("pods", pod("b", ns))
    api.fail_next("patch", "pods", status=429, name="b")
    core.patch_namespaced_pod("a", ns, {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("b", ns, {"metadata": {"labels": {"x": "1"}}})
    assert err.value.status == 429
    assert err.value.headers["Retry-After"] == "1"
    assert status_of(err.value)["reason"] == "TooManyRequests"
    core.patch_namespaced_pod("b", ns, {"metadata": {"labels": {"x": "1"}}})
    api.fail_next("*", "pods/eviction", status=503)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("a", ns, {"metadata": {"name": "a"}})
    assert err.value.status == 503
    for verb, resource in (("list", "pod"), ("evict", "pods"), ("create", "pods/evict")):
        with pytest.raises(ValueError):  # a typo must not silently never match
            api.fail_next(verb, resource)
    patches = [r for r in api.requests if r.verb == "patch" and r.namespace == ns]
    assert [(r.name, r.status) for r in patches] == [("a", 200), ("b", 429), ("b", 200)]
    assert api.requests[-1].full_resource == "pods/eviction"


def test_delay_next(api: FakeKubeApi, core: client.CoreV1Api, ns: str) -> None:
    api.delay_next("get", "pods", 0.3)
    api.create("pods", pod("slow", ns))
    started = time.monotonic()
    core.read_namespaced_pod("slow", ns)
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    core.read_namespaced_pod("slow", ns)
    assert time.monotonic() - started < 0.3


# Watch ------------------------------------------------------------------------------------


def test_watch_resumes_from_a_resource_version(api: FakeKubeApi, core: client.CoreV1Api,
                                               ns: str) -> None:
    api.create("pods", pod("before", ns))
    since = api.resource_version
    api.create("pods", pod("w", ns))
    api.patch("pods", "w", {"metadata": {"labels": {"step": "2"}}}, namespace=ns)
    api.delete("pods", "w", namespace=ns)
    w = watch.Watch()
    events = []
    for event in w.stream(core.list_namespaced_pod, ns, resource_version=str(since),
                          timeout_seconds=10):
        events.append((event["type"], event["object"].metadata.name,
                       event["object"].metadata.labels))
        if len(events) == 3:
            w.stop()
    assert events == [("ADDED", "w", {}), ("MODIFIED", "w", {"step": "2"}),
                      ("DELETED", "w", {"step": "2"})]


def test_watch_streams_live_events(api: FakeKubeApi, core: client.CoreV1Api, ns: str) -> None:
    api.create("pods", pod("existing", ns, labels={"watched": "yes"}))
    assert api.wait_for_watchers("pods", 0)  # earlier tests' watches are gone

    def writer() -> None:
        assert api.wait_for_watchers("pods", 1)
        core.create_namespaced_pod(ns, pod("live", ns, labels={"watched": "yes"}))
        core.create_namespaced_pod(ns, pod("ignored", ns, labels={"watched": "no"}))
        core.patch_namespaced_pod("live", ns, {"metadata": {"labels": {"watched": "no"}}})
        core.delete_namespaced_pod("existing", ns)

    thread = threading.Thread(target=writer)
    thread.start()
    w = watch.Watch()
    events = []
    for event in w.stream(core.list_namespaced_pod, ns, label_selector="watched=yes",
                          timeout_seconds=10):
        events.append((event["type"], event["object"].metadata.name))
        if len(events) == 4:
            w.stop()
    thread.join()
    # Without a resourceVersion the watch starts with the current state; a pod that
    # leaves the selector arrives as DELETED, as from the real watch cache.
    assert events == [("ADDED", "existing"), ("ADDED", "live"), ("DELETED", "live"),
                      ("DELETED", "existing")]
    # The client hung up: the server notices and drops the watch.
    assert api.wait_for_watchers("pods", 0)


def test_watch_ends_at_timeout_and_sends_initial_events_end_bookmark(
        api: FakeKubeApi, core: client.CoreV1Api, ns: str) -> None:
    api.create("pods", pod("one", ns))
    resp = core.list_namespaced_pod(ns, watch=True, timeout_seconds=1, send_initial_events=True,
                                    allow_watch_bookmarks=True,
                                    resource_version_match="NotOlderThan",
                                    _preload_content=False)
    assert resp.headers["Transfer-Encoding"] == "chunked"
    lines = [orjson.loads(line) for line in resp.read().splitlines()]
    assert [e["type"] for e in lines] == ["ADDED", "BOOKMARK"]
    assert lines[0]["object"]["kind"] == "Pod"
    bookmark = lines[1]["object"]["metadata"]
    assert bookmark["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(bookmark["resourceVersion"]) >= int(lines[0]["object"]["metadata"]
                                                    ["resourceVersion"])


def test_watch_with_too_old_resource_version_gets_410() -> None:
    small = FakeKubeApi(history_size=5)
    with small, small.api_client() as c:
        core = client.CoreV1Api(c)
        url = small.url
        first = small.create("pods", pod("p0", "default"))["metadata"]["resourceVersion"]
        for i in range(1, 10):
            small.create("pods", pod(f"p{i}", "default"))
        raw = core.list_namespaced_pod("default", watch=True, resource_version=first,
                                       _preload_content=False)
        lines = [orjson.loads(line) for line in raw.read().splitlines()]
        assert len(lines) == 1 and lines[0]["type"] == "ERROR"
        status = lines[0]["object"]
        assert (status["code"], status["reason"]) == (410, "Expired")
        with pytest.raises(ApiException) as err:
            for _ in watch.Watch().stream(core.list_namespaced_pod, "default",
                                          resource_version=first):
                pass
        assert err.value.status == 410
        # Still within the history: replayed.
        recent = small.get("pods", "p7", "default")["metadata"]["resourceVersion"]
        raw = core.list_namespaced_pod("default", watch=True, resource_version=recent,
                                       timeout_seconds=1, _preload_content=False)
        replay = [orjson.loads(line)["object"]["metadata"]["name"]
                  for line in raw.read().splitlines()]
        assert replay == ["p8", "p9"]
    # Stopped: the port no longer accepts connections.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=scaled(2))


# In-process API ---------------------------------------------------------------------


def test_in_process_api(api: FakeKubeApi, core: client.CoreV1Api, ns: str) -> None:
    created = api.create("pods", pod("ip", ns, node="n9"))
    with pytest.raises(KeyError):
        api.get("pods", "absent", ns)
    with pytest.raises(NotFound):
        api.delete("pods", "absent", ns)
    fetched = api.get("pods", "ip", ns)
    fetched["metadata"]["labels"]["mutated"] = "locally"  # copies: the store is untouched
    assert "mutated" not in api.get("pods", "ip", ns)["metadata"]["labels"]
    assert names(api.list("pods", field_selector="spec.nodeName=n9")) == ["ip"]
    stale = dict(created)
    api.patch("pods", "ip", {"metadata": {"labels": {"v": "2"}}}, namespace=ns)
    with pytest.raises(Conflict):
        api.replace("pods", stale, namespace=ns)
    current = api.get("pods", "ip", ns)
    current["spec"]["nodeName"] = "n10"
    assert api.replace("pods", current)["spec"]["nodeName"] == "n10"
    patched = api.patch("pods", "ip", {"spec": {"containers": [{"name": "main", "image": "b2"}]}},
                        namespace=ns, kind="strategic")
    assert [(c["name"], c["image"]) for c in patched["spec"]["containers"]] == [("main", "b2")]
    patched = api.patch("pods", "ip", [{"op": "add", "path": "/metadata/labels/j", "value": "1"}],
                        namespace=ns, kind="json")
    assert patched["metadata"]["labels"] == {"v": "2", "j": "1"}
    # In-process writes are visible over HTTP, with the same resourceVersion.
    assert core.read_namespaced_pod("ip", ns).metadata.resource_version == \
        patched["metadata"]["resourceVersion"]
    api.delete("pods", "ip", ns)
    assert api.list("pods", ns) == []
    with pytest.raises(ValueError):
        api.get("widgets", "x")


# kubectl -------------------------------------------------------------------------------


@needs_kubectl
def test_kubectl_get_taint_describe(api: FakeKubeApi, tmp_path: Path) -> None:
    api.create("nodes", {"metadata": {"name": "kn1", "labels": {"role": "worker"}},
                         "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                    "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                    "conditions": [{"type": "Ready", "status": "True"}]}})
    api.create("pods", {"metadata": {"name": "kp1", "namespace": "kubectl-ns"},
                        "spec": {"nodeName": "kn1", "containers": [
                            {"name": "c", "image": "i",
                             "resources": {"requests": {"cpu": "250m"}}}]}})
    api.create("leases", {"metadata": {"name": "kn1"}, "spec": {"holderIdentity": "kn1"}},
               namespace="kube-node-lease")
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")

    def kubectl(*args: str) -> str:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"),
             *args], capture_output=True, text=True, timeout=scaled(60), check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    listing = kubectl("get", "nodes,pods", "-A")
    assert re.search(r"node/kn1\s+Ready\s+<none>\s+\d+s", listing), listing
    assert re.search(r"kubectl-ns\s+pod/kp1\s+0/1\s+Pending\s+0\s+\d+s", listing), listing
    assert re.search(r"kube-node-lease\s+kn1\s+kn1", kubectl("get", "leases", "-A"))
    assert "node/kn1 tainted" in kubectl("taint", "nodes", "kn1", "a=b:NoSchedule")
    assert api.get("nodes", "kn1")["spec"]["taints"] == [
        {"effect": "NoSchedule", "key": "a", "value": "b"}]
    described = kubectl("describe", "node", "kn1")
    assert re.search(r"Taints:\s+a=b:NoSchedule", described)
    assert re.search(r"kubectl-ns\s+kp1\s+250m", described)
    assert re.search(r"HolderIdentity:\s+kn1", described)
