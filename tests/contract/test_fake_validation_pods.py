"""The fake API refuses the pods a real API server refuses (422 `Invalid`, every cause with its
reason and field), and the pod updates it refuses, seen through the real `kubernetes` client.

The cases re-express upstream's tables in kubernetes pkg/apis/core/validation/validation_test.go
(TestValidatePodSpec, TestValidateContainers, TestValidateContainerPorts,
TestValidateResourceRequirements, TestValidateTolerations (via TestValidatePod), TestValidateNode
and TestValidatePodUpdate); each case's id names the test it comes from."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.fakes.kube_api.validation.pod_update import POD_UPDATE_FORBIDDEN

Obj = dict[str, Any]
NS = "pods"


def pod(name: str, containers: list[Obj] | None = None, **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": containers if containers is not None
                     else [{"name": "main", "image": "busybox:1"}], **spec}}


def post(core: client.CoreV1Api, path: str, body: Obj) -> tuple[int, Obj]:
    """POST through the client's own HTTP stack, for bodies its typed methods refuse before
    sending (this client checks required fields itself)."""
    api_client = core.api_client
    resp = api_client.call_api("POST", api_client.configuration.host + path,
                               header_params={"Content-Type": "application/json",
                                              **api_client.default_headers}, body=body)
    resp.read()
    return resp.status, json.loads(resp.data)


def causes_of(core: client.CoreV1Api, body: Obj) -> list[tuple[str, str, str]]:
    """(reason, field, message) of each cause of the 422 the create gets."""
    code, status = post(core, f"/api/v1/namespaces/{NS}/pods", body)
    assert code == 422, status
    assert (status["reason"], status["code"], status["details"]["kind"]) == ("Invalid", 422,
                                                                              "Pod")
    assert status["message"].startswith(f'Pod "{body["metadata"]["name"]}" is invalid: ')
    return [(c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]]


C = "spec.containers[0]"


@pytest.mark.parametrize(("containers", "spec", "expected"), [
    pytest.param([], {}, [("FieldValueRequired", "spec.containers", "Required value")],
                 id="TestValidatePodSpec-no-containers"),
    pytest.param([{"name": "main"}], {}, [("FieldValueRequired", f"{C}.image",
                                           "Required value")],
                 id="TestValidateContainers-image-required"),
    pytest.param([{"image": "i"}], {}, [("FieldValueRequired", f"{C}.name", "Required value")],
                 id="TestValidateContainers-name-required"),
    pytest.param([{"name": "Main_1", "image": "i"}], {}, [
        ("FieldValueInvalid", f"{C}.name", 'Invalid value: "Main_1": a lowercase RFC 1123 label '
         "must consist of lower case alphanumeric characters or '-', and must start and end "
         "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
         "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")],
     id="TestValidateContainers-name-not-a-DNS-label"),
    pytest.param([{"name": "a", "image": "i"}, {"name": "a", "image": "i"}], {},
                 [("FieldValueDuplicate", "spec.containers[1].name", 'Duplicate value: "a"')],
                 id="TestValidateContainers-duplicate-names"),
    pytest.param([{"name": "a", "image": "i", "imagePullPolicy": "Sometimes"}], {},
                 [("FieldValueNotSupported", f"{C}.imagePullPolicy", 'Unsupported value: '
                   '"Sometimes": supported values: "Always", "IfNotPresent", "Never"')],
                 id="TestValidateContainers-invalid-image-pull-policy"),
    pytest.param(None, {"restartPolicy": "Sometimes"},
                 [("FieldValueNotSupported", "spec.restartPolicy", 'Unsupported value: '
                   '"Sometimes": supported values: "Always", "OnFailure", "Never"')],
                 id="TestValidatePodSpec-bad-restart-policy"),
    pytest.param(None, {"dnsPolicy": "Cluster"},
                 [("FieldValueNotSupported", "spec.dnsPolicy", 'Unsupported value: "Cluster": '
                   'supported values: "ClusterFirst", "ClusterFirstWithHostNet", "Default", '
                   '"None"')],
                 id="TestValidatePodSpec-bad-dns-policy"),
    pytest.param(None, {"activeDeadlineSeconds": 0},
                 [("FieldValueInvalid", "spec.activeDeadlineSeconds", "Invalid value: 0: must "
                   "be between 1 and 2147483647, inclusive")],
                 id="TestValidatePodSpec-bad-active-deadline-seconds"),
    pytest.param(None, {"nodeSelector": {"-key": "v"}},
                 [("FieldValueInvalid", "spec.nodeSelector", "")],
                 id="TestValidatePodSpec-bad-node-selector"),
])
def test_pod_specs_refused(core: client.CoreV1Api, containers: list[Obj] | None, spec: Obj,
                           expected: list[tuple[str, str, str]]) -> None:
    got = causes_of(core, pod("refused", containers, **spec))
    assert [(r, f) for r, f, _ in got] == [(r, f) for r, f, _ in expected]
    assert [m for _, _, m in got if m] == [m if m else g for (_, _, m), (_, _, g)
                                           in zip(expected, got, strict=True)]


P = f"{C}.ports[0]"


@pytest.mark.parametrize(("ports", "expected"), [
    pytest.param([{"containerPort": 80}], [], id="TestValidateContainerPorts-success-TCP"),
    pytest.param([{"containerPort": 80, "protocol": "UDP", "name": "dns"},
                  {"containerPort": 81, "protocol": "SCTP", "name": "sctp"}], [],
                 id="TestValidateContainerPorts-success-UDP-SCTP"),
    pytest.param([{"containerPort": 80, "name": "a" * 16}],
                 [("FieldValueInvalid", f"{P}.name")],
                 id="TestValidateContainerPorts-name-too-long"),
    pytest.param([{"containerPort": 80, "name": "12345"}],
                 [("FieldValueInvalid", f"{P}.name")],
                 id="TestValidateContainerPorts-name-not-IANA_SVC_NAME"),
    pytest.param([{"containerPort": 80, "name": "p"}, {"containerPort": 81, "name": "p"}],
                 [("FieldValueDuplicate", f"{C}.ports[1].name")],
                 id="TestValidateContainerPorts-duplicate-name"),
    pytest.param([{"containerPort": 0}], [("FieldValueRequired", f"{P}.containerPort")],
                 id="TestValidateContainerPorts-zero-container-port"),
    pytest.param([{"containerPort": 65536}], [("FieldValueInvalid", f"{P}.containerPort")],
                 id="TestValidateContainerPorts-invalid-container-port"),
    pytest.param([{"containerPort": 80, "hostPort": 65536}],
                 [("FieldValueInvalid", f"{P}.hostPort")],
                 id="TestValidateContainerPorts-invalid-host-port"),
    pytest.param([{"containerPort": 80, "protocol": "tcp"}],
                 [("FieldValueNotSupported", f"{P}.protocol")],
                 id="TestValidateContainerPorts-invalid-protocol-case"),
])
def test_container_ports(core: client.CoreV1Api, ports: list[Obj],
                         expected: list[tuple[str, str]]) -> None:
    body = pod(f"ports-{len(ports)}-{abs(hash(json.dumps(ports))) % 10**6}",
               [{"name": "main", "image": "i", "ports": ports}])
    if not expected:
        made = core.create_namespaced_pod(NS, body)
        assert [p.protocol for p in made.spec.containers[0].ports] == [
            p.get("protocol", "TCP") for p in ports]
        return
    assert [(r, f) for r, f, _ in causes_of(core, body)] == expected


R = f"{C}.resources"


@pytest.mark.parametrize(("resources", "expected"), [
    pytest.param({"limits": {"cpu": "1", "memory": "1Gi"},
                  "requests": {"cpu": "500m", "memory": "1Gi"}}, [],
                 id="TestValidateResourceRequirements-requests-below-limits"),
    pytest.param({"limits": {"cpu": "1"}, "requests": {"cpu": "2"}},
                 [("FieldValueInvalid", f"{R}.requests", 'Invalid value: "2": must be less '
                   "than or equal to cpu limit of 1")],
                 id="TestValidateResourceRequirements-requests-above-limits"),
    pytest.param({"requests": {"memory": "-1"}},
                 [("FieldValueInvalid", f"{R}.requests[memory]", 'Invalid value: "-1": must '
                   "be greater than or equal to 0")],
                 id="TestValidateResourceRequirements-negative"),
    pytest.param({"limits": {"example.com/gpu": "2"}, "requests": {"example.com/gpu": "1"}},
                 [("FieldValueInvalid", f"{R}.requests", 'Invalid value: "1": must be equal '
                   "to example.com/gpu limit of 2")],
                 id="TestValidateResourceRequirements-extended-not-overcommitted"),
    pytest.param({"requests": {"example.com/gpu": "1"}},
                 [("FieldValueRequired", f"{R}.limits", "Required value: Limit must be set "
                   "for non overcommitable resources")],
                 id="TestValidateResourceRequirements-extended-without-limit"),
    pytest.param({"requests": {"disk": "1"}},
                 [("FieldValueInvalid", f"{R}.requests[disk]", 'Invalid value: "disk": must '
                   "be a standard resource for containers")],
                 id="TestValidateResourceRequirements-unknown-resource-name"),
])
def test_resource_requirements(core: client.CoreV1Api, resources: Obj,
                               expected: list[tuple[str, str, str]]) -> None:
    body = pod(f"res-{abs(hash(json.dumps(resources))) % 10**8}",
               [{"name": "main", "image": "i", "resources": resources}])
    if not expected:
        core.create_namespaced_pod(NS, body)
        return
    assert causes_of(core, body) == expected


def test_a_malformed_quantity_cannot_be_decoded(core: client.CoreV1Api) -> None:
    """A quantity that does not parse fails the decode: 400, before any validation."""
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(NS, pod("q", [{"name": "m", "image": "i", "resources": {
            "requests": {"cpu": "one"}}}]))
    assert err.value.status == 400
    assert "quantities must match the regular expression" in json.loads(err.value.body)[
        "message"]


T = "spec.tolerations[0]"


@pytest.mark.parametrize(("toleration", "expected"), [
    pytest.param({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, [],
                 id="TestValidatePod-toleration-exists"),
    pytest.param({"operator": "Exists"}, [], id="TestValidatePod-toleration-empty-key-exists"),
    pytest.param({"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute",
                  "tolerationSeconds": 60}, [], id="TestValidatePod-toleration-seconds"),
    pytest.param({"key": "k", "operator": "In", "effect": "NoSchedule"},
                 [("FieldValueNotSupported", f"{T}.operator")],
                 id="TestValidatePod-toleration-operator-not-supported"),
    pytest.param({"operator": "Equal", "value": "v"}, [("FieldValueInvalid", f"{T}.operator")],
                 id="TestValidatePod-toleration-empty-key-with-Equal"),
    pytest.param({"key": "k", "operator": "Exists", "value": "v"},
                 [("FieldValueInvalid", f"{T}.operator")],
                 id="TestValidatePod-toleration-value-with-Exists"),
    pytest.param({"key": "k", "effect": "NoSchedule", "tolerationSeconds": 1},
                 [("FieldValueInvalid", f"{T}.effect")],
                 id="TestValidatePod-toleration-seconds-without-NoExecute"),
    pytest.param({"key": "k", "effect": "NoScheduleNoAdmit"},
                 [("FieldValueNotSupported", f"{T}.effect")],
                 id="TestValidatePod-toleration-unknown-effect"),
    pytest.param({"key": "-k", "operator": "Exists"}, [("FieldValueInvalid", f"{T}.key")],
                 id="TestValidatePod-toleration-bad-key"),
])
def test_tolerations(core: client.CoreV1Api, toleration: Obj,
                     expected: list[tuple[str, str]]) -> None:
    body = pod(f"tol-{abs(hash(json.dumps(toleration))) % 10**8}", tolerations=[toleration])
    if not expected:
        core.create_namespaced_pod(NS, body)
        return
    assert [(r, f) for r, f, _ in causes_of(core, body)] == expected


@pytest.mark.parametrize(("taint", "expected"), [
    pytest.param({"key": "k", "value": "v", "effect": "NoSchedule"}, [],
                 id="TestValidateNode-taint-ok"),
    pytest.param({"key": "k", "effect": "NoScheduleNoAdmit"},
                 [("FieldValueNotSupported", "metadata.taints[0].effect",
                   'Unsupported value: "NoScheduleNoAdmit": supported values: "NoSchedule", '
                   '"PreferNoSchedule", "NoExecute"')],
                 id="TestValidateNode-invalid-taint-effect"),
    pytest.param({"key": "k"}, [("FieldValueRequired", "metadata.taints[0].effect",
                                 "Required value")],
                 id="TestValidateNode-missing-taint-effect"),
    pytest.param({"key": "", "effect": "NoSchedule"},
                 [("FieldValueInvalid", "metadata.taints[0].key",
                   'Invalid value: "": name part must be non-empty'),
                  ("FieldValueInvalid", "metadata.taints[0].key", "")],
                 id="TestValidateNode-missing-taint-key"),
])
def test_node_taints(core: client.CoreV1Api, taint: Obj,
                     expected: list[tuple[str, str, str]]) -> None:
    """Reported under `metadata.taints`, as upstream's ValidateNode passes the metadata path
    to validateNodeTaints."""
    name = f"taint-{abs(hash(json.dumps(taint))) % 10**8}"
    body = {"metadata": {"name": name}, "spec": {"taints": [taint]}}
    if not expected:
        core.create_node(body)
        return
    code, status = post(core, "/api/v1/nodes", body)
    assert code == 422, status
    got = [(c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]]
    assert [(r, f) for r, f, _ in got] == [(r, f) for r, f, _ in expected]
    assert [m for (_, _, m), (_, _, want) in zip(got, expected, strict=True) if want] == [
        want for _, _, want in expected if want]


def test_duplicate_taints_by_key_and_effect(core: client.CoreV1Api) -> None:
    """validateNodeTaints: unique by (key, effect); the same key with another effect is fine."""
    core.create_node({"metadata": {"name": "two-effects"}, "spec": {"taints": [
        {"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoExecute"}]}})
    with pytest.raises(ApiException) as err:
        core.create_node({"metadata": {"name": "dup-taints"}, "spec": {"taints": [
            {"key": "k", "effect": "NoSchedule"}, {"key": "k", "value": "x",
                                                   "effect": "NoSchedule"}]}})
    [cause] = json.loads(err.value.body)["details"]["causes"]
    assert (cause["reason"], cause["field"]) == ("FieldValueDuplicate", "metadata.taints[1]")
    assert cause["message"].endswith("taints must be unique by key and effect pair")


# Updates ------------------------------------------------------------------------------------


def test_pod_updates_that_touch_immutable_fields_are_refused(core: client.CoreV1Api) -> None:
    """TestValidatePodUpdate: image, activeDeadlineSeconds (lowered) and added tolerations
    may change; a resource, a container, a node name may not."""
    core.create_namespaced_pod(NS, pod("upd", [{"name": "main", "image": "busybox:1",
                                                "resources": {"requests": {"cpu": "1"}}}],
                                       activeDeadlineSeconds=100))
    core.patch_namespaced_pod("upd", NS, {"spec": {"containers": [{"name": "main",
                                                                   "image": "busybox:2"}]}})
    core.patch_namespaced_pod("upd", NS, {"spec": {"activeDeadlineSeconds": 50}})
    current = core.read_namespaced_pod("upd", NS)
    tolerations = [*current.spec.tolerations, client.V1Toleration(key="new", operator="Exists")]
    core.patch_namespaced_pod("upd", NS, {"spec": {"tolerations": [
        client.ApiClient().sanitize_for_serialization(t) for t in tolerations]}})
    for patch, field_ in (
            ({"spec": {"containers": [{"name": "main", "resources": {"requests": {
                "cpu": "2"}}}]}}, "Requests:"),  # the Go fields cmp.Diff names
            ({"spec": {"nodeName": "elsewhere"}}, "NodeName:"),
            ({"spec": {"activeDeadlineSeconds": 500}}, None),
            ({"spec": {"tolerations": []}}, "Tolerations:")):
        with pytest.raises(ApiException) as err:
            core.patch_namespaced_pod("upd", NS, patch)
        assert err.value.status == 422
        status = json.loads(err.value.body)
        if field_ is None:  # raised, not forbidden: activeDeadlineSeconds may only go down
            assert status["details"]["causes"][0]["field"] == "spec.activeDeadlineSeconds"
            continue
        [cause] = status["details"]["causes"]
        assert (cause["reason"], cause["field"]) == ("FieldValueForbidden", "spec")
        assert cause["message"].startswith("Forbidden: " + POD_UPDATE_FORBIDDEN)
        assert field_ in cause["message"]
    assert core.read_namespaced_pod("upd", NS).spec.containers[0].image == "busybox:2"


def test_in_process_writes_bind_pods_as_the_control_plane(api: FakeKubeApi) -> None:
    """The simulator's scheduler binds through the in-process methods, as a real scheduler
    binds through pods/binding: no pod update rule there."""
    api.create("pods", pod("bound"), namespace=NS)
    assert api.patch("pods", "bound", {"spec": {"nodeName": "n1"}}, NS)["spec"]["nodeName"] \
        == "n1"
