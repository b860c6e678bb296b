"""A `/scale` patch or an Eviction whose field has the wrong JSON type is refused in the
decoder's words, as a main resource's write is, over HTTP with the `kubernetes` client's
dynamic client (its typed methods check types on the client side and never send such a body).

Sources, re-expressed: k8s.io/apiserver handlers/patch.go (jsonPatcher decodes the patched
Scale and answers 422 Invalid on `patch` with the patched JSON; smpPatcher converts the
patched map with runtime/converter.go, `unrecognized type: int32`, `cannot convert float64 to
int32`), handlers/create.go and rest.go transformDecodeError for the Eviction a pods/eviction
create decodes (`Eviction in version "v1" cannot be handled as a Eviction: json: cannot
unmarshal string into Go struct field DeleteOptions.deleteOptions.gracePeriodSeconds of type
int64`); the Go types are k8s.io/api autoscaling/v1 ScaleSpec (`Replicas int32`) and policy/v1
Eviction (`DeleteOptions *metav1.DeleteOptions`, `PropagationPolicy *DeletionPropagation`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import dynamic
from kubernetes.dynamic.exceptions import DynamicApiError

from kube_elevator.fakes.kube_api.server import FakeKubeApi

Obj = dict[str, Any]
NS = "subtypes"
CANNOT = "json: cannot unmarshal"
MERGE, JSON_PATCH, STRATEGIC = ("application/merge-patch+json", "application/json-patch+json",
                                "application/strategic-merge-patch+json")


@pytest.fixture(scope="module")
def dyn(api: FakeKubeApi, tmp_path_factory: pytest.TempPathFactory,
        ) -> Iterator[dynamic.DynamicClient]:
    with api.api_client() as api_client:
        # its discovery cache in the test's folder, not /tmp/osrcp-<hash>.json (a fake
        # server's new port each time: one file a run left behind)
        yield dynamic.DynamicClient(
            api_client, cache_file=str(tmp_path_factory.mktemp("discovery") / "cache.json"))


@pytest.fixture(scope="module")
def deployments(dyn: dynamic.DynamicClient) -> Any:
    resource = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    resource.create(namespace=NS, body={
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}})
    return resource


def refused(call: Any, status: int) -> Obj:
    with pytest.raises(DynamicApiError) as err:
        call()
    assert err.value.status == status, err.value.body
    answer: Obj = json.loads(err.value.body)
    return answer


@pytest.mark.parametrize(("content_type", "body", "detail"), [
    pytest.param(MERGE, {"spec": {"replicas": "3"}},
                 CANNOT + " string into Go struct field ScaleSpec.spec.replicas of type int32",
                 id="merge"),
    pytest.param(JSON_PATCH, [{"op": "replace", "path": "/spec/replicas", "value": True}],
                 CANNOT + " bool into Go struct field ScaleSpec.spec.replicas of type int32",
                 id="json"),
    pytest.param(MERGE, {"status": {"selector": 1}},
                 CANNOT + " number into Go struct field ScaleStatus.status.selector of type "
                 "string", id="merge-status"),
])
def test_a_scale_json_or_merge_patch_is_invalid_on_patch(deployments: Any, content_type: str,
                                                         body: Any, detail: str) -> None:
    status = refused(lambda: deployments.scale.patch(
        name="web", namespace=NS, body=body, content_type=content_type), 422)
    assert status["reason"] == "Invalid"
    assert status["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    assert status["message"].endswith('}": ' + detail)
    [cause] = status["details"]["causes"]
    assert (cause["reason"], cause["field"]) == ("FieldValueInvalid", "patch")
    patched = json.loads(json.loads(cause["message"].removeprefix("Invalid value: ")
                                    .removesuffix(": " + detail)))
    assert (patched["kind"], patched["metadata"]["name"]) == ("Scale", "web")


@pytest.mark.parametrize(("body", "detail"), [
    pytest.param({"spec": {"replicas": "3"}},
                 'Invalid value: "map[spec:map[replicas:3]]": unrecognized type: int32',
                 id="string-into-int32"),
    pytest.param({"spec": {"replicas": 1.5}},
                 'Invalid value: "map[spec:map[replicas:1.5]]": cannot convert float64 to '
                 "int32", id="fraction-into-int32"),
    pytest.param({"spec": "3"},
                 'Invalid value: "map[spec:3]": cannot restore struct from: string',
                 id="string-into-struct"),
])
def test_a_scale_strategic_merge_patch_is_invalid_in_the_converters_words(
        deployments: Any, body: Obj, detail: str) -> None:
    status = refused(lambda: deployments.scale.patch(
        name="web", namespace=NS, body=body, content_type=STRATEGIC), 422)
    assert status["message"] == ' "" is invalid: patch: ' + detail
    assert status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": detail, "field": "patch"}]


def test_a_well_typed_scale_patch_still_scales(deployments: Any) -> None:
    deployments.scale.patch(name="web", namespace=NS, body={"spec": {"replicas": 3.0}},
                            content_type=STRATEGIC)  # an integral float converts
    deployments.scale.patch(name="web", namespace=NS, body={"spec": {"replicas": 4}},
                            content_type=MERGE)
    assert deployments.get(name="web", namespace=NS).spec.replicas == 4


@pytest.fixture(scope="module")
def pods(dyn: dynamic.DynamicClient) -> Any:
    return dyn.resources.get(api_version="v1", kind="Pod")


EVICTION = 'Eviction in version "v1" cannot be handled as a Eviction: '


@pytest.mark.parametrize(("body", "message"), [
    pytest.param({"deleteOptions": {"gracePeriodSeconds": "5"}},
                 EVICTION + CANNOT + " string into Go struct field DeleteOptions.deleteOptions."
                 "gracePeriodSeconds of type int64", id="string-into-int64"),
    pytest.param({"deleteOptions": {"propagationPolicy": 1}},
                 EVICTION + CANNOT + " number into Go struct field DeleteOptions.deleteOptions."
                 "propagationPolicy of type v1.DeletionPropagation", id="named-type"),
    pytest.param({"deleteOptions": {"dryRun": "All"}},
                 EVICTION + CANNOT + " string into Go struct field DeleteOptions.deleteOptions."
                 "dryRun of type []string", id="string-into-slice"),
    pytest.param({"deleteOptions": [1]},
                 EVICTION + CANNOT + " array into Go struct field Eviction.deleteOptions of "
                 "type v1.DeleteOptions", id="array-into-struct"),
    pytest.param({"apiVersion": "policy/v1beta1", "metadata": {"name": 5}},
                 'Eviction in version "v1beta1" cannot be handled as a Eviction: ' + CANNOT
                 + " number into Go struct field ObjectMeta.metadata.name of type string",
                 id="v1beta1"),
])
def test_an_eviction_of_the_wrong_types_is_refused_as_the_decoder_words_it(
        pods: Any, body: Obj, message: str) -> None:
    name = "evicted"
    if not pods.get(namespace=NS, field_selector=f"metadata.name={name}").items:
        pods.create(namespace=NS, body={"apiVersion": "v1", "kind": "Pod",
                                        "metadata": {"name": name},
                                        "spec": {"containers": [{"name": "c", "image": "i"}]}})
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name},
                **body}
    status = refused(lambda: pods.eviction.create(name=name, namespace=NS, body=eviction), 400)
    assert (status["reason"], status["message"]) == ("BadRequest", message)
    assert pods.get(name=name, namespace=NS).metadata.name == name  # not evicted
