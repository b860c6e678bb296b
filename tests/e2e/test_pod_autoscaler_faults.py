"""Pod autoscalers under lost and refused writes: one scale per scale window, whichever write
fails (the node groups' rule, "no double scale-up", for the WPA and the MemoryAutoscaler).

Their windows read only the status's lastScaleTime; a scale whose status write did not land
would be made again inside its window, from the pods the first scale added. So a cycle records
the scale in the status first, and reads `/scale` back when the scale's answer is lost.
The cluster is the fake API over HTTP with its fault rules; the metrics are a `--metrics` file's
(`StaticMetrics`); the steps retry as the flow's policy does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.pod_cycle import cycle
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.adapters.prometheus import StaticMetrics
from tests.e2e.test_fault_ticks import run_retrying
from tests.e2e.test_pods_cli import watermark

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "shop"
T0 = 1_795_262_400.0
STARTED = "2026-11-21T10:00:00Z"
GiB = 2**30
SCALE = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/web/scale"


@dataclass(frozen=True)
class Autoscaler:
    """One kind: how to create it, the load before and after, and its clock."""

    plural: str
    create: Callable[[FakeKubeApi], None]
    usage_before: dict[str, float]
    usage_after: dict[str, float]  # per pod: enough to scale up, and again from the new pods
    scale_at: float  # outside any window
    then: float  # after `scale_at`, inside its window
    later: float  # after `then`, inside its window
    scaled: int  # the replicas of one scale up from 2

    @property
    def status_path(self) -> str:
        group = "datadoghq.com" if self.plural == "watermarkpodautoscalers" else "elevator.io"
        return f"/apis/{group}/v1alpha1/namespaces/{NAMESPACE}/{self.plural}/web/status"


def create_watermark(api: FakeKubeApi) -> None:
    api.register_custom_resource("datadoghq.com", "v1alpha1", "watermarkpodautoscalers",
                                 "WatermarkPodAutoscaler", short_names=("wpa",))
    api.create("watermarkpodautoscalers", watermark("web", [{"type": "Resource", "resource": {
        "name": "cpu", "metricSelector": {"matchLabels": {"app": "web"}},
        "highWatermark": "500m", "lowWatermark": "200m"}}], algorithm="average", maxReplicas=20))


def create_memory_autoscaler(api: FakeKubeApi) -> None:
    api.install_crd(ROOT / "deployments/kubernetes/base/memoryautoscaler-crd.yaml")
    api.create("memoryautoscalers", {
        "apiVersion": "elevator.io/v1alpha1", "kind": "MemoryAutoscaler",
        "metadata": {"name": "web", "namespace": NAMESPACE},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 20, "targetUtilizationPercentage": 50}})


# WPA: 1 core a pod against a 500m high watermark; its 60 s upscale window, stamped by the first
# cycle. MemoryAutoscaler: 0.9 GiB of a 1 GiB limit against 50 % (2 -> 4); its 300 s window.
WATERMARK = Autoscaler("watermarkpodautoscalers", create_watermark, {"cpu": 0.3},
                       {"cpu": 1.0}, T0 + 61, T0 + 91, T0 + 121, 3)
MEMORY = Autoscaler("memoryautoscalers", create_memory_autoscaler, {"memory": 0.5 * GiB},
                    {"memory": 0.9 * GiB}, T0 + 10, T0 + 100, T0 + 200, 4)


class Workload:
    """Deployment `web` with 2 replicas, its pods kept to spec.replicas (the controller, faked),
    and the metrics file's usage per pod."""

    def __init__(self, api: FakeKubeApi) -> None:
        self.api = api
        self.usage: dict[str, float] = {}
        api.create("deployments", {
            "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                         "containers": [{"name": "main", "image": "app"}]}}}})
        self.sync()

    @property
    def replicas(self) -> int:
        return int(self.api.get("deployments", "web", NAMESPACE)["spec"]["replicas"])

    def sync(self) -> None:
        names = [pod["metadata"]["name"]
                 for pod in self.api.list("pods", NAMESPACE, label_selector="app=web")]
        for index in range(len(names), self.replicas):
            self.api.create("pods", {
                "metadata": {"name": f"web-7c9f8-{index}", "namespace": NAMESPACE,
                             "labels": {"app": "web"},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                  "name": "web-7c9f8", "uid": "u"}]},
                "spec": {"containers": [{"name": "main", "image": "app", "resources": {
                    "limits": {"memory": "1Gi"}, "requests": {"cpu": "500m"}}}]},
                "status": {"phase": "Running", "startTime": STARTED, "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": STARTED}]}})
        self.api.patch("deployments/status", "web", {"status": {"replicas": self.replicas}},
                       NAMESPACE)

    def metrics(self) -> StaticMetrics:
        pods = self.api.list("pods", NAMESPACE, label_selector="app=web")
        return StaticMetrics({}, {f"{NAMESPACE}/{pod['metadata']['name']}": self.usage
                                  for pod in pods})


