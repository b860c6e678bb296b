"""ConfigMaps, PodDisruptionBudgets and budget-aware eviction in `fakes.kube_api`, driven by
the real `kubernetes` client over HTTP, and the `KubeClient` calls a drain makes on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.core.errors import EvictionBlocked

Obj = dict[str, Any]
NS = "shop"
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def policy(api_client: client.ApiClient) -> client.PolicyV1Api:
    return client.PolicyV1Api(api_client)


def pod(name: str, *, app: str = "web", phase: str = "Running", ready: bool | None = True,
        ns: str = NS) -> Obj:
    """A pod of `app`; `ready=None` leaves the Ready condition out (counts as healthy)."""
    status: Obj = {"phase": phase}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            "status": status}


def pdb(name: str, ns: str = NS, selector: Obj | None = None, **spec: Any) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": selector or {"matchLabels": {"app": "web"}}, **spec}}


def evict(core: client.CoreV1Api, name: str, ns: str = NS) -> None:
    core.create_namespaced_pod_eviction(
        name, ns, client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=ns)))


def status_of(exc: ApiException) -> Obj:
    body: Obj = json.loads(exc.body)
    assert body["kind"] == "Status" and body["code"] == exc.status
    return body


def pod_names(core: client.CoreV1Api, ns: str = NS) -> list[str]:
    return [p.metadata.name for p in core.list_namespaced_pod(ns).items]


def budget(fake_kube: FakeKubeApi, name: str, ns: str = NS) -> Obj:
    status: Obj = fake_kube.get("poddisruptionbudgets", name, ns)["status"]
    return {k: status[k] for k in ("currentHealthy", "desiredHealthy", "disruptionsAllowed",
                                   "expectedPods")}


# Discovery and ConfigMaps ------------------------------------------------------------------


def test_discovery_lists_configmaps_and_budgets(api_client: client.ApiClient) -> None:
    core = {r.name: r for r in client.CoreV1Api(api_client).get_api_resources().resources}
    assert core["configmaps"].namespaced and core["configmaps"].short_names == ["cm"]
    assert "pods/eviction" in core
    policy = {r.name: r for r in client.PolicyV1Api(api_client).get_api_resources().resources}
    assert policy["poddisruptionbudgets"].kind == "PodDisruptionBudget"
    assert policy["poddisruptionbudgets"].short_names == ["pdb"]
    assert set(policy["poddisruptionbudgets"].verbs) >= {"create", "get", "list", "watch",
                                                        "update", "patch", "delete"}
    assert "poddisruptionbudgets/status" in policy


def test_configmap_crud(core: client.CoreV1Api) -> None:
    body = {"metadata": {"name": "cluster-autoscaler-priority-expander"},
            "data": {"priorities": "10:\n  - .*-spot-.*\n"}}
    created = core.create_namespaced_config_map("kube-system", body)
    assert created.metadata.namespace == "kube-system" and created.metadata.uid
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("kube-system", body)
    assert err.value.status == 409
    core.create_namespaced_config_map(NS, {"metadata": {"name": "other"}, "data": {"a": "1"}})
    everywhere = core.list_config_map_for_all_namespaces().items
    assert [(c.metadata.namespace, c.metadata.name) for c in everywhere] == [
        ("kube-system", "cluster-autoscaler-priority-expander"), (NS, "other")]
    read = core.read_namespaced_config_map("other", NS)
    read.data["b"] = "2"
    assert core.replace_namespaced_config_map("other", NS, read).data == {"a": "1", "b": "2"}
    patched = core.patch_namespaced_config_map("other", NS, {"data": {"a": None}})
    assert patched.data == {"b": "2"}
    core.delete_namespaced_config_map("other", NS)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("other", NS)
    assert err.value.status == 404


# PodDisruptionBudgets ------------------------------------------------------------------------


def test_budget_crud_and_status(fake_kube: FakeKubeApi, policy: client.PolicyV1Api) -> None:
    for name in ("a", "b", "c"):
        fake_kube.create("pods", pod(name))
    fake_kube.create("pods", pod("unready", ready=False))
    fake_kube.create("pods", pod("starting", phase="Pending", ready=None))
    fake_kube.create("pods", pod("done", phase="Succeeded", ready=None))
    fake_kube.create("pods", pod("db", app="db"))
    created = policy.create_namespaced_pod_disruption_budget(NS, pdb("web", minAvailable=2))
    assert created.metadata.generation == 1
    # Expected: a, b, c, unready, starting (not done, not db); healthy: a, b, c.
    assert created.status.current_healthy == 3 and created.status.desired_healthy == 2
    assert created.status.disruptions_allowed == 1 and created.status.expected_pods == 5

    patched = policy.patch_namespaced_pod_disruption_budget(
        "web", NS, {"spec": {"minAvailable": None, "maxUnavailable": "50%"}})
    # 5 expected pods, 50% rounded up = 3 may be unavailable: 2 must stay healthy.
    assert patched.metadata.generation == 2 and patched.status.observed_generation == 2
    assert patched.status.desired_healthy == 2 and patched.status.disruptions_allowed == 1

    policy.create_namespaced_pod_disruption_budget(
        "other", pdb("db", "other", {"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["db"]}]}, maxUnavailable=0))
    listed = policy.list_pod_disruption_budget_for_all_namespaces().items
    assert [(b.metadata.namespace, b.metadata.name) for b in listed] == [
        ("other", "db"), (NS, "web")]
    assert listed[0].status.expected_pods == 0  # the db pod is in another namespace
    fake_kube.create("pods", pod("db", app="db", ns="other"))
    db = policy.read_namespaced_pod_disruption_budget("db", "other")
    assert (db.status.current_healthy, db.status.desired_healthy,
            db.status.disruptions_allowed) == (1, 1, 0)

    read = policy.read_namespaced_pod_disruption_budget("web", NS)
    read.spec.max_unavailable = 1
    replaced = policy.replace_namespaced_pod_disruption_budget("web", NS, read)
    assert replaced.status.desired_healthy == 4 and replaced.status.disruptions_allowed == 0

    policy.delete_namespaced_pod_disruption_budget("web", NS)
    with pytest.raises(ApiException) as err:
        policy.read_namespaced_pod_disruption_budget("web", NS)
    assert err.value.status == 404


@pytest.mark.parametrize("spec", [
    {"minAvailable": 1, "maxUnavailable": 1},
    {"minAvailable": -1},
    {"maxUnavailable": "150%"},
    {"minAvailable": "half"},
    {"unhealthyPodEvictionPolicy": "Sometimes"},
])
def test_invalid_budgets_are_rejected(policy: client.PolicyV1Api, spec: Obj) -> None:
    with pytest.raises(ApiException) as err:
        policy.create_namespaced_pod_disruption_budget(NS, pdb("bad", **spec))
    assert err.value.status == 422
    assert status_of(err.value)["reason"] == "Invalid"


# Eviction ---------------------------------------------------------------------------------


def assert_blocked(core: client.CoreV1Api, name: str, budget_name: str, desired: int,
                   current: int) -> None:
    with pytest.raises(ApiException) as err:
        evict(core, name)
    assert err.value.status == 429
    body = status_of(err.value)
    assert body["reason"] == "TooManyRequests" and body["message"] == VIOLATION
    assert body["details"]["causes"] == [{
        "reason": "DisruptionBudget",
        "message": f"The disruption budget {budget_name} needs {desired} healthy pods and "
                   f"has {current} currently"}]
    assert name in pod_names(core)


def test_eviction_min_available_int(fake_kube: FakeKubeApi, core: client.CoreV1Api) -> None:
    for name in ("a", "b", "c"):
        fake_kube.create("pods", pod(name, ready=None))  # Running, no conditions: healthy
    fake_kube.create("poddisruptionbudgets", pdb("web", minAvailable=2))
    evict(core, "a")
    assert pod_names(core) == ["b", "c"]
    assert budget(fake_kube, "web")["disruptionsAllowed"] == 0
    assert_blocked(core, "b", "web", 2, 2)


def test_eviction_min_available_percent(fake_kube: FakeKubeApi,
                                        core: client.CoreV1Api) -> None:
    for name in ("a", "b", "c"):
        fake_kube.create("pods", pod(name))
    fake_kube.create("pods", pod("starting", phase="Pending", ready=None))
    fake_kube.create("poddisruptionbudgets", pdb("web", minAvailable="50%"))
    # 4 expected, 50% = 2 desired, 3 healthy: one disruption allowed.
    assert budget(fake_kube, "web") == {"currentHealthy": 3, "desiredHealthy": 2,
                                        "disruptionsAllowed": 1, "expectedPods": 4}
    evict(core, "a")
    # 3 expected, 50% rounded up = 2 desired, 2 healthy: at the limit.
    assert_blocked(core, "b", "web", 2, 2)
    evict(core, "starting")  # a pending pod ignores its budget
    assert pod_names(core) == ["b", "c"]


def test_eviction_max_unavailable_then_ready(fake_kube: FakeKubeApi,
                                             core: client.CoreV1Api) -> None:
    for name in ("a", "b", "c"):
        fake_kube.create("pods", pod(name))
    fake_kube.create("poddisruptionbudgets", pdb("web", maxUnavailable=1))
    evict(core, "a")
    # The ReplicaSet's replacement: expected back to 3, but it is not Ready yet.
    fake_kube.create("pods", pod("a2", phase="Pending", ready=False))
    assert budget(fake_kube, "web") == {"currentHealthy": 2, "desiredHealthy": 2,
                                        "disruptionsAllowed": 0, "expectedPods": 3}
    assert_blocked(core, "b", "web", 2, 2)
    core.patch_namespaced_pod_status("a2", NS, {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    assert budget(fake_kube, "web")["disruptionsAllowed"] == 1
    evict(core, "b")
    assert pod_names(core) == ["a2", "c"]


def test_eviction_max_unavailable_percent(fake_kube: FakeKubeApi,
                                          core: client.CoreV1Api) -> None:
    for name in ("a", "b", "c"):
        fake_kube.create("pods", pod(name))
    fake_kube.create("pods", pod("late", phase="Pending", ready=None))
    fake_kube.create("poddisruptionbudgets", pdb("web", maxUnavailable="25%"))
    # 4 expected, 25% = 1 unavailable: 3 desired, 3 healthy.
    assert budget(fake_kube, "web")["desiredHealthy"] == 3
    assert_blocked(core, "a", "web", 3, 3)


def test_unhealthy_pods_and_the_budget(fake_kube: FakeKubeApi, core: client.CoreV1Api) -> None:
    for name in ("a", "b"):
        fake_kube.create("pods", pod(name))
    for name in ("sick", "sicker"):
        fake_kube.create("pods", pod(name, ready=False))
    fake_kube.create("poddisruptionbudgets", pdb("web", minAvailable=2))
    # IfHealthyBudget (the default): the budget is met, so an unready pod may go.
    evict(core, "sick")
    fake_kube.patch("poddisruptionbudgets", "web", {"spec": {"minAvailable": 3}}, NS)
    assert_blocked(core, "sicker", "web", 3, 2)
    fake_kube.patch("poddisruptionbudgets", "web",
                    {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}, NS)
    evict(core, "sicker")
    assert pod_names(core) == ["a", "b"]


def test_two_budgets_answer_500(fake_kube: FakeKubeApi, core: client.CoreV1Api) -> None:
    fake_kube.create("pods", pod("a"))
    fake_kube.create("poddisruptionbudgets", pdb("one", minAvailable=0))
    fake_kube.create("poddisruptionbudgets", pdb("two", maxUnavailable="100%"))
    fake_kube.create("poddisruptionbudgets", pdb("empty", selector={}, maxUnavailable=0))
    with pytest.raises(ApiException) as err:
        evict(core, "a")
    assert err.value.status == 500
    body = status_of(err.value)
    assert body["reason"] == "InternalError"
    assert body["message"] == ("Internal error occurred: This pod has more than one "
                               "PodDisruptionBudget, which the eviction subresource does not "
                               "support.")
    assert pod_names(core) == ["a"]


def test_budgets_elsewhere_do_not_apply(fake_kube: FakeKubeApi, core: client.CoreV1Api) -> None:
    fake_kube.create("pods", pod("a"))
    fake_kube.create("pods", pod("b", app="db"))
    fake_kube.create("poddisruptionbudgets", pdb("web", "other", minAvailable=5))
    fake_kube.create("poddisruptionbudgets", pdb("db", minAvailable=5,
                                                 selector={"matchLabels": {"app": "db"}}))
    evict(core, "a")  # the web budget is in another namespace, the db one selects db pods
    assert_blocked(core, "b", "db", 5, 1)


def test_eviction_blocked_switch_still_works(fake_kube: FakeKubeApi,
                                             core: client.CoreV1Api) -> None:
    fake_kube.create("pods", pod("a"))
    fake_kube.set_eviction_blocked(NS, "a", True)
    with pytest.raises(ApiException) as err:
        evict(core, "a")
    assert err.value.status == 429
    fake_kube.set_eviction_blocked(NS, "a", False)
    evict(core, "a")
    assert pod_names(core) == []


# KubeClient ---------------------------------------------------------------------------------


def test_kube_client_evict_pod(fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    kube = KubeClient.from_config(kubeconfig)
    for name in ("a", "b"):
        fake_kube.create("pods", pod(name))
    fake_kube.create("poddisruptionbudgets", pdb("web", minAvailable=1))
    assert kube.evict_pod(NS, "a") is True
    assert kube.evict_pod(NS, "a") is False  # already gone
    with pytest.raises(EvictionBlocked) as blocked:
        kube.evict_pod(NS, "b")
    assert blocked.value.pod == f"{NS}/b"
    assert blocked.value.message == (
        f"{VIOLATION}; The disruption budget web needs 1 healthy pods and has 1 currently")
    assert [p["metadata"]["name"] for p in fake_kube.list("pods", NS)] == ["b"]


def test_kube_client_budgets_and_config_maps(fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    kube = KubeClient.from_config(kubeconfig)
    assert kube.list_pod_disruption_budgets() == []
    assert kube.read_config_map("kube-system", "cluster-autoscaler-priority-expander") is None
    fake_kube.create("pods", pod("a"))
    fake_kube.create("poddisruptionbudgets", pdb("web", minAvailable=1))
    fake_kube.create("poddisruptionbudgets", pdb("dns", "kube-system", maxUnavailable=1))
    fake_kube.create("configmaps", {
        "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
        "data": {"priorities": "10:\n  - .*-spot-.*\n"}})
    budgets = kube.list_pod_disruption_budgets()
    assert [(b["metadata"]["namespace"], b["metadata"]["name"]) for b in budgets] == [
        ("kube-system", "dns"), (NS, "web")]
    assert budgets[1]["spec"]["minAvailable"] == 1
    assert budgets[1]["status"]["disruptionsAllowed"] == 0
    assert kube.read_config_map("kube-system", "cluster-autoscaler-priority-expander") == {
        "priorities": "10:\n  - .*-spot-.*\n"}
