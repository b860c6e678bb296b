"""Field validation (`fieldValidation` Strict/Warn/Ignore) of the fake API, over HTTP.

The tables are kubernetes test/integration/apiserver/field_validation_test.go's (TestFieldValidation:
testFieldValidationPost, testFieldValidationPut, testFieldValidationPatchTyped,
testFieldValidationSMP, testFieldValidationApplyCreate, testFieldValidationApplyUpdate),
re-expressed: the same bodies, directives and expected errors and warnings, sent as raw HTTP (the
upstream test uses client-go's raw REST client too: duplicate members cannot pass through a typed
client), then the same rules through the official client and kubectl.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import kubernetes.client
import pytest

from benchmarks.deadlines import scaled
from kube_elevator.fakes.harness.cluster import FakeCluster
from kube_elevator.fakes.kube_api import FakeKubeApi
from tests.tools import needs_kubectl

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"

# invalidBodyJSON: a duplicate name, unknown fields, a field both unknown and duplicated (only
# reported unknown: unknown fields are never "seen"), a duplicated known field, nested ones.
INVALID_JSON = """{
 "apiVersion": "apps/v1", "kind": "Deployment",
 "metadata": {"name": "dupename", "name": "%s", "labels": {"app": "nginx"},
              "unknownMeta": "metaVal"},
 "spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2",
          "paused": true, "paused": false,
          "selector": {"matchLabels": {"app": "nginx"}},
          "template": {"metadata": {"labels": {"app": "nginx"}},
                       "spec": {"containers": [{"name": "nginx", "image": "nginx:latest",
                                                "unknownNested": "val1",
                                                "imagePullPolicy": "Always",
                                                "imagePullPolicy": "Never"}]}}}}"""
JSON_ERRORS = [
    'duplicate field "metadata.name"', 'unknown field "metadata.unknownMeta"',
    'unknown field "spec.unknown1"', 'unknown field "spec.unknownDupe"',
    'duplicate field "spec.paused"',
    'unknown field "spec.template.spec.containers[0].unknownNested"',
    'duplicate field "spec.template.spec.containers[0].imagePullPolicy"',
]
# invalidBodyYAML: the same as YAML (the line numbers below are the duplicates' lines).
INVALID_YAML = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: dupename
  name: %s
  unknownMeta: metaVal
  labels:
    app: nginx
spec:
  unknown1: val1
  unknownDupe: valDupe
  unknownDupe: valDupe2
  paused: true
  paused: false
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx:latest
        unknownNested: val1
        imagePullPolicy: Always
        imagePullPolicy: Never"""
YAML_LINES = ['line 5: key "name" already set in map',
              'line 12: key "unknownDupe" already set in map',
              'line 14: key "paused" already set in map',
              'line 28: key "imagePullPolicy" already set in map']
# YAML reaches the decoder as JSON re-encoded from a map: its unknown fields in sorted order.
YAML_UNKNOWN = ['unknown field "metadata.unknownMeta"',
                'unknown field "spec.template.spec.containers[0].unknownNested"',
                'unknown field "spec.unknown1"', 'unknown field "spec.unknownDupe"']
YAML_ERROR = ("yaml: unmarshal errors:\n  " + "\n  ".join(YAML_LINES) + ", "
              + ", ".join(YAML_UNKNOWN))
VALID = {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "", "labels": {"app": "nginx"}},
         "spec": {"selector": {"matchLabels": {"app": "nginx"}},
                  "template": {"metadata": {"labels": {"app": "nginx"}},
                               "spec": {"containers": [{"name": "nginx", "image": "nginx:latest",
                                                        "imagePullPolicy": "Always"}]}},
                  "replicas": 2}}
PREFIX = 'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
# (directive, content type, the Strict error or None, the warnings)
WRITE_CASES = [
    ("Strict", "application/json", PREFIX + ", ".join(JSON_ERRORS), []),
    ("Warn", "application/json", None, JSON_ERRORS),
    ("Ignore", "application/json", None, []),
    ("", "application/json", None, JSON_ERRORS),  # the default since 1.27: Warn
    ("Strict", "application/yaml", PREFIX + YAML_ERROR, []),
    ("Warn", "application/yaml", None, YAML_LINES + YAML_UNKNOWN),
    ("Ignore", "application/yaml", None, []),
    ("", "application/yaml", None, YAML_LINES + YAML_UNKNOWN),
]


@pytest.fixture(scope="module")
def api() -> Iterator[FakeKubeApi]:
    with FakeKubeApi() as server:
        yield server


