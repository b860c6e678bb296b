"""Leases, PodDisruptionBudgets, workloads, ConfigMaps and events.k8s.io Events refused as the
API server refuses them; status written through the main resource ignored as it ignores it;
seen through the real `kubernetes` client.

Sources, re-expressed: kubernetes pkg/apis/coordination/validation/validation_test.go
(TestValidateLeaseSpec), pkg/apis/policy/validation/validation_test.go
(TestValidatePodDisruptionBudgetSpec, TestValidateUnhealthyPodEvictionPolicyDisruptionBudgetSpec),
pkg/apis/apps/validation/validation_test.go (TestValidateDeployment,
TestValidateStatefulSet, TestValidateStatefulSetUpdate), pkg/registry/apps/deployment/strategy.go
(ValidateUpdate's selector rule), pkg/apis/core/validation/validation_test.go (TestValidateConfigMap,
TestValidateConfigMapUpdate),
pkg/apis/core/validation/events_test.go (TestValidateEventForCoreV1Events,
TestValidateEventForNewV1EventsAPI); the registry strategies' PrepareForCreate and
PrepareForUpdate for status (pkg/registry/core/pod/strategy.go, apps/deployment/strategy.go)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube_elevator.fakes.kube_api.server import FakeKubeApi

Obj = dict[str, Any]
NS = "kinds"


@pytest.fixture(scope="module")
def api_client(api: FakeKubeApi) -> Iterator[client.ApiClient]:
    with api.api_client() as api_client:
        yield api_client


def refused_body(call: Callable[[], Any]) -> str:
    """The body of a write's 422."""
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == 422, err.value.body
    body: str = err.value.body
    return body


def refused(call: Callable[[], Any]) -> list[tuple[str, str]]:
    return [(c["reason"], c["field"]) for c in json.loads(refused_body(call))["details"]["causes"]]


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0}, [],
                 id="TestValidateLeaseSpec-ok"),
    pytest.param({"leaseDurationSeconds": 0},
                 [("FieldValueInvalid", "spec.leaseDurationSeconds")],
                 id="TestValidateLeaseSpec-non-positive-duration"),
    pytest.param({"leaseTransitions": -1}, [("FieldValueInvalid", "spec.leaseTransitions")],
                 id="TestValidateLeaseSpec-negative-transitions"),
    pytest.param({"preferredHolder": "b"}, [("FieldValueForbidden", "spec.preferredHolder")],
                 id="TestValidateLeaseSpec-preferred-holder-without-strategy"),
])
def test_lease_specs(api_client: client.ApiClient, spec: Obj,
                     expected: list[tuple[str, str]]) -> None:
    coord = client.CoordinationV1Api(api_client)
    body = {"metadata": {"name": f"lease-{abs(hash(json.dumps(spec))) % 10**8}"}, "spec": spec}
    if not expected:
        coord.create_namespaced_lease(NS, body)
        return
    assert refused(lambda: coord.create_namespaced_lease(NS, body)) == expected


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({"minAvailable": "50%", "selector": {"matchLabels": {"a": "b"}}}, [],
                 id="TestValidatePodDisruptionBudgetSpec-percent"),
    pytest.param({"minAvailable": -1}, [("FieldValueInvalid", "spec.minAvailable")],
                 id="TestValidatePodDisruptionBudgetSpec-negative-min"),
    pytest.param({"maxUnavailable": "101%"}, [("FieldValueInvalid", "spec.maxUnavailable")],
                 id="TestValidatePodDisruptionBudgetSpec-over-100-percent"),
    pytest.param({"minAvailable": 1, "maxUnavailable": 1}, [("FieldValueInvalid", "spec")],
                 id="TestValidatePodDisruptionBudgetSpec-both-set"),
    pytest.param({"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
                 [("FieldValueRequired", "spec.selector.matchExpressions[0].values")],
                 id="TestValidatePodDisruptionBudgetSpec-In-without-values"),
    pytest.param({"unhealthyPodEvictionPolicy": "Sometimes"},
                 [("FieldValueNotSupported", "spec.unhealthyPodEvictionPolicy")],
                 id="TestValidateUnhealthyPodEvictionPolicyDisruptionBudgetSpec-invalid"),
])
def test_pod_disruption_budget_specs(api_client: client.ApiClient, spec: Obj,
                                     expected: list[tuple[str, str]]) -> None:
    policy = client.PolicyV1Api(api_client)
    body = {"metadata": {"name": f"pdb-{abs(hash(json.dumps(spec))) % 10**8}"}, "spec": spec}
    if not expected:
        policy.create_namespaced_pod_disruption_budget(NS, body)
        return
    assert refused(lambda: policy.create_namespaced_pod_disruption_budget(NS, body)) == expected


def workload(name: str, labels: dict[str, str], **pod_spec: Any) -> Obj:
    return {"metadata": {"name": name}, "spec": {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": labels},
                     "spec": {"containers": [{"name": "c", "image": "i:1"}], **pod_spec}}}}


