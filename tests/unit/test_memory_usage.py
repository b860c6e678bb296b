"""The memory autoscaler (tasks/pod_autoscalers/memory.py): utilization, the ±10 % band, window, limits."""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.core.timefmt import rfc3339
from kube_elevator.tasks.core.workload import PodState, TargetScale
from kube_elevator.tasks.pod_autoscalers.memory import (
    decide_memory,
    memory_scale_failed,
    memory_utilization,
    parse_memory_autoscaler,
    proposed_replicas,
)
from kube_elevator.tasks.pod_autoscalers.wpa.crd import ABLE_TO_SCALE, SCALING_ACTIVE

NOW = 1_795_262_400.0
GiB = 2**30


def autoscaler(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 10, "targetUtilizationPercentage": 50, **spec}
    obj: dict[str, Any] = {"apiVersion": "elevator.io/v1alpha1", "kind": "MemoryAutoscaler",
                           "metadata": {"name": "m", "namespace": "ns"},
                           "spec": {k: v for k, v in body.items() if v is not None}}
    if status is not None:
        obj["status"] = status
    return obj


def pod(name: str, limit: int | None = GiB, phase: str = "Running") -> PodState:
    return PodState(name, "ns", {"app": "web"}, phase=phase, memory_limit_bytes=limit)


def target(replicas: int) -> TargetScale:
    return TargetScale("Deployment", "web", "ns", replicas, replicas, "app=web")


def decide(obj: dict[str, Any], replicas: int, pods: list[PodState],
           usage: dict[str, float] | str, now: float = NOW) -> Any:
    return decide_memory(parse_memory_autoscaler(obj), target(replicas), pods, usage, now)


def test_defaults_and_validation() -> None:
    parsed = parse_memory_autoscaler(autoscaler(minReplicas=None))
    assert parsed.rules is not None
    assert (parsed.rules.min_replicas, parsed.rules.scale_window_seconds) == (1, 300)
    for spec, expected in (({"minReplicas": 5, "maxReplicas": 2}, "spec.maxReplicas"),
                           ({"targetUtilizationPercentage": None}, "required"),
                           ({"targetUtilizationPercentage": 0}, "1..100"),
                           ({"maxReplicas": None}, "spec.maxReplicas: required"),
                           ({"scaleWindowSeconds": -1}, "at least 0"),
                           ({"scaleTargetRef": {"name": "web"}}, "kind and name"),
                           ({"minReplicas": "x"}, "spec.minReplicas: Input should be")):
        problems = parse_memory_autoscaler(autoscaler(**spec)).problems
        assert any(expected in p for p in problems), (spec, problems)


def test_utilization_counts_only_running_pods_with_metrics() -> None:
    pods = [pod("a"), pod("b"), pod("pending", phase="Pending"), pod("no-sample")]
    usage = memory_utilization(pods, {"a": 0.25 * GiB, "b": 0.75 * GiB, "pending": 5 * GiB})
    assert usage.percent == 50.0
    assert usage.counted == ("a", "b")
    assert usage.not_running == ("pending",) and usage.without_metrics == ("no-sample",)


@pytest.mark.parametrize(("utilization", "current", "expected"), [
    (44.0, 4, 4),   # ratio 0.88 < 0.9: ceil(0.88 * 4) = 4 (no change after rounding)
    (40.0, 10, 8),  # ratio 0.8: ceil(8.0) = 8
    (45.0, 4, 4),   # ratio 0.9: inside the band
    (55.0, 4, 4),   # ratio 1.1: inside the band
    (56.0, 4, 5),   # ratio 1.12: ceil(4.48) = 5
    (100.0, 3, 6),
])
def test_the_band_and_ceil(utilization: float, current: int, expected: int) -> None:
    assert proposed_replicas(current, utilization, 50)[0] == expected


