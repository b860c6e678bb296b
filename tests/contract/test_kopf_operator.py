"""A small kopf operator end to end against the fake API, in-process (its own thread and loop):
a CRD, a create handler that patches status and posts an event, the finalizer kopf adds for
its delete handler and removes when that handler has run.  Peering off (standalone)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import kopf
import pytest
from kubernetes import client, watch

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.resources import TOKEN
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.builders import crd_manifest

Obj = dict[str, Any]
GROUP, PLURAL, NS = "kopf.example.com", "tasks", "kopf-ns"
CRD = crd_manifest(GROUP, PLURAL, "Task", scale=False)


def operator_registry(url: str, deleted: list[str]) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=url, token=TOKEN, insecure=True)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.level = logging.INFO  # kopf.info() events are posted
        settings.watching.server_timeout = 30
        settings.networking.request_timeout = 10

    @kopf.on.create(GROUP, "v1", PLURAL, registry=registry)
    def created(spec: Obj, body: Any, patch: kopf.Patch, **_: Any) -> None:
        patch.status["phase"] = "Ready"
        patch.status["size"] = spec.get("size", 0) * 2
        kopf.info(body, reason="Created", message=f"task of size {spec.get('size')} ready")

    @kopf.on.delete(GROUP, "v1", PLURAL, registry=registry)
    def removed(name: str, **_: Any) -> None:
        deleted.append(name)

    return registry


@pytest.fixture(scope="module")
def operator(api: FakeKubeApi) -> Iterator[list[str]]:
    """The operator running in a thread of its own until the module's tests end."""
    api.install_crd(CRD)
    deleted: list[str] = []
    stop, ready = threading.Event(), threading.Event()
    registry = operator_registry(api.url, deleted)

    def run() -> None:
        asyncio.run(kopf.operator(registry=registry, standalone=True, namespaces=[NS],
                                  stop_flag=stop, ready_flag=ready))

    thread = threading.Thread(target=run, name="kopf-operator", daemon=True)
    api.create("namespaces", {"metadata": {"name": NS}})
    thread.start()
    try:
        assert ready.wait(scaled(30)), "the kopf operator did not start"
        assert api.wait_for_watchers(PLURAL, 1, timeout=scaled(30)), "kopf does not watch its tasks"
        yield deleted
    finally:
        stop.set()
        thread.join(timeout=scaled(30))
    assert not thread.is_alive()


def wait_for(objects: client.CustomObjectsApi, name: str,
             done: Callable[[str, Obj], bool], since: str = "") -> Obj:
    """The first state of the task that `done` accepts, as a watch delivers it (from `since`,
    a resourceVersion, or the current state)."""
    for event in watch.Watch().stream(objects.list_namespaced_custom_object, GROUP, "v1", NS,
                                      PLURAL, field_selector=f"metadata.name={name}",
                                      resource_version=since or None, timeout_seconds=30):
        if done(event["type"], event["object"]):
            obj: Obj = event["object"]
            return obj
    raise AssertionError(f"task {name} never reached the awaited state")


def test_kopf_operator_handles_create_status_events_finalizer_and_delete(
        api: FakeKubeApi, operator: list[str]) -> None:
    with api.api_client() as api_client:
        objects = client.CustomObjectsApi(api_client)
        objects.create_namespaced_custom_object(GROUP, "v1", NS, PLURAL, {
            "apiVersion": f"{GROUP}/v1", "kind": "Task",
            "metadata": {"name": "t1"}, "spec": {"size": 21}})
        ready = wait_for(objects, "t1",
                         lambda _, o: (o.get("status") or {}).get("phase") == "Ready")
        assert ready["status"]["size"] == 42
        assert "kopf.zalando.org/KopfFinalizerMarker" in ready["metadata"]["finalizers"]
        # kopf posts its events from a queue of its own, after or before the status patch.
        core = client.CoreV1Api(api_client)
        posted = next(e["object"] for e in watch.Watch().stream(
            core.list_namespaced_event, NS, field_selector="involvedObject.name=t1,reason=Created",
            timeout_seconds=30))
        assert (posted.message, posted.involved_object.kind) == ("task of size 21 ready", "Task")
        assert posted.source.component == "kopf"

        since = objects.get_namespaced_custom_object(GROUP, "v1", NS, PLURAL, "t1")[
            "metadata"]["resourceVersion"]
        objects.delete_namespaced_custom_object(GROUP, "v1", NS, PLURAL, "t1")
        gone = wait_for(objects, "t1", lambda kind, _: kind == "DELETED", since)
        assert gone["metadata"]["deletionTimestamp"]
        assert operator == ["t1"]
        assert api.list(PLURAL, NS) == []
