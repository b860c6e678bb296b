"""End to end: the pod-autoscale cycle against the fake Kubernetes API and a real Prometheus.

Prometheus (Debian's `prometheus` package) scrapes `fakes.pod_metrics` every second from a
temporary TSDB on 127.0.0.1; the fake API serves the Deployments (with `/scale`), their pods
and the autoscaler objects; a few lines below play the Deployment controller.  The autoscalers'
clock (forbidden windows, scale windows) is driven by the test; only the metrics move in real
time, and the test waits for Prometheus to see them by polling its API with a deadline.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.fakes.pod_metrics import PodMetricsServer
from kube_elevator.flows.pod_autoscale import WatermarkMetrics
from kube_elevator.flows.pod_cycle import cycle
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.adapters.prometheus import PrometheusMetrics
from kube_elevator.tasks.core.step import run_plain
from kube_elevator.tasks.core.timefmt import parse_time, rfc3339
from tests.tools import prometheus_missing

REPO = Path(__file__).resolve().parents[2]
T0 = 1_795_262_400.0  # the autoscalers' clock: 2026-11-21T12:00:00Z
GiB = 2**30
STARTED = "2026-11-21T10:00:00Z"  # pods started (and became ready) long before T0


def wait_for(what: str, check: Callable[[], bool], timeout: float = 25.0) -> None:
    """Poll `check` until it holds; fail with `what` after `timeout` seconds, scaled by the one
    deadline setting (benchmarks/deadlines.py)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def pod_metrics() -> Iterator[PodMetricsServer]:
    with PodMetricsServer() as server:
        yield server


@pytest.fixture(scope="module")
def prometheus_url(pod_metrics: PodMetricsServer, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip(prometheus_missing() or "")
    home = tmp_path_factory.mktemp("prometheus")
    config = home / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: pods\n    scrape_interval: 1s\n"
        "    scrape_timeout: 900ms\n"
        f"    static_configs:\n      - targets: ['{pod_metrics.address}']\n")
    port = free_port()
    log_file = (home / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={home / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=log_file, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if process.poll() is not None:
            pytest.fail(f"prometheus exited: {(home / 'prometheus.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=scaled(1)) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    try:
        wait_for("Prometheus to be ready", ready, timeout=scaled(30))
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=scaled(10))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log_file.close()


@pytest.fixture
def source(prometheus_url: str) -> PrometheusMetrics:
    return PrometheusMetrics(prometheus_url, rate_window="3s", timeout=5, retries=0)


@pytest.fixture
def cluster(fake_kube: FakeKubeApi, kubeconfig: Path) -> KubeClient:
    fake_kube.register_custom_resource("datadoghq.com", "v1alpha1", "watermarkpodautoscalers",
                                       "WatermarkPodAutoscaler", short_names=("wpa",))
    fake_kube.install_crd(REPO / "deployments/kubernetes/base/memoryautoscaler-crd.yaml")
    return KubeClient.from_config(kubeconfig)


class Workload:
    """A Deployment, its pods and their usage: the Deployment controller and kubelet, faked."""

    def __init__(self, api: FakeKubeApi, metrics: PodMetricsServer, namespace: str, name: str,
                 replicas: int) -> None:
        self.api, self.metrics, self.namespace, self.name = api, metrics, namespace, name
        self.cpu_cores, self.memory_bytes = 0.1, 0.1 * GiB
        api.create("deployments", {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "containers": [{"name": "main", "image": "app"}]}}}})
        self.sync()

    @property
    def replicas(self) -> int:
        return int(self.api.get("deployments", self.name, self.namespace)["spec"]["replicas"])

    def pod_names(self) -> list[str]:
        return [p["metadata"]["name"] for p in
                self.api.list("pods", self.namespace, label_selector=f"app={self.name}")]

    def sync(self) -> None:
        """Make the pods match spec.replicas, each using the current load."""
        wanted = self.replicas
        names = self.pod_names()
        for index in range(len(names), wanted):
            pod = f"{self.name}-7c9f8-{index}"
            self.api.create("pods", {
                "metadata": {"name": pod, "namespace": self.namespace,
                             "labels": {"app": self.name},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                  "name": f"{self.name}-7c9f8", "uid": "u"}]},
                "spec": {"containers": [{"name": "main", "image": "app", "resources": {
                    "limits": {"memory": "1Gi"}, "requests": {"cpu": "500m"}}}]},
                "status": {"phase": "Running", "startTime": STARTED,
                           "conditions": [{"type": "Ready", "status": "True",
                                           "lastTransitionTime": STARTED}]}})
            names.append(pod)
        for pod in sorted(names)[wanted:]:
            self.api.delete("pods", pod, self.namespace)
            self.metrics.remove(self.namespace, pod)
        self.api.patch("deployments/status", self.name, {"status": {"replicas": wanted}},
                       self.namespace)
        self.load(self.cpu_cores, self.memory_bytes)

    def load(self, cpu_cores: float, memory_bytes: float) -> None:
        self.cpu_cores, self.memory_bytes = cpu_cores, memory_bytes
        for pod in self.pod_names():
            self.metrics.set_usage(self.namespace, pod, cpu_cores, memory_bytes)

    def seen_by(self, source: PrometheusMetrics, resource: str) -> bool:
        """Prometheus reports every pod at the current load (within 3 %), and no other."""
        usage = source.pod_usage(self.namespace, resource)
        expected = self.cpu_cores if resource == "cpu" else self.memory_bytes
        return set(usage) == set(self.pod_names()) and all(
            abs(value - expected) <= 0.03 * expected for value in usage.values())

    def stop(self) -> None:
        for pod in self.pod_names():
            self.metrics.remove(self.namespace, pod)