def _warnings(response: httpx.Response) -> list[str]:
    """The texts of `Warning: 299 - "<text>"` headers, as client-go's warning handler reads them."""
    return [json.loads(h.removeprefix("299 - ")) for h in response.headers.get_list("warning")]


def _query(directive: str) -> dict[str, str]:
    return {"fieldValidation": directive} if directive else {}


def _check(response: httpx.Response, error: str | None, warnings: list[str]) -> None:
    if error is not None:
        assert response.status_code == 400, response.text
        assert response.json()["reason"] == "BadRequest"
        assert response.json()["message"] == error
    else:
        assert response.status_code < 300, response.text
    assert _warnings(response) == warnings


def _stored_spec(api: FakeKubeApi, name: str) -> dict[str, object]:
    spec: dict[str, object] = api.get("deployments", name, "default")["spec"]
    return spec


@pytest.mark.parametrize(("directive", "content_type", "error", "warnings"), WRITE_CASES)
def test_post_as_field_validation_test_post(api: FakeKubeApi, directive: str, content_type: str,
                                            error: str | None, warnings: list[str]) -> None:
    name = f"post-{directive.lower() or 'default'}-{content_type.rpartition('/')[2]}"
    body = (INVALID_JSON if content_type.endswith("json") else INVALID_YAML) % name
    response = httpx.post(api.url + DEPLOYMENTS, params=_query(directive), content=body,
                          headers={"Content-Type": content_type})
    _check(response, error, warnings)
    if error is None:  # stored with the unknown fields dropped, each duplicate's last value
        spec = _stored_spec(api, name)
        assert "unknown1" not in spec and "unknownDupe" not in spec
        assert spec["paused"] is False
        assert "unknownMeta" not in api.get("deployments", name, "default")["metadata"]
        # The API server's defaults join what was sent (pkg/apis/core/v1/defaults.go).
        assert spec["template"]["spec"]["containers"][0] == {  # type: ignore[index]
            "name": "nginx", "image": "nginx:latest", "imagePullPolicy": "Never",
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
    else:
        with pytest.raises(KeyError):
            api.get("deployments", name, "default")


@pytest.mark.parametrize(("directive", "content_type", "error", "warnings"), WRITE_CASES)
def test_put_as_field_validation_test_put(api: FakeKubeApi, directive: str, content_type: str,
                                          error: str | None, warnings: list[str]) -> None:
    name = f"put-{directive.lower() or 'default'}-{content_type.rpartition('/')[2]}"
    api.create("deployments", {**VALID, "metadata": {**VALID["metadata"], "name": name}},
               "default")
    body = (INVALID_JSON if content_type.endswith("json") else INVALID_YAML) % name
    response = httpx.put(f"{api.url}{DEPLOYMENTS}/{name}", params=_query(directive),
                         content=body, headers={"Content-Type": content_type})
    _check(response, error, warnings)
    spec = _stored_spec(api, name)
    if error is None:
        assert spec["paused"] is False and "unknown1" not in spec
    else:
        assert "paused" not in spec  # refused: the stored object is the one created


MERGE_PATCH = """{"spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2",
 "paused": true, "paused": false,
 "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:latest",
  "unknownNested": "val1", "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}"""
JSON_PATCH = """[
 {"op": "add", "path": "/spec/unknown1", "value": "val1", "foo": "bar"},
 {"op": "add", "path": "/spec/unknown2", "path": "/spec/unknown3", "value": "val1"},
 {"op": "add", "path": "/spec/unknownDupe", "value": "valDupe"},
 {"op": "add", "path": "/spec/unknownDupe", "value": "valDupe2"},
 {"op": "add", "path": "/spec/paused", "value": true},
 {"op": "add", "path": "/spec/paused", "value": false},
 {"op": "add", "path": "/spec/template/spec/containers/0/unknownNested", "value": "val1"},
 {"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "Always"},
 {"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "Never"}]"""
NONCONFLICTING_MERGE_PATCH = """{"spec": {"paused": true, "paused": false,
 "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:latest",
  "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}"""
SMP = """{"spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2",
 "paused": true, "paused": false, "selector": {"matchLabels": {"app": "nginx"}},
 "template": {"metadata": {"labels": {"app": "nginx"}},
  "spec": {"containers": [{"name": "nginx", "unknownNested": "val1",
   "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}"""
NONCONFLICTING_SMP = """{"spec": {"paused": true, "paused": false,
 "selector": {"matchLabels": {"app": "nginx"}},
 "template": {"metadata": {"labels": {"app": "nginx"}},
  "spec": {"containers": [{"name": "nginx", "imagePullPolicy": "Always",
   "imagePullPolicy": "Never"}]}}}}"""
# The patch's duplicates first (in its order), then the patched object's unknown fields (sorted).
MERGE_ERRORS = ['duplicate field "spec.unknownDupe"', 'duplicate field "spec.paused"',
                'duplicate field "spec.template.spec.containers[0].imagePullPolicy"',
                'unknown field "spec.template.spec.containers[0].unknownNested"',
                'unknown field "spec.unknown1"', 'unknown field "spec.unknownDupe"']
JSON_PATCH_ERRORS = ['json patch unknown field "[0].foo"', 'json patch duplicate field "[1].path"',
                     'unknown field "spec.template.spec.containers[0].unknownNested"',
                     'unknown field "spec.unknown1"', 'unknown field "spec.unknown3"',
                     'unknown field "spec.unknownDupe"']
NONCONFLICTING_ERRORS = ['duplicate field "spec.paused"',
                         'duplicate field "spec.template.spec.containers[0].imagePullPolicy"']
MERGE, JSONP, STRATEGIC = ("application/merge-patch+json", "application/json-patch+json",
                           "application/strategic-merge-patch+json")
PATCH_CASES = [
    (kind, body, directive, errors)
    for kind, body, errors in (
        (MERGE, MERGE_PATCH, MERGE_ERRORS), (JSONP, JSON_PATCH, JSON_PATCH_ERRORS),
        (MERGE, NONCONFLICTING_MERGE_PATCH, NONCONFLICTING_ERRORS),
        (STRATEGIC, SMP, MERGE_ERRORS), (STRATEGIC, NONCONFLICTING_SMP, NONCONFLICTING_ERRORS))
    for directive in ("Strict", "Warn", "Ignore", "")
]


@pytest.mark.parametrize(("content_type", "body", "directive", "errors"), PATCH_CASES)
def test_patch_as_field_validation_test_patch_typed_and_smp(
        api: FakeKubeApi, content_type: str, body: str, directive: str,
        errors: list[str]) -> None:
    name = f"patch-{len(api.requests)}"
    api.create("deployments", {**VALID, "metadata": {**VALID["metadata"], "name": name}},
               "default")
    response = httpx.patch(f"{api.url}{DEPLOYMENTS}/{name}", params=_query(directive),
                           content=body, headers={"Content-Type": content_type})
    if directive == "Strict":
        _check(response, "strict decoding error: " + ", ".join(errors), [])
        assert "paused" not in _stored_spec(api, name)
    else:
        _check(response, None, [] if directive == "Ignore" else errors)
        spec = _stored_spec(api, name)
        assert spec["paused"] is False
        assert not {"unknown1", "unknown3", "unknownDupe"} & set(spec)


# applyInvalidBody: duplicates only (an unknown field in an apply configuration is refused by
# the typed conversion whatever the directive, below).
APPLY_INVALID = """{
	"apiVersion": "apps/v1",
	"kind": "Deployment",
	"metadata": {
		"name": "%s",
		"labels": {"app": "nginx"}
	},
	"spec": {
		"paused": false,
		"paused": true,
		"selector": {
			"matchLabels": {
				"app": "nginx"
			}
		},
		"template": {
			"metadata": {
				"labels": {
					"app": "nginx"
				}
			},
			"spec": {
				"containers": [{
					"name":  "nginx",
					"image": "nginx:latest",
					"imagePullPolicy": "Never",
					"imagePullPolicy": "Always"
				}]
			}
		}
	}
}"""
APPLY_LINES = ['line 10: key "paused" already set in map',
               'line 27: key "imagePullPolicy" already set in map']


@pytest.mark.parametrize("exists", [False, True], ids=["apply-create", "apply-update"])
@pytest.mark.parametrize("directive", ["Strict", "Warn", "Ignore", ""])
def test_apply_as_field_validation_test_apply_create_and_update(
        api: FakeKubeApi, directive: str, exists: bool) -> None:
    name = f"apply-{'update' if exists else 'create'}-{directive.lower() or 'default'}"
    url = f"{api.url}{DEPLOYMENTS}/{name}"
    headers = {"Content-Type": "application/apply-patch+yaml"}
    query = {**_query(directive), "fieldManager": "mgr"}
    if exists:
        valid = {**VALID, "metadata": {**VALID["metadata"], "name": name}}
        assert httpx.patch(url, params=query, content=json.dumps(valid),
                           headers=headers).status_code == 201
    response = httpx.patch(url, params=query, content=APPLY_INVALID % name, headers=headers)
    if directive == "Strict":
        _check(response, "error strict decoding YAML: error converting YAML to JSON: "
               "yaml: unmarshal errors:\n  " + "\n  ".join(APPLY_LINES), [])
    else:
        _check(response, None, [] if directive == "Ignore" else APPLY_LINES)
        assert _stored_spec(api, name)["paused"] is True


@pytest.mark.parametrize("directive", ["Strict", "Ignore"])
def test_an_unknown_field_in_an_apply_configuration_fails_its_typed_conversion(
        api: FakeKubeApi, directive: str) -> None:
    """structured-merge-diff refuses it whatever the directive, with the server's 500
    (kubernetes issue 122480: `failed to create typed patch object`)."""
    config = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"ssa-{directive}"},
              "spec": {"unschedulabel": True}}
    response = httpx.patch(f"{api.url}/api/v1/nodes/ssa-{directive}",
                           params={"fieldManager": "mgr", "fieldValidation": directive},
                           content=json.dumps(config),
                           headers={"Content-Type": "application/apply-patch+yaml"})
    assert response.status_code == 500
    assert response.json()["message"] == (
        f"failed to create typed patch object (/ssa-{directive}; /v1, Kind=Node): "
        ".spec.unschedulabel: field not declared in schema")


