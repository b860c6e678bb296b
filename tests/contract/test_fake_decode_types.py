"""A field of the wrong JSON type is refused by the fake API as a real server's decoders refuse
it, over HTTP: the `kubernetes` client's dynamic client (its typed methods check types on the
client side, with pydantic, and never send such a body), raw patches, and kubectl.

Sources, re-expressed: the decoder's words are sigs.k8s.io/json's fork of encoding/json
(internal/golang/encoding/json decode.go, the UnmarshalTypeError cases of decode_test.go's
unmarshalTests: `string into int`, `number into string`, `object into slice`, `array into
struct`, `number 1.5 into int`, and their Struct/Field context), wrapped by k8s.io/apiserver's
transformDecodeError (handlers/rest.go); the messages real servers answer for the same bodies
(`Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal string
into Go struct field DeploymentSpec.spec.replicas of type int32`, `... ContainerPort.spec.
template.spec.containers.ports.containerPort of type int32`, `... EnvVar.spec.template.spec.
containers.env.value of type string`, `... ObjectMeta.spec.template.metadata.labels of type
string`, `... Container.spec.template.spec.containers.ports of type []v1.ContainerPort`);
patches: k8s.io/apiserver handlers/patch.go (jsonPatcher, smpPatcher) with
apimachinery runtime/converter.go fromUnstructured (converter_test.go's mismatched types);
server-side apply: structured-merge-diff typed/validate.go validateScalar (validate_test.go's
invalid scalars) and kubernetes issue 94275's `expected string, got
&value.valueUnstructured{Value:1}`."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import dynamic
from kubernetes.dynamic.exceptions import DynamicApiError

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.tools import needs_kubectl

Obj = dict[str, Any]
NS = "decode"
PODS = f"/api/v1/namespaces/{NS}/pods"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NS}/deployments"
CANNOT = "json: cannot unmarshal"


@pytest.fixture(scope="module")
def dyn(api: FakeKubeApi, tmp_path_factory: pytest.TempPathFactory,
        ) -> Iterator[dynamic.DynamicClient]:
    with api.api_client() as api_client:
        # its discovery cache in the test's folder, not /tmp/osrcp-<hash>.json (a fake
        # server's new port each time: one file a run left behind)
        yield dynamic.DynamicClient(
            api_client, cache_file=str(tmp_path_factory.mktemp("discovery") / "cache.json"))


def pod(name: str, **container: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "i:1", **container}]}}


def deployment(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "i:1"}]}},
                     **spec}}


def refused_create(dyn: dynamic.DynamicClient, body: Obj, query: Obj | None = None) -> Obj:
    resource = dyn.resources.get(api_version=body["apiVersion"], kind=body["kind"])
    with pytest.raises(DynamicApiError) as err:
        resource.create(body=body, namespace=NS, query_params=list((query or {}).items()))
    assert err.value.status == 400, err.value.body
    status: Obj = json.loads(err.value.body)
    assert status["reason"] == "BadRequest"
    return status


POD = 'Pod in version "v1" cannot be handled as a Pod: '
DEPLOYMENT = 'Deployment in version "v1" cannot be handled as a Deployment: '


@pytest.mark.parametrize(("body", "message"), [
    pytest.param(pod("port-string", ports=[{"containerPort": "80"}]),
                 POD + CANNOT + " string into Go struct field ContainerPort.spec.containers."
                 "ports.containerPort of type int32", id="string-into-int32"),
    pytest.param(pod("ports-object", ports={"containerPort": 80}),
                 POD + CANNOT + " object into Go struct field Container.spec.containers.ports "
                 "of type []v1.ContainerPort", id="object-into-slice"),
    pytest.param(pod("ports-string", ports=["80"]),
                 POD + CANNOT + " string into Go struct field Container.spec.containers.ports "
                 "of type v1.ContainerPort", id="string-into-struct-element"),
    pytest.param(pod("env-number", env=[{"name": "A", "value": 1}]),
                 POD + CANNOT + " number into Go struct field EnvVar.spec.containers.env.value "
                 "of type string", id="number-into-string"),
    pytest.param({**pod("label-number"), "metadata": {"name": "label-number",
                                                      "labels": {"year": 2025}}},
                 POD + CANNOT + " number into Go struct field ObjectMeta.metadata.labels of "
                 "type string", id="number-into-map-value"),
    pytest.param(pod("stdin-string", stdin="yes"),
                 POD + CANNOT + " string into Go struct field Container.spec.containers.stdin "
                 "of type bool", id="string-into-bool"),
    pytest.param({**pod("spec-array"), "spec": [1]},
                 POD + CANNOT + " array into Go struct field Pod.spec of type v1.PodSpec",
                 id="array-into-struct"),
    pytest.param({**pod("grace-float"), "spec": {**pod("x")["spec"],
                                                 "terminationGracePeriodSeconds": 1.5}},
                 POD + CANNOT + " number 1.5 into Go struct field PodSpec.spec."
                 "terminationGracePeriodSeconds of type int64", id="fraction-into-int64"),
    pytest.param(pod("port-overflow", ports=[{"containerPort": 4294967296}]),
                 POD + CANNOT + " number 4294967296 into Go struct field ContainerPort.spec."
                 "containers.ports.containerPort of type int32", id="overflow-int32"),
    pytest.param(deployment("replicas-string", replicas="3"),
                 DEPLOYMENT + CANNOT + " string into Go struct field DeploymentSpec.spec.replicas "
                 "of type int32", id="deployment-replicas"),
    pytest.param(deployment("surge-bool", strategy={"rollingUpdate": {"maxSurge": True}}),
                 DEPLOYMENT + CANNOT + " bool into Go value of type int32",
                 id="int-or-string-UnmarshalJSON"),
    pytest.param(pod("cpu-bool", resources={"requests": {"cpu": True}}),
                 POD + "quantities must match the regular expression "
                 "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'", id="quantity-UnmarshalJSON"),
    pytest.param({**pod("created-number"), "metadata": {"name": "created-number",
                                                        "creationTimestamp": 5}},
                 POD + CANNOT + " number into Go value of type string", id="time-UnmarshalJSON"),
])
def test_create_with_a_field_of_the_wrong_type(dyn: dynamic.DynamicClient, body: Obj,
                                               message: str) -> None:
    assert refused_create(dyn, body)["message"] == message


@pytest.mark.parametrize("directive", ["Strict", "Warn", "Ignore"])
def test_the_type_error_wins_whatever_the_directive(dyn: dynamic.DynamicClient,
                                                    directive: str) -> None:
    """apimachinery json.go: a decoding error is returned before the strict errors."""
    body = pod(f"both-{directive.lower()}", ports=[{"containerPort": "80"}], unknwn=1)
    message = refused_create(dyn, body, {"fieldValidation": directive})["message"]
    assert message.startswith(POD + CANNOT + " string into Go struct field ContainerPort")


def test_what_the_decoder_accepts_is_stored(dyn: dynamic.DynamicClient) -> None:
    """Int-or-string and quantity fields take both; integral numbers fill floats; nulls are
    the zero value."""
    pods = dyn.resources.get(api_version="v1", kind="Pod")
    body = pod("accepted", resources={"requests": {"cpu": 1, "memory": "1Gi"},
                                      "limits": {"cpu": 1.5}},
               readinessProbe={"httpGet": {"port": "http"}},
               livenessProbe={"httpGet": {"port": 8080}}, env=None)
    created = pods.create(body=body, namespace=NS).to_dict()
    assert created["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] == "http"
    dep = deployment("accepted", strategy={"rollingUpdate": {"maxSurge": "50%",
                                                             "maxUnavailable": 0}})
    dyn.resources.get(api_version="apps/v1", kind="Deployment").create(body=dep, namespace=NS)


def test_an_update_is_decoded_as_a_create_is(dyn: dynamic.DynamicClient) -> None:
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    stored = deployments.create(body=deployment("updated"), namespace=NS).to_dict()
    stored["spec"]["paused"] = "yes"
    with pytest.raises(DynamicApiError) as err:
        deployments.replace(body=stored, namespace=NS)
    assert err.value.status == 400
    assert json.loads(err.value.body)["message"] == (
        DEPLOYMENT + CANNOT + " string into Go struct field DeploymentSpec.spec.paused of "
        "type bool")


def test_a_scale_body_is_decoded_as_a_scale(dyn: dynamic.DynamicClient,
                                            http: httpx.Client) -> None:
    dyn.resources.get(api_version="apps/v1", kind="Deployment").create(
        body=deployment("scaled"), namespace=NS)
    answer = http.put(f"{DEPLOYMENTS}/scaled/scale", json={
        "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "scaled"},
        "spec": {"replicas": "3"}})
    assert answer.status_code == 400, answer.text
    assert answer.json()["message"] == (
        'Scale in version "v1" cannot be handled as a Scale: ' + CANNOT + " string into Go "
        "struct field ScaleSpec.spec.replicas of type int32")


def test_a_yaml_body_is_decoded_as_its_json(http: httpx.Client) -> None:
    """sigs.k8s.io/yaml turns the body into JSON first: an unquoted timestamp is a string (a
    Time takes it), an unquoted number is a number (a ConfigMap's data refuses it)."""
    path = f"/api/v1/namespaces/{NS}/configmaps"
    good = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml-good\n"
            "  creationTimestamp: 2024-01-01T00:00:00Z\ndata:\n  a: b\n")
    answer = http.post(path, content=good, headers={"Content-Type": "application/yaml"})
    assert answer.status_code == 201, answer.text
    bad = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml-bad\ndata:\n  a: 1\n"
    answer = http.post(path, content=bad, headers={"Content-Type": "application/yaml"})
    assert answer.status_code == 400, answer.text
    assert answer.json()["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: ' + CANNOT
        + " number into Go struct field ConfigMap.data of type string")


