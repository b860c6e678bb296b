"""Two CustomResourceDefinitions with one plural in two groups, served side by side as a real API
server serves them: `widgets.a.example.com` and `widgets.b.example.com`, each at its own URL
with objects of its own, through every verb, subresource, field selector, watch and deletion,
seen through the official client's CustomObjectsApi and kubectl.

Upstream rules: apiextensions-apiserver pkg/controller/status/naming_controller.go
(`getAcceptedNamesForGroup`: names conflict within a group only); the aggregator's group order
in discovery (kube-aggregator pkg/apis/apiregistration/v1/helper/helpers.go
`ByGroupPriorityMinimum`, 1000 for every CRD group, ties by APIService name `v1.a.example.com`),
which kubectl's RESTMapper takes as its priority for a name two groups serve.
"""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.tools import needs_kubectl

Obj = dict[str, Any]
A, B, VERSION, PLURAL, NS = "a.example.com", "b.example.com", "v1", "widgets", "default"


def widget_crd(group: str, *, versions: tuple[str, ...] = (VERSION,),
               selectable: tuple[str, ...] = ()) -> Obj:
    """A namespaced Widget CRD in `group`, with /status, /scale and the given field selectors."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget"},
                 "versions": [{
                     "name": version, "served": True, "storage": i == 0,
                     "subresources": {"status": {}, "scale": {
                         "specReplicasPath": ".spec.replicas",
                         "statusReplicasPath": ".status.replicas"}},
                     "selectableFields": [{"jsonPath": path} for path in selectable],
                     "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
                     for i, version in enumerate(versions)]}}


def widget(group: str, name: str, color: str, replicas: int = 1,
           version: str = VERSION) -> Obj:
    return {"apiVersion": f"{group}/{version}", "kind": "Widget",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"color": color, "replicas": replicas}}


@pytest.fixture
def api() -> Iterator[FakeKubeApi]:
    """A server of the test's own: the groups' order in discovery is the test's subject."""
    with FakeKubeApi() as server:
        yield server


@pytest.fixture
def api_client(api: FakeKubeApi) -> Iterator[client.ApiClient]:
    with api.api_client() as c:
        yield c


