"""An update the API server refuses as changing an immutable spec quotes go-cmp's diff of the
old and new specs, and so does the fake, over HTTP with the `kubernetes` client.

Sources: pkg/apis/core/validation/validation.go ValidatePodUpdate (`pod updates may not change
fields other than ...` then `cmp.Diff(oldPod.Spec, mungedPodSpec)`),
ValidatePersistentVolumeUpdate (`spec.persistentvolumesource is immutable after creation` then
`cmp.Diff(oldPv.Spec.PersistentVolumeSource, newPv.Spec.PersistentVolumeSource)`),
ValidatePersistentVolumeClaimUpdate (`spec is immutable after creation except ...` then
`cmp.Diff(oldPvcClone.Spec, newPvcClone.Spec)`); the diff's shape is go-cmp's default
reporter (cmp/report_compare.go, report_text.go), as real servers print it, e.g.
`  core.PodSpec{` ... `- \tImagePullSecrets: []core.LocalObjectReference{{Name: "x"}},`
`+ \tImagePullSecrets: nil,` ... `  \t... // 14 identical fields` ... `  }`.

go-cmp writes a regular or a non-breaking space after each line's mark at random, so the lines
are compared with non-breaking spaces made regular, as a test against a real server must.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube_elevator.fakes.kube_api.validation.pod_update import POD_UPDATE_FORBIDDEN

Obj = dict[str, Any]
NS = "diffs"


def refusal(call: Any) -> str:
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == 422, err.value.body
    message: str = json.loads(err.value.body)["message"]
    return message.replace("\u00a0", " ")


def squeezed(text: str) -> list[str]:
    """The diff's lines, tabs kept (they are its indentation), a key's alignment padding made
    one space."""
    return [re.sub(r"(?<=:) +", " ", line) for line in text.split("\n")]


def pod(name: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {
        "restartPolicy": "Always",
        "containers": [{"name": "c", "image": "busybox:1",
                        "ports": [{"containerPort": 80}]}]}}


def test_a_pod_update_quotes_the_spec_diff(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("restart"))
    message = refusal(lambda: core.patch_namespaced_pod(
        "restart", NS, {"spec": {"restartPolicy": "Never"}}))
    head, _, diff = message.partition("\n")
    assert head == 'Pod "restart" is invalid: spec: Forbidden: ' + POD_UPDATE_FORBIDDEN
    lines = squeezed(diff)
    assert lines[0] == "  core.PodSpec{"
    assert [line for line in lines if line.startswith(("-", "+"))] == [
        '- \tRestartPolicy: "Always",', '+ \tRestartPolicy: "Never",']
    assert lines[-2:] == ["  }", ""]  # cmp.Diff's report ends with a newline
    assert any(re.fullmatch(r"  \t\.\.\. // \d+ identical fields", line) for line in lines)


def test_a_nested_change_is_shown_inside_its_parents(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("port"))
    stored = core.read_namespaced_pod("port", NS)
    stored.spec.containers[0].ports[0].container_port = 81
    message = refusal(lambda: core.replace_namespaced_pod("port", NS, stored))
    lines = squeezed(message.partition("\n")[2])
    start = lines.index("  \tContainers: []core.Container{")
    assert lines[start + 1] == "  \t\t{"
    ports = lines.index("  \t\t\tPorts: []core.ContainerPort{")
    assert ports > start
    assert [line for line in lines if line.startswith(("-", "+"))] == [
        "- \t\t\t\t\tContainerPort: 80,", "+ \t\t\t\t\tContainerPort: 81,"]
    assert '  \t\t\t\t\tProtocol: "TCP",' in lines  # context, defaulted by the server


def test_an_added_list_is_printed_with_its_type(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod("secrets"))
    message = refusal(lambda: core.patch_namespaced_pod(
        "secrets", NS, {"spec": {"imagePullSecrets": [{"name": "registry"}]}}))
    lines = squeezed(message.partition("\n")[2])
    assert [line for line in lines if line.startswith(("-", "+"))] == [
        "- \tImagePullSecrets: nil,",
        '+ \tImagePullSecrets: []core.LocalObjectReference{{Name: "registry"}},']


def test_a_persistent_volume_source_change_quotes_the_source_diff(
        core: client.CoreV1Api) -> None:
    core.create_persistent_volume({"metadata": {"name": "diff-pv"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "hostPath": {"path": "/foo"}}})
    message = refusal(lambda: core.patch_persistent_volume(
        "diff-pv", {"spec": {"hostPath": {"path": "/bar"}}}))
    head, _, diff = message.partition("\n")
    assert head == ('PersistentVolume "diff-pv" is invalid: spec.persistentvolumesource: '
                    "Forbidden: spec.persistentvolumesource is immutable after creation")
    lines = squeezed(diff)
    assert lines[0] == "  core.PersistentVolumeSource{"
    assert "  \tHostPath: &core.HostPathVolumeSource{" in lines
    assert [line for line in lines if line.startswith(("-", "+"))] == [
        '- \t\tPath: "/foo",', '+ \t\tPath: "/bar",']


def test_a_claim_spec_change_quotes_the_spec_diff(core: client.CoreV1Api) -> None:
    core.create_namespaced_persistent_volume_claim(NS, {"metadata": {"name": "claim"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    message = refusal(lambda: core.patch_namespaced_persistent_volume_claim(
        "claim", NS, {"spec": {"accessModes": ["ReadWriteMany"]}}))
    head, _, diff = message.partition("\n")
    assert head == ('PersistentVolumeClaim "claim" is invalid: spec: Forbidden: spec is '
                    "immutable after creation except resources.requests and "
                    "volumeAttributesClassName for bound claims")
    lines = squeezed(diff)
    assert lines[0] == "  core.PersistentVolumeClaimSpec{"
    assert [line for line in lines if line.startswith(("-", "+"))] == [
        '- \tAccessModes: []core.PersistentVolumeAccessMode{"ReadWriteOnce"},',
        '+ \tAccessModes: []core.PersistentVolumeAccessMode{"ReadWriteMany"},']


def test_a_long_string_is_diffed_in_parts(core: client.CoreV1Api) -> None:
    """go-cmp's report_slices.go: a changed string of 32 bytes or more on both sides prints as
    `strings.Join({` its common part, the old and the new span, `}, "")`."""
    body = pod("long-node")
    body["spec"]["nodeName"] = "ip-10-0-1-23.us-west-2.compute.internal"
    core.create_namespaced_pod(NS, body)
    message = refusal(lambda: core.patch_namespaced_pod(
        "long-node", NS, {"spec": {"nodeName": "ip-10-0-1-99.us-west-2.compute.internal"}}))
    lines = squeezed(message.partition("\n")[2])
    start = lines.index("  \tNodeName: strings.Join({")
    assert lines[start + 1:start + 6] == [
        '  \t\t"ip-10-0-1-",', '- \t\t"23",', '+ \t\t"99",',
        '  \t\t".us-west-2.compute.internal",', '  \t}, ""),']