def status_of(api: FakeKubeApi, plural: str, namespace: str, name: str) -> dict[str, Any]:
    return dict(api.get(plural, name, namespace).get("status") or {})


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status.get("conditions", []) if c["type"] == kind)


def cpu_watermark(namespace: str, name: str) -> dict[str, Any]:
    """A WPA on Deployment `name`'s CPU (average, watermarks 500m and 200m, 1 to 10 replicas)."""
    return {
        "apiVersion": "datadoghq.com/v1alpha1", "kind": "WatermarkPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                 "minReplicas": 1, "maxReplicas": 10, "algorithm": "average",
                 "metrics": [{"type": "Resource", "resource": {
                     "name": "cpu", "metricSelector": {"matchLabels": {"app": name}},
                     "highWatermark": "500m", "lowWatermark": "200m"}}]}}


def test_watermark_scales_up_within_the_limit_holds_in_the_window_and_scales_down(
        fake_kube: FakeKubeApi, cluster: KubeClient, pod_metrics: PodMetricsServer,
        source: PrometheusMetrics) -> None:
    namespace = "shop-wpa"
    web = Workload(fake_kube, pod_metrics, namespace, "web", 2)
    fake_kube.create("watermarkpodautoscalers", cpu_watermark(namespace, "web"))
    exporter = WatermarkMetrics()

    def run_cycle(now: float) -> None:
        results = cycle(run_plain, cluster, source, now, cluster)
        assert [r.error for r in results] == [""]
        exporter.export(results)

    def gauge(name: str, **labels: str) -> float | None:
        return exporter.registry.get_sample_value(f"wpa_controller_{name}", {
            "wpa_name": "web", "wpa_namespace": namespace, "resource_namespace": namespace,
            "resource_name": "web", "resource_kind": "Deployment", "target_name": "web",
            "namespace": namespace, "dry_run": "false", **labels})

    try:
        web.load(0.3, 0.2 * GiB)  # 300m per pod: inside [180m, 550m]
        wait_for("Prometheus to see 300m per pod", lambda: web.seen_by(source, "cpu"))
        run_cycle(T0)
        status = status_of(fake_kube, "watermarkpodautoscalers", namespace, "web")
        assert web.replicas == 2 and status["lastScaleTime"] == rfc3339(T0)  # first cycle
        assert gauge("restricted_scaling", reason="within_bounds") == 1.0

        web.load(1.0, 0.2 * GiB)  # 1 core per pod: above the high watermark
        wait_for("Prometheus to see 1 core per pod", lambda: web.seen_by(source, "cpu"))
        run_cycle(T0 + 30)  # inside the 60 s upscale window
        status = status_of(fake_kube, "watermarkpodautoscalers", namespace, "web")
        assert web.replicas == 2
        assert condition(status, "AbleToScale")["reason"] == "BackoffBoth"
        assert gauge("transition_countdown", transition="upscale") == 30.0

        run_cycle(T0 + 61)  # ceil(2 * 1000 / 500) = 4, limited to 2 + max(1, 50 % of 2) = 3
        status = status_of(fake_kube, "watermarkpodautoscalers", namespace, "web")
        assert web.replicas == 3 and status["desiredReplicas"] == 3
        assert condition(status, "ScalingLimited")["reason"] == "ScaleUpLimit"
        assert gauge("restricted_scaling", reason="upscale_capping") == 1.0
        assert gauge("upscale_replicas_total") == 1.0
        assert gauge("value", metric_name="cpu") == pytest.approx(1000, rel=0.03)

        web.sync()  # the third pod starts, at 1 core too
        wait_for("Prometheus to see the third pod", lambda: web.seen_by(source, "cpu"))
        run_cycle(T0 + 90)  # would go to 4, but the window started again at T0 + 61
        assert web.replicas == 3
        status = status_of(fake_kube, "watermarkpodautoscalers", namespace, "web")
        assert parse_time(status["lastScaleTime"]) == T0 + 61

        web.load(0.05, 0.2 * GiB)  # 50m per pod: below the low watermark
        wait_for("Prometheus to see 50m per pod", lambda: web.seen_by(source, "cpu"))
        run_cycle(T0 + 61 + 299)  # inside the 300 s downscale window
        assert web.replicas == 3
        run_cycle(T0 + 61 + 300)  # floor(3 * 50 / 200) = 0 -> 1, limited to 3 - 1 = 2
        assert web.replicas == 2
        status = status_of(fake_kube, "watermarkpodautoscalers", namespace, "web")
        assert condition(status, "BelowLowWatermark")["status"] == "True"
        assert condition(status, "ScalingLimited")["reason"] == "ScaleDownLimit"
        assert gauge("restricted_scaling", reason="upscale_capping") == 0.0
        assert gauge("downscale_replicas_total") == 1.0
    finally:
        web.stop()


