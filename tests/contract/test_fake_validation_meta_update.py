"""What an update may do to an object's metadata, for every built-in kind, and owner references,
refused by the fake API as a real server refuses them; through the `kubernetes` client and
kubectl over HTTP.

Sources, re-expressed: staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta_test.go
(TestValidateObjectMetaUpdateIgnoresCreationTimestamp,
TestValidateObjectMetaUpdatePreventsDeletionFieldMutation,
TestValidateObjectMetaOwnerReferences), with what k8s.io/apiserver pkg/registry/rest/update.go
BeforeUpdate repairs before that validation runs (an empty uid, any creationTimestamp, a stored
deletionTimestamp, a stored grace period filling an empty one); the unconditional-update
refusal of pkg/registry/policy/poddisruptionbudget/strategy.go (AllowUnconditionalUpdate) and
staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go Update."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from tests.tools import needs_kubectl

Obj = dict[str, Any]
NS = "metaupdate"
STAMP = "2025-03-04T05:06:07Z"


@pytest.fixture(scope="module")
def api_client(api: FakeKubeApi) -> Iterator[client.ApiClient]:
    with api.api_client() as api_client:
        yield api_client


@pytest.fixture(scope="module")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def created(core: client.CoreV1Api, name: str, **metadata: Any) -> Obj:
    body = {"metadata": {"name": name, **metadata}, "data": {"k": "v"}}
    result: Obj = core.api_client.sanitize_for_serialization(
        core.create_namespaced_config_map(NS, body))
    return result


def refused(call: Any) -> Obj:
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == 422, err.value.body
    status: Obj = json.loads(err.value.body)
    return status


def causes(status: Obj) -> list[tuple[str, str, str]]:
    return [(c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]]


def test_a_new_uid_is_immutable(core: client.CoreV1Api) -> None:
    stored = created(core, "uid")
    stored["metadata"]["uid"] = "another-uid"
    status = refused(lambda: core.replace_namespaced_config_map("uid", NS, stored))
    assert status["message"] == ('ConfigMap "uid" is invalid: metadata.uid: Invalid value: '
                                 '"another-uid": field is immutable')
    assert causes(status) == [("FieldValueInvalid", "metadata.uid",
                               'Invalid value: "another-uid": field is immutable')]


def test_what_before_update_repairs_is_not_refused(core: client.CoreV1Api) -> None:
    """An empty uid takes the stored one; creationTimestamp is always the stored one
    (TestValidateObjectMetaUpdateIgnoresCreationTimestamp)."""
    stored = created(core, "repaired")
    uid, born = stored["metadata"]["uid"], stored["metadata"]["creationTimestamp"]
    stored["metadata"]["uid"] = ""
    stored["metadata"]["creationTimestamp"] = "2001-01-01T00:00:00Z"
    stored["data"] = {"k": "w"}
    replaced = core.replace_namespaced_config_map("repaired", NS, stored)
    assert replaced.metadata.uid == uid
    assert core.api_client.sanitize_for_serialization(replaced.metadata.creation_timestamp) == \
        born


@pytest.mark.parametrize(("metadata", "expected"), [
    pytest.param({"deletionTimestamp": STAMP},
                 [("FieldValueInvalid", "metadata.deletionTimestamp",
                   "Invalid value: 2025-03-04 05:06:07 +0000 UTC: field is immutable")],
                 id="nil-to-set-deletionTimestamp"),
    pytest.param({"deletionGracePeriodSeconds": 30},
                 [("FieldValueInvalid", "metadata.deletionGracePeriodSeconds",
                   "Invalid value: 30: field is immutable")],
                 id="nil-to-set-gracePeriod"),
    pytest.param({"deletionTimestamp": STAMP, "deletionGracePeriodSeconds": 0},
                 [("FieldValueInvalid", "metadata.deletionTimestamp",
                   "Invalid value: 2025-03-04 05:06:07 +0000 UTC: field is immutable"),
                  ("FieldValueInvalid", "metadata.deletionGracePeriodSeconds",
                   "Invalid value: 0: field is immutable")],
                 id="both"),
])
def test_an_update_cannot_mark_an_object_deleted(core: client.CoreV1Api, metadata: Obj,
                                                  expected: list[tuple[str, str, str]]) -> None:
    """TestValidateObjectMetaUpdatePreventsDeletionFieldMutation: nil to set is refused."""
    name = "deleted-" + "-".join(sorted(metadata)).lower()
    created(core, name)
    status = refused(lambda: core.patch_namespaced_config_map(
        name, NS, {"metadata": metadata}))
    assert causes(status) == expected


def test_an_object_being_deleted_keeps_its_deletion_fields(core: client.CoreV1Api) -> None:
    """Set to nil or to another time: BeforeUpdate restores the stored values (so the update
    passes); set to another grace period: refused."""
    created(core, "finalized", finalizers=["example.com/hold"])
    core.delete_namespaced_config_map("finalized", NS)
    stored = core.api_client.sanitize_for_serialization(
        core.read_namespaced_config_map("finalized", NS))
    stamp = stored["metadata"]["deletionTimestamp"]
    grace = stored["metadata"]["deletionGracePeriodSeconds"]
    stored["metadata"]["deletionTimestamp"] = "2001-01-01T00:00:00Z"
    del stored["metadata"]["deletionGracePeriodSeconds"]
    stored["metadata"]["labels"] = {"kept": "yes"}
    replaced = core.api_client.sanitize_for_serialization(
        core.replace_namespaced_config_map("finalized", NS, stored))
    assert (replaced["metadata"]["deletionTimestamp"],
            replaced["metadata"]["deletionGracePeriodSeconds"]) == (stamp, grace)
    status = refused(lambda: core.patch_namespaced_config_map(
        "finalized", NS, {"metadata": {"deletionGracePeriodSeconds": grace + 10}}))
    assert causes(status) == [("FieldValueInvalid", "metadata.deletionGracePeriodSeconds",
                               f"Invalid value: {grace + 10}: field is immutable")]
    core.patch_namespaced_config_map("finalized", NS, {"metadata": {"finalizers": None}})


def owner(kind: str, name: str, uid: str = "1", api_version: str = "apps/v1",
          controller: bool | None = None) -> Obj:
    ref: Obj = {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}
    if controller is not None:
        ref["controller"] = controller
    return ref


@pytest.mark.parametrize(("refs", "expected"), [
    pytest.param([owner("customresourcekind", "name", api_version="customresourceVersion")],
                 [], id="simple-success-third-party-extension"),
    pytest.param([owner("Event", "name", api_version="v1")],
                 [("FieldValueInvalid", "metadata.ownerReferences")],
                 id="event-should-not-be-an-owner"),
    pytest.param([owner("ReplicaSet", "a", controller=True),
                  owner("ReplicaSet", "b", "2", controller=False)], [],
                 id="one-reference-with-controller"),
    pytest.param([owner("ReplicaSet", "a", controller=True),
                  owner("ReplicaSet", "b", "2", controller=True)],
                 [("FieldValueInvalid", "metadata.ownerReferences")],
                 id="two-references-with-controller"),
    pytest.param([{"apiVersion": "", "kind": "", "name": "", "uid": ""}],
                 [("FieldValueInvalid", "metadata.ownerReferences.apiVersion"),
                  ("FieldValueInvalid", "metadata.ownerReferences.kind"),
                  ("FieldValueInvalid", "metadata.ownerReferences.name"),
                  ("FieldValueInvalid", "metadata.ownerReferences.uid")],
                 id="every-part-empty"),
])
def test_owner_references(core: client.CoreV1Api, refs: list[Obj],
                          expected: list[tuple[str, str]]) -> None:
    """TestValidateObjectMetaOwnerReferences, on create and on update."""
    name = f"owned-{abs(hash(json.dumps(refs))) % 10**8}"
    body = {"metadata": {"name": name, "ownerReferences": refs}}
    if not expected:
        core.create_namespaced_config_map(NS, body)
        return
    status = refused(lambda: core.create_namespaced_config_map(NS, body))
    assert [(reason, fld) for reason, fld, _ in causes(status)] == expected
    created(core, name)
    status = refused(lambda: core.patch_namespaced_config_map(
        name, NS, {"metadata": {"ownerReferences": refs}}))
    assert [(reason, fld) for reason, fld, _ in causes(status)] == expected


def test_two_controllers_are_named_in_the_refusal(core: client.CoreV1Api) -> None:
    body = {"metadata": {"name": "two-controllers", "ownerReferences": [
        owner("ReplicaSet", "a", controller=True), owner("ReplicaSet", "b", "2", controller=True)]}}
    status = refused(lambda: core.create_namespaced_config_map(NS, body))
    assert causes(status)[0][2].endswith(
        'Only one reference can have Controller set to true. Found "true" in references for '
        "ReplicaSet/a and ReplicaSet/b")


def test_a_pod_disruption_budget_is_never_updated_unconditionally(
        api_client: client.ApiClient) -> None:
    policy = client.PolicyV1Api(api_client)
    policy.create_namespaced_pod_disruption_budget(
        NS, {"metadata": {"name": "budget"}, "spec": {"minAvailable": 1}})
    stored = api_client.sanitize_for_serialization(
        policy.read_namespaced_pod_disruption_budget("budget", NS))
    stored["spec"]["minAvailable"] = 2
    unconditional = {**stored, "metadata": {"name": "budget"}}
    status = refused(lambda: policy.replace_namespaced_pod_disruption_budget(
        "budget", NS, unconditional))
    assert status["message"] == ('poddisruptionbudgets.policy "budget" is invalid: '
                                 "metadata.resourceVersion: Invalid value: 0x0: must be "
                                 "specified for an update")
    assert status["details"]["kind"] == "poddisruptionbudgets"
    # with its resourceVersion, as read, it goes through; a ConfigMap needs none
    policy.replace_namespaced_pod_disruption_budget("budget", NS, stored)
    client.CoreV1Api(api_client).create_namespaced_config_map(NS, {"metadata": {"name": "free"}})
    client.CoreV1Api(api_client).replace_namespaced_config_map(
        "free", NS, {"metadata": {"name": "free"}, "data": {"a": "b"}})


def test_the_switch_lets_an_update_send_another_uid() -> None:
    with FakeKubeApi(validation=False) as bare, bare.api_client() as api_client:
        core = client.CoreV1Api(api_client)
        core.create_namespaced_config_map("default", {"metadata": {"name": "bare"}})
        core.patch_namespaced_config_map("bare", "default",
                                         {"metadata": {"uid": "another"}})


@needs_kubectl
def test_kubectl_prints_the_immutable_uid(api: FakeKubeApi, core: client.CoreV1Api,
                                          tmp_path: Path) -> None:
    stored = created(core, "kubectl-uid")
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "kubectl-uid", "namespace": NS, "uid": "not-" + stored["metadata"]["uid"],
            "resourceVersion": stored["metadata"]["resourceVersion"]}}))
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"),
         "replace", "-f", str(manifest)], capture_output=True, text=True, timeout=60,
        check=False)
    assert done.returncode == 1
    assert ('The ConfigMap "kubectl-uid" is invalid: metadata.uid: Invalid value: "not-'
            in done.stderr)
    assert '": field is immutable' in done.stderr
