"""Custom resources, finalizers, server-side apply and events.k8s.io against the fake API, driven by
the official `kubernetes` client over HTTP (kubectl, kr8s, lightkube and kopf: test_clients*.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.builders import crd_manifest

Obj = dict[str, Any]
GROUP, VERSION, PLURAL = "stable.example.com", "v1", "crontabs"


def crontab_crd(*, versions: tuple[str, ...] = (VERSION,)) -> Obj:
    return crd_manifest(GROUP, PLURAL, "CronTab", versions=versions, short_names=("ct",))


def crontab(name: str, ns: str = "default", **labels: str) -> Obj:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "CronTab",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"cronSpec": "* * * * */5", "replicas": 1}}


@pytest.fixture(scope="module")
def api_client(api: FakeKubeApi) -> Iterator[client.ApiClient]:
    """The official client on the module's server."""
    with api.api_client() as c:
        yield c


@pytest.fixture
def ext(api_client: client.ApiClient) -> client.ApiextensionsV1Api:
    return client.ApiextensionsV1Api(api_client)


@pytest.fixture
def objects(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def crd(ext: client.ApiextensionsV1Api) -> Iterator[Obj]:
    """The CronTab CRD, created over HTTP for the test and deleted after it."""
    created = ext.create_custom_resource_definition(crontab_crd())
    yield client.ApiClient().sanitize_for_serialization(created)
    try:
        ext.delete_custom_resource_definition(f"{PLURAL}.{GROUP}")
    except ApiException as exc:
        assert exc.status == 404


def status_of(exc: ApiException) -> Obj:
    body: Obj = json.loads(exc.body)
    return body


def call(api_client: client.ApiClient, method: str, path: str, body: Any = None, *,
         content_type: str = "application/json", **query: str) -> Obj:
    """One raw request through the client's own HTTP stack; raises ApiException on a failure
    Status, as the client's typed methods do."""
    url = api_client.configuration.host + path
    if query:
        url += "?" + urlencode(query)
    headers = {"Content-Type": content_type} if body is not None else {}
    resp = api_client.call_api(method, url, header_params=headers, body=body)
    resp.read()
    if resp.status >= 400:
        raise ApiException(status=resp.status, reason=resp.reason, body=resp.data.decode())
    result: Obj = json.loads(resp.data)
    return result


def test_a_posted_crd_is_established_and_discovered(api_client: client.ApiClient,
                                                    ext: client.ApiextensionsV1Api,
                                                    crd: Obj) -> None:
    conditions = {c["type"]: c for c in crd["status"]["conditions"]}
    assert conditions["Established"]["status"] == "True"
    assert conditions["NamesAccepted"]["status"] == "True"
    assert crd["status"]["acceptedNames"]["listKind"] == "CronTabList"
    assert crd["metadata"]["generation"] == 1
    listed = ext.list_custom_resource_definition(field_selector=f"metadata.name={PLURAL}.{GROUP}")
    assert [c.metadata.name for c in listed.items] == [f"{PLURAL}.{GROUP}"]
    groups = {g.name: g for g in client.ApisApi(api_client).get_api_versions().groups}
    assert groups[GROUP].preferred_version.group_version == f"{GROUP}/{VERSION}"
    group = call(api_client, "GET", f"/apis/{GROUP}")
    assert group["kind"] == "APIGroup" and group["name"] == GROUP
    resources = call(api_client, "GET", f"/apis/{GROUP}/{VERSION}")["resources"]
    by_name = {r["name"]: r for r in resources}
    assert by_name[PLURAL]["kind"] == "CronTab" and by_name[PLURAL]["shortNames"] == ["ct"]
    assert by_name[f"{PLURAL}/status"]["verbs"] == ["get", "patch", "update"]
    assert by_name[f"{PLURAL}/scale"]["group"] == "autoscaling"


def test_custom_objects_crud_selectors_and_watch(api: FakeKubeApi, crd: Obj,
                                                 objects: client.CustomObjectsApi) -> None:
    args = (GROUP, VERSION, "team-a", PLURAL)
    objects.create_namespaced_custom_object(*args, crontab("one", "team-a", tier="web"))
    objects.create_namespaced_custom_object(*args, crontab("two", "team-a", tier="db"))
    objects.create_namespaced_custom_object(GROUP, VERSION, "team-b", PLURAL,
                                            crontab("one", "team-b", tier="web"))
    got = objects.get_namespaced_custom_object(*args, "one")
    assert got["kind"] == "CronTab" and got["apiVersion"] == f"{GROUP}/{VERSION}"
    assert got["metadata"]["generation"] == 1

    def listed(**query: str) -> list[str]:
        found = objects.list_cluster_custom_object(GROUP, VERSION, PLURAL, **query)
        assert found["kind"] == "CronTabList"
        return [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in found["items"]]

    assert listed(label_selector="tier=web") == ["team-a/one", "team-b/one"]
    assert listed(field_selector="metadata.name=one,metadata.namespace=team-b") == ["team-b/one"]
    assert listed(field_selector="metadata.namespace!=team-a") == ["team-b/one"]
    with pytest.raises(ApiException) as bad:
        listed(field_selector="spec.cronSpec=x")
    assert bad.value.status == 400
    with pytest.raises(ApiException) as taken:
        objects.create_namespaced_custom_object(*args, crontab("one", "team-a"))
    assert taken.value.status == 409 and status_of(taken.value)["reason"] == "AlreadyExists"

    got["spec"]["cronSpec"] = "* * * * */1"
    replaced = objects.replace_namespaced_custom_object(*args, "one", got)
    assert replaced["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as stale:
        objects.replace_namespaced_custom_object(*args, "one", got)  # got's old version
    assert stale.value.status == 409 and status_of(stale.value)["reason"] == "Conflict"
    patched = objects.patch_namespaced_custom_object(*args, "one",
                                                     {"metadata": {"labels": {"tier": "x"}}})
    assert patched["metadata"]["labels"] == {"tier": "x"}
    assert patched["metadata"]["generation"] == 2  # metadata alone: no new generation
    json_patched = call(objects.api_client, "PATCH",
                        f"/apis/{GROUP}/{VERSION}/namespaces/team-a/{PLURAL}/one",
                        [{"op": "replace", "path": "/spec/replicas", "value": 4}],
                        content_type="application/json-patch+json")
    assert json_patched["spec"]["replicas"] == 4
    with pytest.raises(ApiException) as unsupported:
        call(objects.api_client, "PATCH", f"/apis/{GROUP}/{VERSION}/namespaces/team-a/{PLURAL}/one",
             {"spec": {"replicas": 5}}, content_type="application/strategic-merge-patch+json")
    assert unsupported.value.status == 415
    assert "strategic" not in status_of(unsupported.value)["message"]

    since = patched["metadata"]["resourceVersion"]
    events = [(e["type"], e["object"]["metadata"]["name"]) for e in watch.Watch().stream(
        objects.list_namespaced_custom_object, *args, resource_version=since,
        timeout_seconds=1)]
    assert events == [("MODIFIED", "one")]
    objects.delete_namespaced_custom_object(*args, "two")
    assert listed(label_selector="tier=db") == []
    assert api.list(PLURAL, "team-a")[0]["spec"]["replicas"] == 4  # in-process, same store


def test_status_and_scale_subresources_keep_to_their_part(crd: Obj,
                                                          objects: client.CustomObjectsApi
                                                          ) -> None:
    args = (GROUP, VERSION, "default", PLURAL)
    made = objects.create_namespaced_custom_object(
        *args, {**crontab("s"), "status": {"replicas": 9}})
    assert "status" not in made  # status is the /status subresource's to write
    made["status"] = {"replicas": 1, "selector": "app=s"}
    made["spec"]["cronSpec"] = "ignored"
    after_status = objects.replace_namespaced_custom_object_status(*args, "s", made)
    assert after_status["status"] == {"replicas": 1, "selector": "app=s"}
    assert after_status["spec"]["cronSpec"] == "* * * * */5"  # a status write ignores spec
    after_status["status"] = {"replicas": 7}
    after_status["spec"]["replicas"] = 2
    after_main = objects.replace_namespaced_custom_object(*args, "s", after_status)
    assert after_main["status"] == {"replicas": 1, "selector": "app=s"}  # and vice versa
    assert after_main["spec"]["replicas"] == 2
    scale = objects.get_namespaced_custom_object_scale(*args, "s")
    assert (scale["kind"], scale["spec"], scale["status"]) == (
        "Scale", {"replicas": 2}, {"replicas": 1, "selector": "app=s"})
    patched = objects.patch_namespaced_custom_object_scale(*args, "s", {"spec": {"replicas": 5}})
    assert patched["spec"]["replicas"] == 5
    assert objects.get_namespaced_custom_object(*args, "s")["spec"]["replicas"] == 5


def test_deleting_the_crd_deletes_its_objects_and_ends_their_watches(
        api: FakeKubeApi, ext: client.ApiextensionsV1Api, crd: Obj,
        objects: client.CustomObjectsApi) -> None:
    args = (GROUP, VERSION, "default", PLURAL)
    objects.create_namespaced_custom_object(*args, crontab("doomed"))
    seen: list[tuple[str, str]] = []

    def watch_them() -> None:
        for event in watch.Watch().stream(objects.list_namespaced_custom_object, *args,
                                          timeout_seconds=20):
            seen.append((event["type"], event["object"]["metadata"]["name"]))

    watcher = threading.Thread(target=watch_them)
    watcher.start()
    assert api.wait_for_watchers(PLURAL, 1)
    ext.delete_custom_resource_definition(f"{PLURAL}.{GROUP}")
    watcher.join(timeout=scaled(10))
    assert not watcher.is_alive() and seen == [("ADDED", "doomed"), ("DELETED", "doomed")]
    with pytest.raises(ApiException) as gone:
        objects.list_namespaced_custom_object(*args)
    assert gone.value.status == 404
    # Created again: served again, and empty.
    ext.create_custom_resource_definition(crontab_crd())
    assert objects.list_namespaced_custom_object(*args)["items"] == []


def test_crd_names_in_use_are_not_accepted_and_versions_share_objects(
        api: FakeKubeApi, ext: client.ApiextensionsV1Api, objects: client.CustomObjectsApi
        ) -> None:
    clash = crontab_crd()
    clash["metadata"]["name"] = "pods.other.example.com"
    clash["spec"].update(group="other.example.com")
    clash["spec"]["names"].update(plural="pods", kind="NotAPod")
    refused = ext.create_custom_resource_definition(clash)
    conditions = {c.type: c for c in refused.status.conditions}
    assert conditions["NamesAccepted"].status == "False"
    assert conditions["Established"].status == "False"
    with pytest.raises(ApiException) as unserved:
        objects.list_cluster_custom_object("other.example.com", VERSION, "pods")
    assert unserved.value.status == 404
    ext.delete_custom_resource_definition("pods.other.example.com")
    with pytest.raises(ApiException) as misnamed:
        ext.create_custom_resource_definition({**crontab_crd(), "metadata": {"name": "x"}})
    assert misnamed.value.status == 422

    ext.create_custom_resource_definition(crontab_crd(versions=("v1", "v2")))
    try:
        # A body of the version written to (a v1 body on v2 is refused with 400, as a real
        # server does: validation_test.go TestForProperValidationErrors "bad version").
        objects.create_namespaced_custom_object(GROUP, "v2", "default", PLURAL,
                                                {**crontab("both"), "apiVersion": f"{GROUP}/v2"})
        as_v1 = objects.get_namespaced_custom_object(GROUP, "v1", "default", PLURAL, "both")
        assert as_v1["apiVersion"] == f"{GROUP}/v1"
        group = next(g for g in client.ApisApi(objects.api_client).get_api_versions().groups
                     if g.name == GROUP)
        assert [v.version for v in group.versions] == ["v1", "v2"]
    finally:
        ext.delete_custom_resource_definition(f"{PLURAL}.{GROUP}")


def test_install_crd_and_register_custom_resource_store_the_crd(api: FakeKubeApi,
                                                                ext: client.ApiextensionsV1Api
                                                                ) -> None:
    rt = api.register_custom_resource("example.org", "v1", "gadgets", "Gadget",
                                      scale=(".spec.size", ".status.size", ""))
    assert api.register_custom_resource("example.org", "v1", "gadgets", "Gadget",
                                        scale=(".spec.size", ".status.size", "")) == rt
    stored = ext.read_custom_resource_definition("gadgets.example.org")
    assert stored.spec.versions[0].subresources.scale.spec_replicas_path == ".spec.size"
    # In-process, an object is set up in one call, status and all (over HTTP, status is
    # the subresource's to write).
    api.create("gadgets", {"metadata": {"name": "g"}, "spec": {"size": 3},
                           "status": {"size": 1}}, "default")
    scale = api.get("gadgets/scale", "g", "default")
    assert (scale["spec"], scale["status"]["replicas"]) == ({"replicas": 3}, 1)
    # The same plural in another group is another resource (naming_controller.go compares
    # names within a group): the bare plural is then ambiguous in-process, plural.group is not.
    api.register_custom_resource("example.net", "v1", "gadgets", "Gadget")
    with pytest.raises(ValueError, match="ambiguous"):
        api.list("gadgets")
    assert api.list("gadgets.example.net") == []
    api.delete("customresourcedefinitions", "gadgets.example.org")
    assert api.list("gadgets") == []  # example.net's, the one left
    api.delete("customresourcedefinitions", "gadgets.example.net")
    with pytest.raises(ValueError, match="unknown resource"):
        api.list("gadgets")


# Finalizers -------------------------------------------------------------------------------


def test_finalizers_hold_a_deleted_object_until_the_last_is_removed(
        api: FakeKubeApi, api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    body = {"metadata": {"name": "held", "finalizers": ["a.example.com/x", "b.example.com/y"]},
            "data": {"k": "v"}}
    core.create_namespaced_config_map("fin", body)
    since = core.read_namespaced_config_map("held", "fin").metadata.resource_version
    answer = call(api_client, "DELETE", "/api/v1/namespaces/fin/configmaps/held")
    assert answer["kind"] == "ConfigMap"  # the object, not a Status: it is still there
    held = core.read_namespaced_config_map("held", "fin")
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.deletion_grace_period_seconds == 0
    core.delete_namespaced_config_map("held", "fin")  # again: no change
    assert core.read_namespaced_config_map("held", "fin").metadata.resource_version == \
        held.metadata.resource_version
    with pytest.raises(ApiException) as forbidden:
        core.patch_namespaced_config_map("held", "fin", {"metadata": {
            "finalizers": ["a.example.com/x", "b.example.com/y", "c.example.com/z"]}})
    assert forbidden.value.status == 422
    core.patch_namespaced_config_map("held", "fin", [
        {"op": "remove", "path": "/metadata/finalizers/0"}])
    assert core.read_namespaced_config_map("held", "fin").metadata.finalizers == [
        "b.example.com/y"]
    core.patch_namespaced_config_map("held", "fin", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("held", "fin")
    assert gone.value.status == 404
    events = [(e["type"], bool(e["object"].metadata.deletion_timestamp)) for e in
              watch.Watch().stream(core.list_namespaced_config_map, "fin",
                                   resource_version=since, timeout_seconds=1)]
    assert events == [("MODIFIED", True), ("MODIFIED", True), ("DELETED", True)]


# Server-side apply ------------------------------------------------------------------------


def deployment_config(replicas: int, image: str = "nginx:1", **labels: str) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ssa", "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": image}]}}}}


def apply(api_client: client.ApiClient, path: str, body: Obj, manager: str, *,
          force: bool = False) -> Obj:
    query = {"fieldManager": manager, **({"force": "true"} if force else {})}
    return call(api_client, "PATCH", path, body, content_type="application/apply-patch+yaml",
                **query)


def test_server_side_apply_owns_fields_conflicts_and_forces(api_client: client.ApiClient) -> None:
    path = "/apis/apps/v1/namespaces/ssa/deployments/web"
    created = apply(api_client, path, deployment_config(2, team="a"), "alice")
    assert created["spec"]["replicas"] == 2
    (entry,) = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["fieldsType"]) == (
        "alice", "Apply", "FieldsV1")
    assert entry["fieldsV1"]["f:spec"]["f:replicas"] == {}
    assert entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"][
        'k:{"name":"web"}'] == {".": {}, "f:image": {}, "f:name": {}}
    # The same values from another manager: shared, no conflict.
    apply(api_client, path, deployment_config(2), "bob")
    with pytest.raises(ApiException) as conflict:
        apply(api_client, path, deployment_config(3, image="nginx:2"), "bob")
    status = status_of(conflict.value)
    assert (conflict.value.status, status["reason"]) == (409, "Conflict")
    assert status["message"].startswith("Apply failed with 2 conflicts: conflicts with \"alice\":")
    assert {(c["type"], c["message"], c["field"]) for c in status["details"]["causes"]} == {
        ("FieldManagerConflict", 'conflict with "alice"', ".spec.replicas"),
        ("FieldManagerConflict", 'conflict with "alice"',
         '.spec.template.spec.containers[name="web"].image')}
    forced = apply(api_client, path, deployment_config(3, image="nginx:2"), "bob", force=True)
    assert forced["spec"]["replicas"] == 3
    # alice stops naming her label: it goes, nobody else owns it.
    dropped = apply(api_client, path, {**deployment_config(3, image="nginx:2"),
                                       "metadata": {"name": "web", "namespace": "ssa"}}, "alice")
    assert "team" not in (dropped["metadata"].get("labels") or {})
    # An update by another writer takes what it changes; the applier then conflicts with it.
    apps = client.AppsV1Api(api_client)
    apps.patch_namespaced_deployment("web", "ssa", {"spec": {"replicas": 5}},
                                     field_manager="kubectl-scale")
    with pytest.raises(ApiException) as against_update:
        apply(api_client, path, deployment_config(4, image="nginx:2"), "bob")
    assert status_of(against_update.value)["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-scale" using apps/v1: '
        ".spec.replicas")
    managers = {m.manager for m in apps.read_namespaced_deployment("web", "ssa")
                .metadata.managed_fields}
    assert managers == {"alice", "bob", "kubectl-scale"}
    with pytest.raises(ApiException) as no_manager:
        call(api_client, "PATCH", path, deployment_config(1),
             content_type="application/apply-patch+yaml")
    assert no_manager.value.status == 400


def test_server_side_apply_to_a_custom_resource_and_an_object_made_without_it(
        api: FakeKubeApi, crd: Obj, api_client: client.ApiClient) -> None:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}/applied"
    body = crontab("applied")
    made = apply(api_client, path, body, "ops")
    assert made["metadata"]["managedFields"][0]["manager"] == "ops"
    status = apply(api_client, path + "/status",
                   {**body, "status": {"replicas": 2}}, "controller")
    assert status["status"] == {"replicas": 2}
    assert [(m["manager"], m.get("subresource")) for m in status["metadata"]["managedFields"]] \
        == [("ops", None), ("controller", "status")]
    # An object written without managedFields: its fields belong to before-first-apply.
    api.create(PLURAL, crontab("plain"), "default")
    with pytest.raises(ApiException) as conflict:
        apply(api_client, path.replace("applied", "plain"),
              {**crontab("plain"), "spec": {"replicas": 3}}, "ops")
    assert status_of(conflict.value)["details"]["causes"][0]["message"] == \
        f'conflict with "before-first-apply" using {GROUP}/{VERSION}'


# Events -----------------------------------------------------------------------------------


def test_events_k8s_io_and_core_events_are_one_store(api_client: client.ApiClient) -> None:
    events_v1 = client.EventsV1Api(api_client)
    core = client.CoreV1Api(api_client)
    events_v1.create_namespaced_event("ev", {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"generateName": "web-"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reason": "Scaled", "type": "Normal",
        "action": "Scale", "note": "scaled to 3", "reportingController": "elevator",
        "reportingInstance": "elevator-0",
        "regarding": {"kind": "Deployment", "name": "web", "namespace": "ev"}})
    (as_core,) = core.list_namespaced_event("ev").items
    assert (as_core.message, as_core.involved_object.name, as_core.reporting_component) == (
        "scaled to 3", "web", "elevator")
    core.create_namespaced_event("ev", {
        "metadata": {"name": "old-style"}, "eventTime": "2026-01-01T00:00:01.000000Z",
        "reason": "Killing", "type": "Warning",
        "message": "stopping", "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ev"},
        "source": {"component": "kubelet"}, "count": 2})
    old_style = events_v1.read_namespaced_event("old-style", "ev")
    assert (old_style.note, old_style.regarding.name, old_style.deprecated_count) == (
        "stopping", "p", 2)
    listed = events_v1.list_namespaced_event("ev", field_selector="reason=Killing")
    assert [e.metadata.name for e in listed.items] == ["old-style"]