def test_memory_autoscaler_scales_up_holds_in_its_window_and_scales_down(
        fake_kube: FakeKubeApi, cluster: KubeClient, pod_metrics: PodMetricsServer,
        source: PrometheusMetrics) -> None:
    namespace = "shop-memory"
    cache = Workload(fake_kube, pod_metrics, namespace, "cache", 2)
    fake_kube.create("memoryautoscalers", {
        "apiVersion": "elevator.io/v1alpha1", "kind": "MemoryAutoscaler",
        "metadata": {"name": "cache", "namespace": namespace},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": "cache"},
                 "minReplicas": 1, "maxReplicas": 6, "targetUtilizationPercentage": 50}})

    def run_cycle(now: float) -> dict[str, Any]:
        results = cycle(run_plain, cluster, source, now, cluster)
        assert [r.error for r in results] == [""]
        return status_of(fake_kube, "memoryautoscalers", namespace, "cache")

    try:
        cache.load(0.1, 0.5 * GiB)  # 50 % of the 1 GiB limit: on target
        wait_for("Prometheus to see 0.5 GiB per pod", lambda: cache.seen_by(source, "memory"))
        status = run_cycle(T0)
        assert cache.replicas == 2 and "lastScaleTime" not in status
        assert status["currentUtilizationPercentage"] == 50

        cache.load(0.1, 0.9 * GiB)  # 90 %: ratio 1.8, ceil(1.8 * 2) = 4
        wait_for("Prometheus to see 0.9 GiB per pod", lambda: cache.seen_by(source, "memory"))
        status = run_cycle(T0 + 10)
        assert cache.replicas == 4 and status["lastScaleTime"] == rfc3339(T0 + 10)

        cache.sync()
        wait_for("Prometheus to see four pods", lambda: cache.seen_by(source, "memory"))
        status = run_cycle(T0 + 100)  # ceil(1.8 * 4) = 8 -> 6, but inside the 300 s window
        assert cache.replicas == 4
        assert condition(status, "AbleToScale")["reason"] == "BackoffWindow"

        cache.load(0.1, 0.1 * GiB)  # 10 %: ratio 0.2, ceil(0.8) = 1
        wait_for("Prometheus to see 0.1 GiB per pod", lambda: cache.seen_by(source, "memory"))
        status = run_cycle(T0 + 310)
        assert cache.replicas == 1 and status["podsCounted"] == 4
    finally:
        cache.stop()