def test_an_unsupported_directive_is_refused_as_validate_patch_options_does(
        api: FakeKubeApi) -> None:
    response = httpx.patch(f"{api.url}/api/v1/nodes/any", params={"fieldValidation": "Loud"},
                           content="{}", headers={"Content-Type": MERGE})
    assert response.status_code == 422
    assert response.json()["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loud": '
        'supported values: "", "Ignore", "Strict", "Warn"')


def test_the_official_client_gets_strict_refusals_and_warn_drops(api: FakeKubeApi) -> None:
    core = kubernetes.client.CoreV1Api(api.api_client())
    api.create("nodes", {"metadata": {"name": "typed-client"}})
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.patch_node("typed-client", {"spec": {"unschedulabel": True}},
                        field_validation="Strict")
    assert refused.value.status == 400
    assert json.loads(refused.value.body)["message"] == \
        'strict decoding error: unknown field "spec.unschedulabel"'
    _, _, headers = core.patch_node_with_http_info(
        "typed-client", {"spec": {"unschedulable": True, "unschedulabel": True}},
        field_validation="Warn")
    assert headers["Warning"] == '299 - "unknown field \\"spec.unschedulabel\\""'
    assert api.get("nodes", "typed-client")["spec"] == {"unschedulable": True}


def test_real_objects_with_status_and_managed_fields_pass_strict(api: FakeKubeApi) -> None:
    """What a real server stores and serves decodes strictly (managedFields' fieldsV1, status,
    every field a 1.3x cluster writes)."""
    dumps = Path(os.environ.get("ELEVATOR_REAL_DUMPS",
                                Path(__file__).resolve().parents[3] / "shared" / "real_dumps"))
    if not dumps.is_dir():
        pytest.skip("no ../shared/real_dumps")
    sent = 0
    for path in sorted(dumps.rglob("*.json")):
        document = json.loads(path.read_text())
        items = document.get("items", []) if isinstance(document, dict) else []
        for item in items[:20]:
            kind = item.get("kind") or document.get("kind", "").removesuffix("List")
            plural = {"Pod": "pods", "Node": "nodes"}.get(kind)
            if plural is None:
                continue
            item = {**item, "kind": kind, "apiVersion": "v1"}
            meta = {k: v for k, v in item["metadata"].items()
                    if k not in ("resourceVersion", "uid")}
            meta["name"] = f"real-{sent}"
            url = api.url + ("/api/v1/nodes" if plural == "nodes"
                             else "/api/v1/namespaces/default/pods")
            meta.pop("namespace", None)
            response = httpx.post(url, params={"fieldValidation": "Strict"},
                                  json={**item, "metadata": meta})
            assert response.status_code == 201, (path, response.text)
            sent += 1
    if not sent:
        pytest.skip("no pods or nodes among the real dumps")


