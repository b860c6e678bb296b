"""Two or more autoscalers on one workload (issue 42): a warning naming them all."""

from __future__ import annotations

from typing import Any

from kube_elevator.tasks.pod_autoscalers.shared_targets import shared_target_warnings


def autoscaler(kind: str, name: str, target: str, namespace: str = "shop",
               target_kind: str = "Deployment") -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": {"scaleTargetRef": {"kind": target_kind, "name": target}}}


def test_one_autoscaler_a_workload_is_no_warning() -> None:
    assert shared_target_warnings([
        autoscaler("WatermarkPodAutoscaler", "a", "web"),
        autoscaler("WatermarkPodAutoscaler", "b", "web", namespace="other"),
        autoscaler("MemoryAutoscaler", "c", "web", target_kind="StatefulSet"),
        {"kind": "WatermarkPodAutoscaler", "metadata": {"name": "d"}, "spec": "bad"}]) == []


def test_three_of_two_kinds_on_one_deployment_are_named_in_one_line() -> None:
    assert shared_target_warnings([
        autoscaler("WatermarkPodAutoscaler", "a", "web"),
        autoscaler("MemoryAutoscaler", "m", "web"),
        autoscaler("WatermarkPodAutoscaler", "b", "web")]) == [
        "WatermarkPodAutoscaler shop/a, MemoryAutoscaler shop/m and WatermarkPodAutoscaler "
        "shop/b all target Deployment shop/web: they would fight over its replicas; give a "
        "workload one autoscaler"]