def _patch(http: httpx.Client, path: str, body: Any, content_type: str,
           query: Obj | None = None) -> httpx.Response:
    return http.patch(path, content=json.dumps(body), params=query or {},
                      headers={"Content-Type": content_type})


@pytest.fixture(scope="module")
def patched_pod(dyn: dynamic.DynamicClient) -> str:
    dyn.resources.get(api_version="v1", kind="Pod").create(body=pod("patched"), namespace=NS)
    return f"{PODS}/patched"


@pytest.mark.parametrize(("content_type", "body", "detail"), [
    pytest.param("application/merge-patch+json", {"metadata": {"labels": {"a": 1}}},
                 CANNOT + " number into Go struct field ObjectMeta.metadata.labels of type "
                 "string", id="merge"),
    pytest.param("application/json-patch+json",
                 [{"op": "add", "path": "/spec/activeDeadlineSeconds", "value": "x"}],
                 CANNOT + " string into Go struct field PodSpec.spec.activeDeadlineSeconds of "
                 "type int64", id="json"),
])
def test_a_json_or_merge_patch_is_invalid_on_patch(http: httpx.Client, patched_pod: str,
                                                   content_type: str, body: Any,
                                                   detail: str) -> None:
    """patch.go jsonPatcher: 422, no kind, no name, the patched object as the bad value."""
    answer = _patch(http, patched_pod, body, content_type)
    assert answer.status_code == 422, answer.text
    status = answer.json()
    assert status["reason"] == "Invalid"
    assert status["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    assert status["message"].endswith('}": ' + detail)
    [cause] = status["details"]["causes"]
    assert (cause["reason"], cause["field"]) == ("FieldValueInvalid", "patch")
    bad_object = json.loads(json.loads(cause["message"].removeprefix("Invalid value: ")
                                       .removesuffix(": " + detail)))
    assert bad_object["metadata"]["name"] == "patched"
    assert "details" not in status or set(status["details"]) == {"causes"}


@pytest.mark.parametrize(("body", "message"), [
    pytest.param({"metadata": {"labels": {"a": 1}}}, 'Invalid value: '
                 '"map[metadata:map[labels:map[a:1]]]": cannot convert int64 to string',
                 id="int-into-string"),
    pytest.param({"spec": {"activeDeadlineSeconds": "x"}}, 'Invalid value: '
                 '"map[spec:map[activeDeadlineSeconds:x]]": unrecognized type: int64',
                 id="string-into-int"),
    pytest.param({"spec": {"activeDeadlineSeconds": 1.5}}, 'Invalid value: '
                 '"map[spec:map[activeDeadlineSeconds:1.5]]": cannot convert float64 to int64',
                 id="fraction-into-int"),
    pytest.param({"spec": {"tolerations": {"key": "k"}}}, 'Invalid value: '
                 '"map[spec:map[tolerations:map[key:k]]]": cannot restore slice from map',
                 id="map-into-slice"),
    pytest.param({"spec": {"securityContext": "x"}}, 'Invalid value: '
                 '"map[spec:map[securityContext:x]]": cannot restore struct from: string',
                 id="string-into-struct"),
])
def test_a_strategic_merge_patch_is_invalid_in_the_converters_words(
        http: httpx.Client, patched_pod: str, body: Obj, message: str) -> None:
    """patch.go smpPatcher: the patch map printed with %+v, runtime/converter.go's error."""
    answer = _patch(http, patched_pod, body, "application/strategic-merge-patch+json")
    assert answer.status_code == 422, answer.text
    assert answer.json()["message"] == ' "" is invalid: patch: ' + message
    assert answer.json()["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": message, "field": "patch"}]