def test_workloads(api_client: client.ApiClient) -> None:
    """TestValidateDeployment / TestValidateStatefulSet: the selector must match the
    template's labels, the template's pods restart Always, replicas are not negative."""
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(NS, workload("web", {"app": "web", "tier": "x"}))
    assert refused(lambda: apps.create_namespaced_deployment(
        NS, workload("mismatch", {"app": "other"}))) == [
        ("FieldValueInvalid", "spec.template.metadata.labels")]
    assert refused(lambda: apps.create_namespaced_stateful_set(
        NS, workload("never", {"app": "never"}, restartPolicy="Never"))) == [
        ("FieldValueNotSupported", "spec.template.spec.restartPolicy")]
    negative = workload("neg", {"app": "neg"})
    negative["spec"]["replicas"] = -1
    assert refused(lambda: apps.create_namespaced_replica_set(NS, negative)) == [
        ("FieldValueInvalid", "spec.replicas")]
    no_image = workload("noimage", {"app": "noimage"})
    no_image["spec"]["template"]["spec"]["containers"] = [{"name": "c", "image": ""}]
    assert refused(lambda: apps.create_namespaced_deployment(NS, no_image)) == [
        ("FieldValueRequired", "spec.template.spec.containers[0].image")]
    late = workload("late", {"app": "late"})
    late["spec"].update(minReadySeconds=10, progressDeadlineSeconds=10)
    assert json.loads(refused_body(lambda: apps.create_namespaced_deployment(NS, late)))[
        "message"] == ('Deployment.apps "late" is invalid: spec.progressDeadlineSeconds: '
                       "Invalid value: 10: must be greater than minReadySeconds")
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment(NS, workload("mismatch", {"app": "other"}))
    assert json.loads(err.value.body)["message"] == (
        'Deployment.apps "mismatch" is invalid: spec.template.metadata.labels: Invalid value: '
        'map[string]string{"app":"other"}: `selector` does not match template `labels`')


