"""`deletecollection` (DELETE on a collection URL) with selectors, for a built-in kind and a
custom resource, through the official client over HTTP: what it deletes, what it answers (the
list of the deleted, as the generic registry's DeleteCollection), finalizers, watch events."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.builders import crd_manifest

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def api_client(api: FakeKubeApi) -> Iterator[client.ApiClient]:
    with api.api_client() as c:
        yield c


def _pod(name: str, **labels: str) -> Obj:
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def test_deletecollection_of_pods_deletes_what_the_selectors_match(
        api: FakeKubeApi, api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    for ns in ("dc-a", "dc-b"):
        for name, tier in (("web-1", "web"), ("web-2", "web"), ("db-1", "db")):
            api.create("pods", _pod(name, tier=tier), namespace=ns)
    answer = core.delete_collection_namespaced_pod("dc-a", label_selector="tier=web",
                                                   _preload_content=False)
    body = json.loads(answer.data)
    assert body["kind"] == "PodList"
    assert sorted(p["metadata"]["name"] for p in body["items"]) == ["web-1", "web-2"]
    assert sorted(p["metadata"]["name"] for p in api.list("pods", namespace="dc-a")) == ["db-1"]
    assert len(api.list("pods", namespace="dc-b")) == 3  # another namespace is untouched
    core.delete_collection_namespaced_pod("dc-b", field_selector="metadata.name=db-1")
    assert sorted(p["metadata"]["name"] for p in api.list("pods", namespace="dc-b")) == \
        ["web-1", "web-2"]
    assert any(r.verb == "deletecollection" and r.status == 200 for r in api.requests)


def test_deletecollection_of_custom_objects_keeps_finalized_ones_and_tells_watches(
        api: FakeKubeApi, api_client: client.ApiClient) -> None:
    api.install_crd(crd_manifest("dc.example.com", "gadgets", "Gadget"))
    objects = client.CustomObjectsApi(api_client)
    for name, finalizers in (("g1", []), ("g2", ["example.com/hold"]), ("g3", [])):
        objects.create_namespaced_custom_object("dc.example.com", "v1", "dc", "gadgets", {
            "apiVersion": "dc.example.com/v1", "kind": "Gadget",
            "metadata": {"name": name, "finalizers": finalizers, "labels": {"app": "x"}}})
    rv = objects.list_namespaced_custom_object("dc.example.com", "v1", "dc",
                                               "gadgets")["metadata"]["resourceVersion"]
    events: list[tuple[str, str]] = []

    def watch_them() -> None:
        w = watch.Watch()
        for event in w.stream(objects.list_namespaced_custom_object, "dc.example.com", "v1",
                              "dc", "gadgets", resource_version=rv, timeout_seconds=5):
            events.append((event["type"], event["object"]["metadata"]["name"]))
            if len(events) == 3:
                w.stop()

    watcher = threading.Thread(target=watch_them)
    watcher.start()
    assert api.wait_for_watchers("gadgets", 1)
    deleted = objects.delete_collection_namespaced_custom_object(
        "dc.example.com", "v1", "dc", "gadgets", label_selector="app=x")
    watcher.join(10)
    assert sorted(i["metadata"]["name"] for i in deleted["items"]) == ["g1", "g2", "g3"]
    held = api.get("gadgets", "g2", namespace="dc")
    assert held["metadata"]["deletionTimestamp"]  # the finalizer holds it
    assert [o["metadata"]["name"] for o in api.list("gadgets", namespace="dc")] == ["g2"]
    assert sorted(events) == [("DELETED", "g1"), ("DELETED", "g3"), ("MODIFIED", "g2")]


def test_deletecollection_is_in_discovery_and_can_be_faulted(
        api: FakeKubeApi, api_client: client.ApiClient) -> None:
    resources = client.CoreV1Api(api_client).get_api_resources().resources
    pods = next(r for r in resources if r.name == "pods")
    assert "deletecollection" in pods.verbs
    api.fail_next("deletecollection", "pods", status=500)
    with pytest.raises(client.ApiException) as raised:
        client.CoreV1Api(api_client).delete_collection_namespaced_pod("dc-c")
    assert raised.value.status == 500