def tick(kube: KubeClient, workload: Workload, now: float) -> list[Any]:
    return cycle(run_retrying, kube, workload.metrics(), now, kube)


def started(autoscaler: Autoscaler, fake_kube: FakeKubeApi, kubeconfig: Path
            ) -> tuple[KubeClient, Workload]:
    """The autoscaler after a first cycle at the usage it holds with."""
    workload = Workload(fake_kube)
    autoscaler.create(fake_kube)
    kube = KubeClient.from_config(kubeconfig)
    workload.usage = autoscaler.usage_before
    tick(kube, workload, T0)
    assert workload.replicas == 2
    workload.usage = autoscaler.usage_after
    return kube, workload


@pytest.fixture(autouse=True)
def short_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELEVATOR_READ_TIMEOUT_SECONDS", "1")


@pytest.mark.parametrize("autoscaler", [WATERMARK, MEMORY], ids=["wpa", "memory"])
@pytest.mark.parametrize("fault", ["none", "status-applied-answer-lost",
                                   "scale-applied-answer-lost-then-500"])
def test_a_scale_whose_answer_was_lost_is_made_once_and_holds_its_window(
        autoscaler: Autoscaler, fault: str, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    kube, workload = started(autoscaler, fake_kube, kubeconfig)
    if fault == "status-applied-answer-lost":  # the retry meets our own write: a 409
        fake_kube.faults.add("apply_then_drop", method="PUT", path=autoscaler.status_path)
    elif fault == "scale-applied-answer-lost-then-500":
        fake_kube.faults.add("apply_then_drop", method="PATCH", path=SCALE)
        fake_kube.faults.add("status", method="PATCH", path=SCALE, status=500, count=None)
    [result] = tick(kube, workload, autoscaler.scale_at)
    fake_kube.faults.clear()
    assert workload.replicas == autoscaler.scaled and result.scaled, result.decision.reason
    workload.sync()  # the new pods carry the same load: without the window, scaled again
    [held] = tick(kube, workload, autoscaler.then)
    assert workload.replicas == autoscaler.scaled, held.decision.reason
    assert not held.scaled


@pytest.mark.parametrize("autoscaler", [WATERMARK, MEMORY], ids=["wpa", "memory"])
@pytest.mark.parametrize("fault", ["status-409-another-writer", "status-unanswered"])
def test_a_scale_whose_status_write_failed_waits_for_the_next_cycle(
        autoscaler: Autoscaler, fault: str, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    """The status is the claim: when it cannot be written, the target is left alone, and the
    next cycle, reading the object again, scales once."""
    kube, workload = started(autoscaler, fake_kube, kubeconfig)
    if fault == "status-409-another-writer":
        fake_kube.faults.add("status", method="PUT", path=autoscaler.status_path, status=409)
    else:
        fake_kube.faults.add("drop", method="PUT", path=autoscaler.status_path, count=None)
    [result] = tick(kube, workload, autoscaler.scale_at)
    fake_kube.faults.clear()
    assert workload.replicas == 2 and not result.scaled
    [scaled] = tick(kube, workload, autoscaler.then)
    assert workload.replicas == autoscaler.scaled and scaled.scaled, scaled.decision.reason
    workload.sync()
    tick(kube, workload, autoscaler.later)
    assert workload.replicas == autoscaler.scaled


@pytest.mark.parametrize("autoscaler", [WATERMARK, MEMORY], ids=["wpa", "memory"])
def test_a_refused_scale_is_recorded_and_leaves_the_window_open(
        autoscaler: Autoscaler, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    """A scale the API refuses (here 403): the status claimed first is written again with
    AbleToScale False FailedScale and the previous lastScaleTime, so the next cycle may try."""
    kube, workload = started(autoscaler, fake_kube, kubeconfig)
    before = fake_kube.get(autoscaler.plural, "web", NAMESPACE).get("status") or {}
    fake_kube.faults.add("status", method="PATCH", path=SCALE, status=403, count=None)
    [result] = tick(kube, workload, autoscaler.scale_at)
    fake_kube.faults.clear()
    assert workload.replicas == 2 and not result.scaled and result.status_written
    status = fake_kube.get(autoscaler.plural, "web", NAMESPACE)["status"]
    assert status.get("lastScaleTime") == before.get("lastScaleTime")
    able = [c for c in status["conditions"] if c["type"] == "AbleToScale"]
    assert [(c["status"], c["reason"]) for c in able] == [("False", "FailedScale")]
    [scaled] = tick(kube, workload, autoscaler.then)
    assert workload.replicas == autoscaler.scaled and scaled.scaled, scaled.decision.reason