def test_external_metrics_aggregate_and_hold_without_data(
        fake_kube: FakeKubeApi, cluster: KubeClient, pod_metrics: PodMetricsServer,
        source: PrometheusMetrics) -> None:
    namespace = "shop-queue"
    worker = Workload(fake_kube, pod_metrics, namespace, "worker", 2)

    def queue_wpa(name: str, metric: str, annotations: dict[str, str]) -> None:
        fake_kube.create("watermarkpodautoscalers", {
            "apiVersion": "datadoghq.com/v1alpha1", "kind": "WatermarkPodAutoscaler",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "worker"},
                     "maxReplicas": 10, "scaleUpLimitFactor": 200,
                     "metrics": [{"type": "External", "external": {
                         "metricName": metric,
                         "metricSelector": {"matchLabels": {"queue": "orders"}},
                         "highWatermark": "10", "lowWatermark": "5"}}]},
            "status": {"lastScaleTime": rfc3339(T0 - 1000)}})

    pod_metrics.set_series("queue_depth", {"queue": "orders", "shard": "a"}, 30)
    pod_metrics.set_series("queue_depth", {"queue": "orders", "shard": "b"}, 12)
    pod_metrics.set_series("queue_depth", {"queue": "refunds", "shard": "a"}, 999)
    pod_metrics.set_series("broken_depth", {"queue": "orders"}, float("nan"))
    queue_wpa("by-max", "queue_depth", {"elevator.io/aggregation": "max"})
    queue_wpa("silent", "absent_depth", {})
    queue_wpa("nan", "broken_depth", {})
    # Lifecycle control (wpa.md §2.2) with no DatadogMonitor of that name: blocked.
    queue_wpa("gated", "queue_depth", {"wpa.datadoghq.com/lifecycle-control.enabled": "true"})
    try:
        wait_for("Prometheus to scrape the queue series", lambda: bool(
            source.query('queue_depth{shard="b"}')) and bool(source.query("broken_depth")))
        results = {r.decision.name: r for r in cycle(run_plain, cluster, source, T0, cluster)}
        # max(30, 12) = 30 for 2 ready pods (absolute): ceil(2 * 30 / 10) = 6.
        assert results["by-max"].decision.value == 30.0
        assert worker.replicas == 6
        for name, why in (("silent", "no data for sum(absent_depth"), ("nan", "is NaN")):
            decision = results[name].decision
            assert decision.metric_failed and why in decision.reason
            active = condition(status_of(fake_kube, "watermarkpodautoscalers", namespace, name),
                               "ScalingActive")
            assert (active["status"], active["reason"]) == ("False", "FailedGetExternalMetric")
        gated = status_of(fake_kube, "watermarkpodautoscalers", namespace, "gated")
        blocked = condition(gated, "ScalingBlocked")
        assert (blocked["status"], blocked["reason"]) == ("True", "FailedGetDatadogMonitor")
        assert results["gated"].decision.lifecycle_blocked is True
    finally:
        worker.stop()
        for series in ("queue_depth", "broken_depth"):
            pod_metrics.remove_series(series)


INVALID = {
    "watermarks-crossed": {"metrics": [{"type": "External", "external": {
        "metricName": "q", "metricSelector": {}, "highWatermark": "5", "lowWatermark": "10"}}]},
    "min-above-max": {"minReplicas": 8, "maxReplicas": 4},
    "unknown-algorithm": {"algorithm": "median"},
}


def create_invalid(api: FakeKubeApi, namespace: str) -> None:
    for name, override in INVALID.items():
        spec = {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 10,
                "metrics": [{"type": "External", "external": {
                    "metricName": "q", "metricSelector": {}, "highWatermark": "10"}}],
                **override}
        api.create("watermarkpodautoscalers", {
            "apiVersion": "datadoghq.com/v1alpha1", "kind": "WatermarkPodAutoscaler",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec})


def assert_reported_and_left_alone(api: FakeKubeApi, namespace: str) -> None:
    for name in INVALID:
        status = status_of(api, "watermarkpodautoscalers", namespace, name)
        able = condition(status, "AbleToScale")
        assert (able["status"], able["reason"]) == ("False", "FailedSpecCheck"), name
        assert "Invalid WPA specification" in able["message"]
    assert api.get("deployments", "web", namespace)["spec"]["replicas"] == 3
    assert not [r for r in api.requests if r.subresource == "scale" and r.verb == "patch"]


