"""Nodes, PersistentVolumes and PersistentVolumeClaims refused by the fake API as a real server
refuses them, over HTTP through the `kubernetes` client's dynamic client (its typed models
check required fields before sending) and kubectl.

Sources, re-expressed: kubernetes pkg/apis/core/validation/validation_test.go (TestValidateNode,
TestValidateNodeUpdate, TestValidatePersistentVolumes, TestValidatePersistentVolumeSourceUpdate,
TestValidatePersistentVolumeClaim, TestValidatePersistentVolumeClaimUpdate) and the rules of
validation.go they test (ValidateNode, ValidateNodeUpdate, ValidateNodeResources,
ValidatePersistentVolumeSpec, ValidatePersistentVolumeUpdate,
ValidatePersistentVolumeClaimSpec, ValidatePersistentVolumeClaimUpdate)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import dynamic
from kubernetes.dynamic.exceptions import DynamicApiError

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.tools import needs_kubectl

Obj = dict[str, Any]
NS = "volumes"
MERGE = "application/merge-patch+json"


@pytest.fixture(scope="module")
def dyn(api: FakeKubeApi, tmp_path_factory: pytest.TempPathFactory,
        ) -> Iterator[dynamic.DynamicClient]:
    with api.api_client() as api_client:
        # its discovery cache in the test's folder, not /tmp/osrcp-<hash>.json (a fake
        # server's new port each time: one file a run left behind)
        yield dynamic.DynamicClient(
            api_client, cache_file=str(tmp_path_factory.mktemp("discovery") / "cache.json"))


def resource(dyn: dynamic.DynamicClient, kind: str) -> Any:
    return dyn.resources.get(api_version="v1", kind=kind)


def causes(call: Any) -> list[tuple[str, str]]:
    with pytest.raises(DynamicApiError) as err:
        call()
    assert err.value.status == 422, err.value.body
    status = json.loads(err.value.body)
    return [(c["reason"], c["field"]) for c in status["details"]["causes"]]


def _name(prefix: str, body: Any) -> str:
    return f"{prefix}-{abs(hash(json.dumps(body, sort_keys=True))) % 10**8}"


# Nodes ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "status", "expected"), [
    pytest.param({"podCIDRs": ["192.168.0.0/16"]}, {}, [], id="valid-podCIDR"),
    pytest.param({"podCIDRs": ["192.168.0.0/16", "2001:db8::/64"]}, {}, [],
                 id="valid-dual-stack-podCIDRs"),
    pytest.param({"podCIDR": "192.168.0.0"}, {},
                 [("FieldValueInvalid", "spec.podCIDRs[0]")], id="invalid-podCIDR"),
    pytest.param({"podCIDRs": ["192.168.0.0/16", "10.0.0.0/16"]}, {},
                 [("FieldValueInvalid", "spec.podCIDRs")], id="two-of-one-family"),
    pytest.param({"podCIDRs": ["192.168.0.0/16", "2001:db8::/64", "10.0.0.0/16"]}, {},
                 [("FieldValueInvalid", "spec.podCIDRs")], id="more-than-two"),
    # allocatable defaults to capacity (SetDefaults_NodeStatus), so both are reported
    pytest.param({}, {"capacity": {"cpu": "-1"}},
                 [("FieldValueInvalid", "status.capacity.cpu"),
                  ("FieldValueInvalid", "status.allocatable.cpu")], id="negative-capacity"),
    pytest.param({}, {"allocatable": {"memory": "-1Gi"}},
                 [("FieldValueInvalid", "status.allocatable.memory")],
                 id="negative-allocatable"),
    pytest.param({}, {"capacity": {"example.com/dongle": "1.5"},
                      "allocatable": {"example.com/dongle": "1"}},
                 [("FieldValueInvalid", "status.capacity.example.com/dongle")],
                 id="fractional-extended-resource"),
])
def test_node_create(dyn: dynamic.DynamicClient, spec: Obj, status: Obj,
                     expected: list[tuple[str, str]]) -> None:
    """TestValidateNode."""
    body = {"metadata": {"name": _name("node", [spec, status])}, "spec": spec, "status": status}
    nodes = resource(dyn, "Node")
    if not expected:
        nodes.create(body=body)
        return
    assert causes(lambda: nodes.create(body=body)) == expected


def test_node_update(dyn: dynamic.DynamicClient) -> None:
    """TestValidateNodeUpdate: podCIDRs and providerID from "" once, then fixed; addresses
    unique; the status's quantities checked on a /status write too."""
    nodes = resource(dyn, "Node")
    nodes.create(body={"metadata": {"name": "updated"}})
    nodes.patch(name="updated", content_type=MERGE, body={"spec": {
        "podCIDRs": ["10.1.0.0/24"], "providerID": "aws:///us-east-1a/i-1"}})
    assert causes(lambda: nodes.patch(name="updated", content_type=MERGE, body={
        "spec": {"podCIDRs": ["10.2.0.0/24"]}})) == [("FieldValueForbidden", "spec.podCIDRs")]
    assert causes(lambda: nodes.patch(name="updated", content_type=MERGE, body={
        "spec": {"providerID": "aws:///us-east-1a/i-2"}})) == [
        ("FieldValueForbidden", "spec.providerID")]
    nodes.patch(name="updated", content_type=MERGE, body={"spec": {"unschedulable": True}})
    addresses = [{"type": "InternalIP", "address": "10.1.0.1"}] * 2
    assert causes(lambda: nodes.status.patch(name="updated", content_type=MERGE, body={
        "status": {"addresses": addresses}})) == [
        ("FieldValueDuplicate", "status.addresses[1]")]
    assert causes(lambda: nodes.status.patch(name="updated", content_type=MERGE, body={
        "status": {"capacity": {"pods": "-5"}, "allocatable": {"pods": "5"}}})) == [
        ("FieldValueInvalid", "status.capacity.pods")]
    with pytest.raises(DynamicApiError) as err:
        nodes.patch(name="updated", content_type=MERGE, body={"spec": {"providerID": ""}})
    assert json.loads(err.value.body)["message"] == (
        'Node "updated" is invalid: spec.providerID: Forbidden: node updates may not change '
        'providerID except from "" to valid')


