"""`elevator pods validate FILE` (issue 42): a pod-autoscaler file checked without a cluster, as
`elevator validate` checks a node-group file: a line per autoscaler, the warnings `pods plan`
prints, and bad input refused in one line naming the file, the key path and the rule (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml

from tests.e2e.test_cli import EXAMPLES, elevator


def watermark(name: str, target: str = "web", kind: str = "Deployment",
              **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "datadoghq.com/v1alpha1", "kind": "WatermarkPodAutoscaler",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target},
                     "minReplicas": 2, "maxReplicas": 10,
                     "metrics": [{"type": "Resource", "resource": {
                         "name": "cpu", "metricSelector": {"matchLabels": {"app": target}},
                         "highWatermark": "800m", "lowWatermark": "400m"}}], **spec}}


def write_list(path: Path, *items: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)}))
    return path


def lines(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_the_shipped_file_is_valid_a_line_per_autoscaler() -> None:
    result = elevator("pods", "validate", EXAMPLES / "pod-autoscalers.yaml")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.splitlines() == [
        "WatermarkPodAutoscaler shop/web-cpu → Deployment web, replicas 2..12, "
        "cpu{map[app:web]} 400m..800m (average)",
        "WatermarkPodAutoscaler shop/worker-queue → Deployment worker, replicas 2..12, "
        "queue_depth{map[queue:orders]} 50..100 (average)",
        "MemoryAutoscaler shop/cache-memory → Deployment cache, replicas 1..6, memory at 60% of "
        "limits",
        f"{EXAMPLES / 'pod-autoscalers.yaml'}: 3 autoscalers, valid"]


def test_format_json_is_one_document_with_the_defaults_applied(tmp_path: Path) -> None:
    spec = watermark("web-cpu")["spec"]
    del spec["minReplicas"]  # the controller's defaults: 1, and the absolute algorithm
    file = write_list(tmp_path / "wpa.yaml", {**watermark("web-cpu"), "spec": spec})
    result = elevator("pods", "validate", file, "--format", "json")
    assert result.returncode == 0, result.stderr
    document = orjson.loads(result.stdout)
    assert document == {
        "file": str(file), "valid": True, "warnings": [],
        "autoscalers": [{"kind": "WatermarkPodAutoscaler", "namespace": "shop",
                         "name": "web-cpu", "target": {"kind": "Deployment", "name": "web"},
                         "min_replicas": 1, "max_replicas": 10,
                         "scales_on": "cpu{map[app:web]} 400m..800m (absolute)"}]}


def test_two_autoscalers_on_one_workload_get_the_warning_pods_plan_prints(
        tmp_path: Path) -> None:
    file = write_list(tmp_path / "two.yaml", watermark("web-cpu"), watermark("web-too"))
    result = elevator("pods", "validate", file)
    assert result.returncode == 0, result.stderr
    warned = lines(result.stderr, "warning:")
    assert warned == [
        "warning: WatermarkPodAutoscaler shop/web-cpu and WatermarkPodAutoscaler shop/web-too "
        "both target Deployment shop/web: they would fight over its replicas; give a workload "
        "one autoscaler"]
    plan = elevator("pods", "plan", "--cluster", file, "--metrics",
                    EXAMPLES / "pod-metrics.json", "--now", "2026-11-21T12:00:00Z")
    assert plan.returncode == 0, plan.stderr
    assert lines(plan.stderr, "warning:") == warned
    assert result.stdout.splitlines()[-1] == f"{file}: 2 autoscalers, valid"


def test_what_the_controller_would_refuse_is_one_line_naming_file_key_and_rule(
        tmp_path: Path) -> None:
    file = write_list(tmp_path / "bad.yaml", watermark("ok"),
                      watermark("upside-down", target="api", minReplicas=5, maxReplicas=3))
    result = elevator("pods", "validate", file)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {file}: items[1] (WatermarkPodAutoscaler): spec.maxReplicas: ")
    assert "5" in line and "3" in line


def test_a_wrong_type_is_refused_as_pods_plan_refuses_it(tmp_path: Path) -> None:
    file = write_list(tmp_path / "typed.yaml", watermark("web-cpu", maxReplicas="10"))
    result = elevator("pods", "validate", file, "--format", "json")
    assert result.returncode == 2 and result.stdout == ""
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {file}: items[0] (WatermarkPodAutoscaler): spec.maxReplicas: ")


def test_a_target_without_scale_is_refused(tmp_path: Path) -> None:
    file = write_list(tmp_path / "job.yaml", watermark("batch", target="nightly", kind="Job"))
    result = elevator("pods", "validate", file)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line == (f"error: {file}: items[0] (WatermarkPodAutoscaler): spec.scaleTargetRef.kind: "
                    "'Job' is not supported: use Deployment, StatefulSet, ReplicaSet")


def test_a_node_group_file_is_named_as_one(tmp_path: Path) -> None:
    result = elevator("pods", "validate", EXAMPLES / "nodegroups.yaml")
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line == (f"error: {EXAMPLES / 'nodegroups.yaml'}: this looks like a node-group file "
                    "(it has `node_groups`), not a pod-autoscaler file: check it with "
                    "`elevator validate`")


def test_a_file_without_an_autoscaler_is_warned_about(tmp_path: Path) -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": 2}}
    file = write_list(tmp_path / "deployments.yaml", deployment)
    result = elevator("pods", "validate", file)
    assert result.returncode == 0, result.stderr
    assert lines(result.stderr, "warning:") == [
        f"warning: {file}: no WatermarkPodAutoscaler or MemoryAutoscaler in it: nothing for "
        "`pods plan` or `pods run` to scale"]
    assert result.stdout.strip() == f"{file}: 0 autoscalers, valid"
