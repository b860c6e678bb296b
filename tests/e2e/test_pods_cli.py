"""`elevator pods plan`: the dry run of both pod autoscalers from files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import typer
from typer.testing import CliRunner

from kube_elevator.flows.cli.pods import register

NOW = "2026-11-21T12:00:00Z"
GiB = 2**30


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    application = typer.Typer()

    @application.callback()
    def main() -> None:
        """A bare app, as flows.cli's."""

    register(application)
    return application


def deployment(name: str, replicas: int, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},  # as a server requires
                                  "spec": {"containers": [{"name": "main", "image": "pause"}]}}},
            "status": {"replicas": replicas}}


def pod(name: str, owner: str, labels: dict[str, str], memory_limit: str = "1Gi",
        phase: str = "Running") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "labels": labels,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": f"{owner}-6f7d9", "uid": f"uid-{owner}-6f7d9"}]},
            "spec": {"containers": [{"name": "main", "image": "pause",
                                     "resources": {"limits": {"memory": memory_limit}}}]},
            "status": {"phase": phase, "startTime": "2026-11-21T10:00:00Z",
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2026-11-21T10:00:10Z"}]}}


def watermark(name: str, metrics: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "datadoghq.com/v1alpha1", "kind": "WatermarkPodAutoscaler",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": "web"},
                     "minReplicas": 1, "maxReplicas": 10, "metrics": metrics, **spec}}


def write_files(tmp_path: Path, extra: list[dict[str, Any]] | None = None
                ) -> tuple[Path, Path]:
    web = {"app": "web"}
    items = [
        deployment("web", 4, web), deployment("cache", 2, {"app": "cache"}),
        *[pod(f"web-6f7d9-{i}", "web", web) for i in range(4)],
        pod("cache-6f7d9-0", "cache", {"app": "cache"}),
        pod("cache-6f7d9-1", "cache", {"app": "cache"}),
        watermark("web-cpu", [{"type": "Resource", "resource": {
            "name": "cpu", "metricSelector": {"matchLabels": web},
            "highWatermark": "800m", "lowWatermark": "400m"}}], algorithm="average"),
        watermark("web-queue", [{"type": "External", "external": {
            "metricName": "queue_depth", "metricSelector": {"matchLabels": {"queue": "orders"}},
            "highWatermark": "100", "lowWatermark": "50"}}], algorithm="average",
            scaleUpLimitFactor=100),
        {"apiVersion": "elevator.io/v1alpha1", "kind": "MemoryAutoscaler",
         "metadata": {"name": "cache-memory", "namespace": "shop"},
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "name": "cache"},
                  "minReplicas": 1, "maxReplicas": 5, "targetUtilizationPercentage": 50}},
        *(extra or []),
    ]
    cluster = tmp_path / "cluster.json"
    cluster.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    metrics = tmp_path / "metrics.json"
    metrics.write_bytes(orjson.dumps({
        "external": {"queue_depth{queue=orders}": 900, "queue_depth{queue=refunds}": 5},
        "pods": {**{f"shop/web-6f7d9-{i}": {"cpu": 1.2, "memory": 0.5 * GiB} for i in range(4)},
                 "shop/cache-6f7d9-0": {"memory": 0.9 * GiB},
                 "shop/cache-6f7d9-1": {"memory": 0.9 * GiB}}}))
    return cluster, metrics


def plan_json(app: typer.Typer, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["pods", "plan", *args, "--now", NOW, "--format", "json"])
    assert result.exit_code == 0, result.output
    return dict(orjson.loads(result.stdout))


