"""`application/vnd.kubernetes.protobuf` on the fake API: bodies in, answers and watches out, and
415/406 for custom resources, over real HTTP; then a stock client-go program (typed clients,
protobuf by default) against it, in both content types."""

from __future__ import annotations

import json
import lzma
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api import protobuf_lists, protobuf_wire
from kube_elevator.fakes.kube_api.protobuf_wire import (
    PROTOBUF,
    decode_object,
    decode_watch_frames,
    encode_object,
    encode_watch_frame,
)
from kube_elevator.fakes.kube_api.resources import TOKEN
from kube_elevator.fakes.kube_api.server import FakeKubeApi

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(os.environ.get("ELEVATOR_CLIENTGO_PROBE",
                            ROOT.parent / "shared" / "tools" / "clientgo-probe"))
CAPTURED = ROOT / "tests" / "data" / "clientgo_protobuf"
CLIENT_GO_ACCEPT = f"{PROTOBUF},application/json"  # what client-go's typed clients send


@pytest.fixture(scope="module")
def kube() -> Iterator[FakeKubeApi]:
    with FakeKubeApi() as api:
        yield api


@pytest.fixture(scope="module")
def http(kube: FakeKubeApi) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=kube.url, headers={"Authorization": f"Bearer {TOKEN}"},
                      timeout=scaled(10)) as session:
        yield session


def proto(content: bytes | None = None) -> dict[str, str]:
    headers = {"Accept": CLIENT_GO_ACCEPT}
    if content is not None:
        headers["Content-Type"] = PROTOBUF
    return headers


def test_create_update_and_read_back_in_protobuf(kube: FakeKubeApi, http: httpx.Client) -> None:
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "pb-node", "labels": {"pool": "pb"}},
            "spec": {"providerID": "aws:///us-east-1a/i-pb"},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}}}
    created = http.post("/api/v1/nodes", content=encode_object(node), headers=proto(b""))
    assert created.status_code == 201, created.text
    assert created.headers["content-type"] == PROTOBUF
    answer = decode_object(created.content)
    assert answer["metadata"]["uid"] and answer["status"]["allocatable"]["memory"] == "16Gi"

    answer["spec"]["taints"] = [{"key": "atlassian.com/escalator", "value": "1",
                                 "effect": "NoSchedule"}]
    updated = http.put("/api/v1/nodes/pb-node", content=encode_object(answer),
                       headers=proto(b""))
    assert updated.status_code == 200, updated.text
    # The store holds what the protobuf said: the official client reads it back as JSON.
    with kube.api_client() as api:
        seen = client.CoreV1Api(api).read_node("pb-node")
    assert [t.key for t in seen.spec.taints] == ["atlassian.com/escalator"]
    assert seen.metadata.labels == {"pool": "pb"}

    listed = http.get("/api/v1/nodes", headers=proto())
    assert listed.headers["content-type"] == PROTOBUF
    node_list = decode_object(listed.content)
    assert node_list["kind"] == "NodeList"
    assert [n["metadata"]["name"] for n in node_list["items"]] == ["pb-node"]

    stale = http.put("/api/v1/nodes/pb-node", content=encode_object(answer), headers=proto(b""))
    assert stale.status_code == 409
    status = decode_object(stale.content)  # errors too: a protobuf Status
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Conflict", 409)

    gone = http.request("DELETE", "/api/v1/nodes/pb-node", headers=proto(b""), content=(
        CAPTURED / "delete-options.pb").read_bytes())  # client-go's {gracePeriodSeconds: 0}
    assert gone.status_code == 200 and decode_object(gone.content)["status"] == "Success"
    missing = http.get("/api/v1/nodes/pb-node", headers=proto())
    assert decode_object(missing.content)["reason"] == "NotFound"


def test_json_clients_still_get_json(http: httpx.Client) -> None:
    body = (CAPTURED / "lease-acquire.pb").read_bytes()
    created = http.post("/apis/coordination.k8s.io/v1/namespaces/default/leases", content=body,
                        headers={"Content-Type": PROTOBUF, "Accept": "application/json, */*"})
    assert created.status_code == 201, created.text
    assert created.headers["content-type"] == "application/json"
    assert created.json()["spec"]["leaseDurationSeconds"] == 15