# PersistentVolumes -------------------------------------------------------------------------

def pv_spec(**changes: Any) -> Obj:
    spec: Obj = {"capacity": {"storage": "10G"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": "/foo", "type": ""}}
    spec.update(changes)
    return {k: v for k, v in spec.items() if v is not None}


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param(pv_spec(), [], id="good-volume"),
    pytest.param(pv_spec(persistentVolumeReclaimPolicy="Retain",
                         storageClassName="valid", volumeMode="Block"), [],
                 id="good-volume-with-retain-policy-class-and-mode"),
    pytest.param(pv_spec(accessModes=["fakemode"]),
                 [("FieldValueNotSupported", "spec.accessModes")], id="invalid-accessmode"),
    pytest.param(pv_spec(accessModes=None), [("FieldValueRequired", "spec.accessModes")],
                 id="missing-accessmodes"),
    pytest.param(pv_spec(accessModes=["ReadWriteOncePod", "ReadWriteMany"]),
                 [("FieldValueForbidden", "spec.accessModes")],
                 id="ReadWriteOncePod-with-other-modes"),
    pytest.param(pv_spec(persistentVolumeReclaimPolicy="fakeReclaimPolicy"),
                 [("FieldValueNotSupported", "spec.persistentVolumeReclaimPolicy")],
                 id="invalid-reclaimpolicy"),
    pytest.param(pv_spec(hostPath=None), [("FieldValueRequired", "spec")],
                 id="missing-volume-source"),
    pytest.param(pv_spec(nfs={"server": "s", "path": "/p"}),
                 [("FieldValueForbidden", "spec.nfs")], id="more-than-one-source"),
    pytest.param(pv_spec(capacity=None),
                 [("FieldValueRequired", "spec.capacity"),
                  ("FieldValueNotSupported", "spec.capacity")], id="missing-capacity"),
    pytest.param(pv_spec(capacity={"storage": "0"}),
                 [("FieldValueInvalid", "spec.capacity[storage]")],
                 id="bad-volume-zero-capacity"),
    pytest.param(pv_spec(capacity={"storage": "10G", "cpu": "1"}),
                 [("FieldValueNotSupported", "spec.capacity")], id="more-than-storage"),
    pytest.param(pv_spec(storageClassName="-invalid-"),
                 [("FieldValueInvalid", "spec.storageClassName")],
                 id="invalid-storage-class-name"),
    pytest.param(pv_spec(volumeMode="Sideways"),
                 [("FieldValueNotSupported", "spec.volumeMode")], id="invalid-volume-mode"),
    pytest.param(pv_spec(hostPath={"path": ""}), [("FieldValueRequired", "spec.hostPath.path")],
                 id="host-path-without-path"),
    pytest.param(pv_spec(hostPath=None, local={"path": "/mnt/disk"}),
                 [("FieldValueRequired", "spec.nodeAffinity")],
                 id="local-volume-without-node-affinity"),
    pytest.param(pv_spec(hostPath=None, csi={"driver": "ebs.csi.aws.com"}),
                 [("FieldValueRequired", "spec.csi.volumeHandle")],
                 id="csi-without-volume-handle"),
])
def test_persistent_volume_create(dyn: dynamic.DynamicClient, spec: Obj,
                                  expected: list[tuple[str, str]]) -> None:
    """TestValidatePersistentVolumes."""
    body = {"metadata": {"name": _name("pv", spec)}, "spec": spec}
    volumes = resource(dyn, "PersistentVolume")
    if not expected:
        volumes.create(body=body)
        return
    assert causes(lambda: volumes.create(body=body)) == expected