@pytest.fixture
def objects(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def two_groups(api_client: client.ApiClient) -> None:
    """widgets.a.example.com (with `.spec.color` selectable) and widgets.b.example.com."""
    ext = client.ApiextensionsV1Api(api_client)
    for crd in (widget_crd(A, selectable=(".spec.color",)), widget_crd(B)):
        created = ext.create_custom_resource_definition(crd)
        conditions = {c.type: (c.status, c.reason) for c in created.status.conditions}
        assert conditions["NamesAccepted"] == ("True", "NoConflicts"), conditions
        assert conditions["Established"][0] == "True"


def names(listed: Obj) -> list[str]:
    return [item["metadata"]["name"] for item in listed["items"]]


@pytest.mark.usefixtures("two_groups")
def test_each_group_serves_objects_of_its_own(objects: client.CustomObjectsApi) -> None:
    objects.create_namespaced_custom_object(A, VERSION, NS, PLURAL, widget(A, "w", "red"))
    objects.create_namespaced_custom_object(B, VERSION, NS, PLURAL, widget(B, "w", "blue", 3))
    objects.create_namespaced_custom_object(B, VERSION, NS, PLURAL, widget(B, "only-b", "blue"))
    assert objects.get_namespaced_custom_object(A, VERSION, NS, PLURAL, "w")["spec"] == \
        {"color": "red", "replicas": 1}
    got_b = objects.get_namespaced_custom_object(B, VERSION, NS, PLURAL, "w")
    assert (got_b["apiVersion"], got_b["spec"]["color"]) == (f"{B}/{VERSION}", "blue")
    assert names(objects.list_namespaced_custom_object(A, VERSION, NS, PLURAL)) == ["w"]
    assert names(objects.list_cluster_custom_object(B, VERSION, PLURAL)) == ["only-b", "w"]
    with pytest.raises(ApiException) as absent:
        objects.get_namespaced_custom_object(A, VERSION, NS, PLURAL, "only-b")
    assert absent.value.status == 404

    # patch, /status and /scale of one group's object leave the other group's alone
    objects.patch_namespaced_custom_object(A, VERSION, NS, PLURAL, "w",
                                           {"spec": {"color": "green"}})
    objects.patch_namespaced_custom_object_status(A, VERSION, NS, PLURAL, "w",
                                                  {"status": {"replicas": 1}})
    objects.patch_namespaced_custom_object_scale(B, VERSION, NS, PLURAL, "w",
                                                 {"spec": {"replicas": 5}})
    a_now = objects.get_namespaced_custom_object(A, VERSION, NS, PLURAL, "w")
    b_now = objects.get_namespaced_custom_object(B, VERSION, NS, PLURAL, "w")
    assert (a_now["spec"], a_now["status"]) == ({"color": "green", "replicas": 1},
                                                {"replicas": 1})
    assert (b_now["spec"], "status" in b_now) == ({"color": "blue", "replicas": 5}, False)
    assert objects.get_namespaced_custom_object_scale(A, VERSION, NS, PLURAL, "w")[
        "spec"]["replicas"] == 1

    objects.delete_namespaced_custom_object(A, VERSION, NS, PLURAL, "w")
    assert names(objects.list_namespaced_custom_object(A, VERSION, NS, PLURAL)) == []
    assert names(objects.list_namespaced_custom_object(B, VERSION, NS, PLURAL)) == ["only-b", "w"]


@pytest.mark.usefixtures("two_groups")
def test_field_selectors_are_each_groups_own(objects: client.CustomObjectsApi) -> None:
    """A's CRD makes `.spec.color` selectable, B's does not: B refuses it as a real server does
    for a field its CRD does not name."""
    objects.create_namespaced_custom_object(A, VERSION, NS, PLURAL, widget(A, "red", "red"))
    objects.create_namespaced_custom_object(A, VERSION, NS, PLURAL, widget(A, "blue", "blue"))
    objects.create_namespaced_custom_object(B, VERSION, NS, PLURAL, widget(B, "red", "red"))
    assert names(objects.list_namespaced_custom_object(
        A, VERSION, NS, PLURAL, field_selector="spec.color=red")) == ["red"]
    with pytest.raises(ApiException) as refused:
        objects.list_namespaced_custom_object(B, VERSION, NS, PLURAL,
                                              field_selector="spec.color=red")
    assert refused.value.status == 400
    assert names(objects.list_namespaced_custom_object(
        B, VERSION, NS, PLURAL, field_selector="metadata.name=red")) == ["red"]


@pytest.mark.usefixtures("two_groups")
def test_a_watch_sees_its_own_group_only(api: FakeKubeApi,
                                         objects: client.CustomObjectsApi) -> None:
    """B's object is created first: a watch on A that leaked B's events would see it first."""
    start = objects.list_namespaced_custom_object(A, VERSION, NS, PLURAL)["metadata"][
        "resourceVersion"]
    seen: list[tuple[str, str, str]] = []

    def follow() -> None:
        for event in watch.Watch().stream(objects.list_namespaced_custom_object, A, VERSION,
                                          NS, PLURAL, resource_version=start,
                                          timeout_seconds=int(scaled(10))):
            obj = event["object"]
            seen.append((event["type"], obj["apiVersion"], obj["metadata"]["name"]))
            return

    watcher = threading.Thread(target=follow)
    watcher.start()
    assert api.wait_for_watchers(f"{PLURAL}.{A}", 1, timeout=scaled(10))
    objects.create_namespaced_custom_object(B, VERSION, NS, PLURAL, widget(B, "from-b", "b"))
    objects.create_namespaced_custom_object(A, VERSION, NS, PLURAL, widget(A, "from-a", "a"))
    watcher.join(timeout=scaled(10))
    assert seen == [("ADDED", f"{A}/{VERSION}", "from-a")]


@pytest.mark.usefixtures("two_groups")
def test_deleting_one_crd_removes_only_its_objects(api: FakeKubeApi,
                                                   api_client: client.ApiClient,
                                                   objects: client.CustomObjectsApi) -> None:
    objects.create_namespaced_custom_object(A, VERSION, NS, PLURAL, widget(A, "w", "red"))
    objects.create_namespaced_custom_object(B, VERSION, NS, PLURAL, widget(B, "w", "blue"))
    client.ApiextensionsV1Api(api_client).delete_custom_resource_definition(f"{PLURAL}.{A}")
    with pytest.raises(ApiException) as gone:
        objects.list_namespaced_custom_object(A, VERSION, NS, PLURAL)
    assert gone.value.status == 404
    assert names(objects.list_namespaced_custom_object(B, VERSION, NS, PLURAL)) == ["w"]
    assert [g.name for g in client.ApisApi(api_client).get_api_versions().groups
            if g.name in (A, B)] == [B]
    # in-process, the bare plural now names the one left
    assert [w["metadata"]["name"] for w in api.list(PLURAL, NS)] == ["w"]


@pytest.mark.usefixtures("two_groups")
def test_discovery_lists_each_under_its_group_and_in_process_names_need_the_group(
        api: FakeKubeApi, api_client: client.ApiClient) -> None:
    groups = [g.name for g in client.ApisApi(api_client).get_api_versions().groups]
    # the aggregator's order: built-in groups by their priority, then the CRD groups (1000)
    assert groups == ["apps", "events.k8s.io", "policy", "apiextensions.k8s.io",
                      "coordination.k8s.io", A, B]
    for group in (A, B):
        listed = client.CustomObjectsApi(api_client).get_api_resources(group, VERSION)
        assert [(r.name, r.kind) for r in listed.resources] == [
            (PLURAL, "Widget"), (f"{PLURAL}/status", "Widget"), (f"{PLURAL}/scale", "Scale")]
    with pytest.raises(ValueError, match="ambiguous"):
        api.list(PLURAL)
    api.create(f"{PLURAL}.{B}", widget(B, "in-process", "b"))
    assert [w["metadata"]["name"] for w in api.list(f"{PLURAL}.{B}")] == ["in-process"]
    assert api.list(f"{PLURAL}.{A}") == []


def test_names_still_conflict_within_a_group(api_client: client.ApiClient) -> None:
    """A second CRD of group A whose singular is A's widgets' plural is not accepted."""
    ext = client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition(widget_crd(A))
    clash = widget_crd(A)
    clash["metadata"]["name"] = f"gizmos.{A}"
    clash["spec"]["names"] = {"plural": "gizmos", "singular": PLURAL, "kind": "Gizmo"}
    created = ext.create_custom_resource_definition(clash)
    accepted = next(c for c in created.status.conditions if c.type == "NamesAccepted")
    assert (accepted.status, accepted.reason, accepted.message) == \
        ("False", "SingularConflict", f'"{PLURAL}" is already in use')
    with pytest.raises(ApiException) as unserved:
        client.CustomObjectsApi(api_client).list_cluster_custom_object(A, VERSION, "gizmos")
    assert unserved.value.status == 404


# kubectl --------------------------------------------------------------------------------------

def kubectl(api: FakeKubeApi, tmp: Path, *args: str) -> str:
    """kubectl with a fresh discovery cache (the groups change between calls)."""
    kubeconfig = api.write_kubeconfig(tmp / "kubeconfig")
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir",
         str(tmp / f"cache-{uuid.uuid4().hex}"), *args],
        capture_output=True, text=True, timeout=scaled(60), check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@needs_kubectl
