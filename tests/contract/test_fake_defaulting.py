"""The fake API fills in what the API server and its default admission plugins fill in, seen
through the real `kubernetes` client over HTTP; each switch turns its layer off.

Sources, re-expressed: kubernetes pkg/apis/core/v1/defaults_test.go (TestPodDefaults,
TestWorkloadDefaults: the paths a pod and a pod template get defaulted),
pkg/apis/apps/v1/defaults_test.go (TestSetDefaultDeployment, TestSetDefaultStatefulSet,
TestSetDefaultReplicaSetReplicas), plugin/pkg/admission/defaulttolerationseconds/admission_test.go
(TestForgivenessAdmission), plugin/pkg/admission/serviceaccount and priority."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from kube_elevator.fakes.kube_api.defaulting import image_pull_policy
from kube_elevator.fakes.kube_api.server import FakeKubeApi

Obj = dict[str, Any]
NS = "defaults"
HANDLER = {"httpGet": {"port": 80}}
PROBE = {"httpGet": {"port": 80}}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}
UNREACHABLE = {**NOT_READY, "key": "node.kubernetes.io/unreachable"}


@pytest.fixture(scope="module")
def api_client(api: FakeKubeApi) -> Iterator[client.ApiClient]:
    with api.api_client() as api_client:
        yield api_client


def full_container(name: str) -> Obj:
    """A container with every substructure TestPodDefaults defaults inside."""
    return {"name": name, "image": "registry.example/app:1.2",
            "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "lifecycle": {"postStart": HANDLER, "preStop": HANDLER},
            "livenessProbe": PROBE, "readinessProbe": PROBE, "ports": [{"containerPort": 80}],
            "resources": {"limits": {"cpu": "1"}}}


def read(api_client: client.ApiClient, kind: str, name: str) -> Obj:
    """The stored object as JSON, the way the client received it."""
    if kind == "pods":
        got = client.CoreV1Api(api_client).read_namespaced_pod(name, NS)
    else:
        got = getattr(client.AppsV1Api(api_client), f"read_namespaced_{kind}")(name, NS)
    return dict(api_client.sanitize_for_serialization(got))


def at(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


POD_DEFAULTS = {  # TestPodDefaults' expectedDefaults, in the JSON spelling
    "spec.containers.0.env.0.valueFrom.fieldRef.apiVersion": "v1",
    "spec.containers.0.imagePullPolicy": "IfNotPresent",
    "spec.containers.0.lifecycle.postStart.httpGet.path": "/",
    "spec.containers.0.lifecycle.postStart.httpGet.scheme": "HTTP",
    "spec.containers.0.lifecycle.preStop.httpGet.path": "/",
    "spec.containers.0.livenessProbe.failureThreshold": 3,
    "spec.containers.0.livenessProbe.httpGet.path": "/",
    "spec.containers.0.livenessProbe.httpGet.scheme": "HTTP",
    "spec.containers.0.livenessProbe.periodSeconds": 10,
    "spec.containers.0.livenessProbe.successThreshold": 1,
    "spec.containers.0.livenessProbe.timeoutSeconds": 1,
    "spec.containers.0.ports.0.protocol": "TCP",
    "spec.containers.0.readinessProbe.timeoutSeconds": 1,
    "spec.containers.0.resources.requests": {"cpu": "1"},
    "spec.containers.0.terminationMessagePath": "/dev/termination-log",
    "spec.containers.0.terminationMessagePolicy": "File",
    "spec.initContainers.0.imagePullPolicy": "IfNotPresent",
    "spec.initContainers.0.terminationMessagePolicy": "File",
    "spec.initContainers.0.resources.requests": {"cpu": "1"},
    "spec.dnsPolicy": "ClusterFirst",
    "spec.enableServiceLinks": True,
    "spec.restartPolicy": "Always",
    "spec.schedulerName": "default-scheduler",
    "spec.securityContext": {},
    "spec.terminationGracePeriodSeconds": 30,
    "spec.volumes.0.configMap.defaultMode": 420,
    "spec.volumes.1.secret.defaultMode": 420,
    "spec.volumes.2.emptyDir": {},
    "spec.volumes.3.projected.defaultMode": 420,
    "spec.volumes.3.projected.sources.0.serviceAccountToken.expirationSeconds": 3600,
    "spec.volumes.4.downwardAPI.items.0.fieldRef.apiVersion": "v1",
    "spec.volumes.5.hostPath.type": "",
}
VOLUMES = [{"name": "cm", "configMap": {"name": "c"}}, {"name": "s", "secret": {"secretName": "s"}},
           {"name": "scratch"},
           {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
           {"name": "down", "downwardAPI": {"items": [{"path": "n", "fieldRef": {
               "fieldPath": "metadata.name"}}]}},
           {"name": "host", "hostPath": {"path": "/tmp"}}]


def test_pod_defaults_as_test_pod_defaults_lists_them(api_client: client.ApiClient) -> None:
    """defaults_test.go TestPodDefaults: every path it lists is filled in on create."""
    client.CoreV1Api(api_client).create_namespaced_pod(NS, {
        "metadata": {"name": "full"},
        "spec": {"containers": [full_container("main")], "initContainers": [
            # a sidecar: only an init container with restartPolicy Always may have hooks and
            # probes (validateInitContainers), and TestPodDefaults' init container has them
            {**full_container("init"), "restartPolicy": "Always"}], "volumes": VOLUMES}})
    stored = read(api_client, "pods", "full")
    assert {path: at(stored, path) for path in POD_DEFAULTS} == POD_DEFAULTS
    assert stored["status"]["qosClass"] == "Burstable"


def test_admission_plugins_defaults(api_client: client.ApiClient) -> None:
    """ServiceAccount (default account), DefaultTolerationSeconds (TestForgivenessAdmission:
    not-ready and unreachable NoExecute for 300 s), Priority (0, PreemptLowerPriority)."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(NS, {"metadata": {"name": "admitted"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}]}})
    spec = read(api_client, "pods", "admitted")["spec"]
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == ("default", "default")
    assert spec["tolerations"] == [NOT_READY, UNREACHABLE]
    assert (spec["priority"], spec["preemptionPolicy"]) == (0, "PreemptLowerPriority")
    assert spec["containers"][0]["imagePullPolicy"] == "Always"  # no tag: latest