def test_persistent_volume_update(dyn: dynamic.DynamicClient) -> None:
    """TestValidatePersistentVolumeSourceUpdate: the source and the mode are fixed; the
    capacity may change."""
    volumes = resource(dyn, "PersistentVolume")
    volumes.create(body={"metadata": {"name": "pv-updated"}, "spec": pv_spec()})
    volumes.patch(name="pv-updated", content_type=MERGE,
                  body={"spec": {"capacity": {"storage": "20G"}}})
    assert causes(lambda: volumes.patch(name="pv-updated", content_type=MERGE, body={
        "spec": {"hostPath": {"path": "/bar"}}})) == [
        ("FieldValueForbidden", "spec.persistentvolumesource")]
    assert causes(lambda: volumes.patch(name="pv-updated", content_type=MERGE, body={
        "spec": {"volumeMode": "Block"}})) == [("FieldValueInvalid", "volumeMode")]


# PersistentVolumeClaims ----------------------------------------------------------------------

def pvc_spec(**changes: Any) -> Obj:
    spec: Obj = {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "10G"}}}
    spec.update(changes)
    return {k: v for k, v in spec.items() if v is not None}


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param(pvc_spec(), [], id="good-claim"),
    pytest.param(pvc_spec(accessModes=None), [("FieldValueRequired", "spec.accessModes")],
                 id="missing-accessmodes"),
    pytest.param(pvc_spec(accessModes=["fakemode"]),
                 [("FieldValueNotSupported", "spec.accessModes")], id="invalid-accessmode"),
    pytest.param(pvc_spec(resources={"requests": {"memory": "1Gi"}}),
                 [("FieldValueRequired", "spec.resources[storage]")],
                 id="no-resource-requests"),
    pytest.param(pvc_spec(resources={"requests": {"storage": "0"}}),
                 [("FieldValueInvalid", "spec.resources[storage]")],
                 id="invalid-claim-zero-capacity"),
    pytest.param(pvc_spec(resources={"requests": {"storage": "-10G"}}),
                 [("FieldValueInvalid", "spec.resources[storage]")],
                 id="negative-storage-request"),
    pytest.param(pvc_spec(volumeMode="Sideways"),
                 [("FieldValueNotSupported", "spec.volumeMode")], id="invalid-volume-mode"),
    pytest.param(pvc_spec(storageClassName="-invalid-"),
                 [("FieldValueInvalid", "spec.storageClassName")],
                 id="invalid-storage-class-name"),
    pytest.param(pvc_spec(selector={"matchExpressions": [{"key": "k", "operator": "Exists",
                                                          "values": ["v"]}]}),
                 [("FieldValueForbidden", "spec.selector.matchExpressions[0].values")],
                 id="invalid-label-selector"),
])
def test_persistent_volume_claim_create(dyn: dynamic.DynamicClient, spec: Obj,
                                        expected: list[tuple[str, str]]) -> None:
    """TestValidatePersistentVolumeClaim."""
    body = {"metadata": {"name": _name("pvc", spec)}, "spec": spec}
    claims = resource(dyn, "PersistentVolumeClaim")
    if not expected:
        claims.create(body=body, namespace=NS)
        return
    assert causes(lambda: claims.create(body=body, namespace=NS)) == expected