def test_plan_json_for_both_kinds(app: typer.Typer, tmp_path: Path) -> None:
    cluster, metrics = write_files(tmp_path)
    document = plan_json(app, "--cluster", str(cluster), "--metrics", str(metrics))
    by_name = {entry["name"]: entry for entry in document["autoscalers"]}
    assert set(document) == {"autoscalers"}
    cpu = by_name["web-cpu"]
    assert set(cpu) == {"kind", "namespace", "name", "current_replicas", "ready_replicas",
                        "value", "proposal", "desired_replicas", "reason", "conditions"}
    # mean 1.2 cores > 880m: ceil(4 * 1200 / 800) = 6, limited to 4 + 50 % = 6.
    assert (cpu["kind"], cpu["current_replicas"], cpu["ready_replicas"]) == (
        "WatermarkPodAutoscaler", 4, 4)
    assert (cpu["value"], cpu["proposal"], cpu["desired_replicas"]) == (1.2, 6, 6)
    assert {"type": "AboveHighWatermark", "status": "True",
            "reason": "Value above High Watermark"} in cpu["conditions"]
    queue = by_name["web-queue"]
    # 900 / 4 ready = 225 per pod > 110: ceil(4 * 225 / 100) = 9, limited to 4 + 100 % = 8.
    assert (queue["value"], queue["proposal"], queue["desired_replicas"]) == (225.0, 9, 8)
    memory = by_name["cache-memory"]
    # 0.9 GiB of 1 GiB = 90 % vs 50 %: ceil(1.8 * 2) = 4.
    assert (memory["kind"], memory["value"], memory["proposal"], memory["desired_replicas"],
            memory["ready_replicas"]) == ("MemoryAutoscaler", 90.0, 4, 4, 2)


def test_plan_reads_the_apis_typed_lists_as_cluster_info_dump_saves_them(
        app: typer.Typer, tmp_path: Path) -> None:
    """`kubectl cluster-info dump` saves a PodList and a DeploymentList whose items leave their
    kind out, and `"items": null` for a namespace without any: the same objects, the same plan."""
    cluster, metrics = write_files(tmp_path)
    items = orjson.loads(cluster.read_bytes())["items"]
    typed = []
    for kind in sorted({item["kind"] for item in items}):
        path = tmp_path / f"{kind}.json"
        path.write_bytes(orjson.dumps({"kind": f"{kind}List", "items": [
            {key: value for key, value in item.items() if key != "kind"}
            for item in items if item["kind"] == kind]}))
        typed += ["--cluster", str(path)]
    empty = tmp_path / "empty.json"
    empty.write_bytes(orjson.dumps({"kind": "PodList", "items": None}))
    together = plan_json(app, "--cluster", str(cluster), "--metrics", str(metrics))
    apart = plan_json(app, *typed, "--cluster", str(empty), "--metrics", str(metrics))
    assert apart == together and len(together["autoscalers"]) == 3


def test_plan_reports_invalid_objects_and_missing_targets(app: typer.Typer,
                                                          tmp_path: Path) -> None:
    cluster, metrics = write_files(tmp_path, extra=[
        watermark("broken", [{"type": "External", "external": {
            "metricName": "q", "metricSelector": {}, "highWatermark": "1",
            "lowWatermark": "2"}}], algorithm="fastest"),
        {**watermark("orphan", [{"type": "External", "external": {
            "metricName": "queue_depth", "metricSelector": {"matchLabels": {"queue": "x"}},
            "highWatermark": "1"}}]),
         "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "gone"}, "maxReplicas": 3,
                  "metrics": [{"type": "External", "external": {
                      "metricName": "queue_depth", "metricSelector": {}, "highWatermark": "1"}}]}},
    ])
    by_name = {e["name"]: e for e in plan_json(app, "--cluster", str(cluster), "--metrics",
                                                str(metrics))["autoscalers"]}
    broken = by_name["broken"]
    assert broken["desired_replicas"] is None and broken["reason"].startswith("invalid spec")
    assert "has to be strictly inferior" in broken["reason"] and "fastest" in broken["reason"]
    assert {"type": "AbleToScale", "status": "False", "reason": "FailedSpecCheck"} in \
        broken["conditions"]
    assert "scale not found" in by_name["orphan"]["reason"]


def test_plan_holds_when_a_metric_has_no_data(app: typer.Typer, tmp_path: Path) -> None:
    cluster, metrics = write_files(tmp_path, extra=[watermark("silent", [
        {"type": "External", "external": {"metricName": "absent", "metricSelector": {},
                                          "highWatermark": "1", "lowWatermark": "1"}}])])
    entry = next(e for e in plan_json(app, "--cluster", str(cluster), "--metrics",
                                      str(metrics))["autoscalers"] if e["name"] == "silent")
    assert entry["proposal"] is None and entry["desired_replicas"] == 4
    assert "no data for absent{}" in entry["reason"]
    assert {"type": "ScalingActive", "status": "False", "reason": "FailedGetExternalMetric"} \
        in entry["conditions"]