@pytest.mark.parametrize(("tolerations", "added"), [
    pytest.param([], [NOT_READY, UNREACHABLE], id="TestForgivenessAdmission-none"),
    pytest.param([{**NOT_READY, "tolerationSeconds": 700}], [UNREACHABLE],
                 id="TestForgivenessAdmission-not-ready-given"),
    pytest.param([{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}],
                 [NOT_READY], id="TestForgivenessAdmission-unreachable-any-effect"),
    pytest.param([{"operator": "Exists", "effect": "NoExecute"}], [],
                 id="TestForgivenessAdmission-tolerates-every-NoExecute-taint"),
    pytest.param([{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                   "effect": "NoSchedule"}], [NOT_READY, UNREACHABLE],
                 id="TestForgivenessAdmission-other-effect-does-not-count"),
])
def test_default_toleration_seconds(api_client: client.ApiClient, tolerations: list[Obj],
                                    added: list[Obj]) -> None:
    name = f"forgive-{len(tolerations)}-{len(added)}-{abs(hash(str(tolerations))) % 10**6}"
    client.CoreV1Api(api_client).create_namespaced_pod(NS, {"metadata": {"name": name}, "spec": {
        "containers": [{"name": "c", "image": "i:1"}], "tolerations": tolerations}})
    assert read(api_client, "pods", name)["spec"]["tolerations"] == [*tolerations, *added]


@pytest.mark.parametrize(("image", "policy"), [
    ("busybox", "Always"), ("busybox:latest", "Always"), ("busybox:1.36", "IfNotPresent"),
    ("localhost:5000/app", "Always"), ("localhost:5000/app:v1", "IfNotPresent"),
    ("app@sha256:" + "a" * 64, "IfNotPresent"), ("app:latest@sha256:" + "a" * 64, "Always"),
    ("", "IfNotPresent"),
])
def test_image_pull_policy_by_tag(image: str, policy: str) -> None:
    """SetDefaults_Container: Always for `latest` (or no tag and no digest), else
    IfNotPresent (defaults_test.go TestSetDefaultsContainerImagePullPolicy-like)."""
    assert image_pull_policy(image) == policy