def test_invalid_objects_are_reported_in_conditions_and_the_log_and_left_alone(
        fake_kube: FakeKubeApi, cluster: KubeClient, pod_metrics: PodMetricsServer,
        caplog: pytest.LogCaptureFixture) -> None:
    namespace = "shop-invalid"
    Workload(fake_kube, pod_metrics, namespace, "web", 3).stop()
    create_invalid(fake_kube, namespace)
    # Invalid objects never reach Prometheus: an address nothing listens on is fine here.
    unused = PrometheusMetrics(f"http://127.0.0.1:{free_port()}", retries=0, timeout=1)
    with caplog.at_level(logging.WARNING, logger="kube_elevator.pod_autoscale"):
        results = cycle(run_plain, cluster, unused, T0, cluster)
    assert sorted(r.decision.name for r in results) == sorted(INVALID)
    assert_reported_and_left_alone(fake_kube, namespace)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "watermarks-crossed: invalid spec" in logged
    assert "has to be strictly inferior to the High Watermark" in logged
    assert "min-above-max: invalid spec" in logged and "inferior to the maximum" in logged
    assert "unknown-algorithm: invalid spec" in logged and "'median'" in logged


def test_the_prefect_flow_runs_a_cycle(prefect_server: None, fake_kube: FakeKubeApi,
                                       cluster: KubeClient, kubeconfig: Path,
                                       pod_metrics: PodMetricsServer) -> None:
    from kube_elevator.flows.pod_autoscale import controller_metrics, pod_autoscale

    namespace = "shop-flow"
    Workload(fake_kube, pod_metrics, namespace, "web", 3).stop()
    create_invalid(fake_kube, namespace)
    results = pod_autoscale(prometheus_url=f"http://127.0.0.1:{free_port()}",
                            kubeconfig=str(kubeconfig), namespace=namespace)
    assert sorted(r["name"] for r in results) == sorted(INVALID)
    assert all(r["reason"].startswith("invalid spec") for r in results)
    assert_reported_and_left_alone(fake_kube, namespace)
    sample = controller_metrics().registry.get_sample_value("wpa_controller_conditions", {
        "wpa_name": "min-above-max", "wpa_namespace": namespace,
        "resource_namespace": namespace, "resource_name": "web", "resource_kind": "Deployment",
        "target_name": "web", "namespace": namespace, "dry_run": "false",
        "condition": "able_to_scale"})
    assert sample == 0.0


def test_a_cycle_that_failed_ends_the_run_failed_and_keeps_every_result(
        prefect_server: None, fake_kube: FakeKubeApi, cluster: KubeClient, kubeconfig: Path,
        pod_metrics: PodMetricsServer) -> None:
    """One autoscaler's cycle raised (its target's /scale is forbidden): the others are still
    reported, and the run ends Failed naming it. A metric Prometheus cannot give is not a
    failure: WPA reports it as a condition."""
    from kube_elevator.flows.pod_autoscale import pod_autoscale
    from kube_elevator.flows.run_state import RunFailed, run_here

    namespace = "shop-failed"
    Workload(fake_kube, pod_metrics, namespace, "web", 3).stop()  # the invalid ones' target
    Workload(fake_kube, pod_metrics, namespace, "api", 2).stop()
    create_invalid(fake_kube, namespace)
    fake_kube.create("watermarkpodautoscalers", cpu_watermark(namespace, "api"))
    fake_kube.faults.add("status", method="GET", status=403, count=None,
                         path=f"/apis/apps/v1/namespaces/{namespace}/deployments/api/scale")
    arguments = {"prometheus_url": f"http://127.0.0.1:{free_port()}",
                 "kubeconfig": str(kubeconfig), "namespace": namespace}
    outcome = run_here(lambda: pod_autoscale(**arguments, return_state=True))
    state = outcome.state
    assert state.is_failed() and state.message is not None
    assert state.message.startswith(
        f"1 of {len(INVALID) + 1} autoscalers failed: WatermarkPodAutoscaler {namespace}/api: ")
    from prefect import get_client

    with get_client(sync_client=True) as client:  # as the UI's run list reads it
        tags = client.read_flow_run(state.state_details.flow_run_id).tags
    assert sorted(tags) == ["autoscaler:shop-failed/api", "failed"]
    results = {result["name"]: result for result in outcome.results()}
    assert sorted(results) == sorted([*INVALID, "api"])
    assert [name for name, result in results.items() if result["error"]] == ["api"]
    assert_reported_and_left_alone(fake_kube, namespace)  # the others' cycles went on
    with pytest.raises(RunFailed) as failed:  # called as a function: the error, with them
        pod_autoscale(**arguments)
    assert len(failed.value.results) == len(INVALID) + 1