def test_patch_bodies_stay_json(http: httpx.Client) -> None:
    http.post("/api/v1/nodes", content=(CAPTURED / "node-create.pb").read_bytes(),
              headers=proto(b""))
    name = decode_object((CAPTURED / "node-create.pb").read_bytes())["metadata"]["name"]
    patched = http.patch(f"/api/v1/nodes/{name}", headers={
        "Content-Type": "application/merge-patch+json", "Accept": CLIENT_GO_ACCEPT},
        content=b'{"spec":{"unschedulable":true}}')
    assert decode_object(patched.content)["spec"]["unschedulable"] is True
    refused = http.patch(f"/api/v1/nodes/{name}", headers=proto(b""),
                         content=(CAPTURED / "node-create.pb").read_bytes())
    assert refused.status_code == 415


def test_watch_streams_length_prefixed_watch_events(kube: FakeKubeApi,
                                                    http: httpx.Client) -> None:
    kube.create("pods", {"metadata": {"name": "pb-pod", "namespace": "pb"},
                         "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    kube.watches_end_at_once = True  # the watch sends what it owes (the initial ADDED), ends
    try:
        watch = http.get("/api/v1/namespaces/pb/pods", headers=proto(), params={
            "watch": "true", "resourceVersion": "0"})
    finally:
        kube.watches_end_at_once = False
    assert watch.headers["content-type"] == f"{PROTOBUF};stream=watch"
    events = decode_watch_frames(watch.content)
    assert [(kind, obj["kind"], obj["metadata"]["name"]) for kind, obj in events] == [
        ("ADDED", "Pod", "pb-pod")]


def _watch_once(kube: FakeKubeApi, http: httpx.Client, path: str, accept: str) -> bytes:
    """A watch from resourceVersion 0 with bookmarks, ended after its initial events."""
    kube.watches_end_at_once = True
    try:
        watch = http.get(path, headers={"Accept": accept}, params={
            "watch": "true", "resourceVersion": "0", "sendInitialEvents": "true",
            "allowWatchBookmarks": "true", "resourceVersionMatch": "NotOlderThan"})
    finally:
        kube.watches_end_at_once = False
    return watch.content


def test_protobuf_watch_frames_are_the_json_events_encoded(kube: FakeKubeApi,
                                                           http: httpx.Client) -> None:
    """Frames built from cached encodings (protobuf_lists.encode_watch_event) are byte for
    byte the JSON events encoded whole, the initial-events-end bookmark included."""
    for i in range(3):
        kube.create("pods", {"metadata": {"name": f"frames-{i}", "namespace": "pbframes",
                                          "labels": {"i": str(i)}},
                             "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    path = "/api/v1/namespaces/pbframes/pods"
    events = [json.loads(line) for line in
              _watch_once(kube, http, path, "application/json").splitlines()]
    assert [e["type"] for e in events] == ["ADDED"] * 3 + ["BOOKMARK"]
    expected = b"".join(encode_watch_frame(e["type"], e["object"]) for e in events)
    assert _watch_once(kube, http, path, CLIENT_GO_ACCEPT) == expected
    kube.patch("pods", "frames-1", {"metadata": {"labels": {"i": "changed"}}}, "pbframes")
    decoded = decode_watch_frames(_watch_once(kube, http, path, CLIENT_GO_ACCEPT))
    assert [obj["metadata"].get("labels", {}).get("i") for _, obj in decoded] == \
        ["0", "changed", "2", None]


def test_a_protobuf_watch_reuses_the_encodings_a_list_made(
        kube: FakeKubeApi, http: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41: each watch event was encoded anew, for every watcher. A stored version's
    encoding is now made once and shared by lists and watches."""
    for i in range(4):
        kube.create("pods", {"metadata": {"name": f"shared-{i}", "namespace": "pbshared"},
                             "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    path = "/api/v1/namespaces/pbshared/pods"
    encoded_pods: list[str] = []
    original = protobuf_wire.encode_message

    def counting(message: protobuf_wire.Message, obj: dict[str, Any],
                 *args: Any, **kwargs: Any) -> bytes:
        name = (obj.get("metadata") or {}).get("name")  # a bookmark's Pod has none
        if message.name == "core.Pod" and name:
            encoded_pods.append(name)
        return original(message, obj, *args, **kwargs)

    monkeypatch.setattr(protobuf_wire, "encode_message", counting)
    monkeypatch.setattr(protobuf_lists, "encode_message", counting)
    listed = http.get(path, headers={"Accept": CLIENT_GO_ACCEPT})
    assert sorted(encoded_pods) == [f"shared-{i}" for i in range(4)]
    for _ in range(2):  # two watchers of the same four pods
        frames = decode_watch_frames(_watch_once(kube, http, path, CLIENT_GO_ACCEPT))
        assert [obj["metadata"]["name"] for kind, obj in frames if kind == "ADDED"] == \
            [item["metadata"]["name"] for item in decode_object(listed.content)["items"]]
    assert len(encoded_pods) == 4  # nothing encoded again


def test_watch_from_a_compacted_version_gets_a_protobuf_410() -> None:
    with FakeKubeApi(history_size=1) as kube, httpx.Client(base_url=kube.url) as http:
        for name in ("a", "b", "c"):
            kube.create("configmaps", {"metadata": {"name": name, "namespace": "pb"}})
        watch = http.get("/api/v1/namespaces/pb/configmaps", headers=proto(), params={
            "watch": "true", "resourceVersion": "1"})
    [(kind, status)] = decode_watch_frames(watch.content)
    assert (kind, status["kind"], status["code"], status["reason"]) == (
        "ERROR", "Status", 410, "Expired")


def test_custom_resources_refuse_protobuf(kube: FakeKubeApi, http: httpx.Client) -> None:
    """As the API server: no protobuf for custom resources, 415 for a body, 406 when the
    client accepts nothing else, JSON when it also accepts JSON."""
    kube.register_custom_resource("example.com", "v1", "widgets", "Widget")
    url = "/apis/example.com/v1/namespaces/default/widgets"
    body = json.dumps({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"name": "w"}}).encode()
    refused = http.post(url, content=body, headers={"Content-Type": PROTOBUF})
    assert refused.status_code == 415 and refused.json()["reason"] == "UnsupportedMediaType"
    assert http.post(url, content=body, headers={"Content-Type": "application/json"}
                     ).status_code == 201
    assert http.get(url, headers={"Accept": PROTOBUF}).status_code == 406
    listed = http.get(url, headers={"Accept": CLIENT_GO_ACCEPT})
    assert listed.headers["content-type"] == "application/json"
    assert [w["metadata"]["name"] for w in listed.json()["items"]] == ["w"]


def test_a_body_that_is_not_protobuf_is_a_clear_400(http: httpx.Client) -> None:
    bad = http.post("/api/v1/nodes", content=b'{"kind":"Node"}', headers=proto(b""))
    assert bad.status_code == 400
    assert "not valid protobuf for Node" in decode_object(bad.content)["message"]


# A stock client-go program ------------------------------------------------------------------

@pytest.fixture(scope="module")
def probe_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    packed = PROBE / "clientgo-probe-linux-amd64.xz"
    if not packed.is_file():
        pytest.skip(f"no clientgo-probe at {packed} (shared/ is beside the clone in CI)")
    binary = tmp_path_factory.mktemp("clientgo-probe") / "clientgo-probe"
    with lzma.open(packed) as source, binary.open("wb") as target:
        shutil.copyfileobj(source, target)
    binary.chmod(0o755)
    return binary


@pytest.mark.parametrize("content_type", ["", "application/json"],
                         ids=["protobuf (client-go default)", "json"])
def test_clientgo_probe(probe_binary: Path, content_type: str, tmp_path: Path) -> None:
    """Typed-client writes (node create/update/delete, pod create/status/eviction, lease
    create/renew, event), an informer's list+watch and leader election on a Lease: all ok."""
    with FakeKubeApi() as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        args = [str(probe_binary), "-kubeconfig", str(kubeconfig)]
        if content_type:
            args += ["-content-type", content_type]
        done = subprocess.run(args, capture_output=True, text=True, timeout=scaled(120), check=False)
        sent = {r.method for r in api.requests}
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    failed = [r for r in results if not r["ok"]]
    assert not failed and done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.strip().endswith(f"{len(results)}/{len(results)} operations ok")
    assert len(results) == 17 and {"POST", "PUT", "PATCH", "DELETE"} <= sent
