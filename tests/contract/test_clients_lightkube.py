"""lightkube (sync `Client` and `AsyncClient`) against the fake API: a CRD it creates, its objects
through every verb and subresource, server-side apply with conflicts, built-in kinds, events,
leases and eviction."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, AsyncClient, Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.resources.events_v1 import Event as EventV1
from lightkube.types import PatchType

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.builders import crd_manifest

Obj = dict[str, Any]
GROUP = "lightkube.example.com"
Widget = create_namespaced_resource(GROUP, "v1", "Widget", "widgets")


def widget_crd() -> Obj:
    return crd_manifest(GROUP, "widgets", "Widget")


def widget(name: str, ns: str, replicas: int = 1, **labels: str) -> Any:
    return Widget(metadata=ObjectMeta(name=name, namespace=ns, labels=labels),
                  spec={"replicas": replicas, "size": "m"})


@pytest.fixture(scope="module")
def config(api: FakeKubeApi, tmp_path_factory: pytest.TempPathFactory) -> KubeConfig:
    path: Path = api.write_kubeconfig(tmp_path_factory.mktemp("lightkube") / "kubeconfig")
    return KubeConfig.from_file(path)


@pytest.fixture(scope="module")
def client(config: KubeConfig) -> Client:
    kube = Client(config=config, field_manager="lightkube-test")
    crd = kube.create(CustomResourceDefinition.from_dict(widget_crd()))
    assert {c.type: c.status for c in crd.status.conditions} == {
        "NamesAccepted": "True", "Established": "True"}
    return kube


def test_lightkube_sync_custom_resources(api: FakeKubeApi, client: Client) -> None:
    ns = "lk-sync"
    client.create(widget("a", ns, tier="web"))
    client.create(widget("b", ns, tier="db"))
    assert client.get(Widget, "a", namespace=ns).spec == {"replicas": 1, "size": "m"}
    assert [w.metadata.name for w in client.list(Widget, namespace=ns, labels={"tier": "web"})] \
        == ["a"]
    assert [w.metadata.name for w in client.list(Widget, namespace="*",
                                                 fields={"metadata.name": "b"})] == ["b"]
    assert [w.metadata.name for w in client.list(Widget, namespace=ns, chunk_size=1)] == ["a", "b"]
    since = client.get(Widget, "b", namespace=ns).metadata.resourceVersion
    client.patch(Widget, "a", {"spec": {"size": "l"}}, namespace=ns, patch_type=PatchType.MERGE)
    client.patch(Widget, "a", [{"op": "replace", "path": "/spec/replicas", "value": 2}],
                 namespace=ns, patch_type=PatchType.JSON)
    with pytest.raises(ApiError) as strategic:
        client.patch(Widget, "a", {"spec": {"size": "s"}}, namespace=ns)  # STRATEGIC default
    assert strategic.value.status.code == 415
    current = client.get(Widget, "a", namespace=ns)
    current.spec["size"] = "xl"
    replaced = client.replace(current)
    assert (replaced.spec["size"], replaced.metadata.generation) == ("xl", 4)
    with pytest.raises(ApiError) as stale:
        client.replace(current)
    assert stale.value.status.code == 409
    client.replace(Widget.Status(metadata=ObjectMeta(name="a", namespace=ns,
                                                     resourceVersion=replaced.metadata
                                                     .resourceVersion),
                                 status={"replicas": 2}))
    client.patch(Widget.Status, "a", {"status": {"ready": True}}, namespace=ns,
                 patch_type=PatchType.MERGE)
    assert client.get(Widget, "a", namespace=ns).status == {"replicas": 2, "ready": True}
    assert client.get(Widget.Scale, "a", namespace=ns).spec.replicas == 2
    client.patch(Widget.Scale, "a", {"spec": {"replicas": 3}}, namespace=ns,
                 patch_type=PatchType.MERGE)
    assert api.get("widgets", "a", ns)["spec"]["replicas"] == 3
    seen = []  # lightkube's watch never ends: it watches again from where it was
    for kind, obj in client.watch(Widget, namespace=ns, resource_version=since, server_timeout=5):
        seen.append((kind, obj.metadata.name))
        if len(seen) == 6:  # merge, json, put, 2 status, scale
            break
    assert set(seen) == {("MODIFIED", "a")}
    client.delete(Widget, "b", namespace=ns)
    assert [w.metadata.name for w in client.list(Widget, namespace=ns)] == ["a"]


def test_lightkube_sync_server_side_apply(client: Client) -> None:
    ns = "lk-apply"
    client.apply(widget("w", ns, replicas=1), field_manager="alice")
    with pytest.raises(ApiError) as conflict:
        client.apply(widget("w", ns, replicas=2), field_manager="bob")
    assert conflict.value.status.code == 409
    assert conflict.value.status.details.causes[0].field == ".spec.replicas"
    applied = client.apply(widget("w", ns, replicas=2), field_manager="bob", force=True)
    assert applied.spec["replicas"] == 2
    assert {m.manager for m in applied.metadata.managedFields} == {"alice", "bob"}
    deployment = Deployment.from_dict({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
    made = client.apply(deployment, field_manager="alice")
    assert made.spec.replicas == 2
    client.patch(Deployment, "web", {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "envoy"}]}}}}, namespace=ns)  # strategic: merged by name
    assert [c.name for c in client.get(Deployment, "web", namespace=ns)
            .spec.template.spec.containers] == ["web", "sidecar"]


def test_lightkube_sync_built_ins(api: FakeKubeApi, client: Client) -> None:
    ns = "lk-builtins"
    lease = client.create(Lease.from_dict({"metadata": {"name": "leader", "namespace": ns},
                                           "spec": {"holderIdentity": "me"}}))
    lease.spec.holderIdentity = "you"
    assert client.replace(lease).spec.holderIdentity == "you"
    client.create(EventV1.from_dict({
        "metadata": {"generateName": "web-", "namespace": ns},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reason": "Scaled", "type": "Normal",
        "action": "Scale", "note": "to 3", "reportingController": "lk",
        "reportingInstance": "lk-0", "regarding": {"kind": "Deployment", "name": "web"}}))
    (event,) = client.list(EventV1, namespace=ns)
    assert event.metadata.name.startswith("web-") and event.note == "to 3"
    assert api.list("events", ns)[0]["message"] == "to 3"  # the core spelling too
    client.create(Pod.from_dict({"metadata": {"name": "p", "namespace": ns},
                                 "spec": {"containers": [{"name": "c", "image": "i"}]}}))
    client.create(Pod.Eviction(metadata=ObjectMeta(name="p", namespace=ns)), "p", namespace=ns)
    assert api.list("pods", ns) == []
    client.create(ConfigMap(metadata=ObjectMeta(name="held", namespace=ns,
                                                finalizers=["example.com/x"])))
    client.delete(ConfigMap, "held", namespace=ns)
    assert client.get(ConfigMap, "held", namespace=ns).metadata.deletionTimestamp is not None
    client.patch(ConfigMap, "held", {"metadata": {"finalizers": None}}, namespace=ns,
                 patch_type=PatchType.MERGE)
    assert api.list("configmaps", ns) == []


def test_lightkube_async(api: FakeKubeApi, client: Client, config: KubeConfig) -> None:
    ns = "lk-async"

    async def run() -> list[tuple[str, str]]:
        kube = AsyncClient(config=config, field_manager="lightkube-async")
        try:
            await kube.create(widget("a", ns))
            await kube.apply(widget("b", ns, replicas=2), field_manager="async-apply")
            got = await kube.get(Widget, "b", namespace=ns)
            await kube.patch(Widget, "a", {"metadata": {"labels": {"x": "y"}}}, namespace=ns,
                             patch_type=PatchType.MERGE)
            await kube.patch(Widget.Status, "a", {"status": {"ok": True}}, namespace=ns,
                             patch_type=PatchType.MERGE)
            listed = [w.metadata.name async for w in kube.list(Widget, namespace=ns,
                                                                labels={"x": "y"})]
            assert listed == ["a"] and got.spec["replicas"] == 2
            await kube.delete(Widget, "b", namespace=ns)
            seen = []
            async for kind, obj in kube.watch(Widget, namespace=ns, server_timeout=5):
                seen.append((kind, obj.metadata.name))
                break  # the current state comes first, then it would watch for ever
            return seen
        finally:
            await kube.close()

    assert asyncio.run(run()) == [("ADDED", "a")]
    assert api.get("widgets", "a", ns)["status"] == {"ok": True}