def test_plan_says_ready_pods_are_not_the_targets(app: typer.Typer, tmp_path: Path) -> None:
    """Issue 34 item 6: Ready pods of another owner were blamed on readiness (`none is
    ready`, FailedGetExternalMetric)."""
    strangers = [pod(f"api-6f7d9-{i}", "api", {"app": "web"}) for i in range(3)]
    cluster, metrics = write_files(tmp_path, extra=strangers)
    document = plan_json(app, "--cluster", str(cluster), "--metrics", str(metrics))
    # web's four pods plus three of `api` that web's selector also lists: web's own count.
    queue = next(e for e in document["autoscalers"] if e["name"] == "web-queue")
    assert queue["desired_replicas"] == 8, queue
    lone = tmp_path / "lone"
    lone.mkdir()
    cluster, metrics = write_files(lone)
    items = orjson.loads(cluster.read_bytes())["items"]
    items = [item for item in items if not (item["kind"] == "Pod"
                                            and item["metadata"]["name"].startswith("web-"))]
    cluster.write_bytes(orjson.dumps({"kind": "List", "items": [*items, *strangers]}))
    samples = orjson.loads(metrics.read_bytes())
    samples["pods"] = {f"shop/api-6f7d9-{i}": {"cpu": 1.2} for i in range(3)}
    metrics.write_bytes(orjson.dumps(samples))
    document = plan_json(app, "--cluster", str(cluster), "--metrics", str(metrics))
    by_name = {entry["name"]: entry for entry in document["autoscalers"]}
    for name in ("web-queue", "web-cpu"):
        entry = by_name[name]
        assert "none of the 3 pods that app=web lists is owned by Deployment/web (they belong "\
            "to ReplicaSet/api-6f7d9)" in entry["reason"], entry["reason"]
        assert "ready" not in entry["reason"], entry["reason"]
        assert {"type": "ScalingActive", "status": "False", "reason": "PodsNotOwnedByTarget"} \
            in entry["conditions"]


def test_the_shipped_examples_plan_and_decide(app: typer.Typer) -> None:
    """Issue 34: example WPA, MemoryAutoscaler and metrics files that `pods plan` runs on as
    README and `--help` show it."""
    examples = Path(__file__).resolve().parents[2] / "deployments" / "examples"
    document = plan_json(app, "--cluster", str(examples / "pod-autoscalers.yaml"),
                         "--metrics", str(examples / "pod-metrics.json"))
    by_name = {entry["name"]: entry for entry in document["autoscalers"]}
    assert set(by_name) == {"web-cpu", "worker-queue", "cache-memory"}
    for entry in by_name.values():  # each decided on its metric: a value and a proposal
        assert entry["value"] is not None and entry["proposal"] is not None, entry
        assert entry["desired_replicas"] > entry["current_replicas"], entry
    # mean 1.1 cores > 880m: ceil(3 * 1100 / 800) = 5, limited to 3 + 50 % = 4
    assert (by_name["web-cpu"]["proposal"], by_name["web-cpu"]["desired_replicas"]) == (5, 4)
    # 420 queued / 3 ready workers = 140 per pod > 110
    assert by_name["worker-queue"]["value"] == 140.0
    # 1.65 GiB working set of 2 GiB of limits = 82.5 % vs 60 %: ceil(2 * 82.5 / 60) = 3
    assert (by_name["cache-memory"]["value"], by_name["cache-memory"]["desired_replicas"]) \
        == (82.5, 3)


def test_plan_table(app: typer.Typer, tmp_path: Path) -> None:
    cluster, metrics = write_files(tmp_path)
    result = CliRunner().invoke(app, ["pods", "plan", "--cluster", str(cluster), "--metrics",
                                      str(metrics), "--now", NOW])
    assert result.exit_code == 0, result.output
    assert "web-cpu" in result.output and "cache-memory" in result.output
    assert "map[app:web]" in result.output  # Go-style names survive rich's markup