def test_scale_up_then_the_window_holds_then_scale_down() -> None:
    obj = autoscaler()
    pods = [pod("a"), pod("b")]
    up = decide(obj, 2, pods, {"a": 0.9 * GiB, "b": 0.9 * GiB})  # 90 % vs 50 %: ratio 1.8
    assert up.rescale and up.scale_to == 4 and up.value == 90.0 and up.ready_replicas == 2
    assert up.status["lastScaleTime"] == rfc3339(NOW)
    assert up.status["currentUtilizationPercentage"] == 90
    obj["status"] = up.status
    pods4 = [*pods, pod("c"), pod("d")]
    held = decide(obj, 4, pods4, {p.name: 0.1 * GiB for p in pods4}, NOW + 299)
    assert not held.rescale and "within the scale window (1 s left)" in held.reason
    able = next(c for c in held.conditions() if c["type"] == ABLE_TO_SCALE)
    assert (able["status"], able["reason"]) == ("False", "BackoffWindow")
    down = decide(obj, 4, pods4, {p.name: 0.1 * GiB for p in pods4}, NOW + 300)
    # 10 % vs 50 %: ceil(0.2 * 4) = 1
    assert down.rescale and down.scale_to == 1


def test_clamped_to_min_and_max() -> None:
    pods = [pod("a"), pod("b")]
    up = decide(autoscaler(maxReplicas=3), 2, pods, {"a": GiB, "b": GiB})
    assert up.desired_replicas == 3 and up.proposal == 4
    limited = next(c for c in up.conditions() if c["type"] == "ScalingLimited")
    assert (limited["status"], limited["reason"]) == ("True", "TooManyReplicas")
    down = decide(autoscaler(minReplicas=2), 3, [pod("a")], {"a": 0.01 * GiB})
    assert down.desired_replicas == 2


def test_out_of_range_is_corrected_despite_the_window() -> None:
    obj = autoscaler(maxReplicas=3, status={"lastScaleTime": rfc3339(NOW - 1)})
    decision = decide(obj, 5, [pod("a")], {"a": 0.5 * GiB})
    assert decision.rescale and decision.desired_replicas == 3


def test_pods_without_a_memory_limit_stop_scaling_with_a_clear_condition() -> None:
    decision = decide(autoscaler(), 2, [pod("a"), pod("b", limit=None)],
                      {"a": GiB, "b": GiB})
    assert not decision.rescale and decision.scale_to is None
    active = next(c for c in decision.conditions() if c["type"] == SCALING_ACTIVE)
    assert (active["status"], active["reason"]) == ("False", "MissingMemoryLimit")
    assert "b" in active["message"]


def test_no_metrics_or_an_error_holds() -> None:
    decision = decide(autoscaler(), 2, [pod("a")], {})
    assert not decision.rescale and "no running pod has memory metrics" in decision.reason
    failed = decide(autoscaler(), 2, [pod("a")], "Prometheus at x is unreachable")
    active = next(c for c in failed.conditions() if c["type"] == SCALING_ACTIVE)
    assert (active["status"], active["reason"]) == ("False", "FailedGetResourceMetric")


def test_zero_replicas_disable_scaling_and_invalid_specs_hold() -> None:
    assert "scaled to zero" in decide(autoscaler(), 0, [], {}).reason
    invalid = decide(autoscaler(targetUtilizationPercentage=0), 2, [pod("a")], {"a": GiB})
    assert not invalid.valid and not invalid.rescale
    able = next(c for c in invalid.conditions() if c["type"] == ABLE_TO_SCALE)
    assert able["reason"] == "FailedSpecCheck"


def test_excluded_pods_are_counted_in_status() -> None:
    decision = decide(autoscaler(), 3, [pod("a"), pod("p", phase="Pending"), pod("x")],
                      {"a": 0.5 * GiB})
    assert (decision.status["podsCounted"], decision.status["podsNotRunning"],
            decision.status["podsWithoutMetrics"]) == (1, 1, 1)


def test_a_failed_scale_keeps_the_previous_last_scale_time() -> None:
    before = rfc3339(NOW - 1000)
    decision = decide(autoscaler(status={"lastScaleTime": before}), 2, [pod("a"), pod("b")],
                      {"a": GiB, "b": GiB})
    failed = memory_scale_failed(decision, "500", NOW)
    assert failed.status["lastScaleTime"] == before and not failed.rescale
