"""The fake API defaults a created pod's container requests from its limits, as SetDefaults_Pod
does (kubernetes pkg/apis/core/v1/defaults.go), seen through the real client over HTTP."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import client

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.tasks.adapters.kube import KubeClient

GiB = 2**30
MiB = 2**20
NAMESPACE = "jobs"


def pod_body(name: str, containers: list[dict[str, Any]],
             init_containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init_containers is not None:
        spec["initContainers"] = init_containers
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


def container(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": "i"}
    if resources:
        body["resources"] = resources
    return body


def test_limits_only_containers_are_stored_and_counted_at_their_limits(
        fake_kube: FakeKubeApi, api_client: client.ApiClient) -> None:
    """The reported case: the tick reads 2000 m (the init container's 2 CPU beats the app's 1)
    and 1 GiB, as on a real cluster, not 0 m from requests left empty."""
    body = pod_body(
        "limits-only",
        [container("c", limits={"cpu": "1", "memory": "1Gi"})],
        [container("i", limits={"cpu": "2"}, requests={"memory": "10Mi"})])
    client.CoreV1Api(api_client).create_namespaced_pod(NAMESPACE, body)

    read = client.CoreV1Api(api_client).read_namespaced_pod("limits-only", NAMESPACE)
    assert read.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}
    assert read.spec.containers[0].resources.limits == {"cpu": "1", "memory": "1Gi"}
    assert read.spec.init_containers[0].resources.requests == {"cpu": "2", "memory": "10Mi"}
    assert read.spec.init_containers[0].resources.limits == {"cpu": "2"}

    [record] = [pod for pod in KubeClient(api_client).list_pods() if pod.name == "limits-only"]
    assert (record.cpu_request_milli, record.memory_request_bytes) == (2000, 1 * GiB)


@pytest.mark.parametrize(("resources", "requests"), [
    pytest.param({"limits": {"cpu": "100m", "memory": "1Gi"}, "requests": {"memory": "0"}},
                 {"memory": "0", "cpu": "100m"},
                 id="TestSetDefaultRequestsPod-limits-fill-missing-keep-zero-request"),
    pytest.param({"requests": {"cpu": "100m"}}, {"cpu": "100m"},
                 id="TestSetDefaultRequestsPod-no-limits-nothing-defaulted"),
    pytest.param({"limits": {"cpu": "1"}, "requests": {"cpu": "250m"}}, {"cpu": "250m"},
                 id="a-request-below-its-limit-kept"),
    pytest.param({"limits": {"nvidia.com/gpu": "1", "memory": "512Mi"}},
                 {"nvidia.com/gpu": "1", "memory": "512Mi"},
                 id="extended-resources-defaulted-too"),
    pytest.param({"limits": {}}, None, id="empty-limits-no-requests"),
])
def test_requests_are_defaulted_key_by_key(
        fake_kube: FakeKubeApi, api_client: client.ApiClient, request: pytest.FixtureRequest,
        resources: dict[str, Any], requests: dict[str, str] | None) -> None:
    """A request given is kept (even 0); only the resources it lacks take the limit."""
    name = f"case-{request.node.callspec.id.lower()}"[:63].rstrip("-")
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(NAMESPACE, pod_body(name, [{"name": "c", "image": "i",
                                                           "resources": resources}]))
    stored = fake_kube.get("pods", name, NAMESPACE)["spec"]["containers"][0]["resources"]
    assert stored.get("requests") == requests
    assert stored.get("limits") == resources.get("limits")


def test_every_container_and_init_container_is_defaulted(
        fake_kube: FakeKubeApi, api_client: client.ApiClient) -> None:
    """Sidecars (init containers that keep running) and second containers are counted too."""
    body = pod_body(
        "many",
        [container("a", limits={"cpu": "500m"}), container("b"),
         container("c", limits={"memory": "256Mi"})],
        [container("setup", limits={"memory": "64Mi"}),
         {**container("sidecar", limits={"cpu": "100m", "memory": "32Mi"}),
          "restartPolicy": "Always"}])
    client.CoreV1Api(api_client).create_namespaced_pod(NAMESPACE, body)
    spec = fake_kube.get("pods", "many", NAMESPACE)["spec"]
    assert [c.get("resources", {}).get("requests") for c in spec["containers"]] == [
        {"cpu": "500m"}, None, {"memory": "256Mi"}]
    assert [c["resources"]["requests"] for c in spec["initContainers"]] == [
        {"memory": "64Mi"}, {"cpu": "100m", "memory": "32Mi"}]
    [record] = [pod for pod in KubeClient(api_client).list_pods() if pod.name == "many"]
    # Sidecar counted with the app containers: 500m + 100m; 256Mi + 32Mi beats setup's 64Mi+32Mi.
    assert (record.cpu_request_milli, record.memory_request_bytes) == (600, 288 * MiB)


def test_an_in_process_create_is_defaulted_and_leaves_the_callers_body_alone(
        fake_kube: FakeKubeApi) -> None:
    """The simulator's `FakeKubeApi.create` has the HTTP create's semantics."""
    body = pod_body("in-process", [container("c", limits={"cpu": "1"})])
    sent = copy.deepcopy(body)
    stored = fake_kube.create("pods", body, NAMESPACE)
    assert stored["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert body == sent