def test_bad_input_files_exit_2_with_every_problem(app: typer.Typer, tmp_path: Path) -> None:
    cluster, _ = write_files(tmp_path)
    metrics = tmp_path / "bad-metrics.json"
    metrics.write_bytes(orjson.dumps({"external": {"bad key{": 1},
                                      "pods": {"no-namespace": {"cpu": 1}}}))
    result = CliRunner().invoke(app, ["pods", "plan", "--cluster", str(cluster),
                                      "--metrics", str(metrics)])
    assert result.exit_code == 2
    assert "external" in result.output and "<namespace>/<pod>" in result.output
    missing = CliRunner().invoke(app, ["pods", "plan", "--cluster", str(tmp_path / "nope.json"),
                                       "--metrics", str(metrics)])
    assert missing.exit_code == 2 and "cannot read" in missing.output
    assert "Traceback" not in missing.output


def test_run_validates_its_options(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["pods", "run", "--prometheus", "localhost:9090",
                                      "--interval", "10", "--once"])
    assert result.exit_code == 2
    assert "--interval" in result.output


def test_pods_plan_decides_as_the_live_cycle(app: typer.Typer, tmp_path: Path,
                                             fake_kube: Any, kubeconfig: Path) -> None:
    """One composition (DESIGN.md §3): the same objects, served by the fake API to the live
    cycle (real client over HTTP, acting on nothing) and read from files by `pods plan`, give
    the same decisions. A finished pod of the target is in both and counts in neither."""
    from kube_elevator.flows.pod_cycle import cycle
    from kube_elevator.tasks.adapters.kube import KubeClient
    from kube_elevator.tasks.adapters.prometheus import StaticMetrics
    from kube_elevator.tasks.core.step import run_plain
    from kube_elevator.tasks.core.timefmt import parse_time

    fake_kube.register_custom_resource("datadoghq.com", "v1alpha1", "watermarkpodautoscalers",
                                       "WatermarkPodAutoscaler", short_names=("wpa",))
    fake_kube.install_crd(Path(__file__).resolve().parents[2]
                          / "deployments/kubernetes/base/memoryautoscaler-crd.yaml")
    finished = pod("web-6f7d9-old", "web", {"app": "web"}, phase="Succeeded")
    cluster, metrics = write_files(tmp_path, [finished])
    plural = {"Deployment": "deployments", "Pod": "pods",
              "WatermarkPodAutoscaler": "watermarkpodautoscalers",
              "MemoryAutoscaler": "memoryautoscalers"}
    for item in orjson.loads(cluster.read_bytes())["items"]:
        fake_kube.create(plural[item["kind"]], item, namespace="shop")
    live = cycle(run_plain, KubeClient.from_config(kubeconfig), StaticMetrics.load(metrics),
                 parse_time(NOW) or 0.0, None)
    planned = plan_json(app, "--cluster", str(cluster), "--metrics", str(metrics))
    assert [result.decision.to_json() for result in live] == planned["autoscalers"]
    by_name = {result.decision.name: result.decision for result in live}
    assert by_name["web-cpu"].current_replicas == 4  # the Succeeded pod is not a replica
    assert all(not result.scaled and not result.status_written for result in live)


def test_two_autoscalers_on_one_workload_are_a_warning_naming_both(
        app: typer.Typer, tmp_path: Path) -> None:
    """Issue 42: web-cpu and web-queue both scale Deployment shop/web; `pods plan` still plans,
    and says once, on stderr, that they would fight over its replicas."""
    cluster, metrics = write_files(tmp_path)
    result = CliRunner().invoke(app, ["pods", "plan", "--cluster", str(cluster), "--metrics",
                                      str(metrics), "--now", NOW, "--format", "json"])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: WatermarkPodAutoscaler shop/web-cpu and WatermarkPodAutoscaler shop/web-queue "
        "both target Deployment shop/web: they would fight over its replicas; give a workload "
        "one autoscaler"], result.stderr
    assert orjson.loads(result.stdout)["autoscalers"]  # the plan is still made


def test_the_shipped_example_gives_each_workload_one_autoscaler(app: typer.Typer) -> None:
    examples = Path(__file__).resolve().parents[2] / "deployments" / "examples"
    result = CliRunner().invoke(app, ["pods", "plan", "--cluster",
                                      str(examples / "pod-autoscalers.yaml"), "--metrics",
                                      str(examples / "pod-metrics.json"), "--now", NOW])
    assert result.exit_code == 0, result.output
    assert "warning:" not in result.stderr, result.stderr