# --- the fakes themselves --------------------------------------------------------------------------


def test_fake_api_serves_custom_resources_like_built_in_ones(fake_kube: FakeKubeApi) -> None:
    from kubernetes import client, watch
    from kubernetes.client.exceptions import ApiException

    served = fake_kube.install_crd(REPO / "deployments/kubernetes/base/memoryautoscaler-crd.yaml")
    assert [(rt.api_version, rt.plural, rt.subresources) for rt in served] == [
        ("elevator.io/v1alpha1", "memoryautoscalers", ("status",))]
    assert fake_kube.install_crd(REPO / "deployments/kubernetes/base/memoryautoscaler-crd.yaml")
    with pytest.raises(ValueError, match="already served"):  # a built-in kind's plural
        fake_kube.register_custom_resource("other.io", "v1", "pods", "Other")
    with fake_kube.api_client() as api_client:
        objects = client.CustomObjectsApi(api_client)
        args = ("elevator.io", "v1alpha1", "ns", "memoryautoscalers")
        body = {"apiVersion": "elevator.io/v1alpha1", "kind": "MemoryAutoscaler",
                "metadata": {"name": "m", "namespace": "ns", "labels": {"team": "a"}},
                "spec": {"maxReplicas": 3}}
        with pytest.raises(ApiException) as refused:  # the CRD's schema holds, as on a cluster
            objects.create_namespaced_custom_object(*args, body)
        assert refused.value.status == 422
        body["spec"] = {"maxReplicas": 3, "targetUtilizationPercentage": 80,
                        "scaleTargetRef": {"kind": "Deployment", "name": "web"}}
        created = objects.create_namespaced_custom_object(*args, body)
        assert created["spec"]["minReplicas"] == 1  # the schema's default
        assert created["metadata"]["generation"] == 1
        stale = dict(created)
        updated = objects.replace_namespaced_custom_object_status(
            *args, "m", {**created, "status": {"currentReplicas": 2}})
        assert updated["status"] == {"currentReplicas": 2}
        assert updated["metadata"]["generation"] == 1  # status writes leave the generation
        with pytest.raises(ApiException) as conflict:
            objects.replace_namespaced_custom_object_status(*args, "m", stale)
        assert conflict.value.status == 409
        objects.patch_namespaced_custom_object(*args, "m", {"spec": {"maxReplicas": 4}})
        assert fake_kube.get("memoryautoscalers", "m", "ns")["metadata"]["generation"] == 2
        listed = objects.list_cluster_custom_object("elevator.io", "v1alpha1",
                                                    "memoryautoscalers",
                                                    label_selector="team=a")["items"]
        assert [o["metadata"]["name"] for o in listed] == ["m"]
        assert objects.list_namespaced_custom_object(*args, label_selector="team=b")[
            "items"] == []
        stream = watch.Watch()
        for event in stream.stream(objects.list_namespaced_custom_object, *args,
                                   resource_version="0", timeout_seconds=5):
            assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "m")
            stream.stop()
        groups = {g.name for g in client.ApisApi(api_client).get_api_versions().groups}
        assert "elevator.io" in groups
        resources = {r.name: r for r in objects.get_api_resources(
            "elevator.io", "v1alpha1").resources}
        assert resources["memoryautoscalers"].short_names == ["memas"]
        assert "memoryautoscalers/status" in resources
        fake_kube.fail_next("update", "memoryautoscalers/status", status=503)
        with pytest.raises(ApiException) as unavailable:
            objects.replace_namespaced_custom_object_status(
                *args, "m", objects.get_namespaced_custom_object(*args, "m"))
        assert unavailable.value.status == 503