def test_switched_off_the_fake_stores_unknown_fields_as_before() -> None:
    with FakeKubeApi(field_validation=False) as api:
        response = httpx.post(api.url + "/api/v1/nodes", params={"fieldValidation": "Strict"},
                              json={"metadata": {"name": "n"}, "spec": {"unschedulabel": True}})
        assert response.status_code == 201
        assert api.get("nodes", "n")["spec"] == {"unschedulabel": True}


@pytest.fixture
def node_yaml(tmp_path: Path) -> Path:
    path = tmp_path / "node.yaml"
    path.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: by-hand\n"
                    "  labelz: {customer: services}\nspec:\n  unschedulabel: true\n")
    return path


@needs_kubectl
@pytest.mark.parametrize("command", [["create"], ["apply"]])
def test_kubectl_is_refused_what_a_real_server_refuses(
        api: FakeKubeApi, tmp_path: Path, node_yaml: Path, command: list[str]) -> None:
    """kubectl >= 1.27 sends fieldValidation=Strict (the fake's /openapi/v3 says its PATCH
    takes it), and prints the server's refusal."""
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    done = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *command, "-f",
                           str(node_yaml)], capture_output=True, text=True, timeout=scaled(60))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f'Error from server (BadRequest): error when creating "{node_yaml}": Node in version '
        '"v1" cannot be handled as a Node: strict decoding error: unknown field '
        '"metadata.labelz", unknown field "spec.unschedulabel"')
    with pytest.raises(KeyError):
        api.get("nodes", "by-hand")