def test_persistent_volume_claim_update(dyn: dynamic.DynamicClient) -> None:
    """TestValidatePersistentVolumeClaimUpdate: an unbound claim's spec is fixed but for a
    first volumeName; a bound claim may grow its request, and not shrink it to its capacity."""
    claims = resource(dyn, "PersistentVolumeClaim")
    claims.create(body={"metadata": {"name": "claim"}, "spec": pvc_spec()}, namespace=NS)
    grow = {"spec": {"resources": {"requests": {"storage": "20G"}}}}
    assert causes(lambda: claims.patch(name="claim", namespace=NS, content_type=MERGE,
                                       body=grow)) == [("FieldValueForbidden", "spec")]
    assert causes(lambda: claims.patch(name="claim", namespace=NS, content_type=MERGE, body={
        "spec": {"accessModes": ["ReadWriteMany"]}})) == [("FieldValueForbidden", "spec")]
    claims.patch(name="claim", namespace=NS, content_type=MERGE,
                 body={"spec": {"volumeName": "pv-1"}})
    assert causes(lambda: claims.patch(name="claim", namespace=NS, content_type=MERGE, body={
        "spec": {"volumeName": "pv-2"}})) == [("FieldValueForbidden", "spec")]
    claims.status.patch(name="claim", namespace=NS, content_type=MERGE, body={
        "status": {"phase": "Bound", "capacity": {"storage": "10G"}}})
    claims.patch(name="claim", namespace=NS, content_type=MERGE, body=grow)
    assert causes(lambda: claims.patch(name="claim", namespace=NS, content_type=MERGE, body={
        "spec": {"resources": {"requests": {"storage": "5G"}}}})) == [
        ("FieldValueForbidden", "spec.resources.requests.storage")]
    with pytest.raises(DynamicApiError) as err:
        claims.patch(name="claim", namespace=NS, content_type=MERGE,
                     body={"spec": {"storageClassName": "other"}})
    assert json.loads(err.value.body)["message"].startswith(
        'PersistentVolumeClaim "claim" is invalid: spec: Forbidden: spec is immutable after '
        "creation except resources.requests and volumeAttributesClassName for bound claims")


def test_the_switch_stores_a_volume_without_a_source(tmp_path: Path) -> None:
    with FakeKubeApi(validation=False) as bare, bare.api_client() as api_client:
        dyn = dynamic.DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))
        volumes = dyn.resources.get(api_version="v1", kind="PersistentVolume")
        volumes.create(body={"metadata": {"name": "bare"}, "spec": {}})


@needs_kubectl
def test_kubectl_prints_a_claim_without_a_storage_request(api: FakeKubeApi,
                                                          tmp_path: Path) -> None:
    manifest = tmp_path / "pvc.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "kubectl-pvc"},
        "spec": {"accessModes": ["ReadWriteOnce"]}}))
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"),
         "-n", NS, "create", "-f", str(manifest)], capture_output=True, text=True, timeout=60,
        check=False)
    assert done.returncode == 1
    assert ('The PersistentVolumeClaim "kubectl-pvc" is invalid: spec.resources[storage]: '
            "Required value") in done.stderr
