"""kr8s (sync and `kr8s.asyncio`) against the fake API: discovery of a CRD's kind, its objects through
create/get/selectors/patch/status/scale/watch/delete, and built-in kinds."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import kr8s
import kr8s.asyncio
import pytest
from kr8s.objects import ConfigMap, new_class

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.builders import crd_manifest

Obj = dict[str, Any]
GROUP = "kr8s.example.com"


def gizmo(name: str, ns: str, replicas: int = 1, **labels: str) -> Obj:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Gizmo",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"replicas": replicas, "colour": "red"}}


@pytest.fixture(scope="module")
def api() -> Iterator[FakeKubeApi]:
    with FakeKubeApi() as server:
        server.install_crd(crd_manifest(GROUP, "gizmos", "Gizmo", short_names=("gz",)))
        yield server


@pytest.fixture(scope="module")
def kubeconfig(api: FakeKubeApi, tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(api.write_kubeconfig(tmp_path_factory.mktemp("kr8s") / "kubeconfig"))


def test_kr8s_sync_custom_resources(api: FakeKubeApi, kubeconfig: str) -> None:
    ns = "kr8s-sync"
    client = kr8s.api(kubeconfig=kubeconfig)
    assert any(r["name"] == "gizmos" for r in client.api_resources())
    Gizmo = new_class("Gizmo", f"{GROUP}/v1", asyncio=False, namespaced=True, scalable=True,
                      plural="gizmos")
    one = Gizmo(gizmo("one", ns, tier="web"), api=client)
    one.create()
    Gizmo(gizmo("two", ns, tier="db"), api=client).create()
    assert [g.name for g in client.get("gizmos", namespace=ns, label_selector={"tier": "web"})] \
        == ["one"]
    assert [g.name for g in client.get("gz", namespace=ns,
                                       field_selector="metadata.name=two")] == ["two"]
    since = one.metadata["resourceVersion"]
    one.label(team="a")
    one.patch({"spec": {"colour": "blue"}})
    one.patch([{"op": "replace", "path": "/spec/replicas", "value": 2}], type="json")
    one.patch({"status": {"replicas": 2}}, subresource="status")
    one.refresh()
    assert (one.spec["colour"], one.spec["replicas"], one.status["replicas"]) == ("blue", 2, 2)
    assert one.labels == {"tier": "web", "team": "a"}
    one.scale(3)
    assert api.get("gizmos", "one", ns)["spec"]["replicas"] == 3
    seen = []
    for kind, obj in client.watch("gizmos", namespace=ns, since=since):
        seen.append((kind, obj.name))
        if len(seen) == 6:
            break
    # From one's creation on: two's, then label, merge, json, status and scale.
    assert seen == [("ADDED", "two")] + [("MODIFIED", "one")] * 5
    Gizmo.get("two", namespace=ns, api=client).delete()
    assert [g.name for g in client.get("gizmos", namespace=ns)] == ["one"]


def test_kr8s_sync_built_ins(api: FakeKubeApi, kubeconfig: str) -> None:
    ns = "kr8s-builtins"
    client = kr8s.api(kubeconfig=kubeconfig)
    Lease = new_class("Lease", "coordination.k8s.io/v1", asyncio=False, namespaced=True)
    lease = Lease({"metadata": {"name": "leader", "namespace": ns},
                   "spec": {"holderIdentity": "me"}}, api=client)
    lease.create()
    lease.patch({"spec": {"holderIdentity": "you"}})
    assert api.get("leases", "leader", ns)["spec"]["holderIdentity"] == "you"
    held = ConfigMap({"metadata": {"name": "held", "namespace": ns,
                                   "finalizers": ["example.com/x"]}}, api=client)
    held.create()
    held.delete()
    held.refresh()
    assert held.metadata["deletionTimestamp"]
    held.patch({"metadata": {"finalizers": None}})
    assert not held.exists()


def test_kr8s_async(api: FakeKubeApi, kubeconfig: str) -> None:
    ns = "kr8s-async"

    async def run() -> list[tuple[str, str]]:
        client = await kr8s.asyncio.api(kubeconfig=kubeconfig)
        Gizmo = new_class("Gizmo", f"{GROUP}/v1", asyncio=True, namespaced=True,
                          scalable=True, plural="gizmos")
        made = await Gizmo(gizmo("a", ns), api=client)
        await made.create()
        await made.patch({"metadata": {"labels": {"x": "y"}}})
        await made.patch({"status": {"ok": True}}, subresource="status")
        listed = [g.name async for g in client.get("gizmos", namespace=ns, label_selector="x=y")]
        assert listed == ["a"]
        seen = []
        async for kind, obj in client.watch("gizmos", namespace=ns):
            seen.append((kind, obj.name))
            break  # the current state first; the watch itself would go on
        await made.delete()
        return seen

    assert asyncio.run(run()) == [("ADDED", "a")]
    assert api.list("gizmos", ns) == []
