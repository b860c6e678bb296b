"""The fake API's `/openapi/v3` and `/openapi/v2`: `kubectl create` validates against it (issue 34
item 7: it failed with `failed to download openapi` unless `--validate=false`)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api import FakeKubeApi
from kube_elevator.fakes.kube_api.protobuf_wire import iter_fields
from tests.tools import needs_kubectl

V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"  # client-go's Accept


@pytest.fixture(scope="module")
def api() -> Iterator[FakeKubeApi]:
    with FakeKubeApi() as server:
        yield server


def test_the_v3_index_names_a_document_per_group_version_with_patch_taking_field_validation(
        api: FakeKubeApi) -> None:
    api.register_custom_resource("example.com", "v1", "widgets", "Widget")
    index = httpx.get(api.url + "/openapi/v3").json()["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/coordination.k8s.io/v1",
            "apis/example.com/v1"} <= set(index)
    document = httpx.get(api.url + index["api/v1"]["serverRelativeURL"]).json()
    patch = document["paths"]["/api/v1/nodes/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1",
                                                        "kind": "Node"}
    assert {"name": "fieldValidation", "in": "query"}.items() <= patch["parameters"][0].items()
    widgets = httpx.get(api.url + index["apis/example.com/v1"]["serverRelativeURL"]).json()
    assert "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}" in widgets["paths"]
    assert "com.example.v1.Widget" in widgets["components"]["schemas"]
    assert httpx.get(api.url + "/openapi/v3/apis/nothing.example.com/v1").status_code == 404


def test_v2_is_json_for_json_and_gnostic_protobuf_for_client_go(api: FakeKubeApi) -> None:
    document = httpx.get(api.url + "/openapi/v2", headers={"Accept": "application/json"}).json()
    assert document["swagger"] == "2.0"
    assert "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale" in document["paths"]
    assert "io.k8s.api.apps.v1.Deployment" in document["definitions"]
    answer = httpx.get(api.url + "/openapi/v2", headers={"Accept": V2_PROTOBUF})
    assert answer.headers["content-type"] == \
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    # gnostic's Document: swagger = 1, paths = 8 > NamedPathItem path = 2 > name = 1, value = 2
    fields = {number: value for number, _, value in iter_fields(answer.content)}
    assert fields[1] == b"2.0"
    items = {bytes(item[1]).decode(): item[2] for item in (
        {number: value for number, _, value in iter_fields(path)}
        for number, _, path in iter_fields(fields[8]) if number == 2)}
    operations = {number: value for number, _, value in
                  iter_fields(items["/api/v1/nodes/{name}"])}
    patch = list(iter_fields(operations[8]))  # PathItem.patch = 8
    extensions = [value for number, _, value in patch if number == 13]
    assert any(b"x-kubernetes-group-version-kind" in e and b"kind: Node" in e for e in extensions)
    assert any(b"fieldValidation" in value for number, _, value in patch if number == 8)


@needs_kubectl
@pytest.mark.parametrize("v3", [True, False], ids=["openapi-v3", "v3-missing-v2-protobuf"])
def test_kubectl_create_validates_without_validate_false(api: FakeKubeApi, tmp_path: Path,
                                                         v3: bool) -> None:
    """kubectl asks /openapi/v3 first; without it (an older server), /openapi/v2 in protobuf."""
    api.requests.clear()
    name = f"by-hand-{v3}".lower()
    if not v3:
        api.faults.add("status", count=None, status=404, path_prefix="/openapi/v3")
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    manifest = tmp_path / "node.yaml"
    manifest.write_text(f"apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n"
                        "  labels: {pool: workers}\n")
    done = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir",
                           str(tmp_path / "cache"), "create", "-f", str(manifest)],
                          capture_output=True, text=True, timeout=scaled(60), check=False)
    api.faults.clear()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"node/{name} created"
    assert api.get("nodes", name)["metadata"]["labels"] == {"pool": "workers"}
    (create,) = [r for r in api.requests if r.verb == "create" and r.resource == "nodes"]
    assert create.query.get("fieldValidation") == "Strict"  # kubectl left validation to us
    asked = {r.path for r in api.requests if r.path.startswith("/openapi/") and r.status == 200}
    assert asked == ({"/openapi/v3", "/openapi/v3/api/v1"} if v3 else {"/openapi/v2"})