@needs_kubectl
def test_kubectl_validate_warn_prints_each_warning_and_stores_without_them(
        api: FakeKubeApi, tmp_path: Path, node_yaml: Path) -> None:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    done = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "create",
                           "--validate=warn", "-f", str(node_yaml)],
                          capture_output=True, text=True, timeout=scaled(60))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ['Warning: unknown field "metadata.labelz"',
                                        'Warning: unknown field "spec.unschedulabel"']
    stored = api.get("nodes", "by-hand")
    assert "labelz" not in stored["metadata"]
    assert "unschedulabel" not in stored.get("spec", {})
    api.delete("nodes", "by-hand")


def test_openapi_v2_and_v3_serve_the_fields_field_validation_accepts(api: FakeKubeApi) -> None:
    """One source for both: every served built-in kind's schema, followed through its `$ref`s,
    names exactly the fields the strict decoder knows (here: Node, Pod's containers)."""
    v3 = httpx.get(api.url + "/openapi/v3/api/v1").json()["components"]["schemas"]
    v2 = httpx.get(api.url + "/openapi/v2", headers={"Accept": "application/json"}).json()
    definitions = v2["definitions"]
    node_v3, node_v2 = v3["io.k8s.api.core.v1.Node"], definitions["io.k8s.api.core.v1.Node"]
    assert node_v3["x-kubernetes-group-version-kind"] == [
        {"group": "", "version": "v1", "kind": "Node"}]
    spec_v3 = v3[node_v3["properties"]["spec"]["$ref"].rpartition("/")[2]]
    spec_v2 = definitions[node_v2["properties"]["spec"]["$ref"].rpartition("/")[2]]
    assert set(spec_v3["properties"]) == set(spec_v2["properties"]) >= {"unschedulable", "taints"}
    assert "unschedulabel" not in spec_v3["properties"]
    pod_spec = v3[v3["io.k8s.api.core.v1.Pod"]["properties"]["spec"]["$ref"].rpartition("/")[2]]
    container = v3[pod_spec["properties"]["containers"]["items"]["$ref"].rpartition("/")[2]]
    known = set(container["properties"])
    accepted = {**{field: None for field in known}, "name": "c", "image": "busybox"}
    response = httpx.post(api.url + "/api/v1/namespaces/default/pods",
                          params={"fieldValidation": "Strict"},
                          json={"metadata": {"name": "every-field"},
                                "spec": {"containers": [accepted]}})
    assert response.status_code == 201, response.text


@needs_kubectl
def test_kubectl_explain_shows_every_field(api: FakeKubeApi, tmp_path: Path) -> None:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    done = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "explain", "node.spec"],
                          capture_output=True, text=True, timeout=scaled(60))
    assert done.returncode == 0, done.stderr
    fields = {line.split()[0] for line in done.stdout.splitlines()
              if line.startswith("  ") and "\t" in line}
    assert {"unschedulable", "taints", "providerID", "podCIDR"} <= fields


@pytest.mark.fake_cluster(field_validation=False)
def test_the_harness_marker_turns_field_validation_off(fake_cluster: FakeCluster) -> None:
    response = httpx.post(fake_cluster.kube.url + "/api/v1/nodes",
                          params={"fieldValidation": "Strict"},
                          json={"metadata": {"name": "as-sent"}, "spec": {"unschedulabel": True}})
    assert response.status_code == 201
    assert fake_cluster.kube.get("nodes", "as-sent")["spec"] == {"unschedulabel": True}


def test_the_harness_validates_fields_by_default(fake_cluster: FakeCluster) -> None:
    response = httpx.post(fake_cluster.kube.url + "/api/v1/nodes",
                          params={"fieldValidation": "Strict"},
                          json={"metadata": {"name": "as-sent"}, "spec": {"unschedulabel": True}})
    assert response.status_code == 400