def test_host_network_ports(api_client: client.ApiClient) -> None:
    """defaults_test.go TestSetDefaultPodSpecHostNetwork: hostPort is the containerPort."""
    client.CoreV1Api(api_client).create_namespaced_pod(NS, {"metadata": {"name": "hostnet"},
        "spec": {"hostNetwork": True, "containers": [{"name": "c", "image": "i:1", "ports": [
            {"containerPort": 8080}]}]}})
    port = read(api_client, "pods", "hostnet")["spec"]["containers"][0]["ports"][0]
    assert port == {"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}


def template(name: str) -> Obj:
    return {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}


def test_workload_defaults(api_client: client.ApiClient) -> None:
    """apps/v1 defaults_test.go TestSetDefaultDeployment, TestSetDefaultStatefulSet,
    TestSetDefaultReplicaSetReplicas; templates get the pod spec's defaults
    (TestWorkloadDefaults) but not the admission plugins' (those act on Pods)."""
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(NS, {"metadata": {"name": "web"}, "spec": template("web")})
    apps.create_namespaced_stateful_set(NS, {"metadata": {"name": "db"}, "spec": template("db")})
    apps.create_namespaced_replica_set(NS, {"metadata": {"name": "rs"}, "spec": template("rs")})
    web = read(api_client, "deployment", "web")["spec"]
    assert (web["replicas"], web["revisionHistoryLimit"], web["progressDeadlineSeconds"]) == (
        1, 10, 600)
    assert web["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {
        "maxUnavailable": "25%", "maxSurge": "25%"}}
    pod_spec = web["template"]["spec"]
    assert (pod_spec["restartPolicy"], pod_spec["dnsPolicy"], pod_spec["schedulerName"]) == (
        "Always", "ClusterFirst", "default-scheduler")
    assert "tolerations" not in pod_spec and "serviceAccountName" not in pod_spec
    db = read(api_client, "stateful_set", "db")["spec"]
    assert (db["replicas"], db["podManagementPolicy"], db["revisionHistoryLimit"]) == (
        1, "OrderedReady", 10)
    assert db["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert db["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain",
                                                          "whenScaled": "Retain"}
    assert read(api_client, "replica_set", "rs")["spec"]["replicas"] == 1


def test_switches_turn_each_layer_off() -> None:
    """`admission_defaults=False` leaves the API defaults; `defaulting=False` stores the body as
    sent, still validated as if defaulted (so no field it would fill is reported missing)."""
    body = {"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "c",
                                                                   "image": "i:1"}]}}
    with FakeKubeApi(admission_defaults=False) as api:
        spec = api.create("pods", body, namespace=NS)["spec"]
        assert spec["restartPolicy"] == "Always"
        assert not {"tolerations", "serviceAccountName", "priority"} & set(spec)
    with FakeKubeApi(defaulting=False, admission_defaults=False) as api, \
            api.api_client() as api_client:
        client.CoreV1Api(api_client).create_namespaced_pod(NS, body)
        assert api.get("pods", "bare", NS)["spec"] == body["spec"]
        api.layers.defaulting = True  # a switch a test may flip on a running server
        api.create("pods", {**body, "metadata": {"name": "now"}}, namespace=NS)
        assert api.get("pods", "now", NS)["spec"]["dnsPolicy"] == "ClusterFirst"


def test_the_harness_passes_the_switches_on() -> None:
    """`fake_cluster(validation=False, admission_defaults=False)`: a bare pod without an image
    is stored, API-defaulted but without the admission plugins' additions."""
    from kube_elevator.harness import fake_cluster

    with fake_cluster(validation=False, admission_defaults=False,
                      set_environment=False) as cluster:
        stored = cluster.kube.create("pods", {"metadata": {"name": "loose"}, "spec": {
            "containers": [{"name": "c"}]}}, namespace=NS)
        assert stored["spec"]["restartPolicy"] == "Always"
        assert "tolerations" not in stored["spec"]
        assert (cluster.kube.layers.validation, cluster.kube.layers.defaulting) == (False, True)


@pytest.mark.fake_cluster(defaulting=False)
def test_the_marker_switches_the_shared_fake_kube(fake_cluster: Any, fake_kube: FakeKubeApi) -> None:
    assert fake_kube.layers.defaulting is False
    assert fake_cluster.kube is fake_kube