def test_fake_cadvisor_counter_grows_at_the_set_rate() -> None:
    clock = [1000.0]
    metrics = PodMetricsServer(clock=lambda: clock[0])
    metrics.set_usage("ns", "web-1", 0.5, 100.0)
    clock[0] += 10
    metrics.set_usage("ns", "web-1", 2.0, 300.0)  # 5 cpu-seconds so far
    clock[0] += 1
    text = metrics.render()
    assert 'container_cpu_usage_seconds_total{container="main",namespace="ns",pod="web-1"} 7.0' \
        in text
    assert 'container_memory_working_set_bytes{container="main",namespace="ns",pod="web-1"} ' \
        '300.0' in text
    assert "# TYPE container_cpu_usage_seconds_total counter" in text
    metrics.set_series("queue_depth", {"queue": 'a"b'}, float("nan"))
    assert 'queue_depth{queue="a\\"b"} NaN' in metrics.render()
    assert metrics.usage("ns", "web-1") == (2.0, 300.0)
    metrics.remove("ns", "web-1")
    assert "web-1" not in metrics.render() and metrics.usage("ns", "web-1") is None
    with metrics, urllib.request.urlopen(f"{metrics.url}/metrics", timeout=scaled(5)) as response:
        assert b"queue_depth" in response.read()


def test_external_metrics_become_promql() -> None:
    from kube_elevator.tasks.adapters.prometheus import ExternalQuery, parse_series_key
    from kube_elevator.tasks.pod_autoscalers.wpa.crd import LabelSelector
    from kube_elevator.tasks.pod_autoscalers.wpa.readings import external_query
    from kube_elevator.tasks.pod_autoscalers.wpa.validate import parse_watermark

    selector = LabelSelector.model_validate({
        "matchLabels": {"queue": 'or"ders'},
        "matchExpressions": [{"key": "shard", "operator": "In", "values": ["a.1", "b"]},
                             {"key": "zone", "operator": "NotIn", "values": ["x"]},
                             {"key": "env", "operator": "Exists"},
                             {"key": "canary", "operator": "DoesNotExist"}]})
    # PromQL strings take Go escapes: the regex `a\.1` is written "a\\.1".
    assert ExternalQuery("depth", selector, "avg").to_promql() == (
        r'avg(depth{queue="or\"ders",shard=~"a\\.1|b",zone!~"x",env!="",canary=""})')
    obj = {"metadata": {"name": "w", "namespace": "ns", "annotations": {
               "elevator.io/query": 'sum(rate(http_requests_total{job="web"}[1m]))'}},
           "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3,
                    "metrics": [{"type": "External", "external": {
                        "metricName": "rps", "metricSelector": {}, "highWatermark": "1"}}]}}
    parsed = parse_watermark(obj)
    assert parsed.rules is not None
    query = external_query(parsed.rules.metrics[0], parsed.annotations)
    assert query.to_promql() == 'sum(rate(http_requests_total{job="web"}[1m]))'
    obj["metadata"]["annotations"] = {"elevator.io/aggregation": "median"}
    assert any("must be one of avg, max, min, sum" in p for p in parse_watermark(obj).problems)
    assert parse_series_key('depth{queue="a", shard=b}') == ("depth", {"queue": "a", "shard": "b"})
    assert parse_series_key("depth") == ("depth", {})
    with pytest.raises(ValueError):
        parse_series_key("depth{queue}")


def test_the_load_watcher_finds_a_real_prometheus_healthy(prometheus_url: str) -> None:
    """A real Prometheus answers HEAD / with 405: the health check asks `/-/healthy`, or
    `/watcher/health` would answer 503 for ever, and no probe on it would pass."""
    import asyncio

    from kube_elevator.tasks.load_aware.watcher import PrometheusProvider

    assert asyncio.run(PrometheusProvider(prometheus_url).healthy())