@pytest.mark.usefixtures("two_groups")
def test_kubectl_resolves_each_group_and_picks_by_discovery_order(
        api: FakeKubeApi, objects: client.CustomObjectsApi, tmp_path: Path) -> None:
    objects.create_namespaced_custom_object(A, VERSION, NS, PLURAL, widget(A, "from-a", "a"))
    objects.create_namespaced_custom_object(B, VERSION, NS, PLURAL, widget(B, "from-b", "b"))
    assert kubectl(api, tmp_path, "get", f"{PLURAL}.{A}", "-o", "name") == \
        f"widget.{A}/from-a\n"
    assert kubectl(api, tmp_path, "get", f"{PLURAL}.{B}", "-o", "name") == \
        f"widget.{B}/from-b\n"
    assert kubectl(api, tmp_path, "get", f"{PLURAL}.{VERSION}.{B}", "-o", "name") == \
        f"widget.{B}/from-b\n"
    # `-o name` prints kind.group/name. The bare plural: kubectl's RESTMapper takes the
    # first group discovery lists.
    assert kubectl(api, tmp_path, "get", PLURAL, "-o", "name") == f"widget.{A}/from-a\n"
    resources = kubectl(api, tmp_path, "api-resources", "--api-group", B, "-o", "name")
    assert resources.split() == [f"{PLURAL}.{B}"]


@needs_kubectl
def test_kubectl_priority_follows_the_apiservice_names_not_the_group_names(
        api: FakeKubeApi, api_client: client.ApiClient,
        objects: client.CustomObjectsApi, tmp_path: Path) -> None:
    """Group A serves only v2, group B v1: the APIServices sort `v1.b.example.com` before
    `v2.a.example.com`, so discovery lists B first and a bare `widgets` is B's."""
    ext = client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition(widget_crd(A, versions=("v2",)))
    ext.create_custom_resource_definition(widget_crd(B))
    objects.create_namespaced_custom_object(A, "v2", NS, PLURAL,
                                            widget(A, "from-a", "a", version="v2"))
    objects.create_namespaced_custom_object(B, VERSION, NS, PLURAL, widget(B, "from-b", "b"))
    groups = [g.name for g in client.ApisApi(api_client).get_api_versions().groups]
    assert groups[-2:] == [B, A]
    assert kubectl(api, tmp_path, "get", PLURAL, "-o", "name") == f"widget.{B}/from-b\n"
    listed = json.loads(kubectl(api, tmp_path, "get", f"{PLURAL}.{A}", "-o", "json"))
    assert [i["metadata"]["name"] for i in listed["items"]] == ["from-a"]