def test_an_integral_float_and_a_null_pass_a_strategic_merge_patch(
        http: httpx.Client, patched_pod: str) -> None:
    answer = _patch(http, patched_pod, {"spec": {"activeDeadlineSeconds": 30.0},
                                        "metadata": {"labels": None}},
                    "application/strategic-merge-patch+json")
    assert answer.status_code == 200, answer.text
    assert answer.json()["spec"]["activeDeadlineSeconds"] == 30


def test_server_side_apply_reports_every_type_error_as_its_typed_conversion(
        http: httpx.Client) -> None:
    config = deployment("applied", replicas="x", paused=1)
    config["spec"]["template"]["spec"]["containers"] = [
        {"name": "c", "image": 5, "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]
    answer = http.patch(f"{DEPLOYMENTS}/applied", content=yaml.safe_dump(config),
                        params={"fieldManager": "me"},
                        headers={"Content-Type": "application/apply-patch+yaml"})
    assert answer.status_code == 500, answer.text
    head, _, errors = answer.json()["message"].partition(": errors:\n  ")
    assert head == f"failed to create typed patch object ({NS}/applied; apps/v1, Kind=Deployment)"
    # structured-merge-diff walks a map in its own order: the lines are compared as a set
    assert set(errors.split("\n  ")) == {
        ".spec.replicas: expected numeric (int or float), got string",
        ".spec.paused: expected boolean, got &{1}",
        '.spec.template.spec.containers[name="c"].image: expected string, got '
        "&value.valueUnstructured{Value:5}"}


@pytest.mark.parametrize(("body", "message"), [
    pytest.param({**pod("restart-number"), "spec": {**pod("x")["spec"], "restartPolicy": 1}},
                 POD + CANNOT + " number into Go struct field PodSpec.spec.restartPolicy of "
                 "type v1.RestartPolicy", id="RestartPolicy"),
    pytest.param(pod("pull-bool", imagePullPolicy=True),
                 POD + CANNOT + " bool into Go struct field Container.spec.containers."
                 "imagePullPolicy of type v1.PullPolicy", id="PullPolicy"),
    pytest.param(pod("protocol-number", ports=[{"containerPort": 80, "protocol": 6}]),
                 POD + CANNOT + " number into Go struct field ContainerPort.spec.containers."
                 "ports.protocol of type v1.Protocol", id="Protocol"),
    pytest.param(pod("caps-number", securityContext={"capabilities": {"add": [1]}}),
                 POD + CANNOT + " number into Go struct field Capabilities.spec.containers."
                 "securityContext.capabilities.add of type v1.Capability",
                 id="slice-element-Capability"),
    pytest.param(pod("caps-string", securityContext={"capabilities": {"add": "NET_ADMIN"}}),
                 POD + CANNOT + " string into Go struct field Capabilities.spec.containers."
                 "securityContext.capabilities.add of type []v1.Capability",
                 id="slice-of-Capability"),
    pytest.param({**pod("effect-number"), "spec": {**pod("x")["spec"],
                                                   "tolerations": [{"effect": 1}]}},
                 POD + CANNOT + " number into Go struct field Toleration.spec.tolerations."
                 "effect of type v1.TaintEffect", id="TaintEffect"),
    pytest.param({**pod("uid-number"), "metadata": {"name": "uid-number", "uid": 7}},
                 POD + CANNOT + " number into Go struct field ObjectMeta.metadata.uid of type "
                 "types.UID", id="types.UID"),
    pytest.param(deployment("strategy-number", strategy={"type": 1}),
                 DEPLOYMENT + CANNOT + " number into Go struct field DeploymentStrategy.spec."
                 "strategy.type of type v1.DeploymentStrategyType", id="apps-named-type"),
])
def test_a_named_string_type_is_printed_by_its_go_name(dyn: dynamic.DynamicClient, body: Obj,
                                                       message: str) -> None:
    """encoding/json's UnmarshalTypeError prints the field's reflect.Type, which names a named
    type (k8s.io/api core/v1/types.go `type RestartPolicy string`, `type Capability string`;
    apimachinery pkg/types `type UID string`), as a real server answers `... PodSpec.spec.
    restartPolicy of type v1.RestartPolicy`."""
    assert refused_create(dyn, body)["message"] == message


def test_a_strategic_merge_patch_names_the_named_type_it_cannot_convert_to(
        http: httpx.Client, patched_pod: str) -> None:
    """runtime/converter.go fromUnstructured: `cannot convert %s to %s` prints dt.String()
    (`v1.DNSPolicy`); `unrecognized type: %v` prints dt.Kind() (`string`)."""
    for body, detail in (
            ({"spec": {"dnsPolicy": 1}}, "cannot convert int64 to v1.DNSPolicy"),
            ({"spec": {"dnsPolicy": True}}, "unrecognized type: string")):
        answer = _patch(http, patched_pod, body, "application/strategic-merge-patch+json")
        assert answer.status_code == 422, answer.text
        assert answer.json()["message"].endswith(": " + detail)


def test_the_switch_stores_what_it_is_sent() -> None:
    """`field_validation=False` turns the decoder's checks off with the unknown fields'."""
    with FakeKubeApi(field_validation=False, validation=False) as bare, \
            httpx.Client(base_url=bare.url) as raw:
        answer = raw.post("/api/v1/namespaces/default/configmaps",
                          json={"metadata": {"name": "typed"}, "data": {"n": 1}})
        assert answer.status_code == 201, answer.text
        assert answer.json()["data"] == {"n": 1}


@needs_kubectl
def test_kubectl_prints_the_decoders_refusal(api: FakeKubeApi, tmp_path: Path) -> None:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    manifest = tmp_path / "rc.yaml"
    body = deployment("kubectl-labels")  # kubectl decodes the top-level metadata itself
    body["spec"]["template"]["metadata"]["labels"]["fecha"] = 2025
    manifest.write_text(yaml.safe_dump(body))
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"),
         "-n", NS, "create", "--validate=false", "-f", str(manifest)],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert ('Error from server (BadRequest): error when creating "' + str(manifest) + '": '
            + DEPLOYMENT + CANNOT + " number into Go struct field ObjectMeta.spec.template."
            "metadata.labels of type string") in done.stderr