def test_an_unreachable_prometheus_holds_the_autoscaler() -> None:
    from kube_elevator.tasks.adapters.prometheus import MetricUnavailable

    source = PrometheusMetrics(f"http://127.0.0.1:{free_port()}", retries=0, timeout=1)
    with pytest.raises(MetricUnavailable, match="unreachable"):
        source.pod_usage("ns", "cpu")
    # The message becomes a status condition and a log line: no password in it.
    port = free_port()
    guarded = PrometheusMetrics(f"http://admin:s3cret@127.0.0.1:{port}", retries=0, timeout=1)
    with pytest.raises(MetricUnavailable) as unreachable:
        guarded.pod_usage("ns", "cpu")
    assert "s3cret" not in str(unreachable.value)
    assert f"http://admin:***@127.0.0.1:{port}" in str(unreachable.value)


def test_gauges_are_rewritten_each_cycle_and_vanished_series_removed() -> None:
    from kube_elevator.flows.pod_cycle import AutoscalerResult
    from kube_elevator.tasks.core.workload import OwnerReference as Owner
    from kube_elevator.tasks.core.workload import PodState, TargetScale
    from kube_elevator.tasks.pod_autoscalers.wpa.decide import decide_watermark
    from kube_elevator.tasks.pod_autoscalers.wpa.proposal import MetricReading
    from kube_elevator.tasks.pod_autoscalers.wpa.validate import parse_watermark

    def decision(value: int | None, lifecycle: bool = False) -> AutoscalerResult:
        obj = {"metadata": {"name": "w", "namespace": "ns", "labels": {"team": "a"},
                            "annotations": {"wpa.datadoghq.com/lifecycle-control.enabled":
                                            "true"} if lifecycle else {}},
               "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                        "maxReplicas": 10, "metrics": [{"type": "External", "external": {
                            "metricName": "q", "metricSelector": {}, "highWatermark": "10",
                            "lowWatermark": "5"}}]},
               "status": {"lastScaleTime": rfc3339(T0 - 1000)}}
        pods = [PodState(f"web-1-{i}", owners=(Owner("ReplicaSet", "web-1"),)) for i in range(2)]
        reading = MetricReading(external_milli=(value,)) if value is not None else \
            MetricReading(error="no data")
        return AutoscalerResult(decide_watermark(
            parse_watermark(obj), TargetScale("Deployment", "web", "ns", 2, 2), pods,
            [reading], T0), labels={"team": "a"})

    exporter = WatermarkMetrics(labels_as_tags=["team"])
    base = {"wpa_name": "w", "wpa_namespace": "ns", "resource_namespace": "ns",
            "resource_name": "web", "resource_kind": "Deployment", "target_name": "web",
            "namespace": "ns", "dry_run": "false"}

    def sample(name: str, **labels: str) -> float | None:
        return exporter.registry.get_sample_value(f"wpa_controller_{name}", {**base, **labels})

    exporter.export([decision(90_000)])  # 90 for 2 pods: ceil(18) -> limited to 3
    assert sample("restricted_scaling", reason="upscale_capping") == 1.0
    assert sample("restricted_scaling", reason="within_bounds") == 0.0
    assert sample("restricted_scaling", reason="downscale_capping") == 0.0
    assert sample("value", metric_name="q") == 90_000 and sample("high_watermak",
                                                                   metric_name="q") == 10_000
    assert sample("replicas_scaling_effective") == 3.0
    assert exporter.registry.get_sample_value("wpa_controller_labels_info", {
        "team": "a", "wpa_name": "w", "wpa_namespace": "ns", "resource_namespace": "ns",
        "namespace": "ns", "dry_run": "false"}) == 1.0
    exporter.export([decision(7_000)])  # back inside the band: every flag rewritten
    assert sample("restricted_scaling", reason="upscale_capping") == 0.0
    assert sample("restricted_scaling", reason="within_bounds") == 1.0
    exporter.export([decision(None)])  # a failed fetch drops value, proposal, restricted
    assert sample("value", metric_name="q") is None
    assert sample("restricted_scaling", reason="within_bounds") is None
    assert sample("scaling_active") == 0.0 and sample("max_replicas") == 10.0
    exporter.export([decision(7_000, lifecycle=True)])
    assert exporter.registry.get_sample_value("wpa_controller_lifecycle_control_status", {
        "wpa_name": "w", "wpa_namespace": "ns", "lifecycle_status": "blocked",
        "monitor_name": "w", "monitor_namespace": "ns", "dry_run": "false"}) == 1.0
    exporter.export([])  # the WPA is gone: its series too
    assert sample("max_replicas") is None and sample("conditions",
                                                     condition="able_to_scale") is None