def test_workload_updates(api_client: client.ApiClient) -> None:
    """What an apps/v1 update may change: a Deployment's (and ReplicaSet's) selector never
    (deployment/strategy.go ValidateUpdate, ValidateImmutableField; the message as `kubectl
    apply` shows it after a chart renames a label), a StatefulSet's spec only in the fields
    ValidateStatefulSetUpdate lists (TestValidateStatefulSetUpdate)."""
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(NS, workload("moving", {"app": "moving"}))
    moved = workload("moving", {"app": "moving", "v": "2"})
    moved["spec"]["selector"] = {"matchLabels": {"v": "2", "app": "moving"}}
    with pytest.raises(ApiException) as err:
        apps.replace_namespaced_deployment("moving", NS, moved)
    assert err.value.status == 422
    assert json.loads(err.value.body)["message"] == (
        'Deployment.apps "moving" is invalid: spec.selector: Invalid value: '
        'v1.LabelSelector{MatchLabels:map[string]string{"app":"moving", "v":"2"}, '
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable")
    apps.patch_namespaced_deployment("moving", NS, {"spec": {"replicas": 3}})  # the rest may
    apps.create_namespaced_replica_set(NS, workload("rs-moving", {"app": "rs-moving"}))
    assert refused(lambda: apps.patch_namespaced_replica_set("rs-moving", NS, {"spec": {
        "selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}})) == [
        ("FieldValueInvalid", "spec.selector")]

    apps.create_namespaced_stateful_set(NS, workload("db", {"app": "db"}))
    apps.patch_namespaced_stateful_set("db", NS, {"spec": {"replicas": 2, "minReadySeconds": 5}})
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_stateful_set("db", NS, {"spec": {"serviceName": "other"}})
    assert json.loads(err.value.body)["message"] == (
        'StatefulSet.apps "db" is invalid: spec: Forbidden: updates to statefulset spec for '
        "fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', "
        "'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' "
        "are forbidden")


def test_config_map_keys(api_client: client.ApiClient) -> None:
    """TestValidateConfigMap: keys are config keys, `.`/`..` and `..x` refused."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(NS, {"metadata": {"name": "cm-ok"}, "data": {
        "a": "", "good-key": "", ".so.is.this": "", "THIS_IS_GOOD": ""}})
    assert refused(lambda: core.create_namespaced_config_map(NS, {
        "metadata": {"name": "cm-bad"}, "data": {"b*d": "", "..bad": ""}})) == [
        ("FieldValueInvalid", "data[b*d]"), ("FieldValueInvalid", "data[..bad]")]


def test_config_map_duplicate_keys_and_size(api_client: client.ApiClient) -> None:
    """ValidateConfigMap: a key in both maps is reported on `data`; 1 MiB of data and binary
    data in all, reported on the path `field.NewPath("")` prints (`[]`)."""
    core = client.CoreV1Api(api_client)
    status = json.loads(refused_body(lambda: core.create_namespaced_config_map(NS, {
        "metadata": {"name": "cm-dup"}, "data": {"k": "text"}, "binaryData": {"k": "AA=="}})))
    assert status["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "data[k]",
        "message": 'Invalid value: "k": duplicate of key present in binaryData'}]
    half = 512 * 1024
    core.create_namespaced_config_map(NS, {"metadata": {"name": "cm-full"}, "data": {
        "a": "x" * half}, "binaryData": {"b": base64.b64encode(b"\0" * half).decode()}})
    status = json.loads(refused_body(lambda: core.create_namespaced_config_map(NS, {
        "metadata": {"name": "cm-over"}, "data": {"a": "x" * half},
        "binaryData": {"b": base64.b64encode(b"\0" * (half + 1)).decode()}})))
    assert status["message"] == ('ConfigMap "cm-over" is invalid: []: Too long: may not be more '
                                 "than 1048576 bytes")


def test_an_immutable_config_map_keeps_its_data(api_client: client.ApiClient) -> None:
    """ValidateConfigMapUpdate (validation_test.go TestValidateConfigMapUpdate's immutable
    cases): data, binaryData and `immutable` itself are fixed once it is true; metadata is not."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(NS, {"metadata": {"name": "cm-frozen"}, "immutable": True,
                                           "data": {"a": "1"}})
    core.patch_namespaced_config_map("cm-frozen", NS, {"metadata": {"labels": {"may": "change"}}})
    assert refused(lambda: core.patch_namespaced_config_map(
        "cm-frozen", NS, {"data": {"a": "2"}, "binaryData": {"b": "AA=="}})) == [
        ("FieldValueForbidden", "data"), ("FieldValueForbidden", "binaryData")]
    status = json.loads(refused_body(lambda: core.patch_namespaced_config_map(
        "cm-frozen", NS, {"immutable": False})))
    assert status["message"] == ('ConfigMap "cm-frozen" is invalid: immutable: Forbidden: field '
                                 "is immutable when `immutable` is set")
    assert core.read_namespaced_config_map("cm-frozen", NS).data == {"a": "1"}


def test_events_validation_depends_on_the_group(api_client: client.ApiClient) -> None:
    """events_test.go: core/v1 events keep the legacy rules (any name), events.k8s.io/v1 ones
    are checked strictly (eventTime, reportingController, action)."""
    client.CoreV1Api(api_client).create_namespaced_event(NS, {
        "metadata": {"name": "web.17a2b3c4d5e6f708"}, "involvedObject": {"kind": "Pod"},
        "reason": "Started", "message": "m", "type": "Normal"})
    events = client.EventsV1Api(api_client)
    assert refused(lambda: events.create_namespaced_event(NS, {
        "metadata": {"name": "e1"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "type": "Normal", "reason": "R", "regarding": {"kind": "Pod"}})) == [
        ("FieldValueRequired", "reportingController"),
        ("FieldValueInvalid", "reportingController"),  # name part empty, and not matching
        ("FieldValueInvalid", "reportingController"),
        ("FieldValueRequired", "reportingInstance"), ("FieldValueRequired", "action")]


def test_status_through_the_main_resource_is_ignored(api: FakeKubeApi,
                                                      api_client: client.ApiClient) -> None:
    """A create drops the status it carries (a Pod starts Pending), an update keeps the stored
    status; `/status` writes it; the in-process methods (the simulator) write both."""
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    made = core.create_namespaced_pod(NS, {"metadata": {"name": "st"}, "spec": {
        "containers": [{"name": "c", "image": "i:1"}]}, "status": {"phase": "Running"}})
    assert (made.status.phase, made.status.qos_class) == ("Pending", "BestEffort")
    current = api_client.sanitize_for_serialization(core.read_namespaced_pod("st", NS))
    current["status"] = {"phase": "Succeeded"}
    current["metadata"]["labels"] = {"seen": "yes"}
    replaced = core.replace_namespaced_pod("st", NS, current)
    assert (replaced.status.phase, replaced.metadata.labels) == ("Pending", {"seen": "yes"})
    assert core.patch_namespaced_pod("st", NS, {"status": {"phase": "Failed"}}).status.phase \
        == "Pending"
    core.patch_namespaced_pod_status("st", NS, {"status": {"phase": "Running"}})
    assert core.read_namespaced_pod("st", NS).status.phase == "Running"
    apps.create_namespaced_deployment(NS, {**workload("stat", {"app": "stat"}),
                                           "status": {"replicas": 7}})
    assert apps.read_namespaced_deployment("stat", NS).status.replicas is None
    node = core.create_node({"metadata": {"name": "st-node"}, "status": {
        "capacity": {"cpu": "4"}}})  # nodeStrategy takes status on create
    assert node.status.allocatable == {"cpu": "4"}
    assert api.patch("pods", "st", {"status": {"phase": "Succeeded"}}, NS)["status"][
        "phase"] == "Succeeded"
