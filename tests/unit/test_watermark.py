"""The WPA decision (tasks/pod_autoscalers/wpa/) against wpa.md §2-6 and upstream's test cases.

Upstream's replica-calculator cases (controllers/datadoghq/replica_calculator_test.go) are
reproduced with the harness' defaults made explicit: pods `test-pod-<i>` owned by ReplicaSet
`foo-bar-123-345` of Deployment `foo-bar-123`, Running and Ready, start time at the zero instant.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from kube_elevator.tasks.core.timefmt import parse_time, rfc3339
from kube_elevator.tasks.core.workload import OwnerReference as Owner
from kube_elevator.tasks.core.workload import PodState, TargetScale, owned_by, pod_state
from kube_elevator.tasks.pod_autoscalers.wpa.crd import (
    ABLE_TO_SCALE,
    ABOVE_HIGH_WATERMARK,
    BELOW_LOW_WATERMARK,
    SCALING_ACTIVE,
    SCALING_BLOCKED,
    SCALING_LIMITED,
    Conditions,
    format_milli,
    milli_of,
    milli_value,
)
from kube_elevator.tasks.pod_autoscalers.wpa.decide import decide_watermark, log_attributes, scale_failed
from kube_elevator.tasks.pod_autoscalers.wpa.gates import (
    MonitorReading,
    lifecycle_control,
    limit_replicas,
    scale_gate,
)
from kube_elevator.tasks.pod_autoscalers.wpa.proposal import (
    MetricError,
    MetricReading,
    PodsNotOwned,
    adjusted_watermarks,
    count_ready_pods,
    external_proposal,
    group_pods,
    replica_proposal,
    resource_proposal,
    round_up_to_multiple,
)
from kube_elevator.tasks.pod_autoscalers.wpa.validate import WatermarkRules, parse_watermark

NOW = 1_795_262_400.0  # 2026-11-21T12:00:00Z
TARGET = "foo-bar-123"
OWNER = (Owner("ReplicaSet", "foo-bar-123-345"),)


def wpa(metrics: list[dict[str, Any]] | None = None, status: dict[str, Any] | None = None,
        annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "scaleTargetRef": {"kind": "Deployment", "name": TARGET, "apiVersion": "apps/v1"},
        "minReplicas": 1, "maxReplicas": 30,
        "metrics": metrics if metrics is not None else [cpu_metric(40000, 20000)],
        **spec,
    }
    obj: dict[str, Any] = {"apiVersion": "datadoghq.com/v1alpha1", "kind": "WatermarkPodAutoscaler",
                           "metadata": {"name": "w", "namespace": "ns",
                                        "annotations": annotations or {}},
                           "spec": {k: v for k, v in body.items() if v is not None}}
    if status is not None:
        obj["status"] = status
    return obj


def cpu_metric(high: int | str, low: int | str, name: str = "cpu") -> dict[str, Any]:
    return {"type": "Resource", "resource": {
        "name": name, "metricSelector": {"matchLabels": {"name": "test-pod"}},
        "highWatermark": f"{high}m" if isinstance(high, int) else high,
        "lowWatermark": f"{low}m" if isinstance(low, int) else low}}


def ext_metric(high: int, low: int, name: str = "deadbeef") -> dict[str, Any]:
    return {"type": "External", "external": {
        "metricName": name, "metricSelector": {"matchLabels": {"foo": "bar"}},
        "highWatermark": f"{high}m", "lowWatermark": f"{low}m"}}


def rules_of(obj: dict[str, Any]) -> WatermarkRules:
    parsed = parse_watermark(obj)
    assert parsed.rules is not None, parsed.problems
    return parsed.rules


def pods(count: int, phases: list[str] | None = None, **fields: Any) -> list[PodState]:
    fields.setdefault("ready_transition", NOW)
    return [PodState(f"test-pod-{i}", "ns", {"name": "test-pod"}, OWNER,
                     (phases[i] if phases else "Running"), **fields) for i in range(count)]


def scale(spec: int, status: int | None = None) -> TargetScale:
    return TargetScale("Deployment", TARGET, "ns", spec, spec if status is None else status,
                       "name=test-pod")


# --- §1 units -------------------------------------------------------------------------------------


def test_quantities_are_compared_as_milli_values() -> None:
    assert milli_value("400m") == 400
    assert milli_value("2") == 2000
    assert milli_value(50) == 50_000
    assert milli_value("0.01") == 10  # tolerance "0.01" = 1 %
    assert milli_value("1Mi") == 1_048_576_000
    assert milli_value("0.5m") == 1  # MilliValue rounds up
    assert milli_of(0.1) == 100 and milli_of(1.0000001) == 1001
    assert format_milli(8600) == "8600m" and format_milli(270000) == "270"
    assert format_milli(3_000_000) == "3k" and format_milli(0) == "0"


# --- §2 defaults and validation -----------------------------------------------------------------------


def test_defaults_fill_unset_and_zero_fields() -> None:
    rules = rules_of(wpa(minReplicas=None, tolerance=0, downscaleForbiddenWindowSeconds=0,
                         upscaleForbiddenWindowSeconds=None))
    assert rules.min_replicas == 1
    assert rules.algorithm == "absolute"
    assert rules.tolerance_milli == 100  # 0 cannot be expressed: replaced by the default
    assert rules.scale_up_limit_factor_milli == 50_000
    assert rules.scale_down_limit_factor_milli == 20_000
    assert rules.upscale_forbidden_window_seconds == 60
    assert rules.downscale_forbidden_window_seconds == 300
    assert rules.modulo == 1
    assert rules.upscale_delay_above_watermark_seconds == 0
    assert rules.converge_towards_watermark == ""
    assert not rules.dry_run and not rules.tolerate_zero


def test_explicit_zero_limit_factors_are_kept() -> None:
    rules = rules_of(wpa(scaleUpLimitFactor=0, scaleDownLimitFactor="0"))
    assert rules.scale_up_limit_factor_milli == 0
    assert rules.scale_down_limit_factor_milli == 0


def test_a_single_watermark_is_copied_into_the_other() -> None:
    metric = cpu_metric(40000, 20000)
    del metric["resource"]["lowWatermark"]
    rules = rules_of(wpa(metrics=[metric]))
    assert (rules.metrics[0].high_milli, rules.metrics[0].low_milli) == (40000, 40000)


def test_the_real_crds_objects_load_unchanged() -> None:
    # DataDog's README example, quantities as YAML numbers and strings.
    obj = wpa(metrics=[{"type": "External", "external": {
        "highWatermark": "400m", "lowWatermark": "150m", "metricName": "sinus",
        "metricSelector": {"matchLabels": {"foo": "bar", "self": "folk"}}}}],
        downscaleForbiddenWindowSeconds=60, upscaleForbiddenWindowSeconds=30,
        scaleDownLimitFactor=30, scaleUpLimitFactor=50, minReplicas=4, maxReplicas=9,
        tolerance="0.01", readinessDelaySeconds=10, convergeTowardsWatermark="highwatermark",
        replicaScalingAbsoluteModulo=2, dryRun=True, tolerateZero=True,
        minAvailableReplicaPercentage=50, upscaleDelayAboveWatermarkSeconds=30)
    obj["status"] = {"currentReplicas": 4, "desiredReplicas": 4, "unknownField": 1}
    rules = rules_of(obj)
    assert rules.tolerance_milli == 10 and rules.scale_down_limit_factor_milli == 30_000
    assert rules.metrics[0].display_name == "sinus{map[foo:bar self:folk]}"


@pytest.mark.parametrize(("spec", "expected"), [
    ({"metrics": [cpu_metric(100, 200)]}, "has to be strictly inferior to the High Watermark"),
    ({"minReplicas": 5, "maxReplicas": 3}, "inferior to the maximum"),
    ({"maxReplicas": None}, "inferior to the maximum"),
    ({"algorithm": "median"}, "spec.algorithm: 'median' is not an algorithm"),
    ({"tolerance": "1.5"}, "tolerance should be set as a quantity between 0 and 1"),
    ({"scaleDownLimitFactor": 100}, "between 0 and 100 (exc.)"),
    ({"scaleUpLimitFactor": -1}, "positive quantity"),
    ({"scaleTargetRef": {"kind": "", "name": "x"}}, "should be populated"),
    ({"metrics": [{"type": "Pods"}]}, "incorrect metric.Type: 'Pods'"),
    ({"metrics": [{"type": "External"}]}, "metric.External is nil"),
    ({"metrics": [{"type": "Resource", "resource": {"name": "cpu", "highWatermark": "1"}}]},
     "Missing Labels for the Resource metric cpu"),
    ({"metrics": [{"type": "Resource", "resource": {"name": "cpu", "metricSelector": {}}}]},
     "Watermarks are not set correctly"),
    ({"metrics": [cpu_metric("abc", "1")]}, "'abc' is not a Kubernetes quantity"),
    ({"metrics": []}, "at least one metric is required"),
    ({"recommender": {"url": "http://r"}, "metrics": None}, "recommender mode is not supported"),
    ({"minReplicas": "three"}, "spec.minReplicas: Input should be a valid integer"),
    ({"convergeTowardsWatermark": "up"}, "must be highwatermark or lowwatermark"),
    ({"replicaScalingAbsoluteModulo": 0}, "must be at least 1"),  # a pointer: 0 is set
    ({"minReplicas": 0}, "spec.minReplicas: must be at least 1"),
    ({"upscaleForbiddenWindowSeconds": 0}, None),  # an int32: zero is unset, the default
    ({"minAvailableReplicaPercentage": 101}, "at most 100"),
])
def test_invalid_specs_are_reported_with_their_key_path(spec: dict[str, Any],
                                                         expected: str | None) -> None:
    parsed = parse_watermark(wpa(**spec))
    if expected is None:
        assert parsed.rules is not None
        assert parsed.rules.upscale_forbidden_window_seconds == 60
        return
    assert parsed.rules is None
    assert any(expected in problem for problem in parsed.problems), parsed.problems


def test_equal_watermarks_are_accepted() -> None:
    assert parse_watermark(wpa(metrics=[cpu_metric(100, 100)])).rules is not None


def test_every_problem_is_reported_at_once() -> None:
    parsed = parse_watermark(wpa(metrics=[cpu_metric(100, 200)], algorithm="x", minReplicas=9,
                                 maxReplicas=3))
    assert len(parsed.problems) == 3


def test_invalid_spec_sets_able_to_scale_false_and_leaves_the_target_alone() -> None:
    parsed = parse_watermark(wpa(metrics=[cpu_metric(100, 200)]))
    decision = decide_watermark(parsed, scale(3), pods(3), [], NOW)
    assert not decision.valid and not decision.rescale and decision.scale_to is None
    able = next(c for c in decision.conditions() if c["type"] == ABLE_TO_SCALE)
    assert able["status"] == "False" and able["reason"] == "FailedSpecCheck"
    assert "Invalid WPA specification" in able["message"]
    assert decision.status_changed


# --- §3 per-metric proposals: upstream's replica-calculator cases ---------------------------------


def resource_case(levels: list[int], spec: int, *, tolerance: int, modulo: int = 1,
                  high: int = 40000, low: int = 20000, phases: list[str] | None = None,
                  converge: str = "", min_max: tuple[int, int] = (1, 10),
                  algorithm: str = "absolute") -> tuple[int, int, int, str]:
    obj = wpa(metrics=[cpu_metric(high, low)], tolerance=f"{tolerance}m", algorithm=algorithm,
              replicaScalingAbsoluteModulo=modulo, convergeTowardsWatermark=converge,
              minReplicas=min_max[0], maxReplicas=min_max[1])
    rules = rules_of(obj)
    reading = MetricReading(pod_usage_milli={f"test-pod-{i}": v for i, v in enumerate(levels)})
    proposal = resource_proposal(rules, rules.metrics[0], reading, scale(spec),
                                 pods(len(levels), phases, start_time=0.0))
    return proposal.replicas, proposal.ready, proposal.utilization_milli, proposal.position


@pytest.mark.parametrize(("case", "kwargs", "expected"), [
    ("AbsoluteScaleUp", {"levels": [90000] * 3, "tolerance": 25}, (21, 3, 270000, "above")),
    ("ScaleIntervalAbsoluteScaleUp", {"levels": [90000] * 3, "tolerance": 25, "modulo": 5},
     (25, 3, 270000, "above")),
    ("ScaleIntervalNoScale", {"levels": [9000] * 3, "tolerance": 25, "modulo": 5},
     (3, 3, 27000, "within")),
    ("ConvergeNoScaleDown", {"levels": [9000] * 3, "tolerance": 25,
                             "converge": "highwatermark"}, (3, 3, 27000, "within")),
    ("ConvergeDefault", {"levels": [9000] * 3, "tolerance": 25}, (3, 3, 27000, "within")),
    ("ConvergeScaleUp", {"levels": [9000] * 3, "tolerance": 25, "converge": "lowwatermark"},
     (4, 3, 27000, "within")),
    ("ConvergeScaleDown", {"levels": [8000] * 3, "tolerance": 25,
                           "converge": "highwatermark"}, (2, 3, 24000, "within")),
    ("AbsoluteScaleDown", {"levels": [4000] * 3, "tolerance": 20}, (1, 3, 12000, "below")),
    ("ScaleIntervalAbsoluteScaleDown", {"levels": [4000] * 3, "tolerance": 20, "modulo": 2},
     (2, 3, 12000, "below")),
    ("AbsoluteScaleDownLessScale", {"levels": [5000] * 3, "tolerance": 20},
     (2, 3, 15000, "below")),
    ("AbsoluteScaleUpPendingLessScale", {"levels": [100000, 50000, 70000], "tolerance": 20,
                                         "phases": ["Pending", "Running", "Running"]},
     (6, 2, 120000, "above")),
    ("AbsoluteScaleUpPendingLessScaleExtraReplica", {
        "levels": [100000, 50001, 70000], "tolerance": 20,
        "phases": ["Pending", "Running", "Running"]}, (7, 2, 120001, "above")),
])
def test_upstream_resource_cases(case: str, kwargs: dict[str, Any],
                                 expected: tuple[int, int, int, str]) -> None:
    assert resource_case(spec=3, **kwargs) == expected, case


def test_upstream_pending_no_scale_with_a_huge_tolerance() -> None:
    # Tolerance NewQuantity(20) = 20000 milli: validation would refuse it, the arithmetic
    # does not care: HW 40000 widens to 840000 and 40000 sits inside the band.
    rules = replace(rules_of(wpa()), tolerance_milli=20_000)
    reading = MetricReading(pod_usage_milli={"test-pod-0": 100000, "test-pod-1": 50000,
                                             "test-pod-2": 40000})
    proposal = resource_proposal(rules, rules.metrics[0], reading, scale(3),
                                 pods(3, ["Pending", "Pending", "Running"], start_time=0.0))
    assert (proposal.replicas, proposal.ready, proposal.utilization_milli) == (3, 1, 40000)


def test_upstream_converge_no_scale_up_with_max_unset() -> None:
    # maxReplicas unset (0) caps the upper bound to minReplicas, so no upscale is proposed.
    rules = replace(rules_of(wpa(metrics=[cpu_metric(40000, 27000)], tolerance="25m",
                                 convergeTowardsWatermark="lowwatermark")), max_replicas=0)
    proposal = replica_proposal(rules, rules.metrics[0], 3, 3, 27000.0)
    assert (proposal.replicas, proposal.position) == (3, "within")


@pytest.mark.parametrize(("case", "ready", "levels", "high", "low", "tolerance", "algorithm",
                          "tolerate_zero", "expected"), [
    ("Upscale1", 4, [8600], 4000, 2000, 20, "absolute", False, (9, 8600, "above")),
    ("Upscale2", 9, [8600], 4000, 2000, 20, "absolute", False, (20, 8600, "above")),
    ("Upscale3", 20, [200], 4000, 2000, 20, "absolute", False, (2, 200, "below")),
    ("WithinAbsolute", 9, [4799], 4000, 2000, 200, "absolute", False, (9, 4799, "within")),
    ("TolerateZeroDefault", 3, [0], 4000, 2000, 20, "absolute", False, (3, 0, "within")),
    ("TolerateZeroEnabled", 3, [0], 4000, 2000, 20, "absolute", True, (1, 0, "below")),
    ("AverageDownscale1", 5, [370000], 85000, 75000, 10, "average", False, (4, 74000, "below")),
    ("AverageDownscale2", 4, [240000], 85000, 75000, 10, "average", False, (3, 60000, "below")),
    ("AverageDownscale3", 3, [240000], 85000, 75000, 10, "average", False,
     (3, 80000, "within")),
])
def test_upstream_external_cases(case: str, ready: int, levels: list[int], high: int, low: int,
                                 tolerance: int, algorithm: str, tolerate_zero: bool,
                                 expected: tuple[int, int, str]) -> None:
    rules = rules_of(wpa(metrics=[ext_metric(high, low)], tolerance=f"{tolerance}m",
                         algorithm=algorithm, tolerateZero=tolerate_zero))
    proposal = external_proposal(rules, rules.metrics[0],
                                 MetricReading(external_milli=tuple(levels)),
                                 scale(ready), pods(ready), NOW)
    assert (proposal.replicas, proposal.utilization_milli, proposal.position) == expected, case
    assert proposal.ready == ready


@pytest.mark.parametrize(("high", "expected"), [(120001, 2), (119999, 3)])
def test_upstream_converging_downward(high: int, expected: int) -> None:
    rules = rules_of(wpa(metrics=[ext_metric(high, 75000)], tolerance="10m",
                         convergeTowardsWatermark="highwatermark", maxReplicas=10))
    proposal = replica_proposal(rules, rules.metrics[0], 3, 3, 80000.0)
    assert proposal.replicas == expected
    assert proposal.converge is not None and proposal.converge.status is (expected == 2)


def test_tolerance_uses_integer_arithmetic_and_strict_comparisons() -> None:
    # trunc(333 * 100 / 1000) = 33: the band is [300 - 30, 333 + 33] = [270, 366].
    assert adjusted_watermarks(333, 300, 100) == (366.0, 270.0)
    rules = rules_of(wpa(metrics=[ext_metric(333, 300)]))
    metric = rules.metrics[0]
    assert replica_proposal(rules, metric, 2, 2, 366.0).position == "within"  # not strictly above
    assert replica_proposal(rules, metric, 2, 2, 366.5).position == "above"
    assert replica_proposal(rules, metric, 2, 2, 270.0).position == "within"
    assert replica_proposal(rules, metric, 2, 2, 269.9).position == "below"


def test_ceil_above_uses_the_raw_high_watermark_and_never_proposes_fewer_than_spec() -> None:
    rules = rules_of(wpa(metrics=[ext_metric(1000, 500)]))
    # ready 2 of spec 5: ceil(2 * 1200 / 1000) = 3, but an upscale keeps at least spec.
    assert replica_proposal(rules, rules.metrics[0], 5, 2, 1200.0).replicas == 5
    assert replica_proposal(rules, rules.metrics[0], 2, 2, 1200.0).replicas == 3


def test_floor_below_keeps_one_replica_and_never_proposes_more_than_spec() -> None:
    rules = rules_of(wpa(metrics=[ext_metric(1000, 500)], replicaScalingAbsoluteModulo=4))
    # floor(3 * 10 / 500) = 0 -> 1 -> rounded up to 4 -> capped at spec 3.
    assert replica_proposal(rules, rules.metrics[0], 3, 3, 10.0).replicas == 3
    assert replica_proposal(rules, rules.metrics[0], 8, 8, 10.0).replicas == 4


def test_round_up_to_multiple() -> None:
    assert [round_up_to_multiple(x, 4) for x in (1, 4, 5, 8)] == [4, 4, 8, 8]
    assert round_up_to_multiple(7, 1) == 7


def test_average_on_resource_is_the_mean_per_ready_pod() -> None:
    replicas, ready, utilization, position = resource_case(
        [900, 900, 900], 3, tolerance=100, high=500, low=200, algorithm="average")
    # mean 900 > 550: ceil(3 * 900 / 500) = 6, "each replica can take HW".
    assert (replicas, ready, utilization, position) == (6, 3, 900, "above")


# --- §4.1 several metrics ----------------------------------------------------------------------------


def test_largest_proposal_wins_ties_keep_the_earlier_and_positions_are_ored() -> None:
    obj = wpa(metrics=[ext_metric(1000, 500, "a"), ext_metric(1000, 500, "b"),
                       ext_metric(1000, 500, "c")])
    readings = [MetricReading(external_milli=(700,)),  # within: 4
                MetricReading(external_milli=(1500,)),  # above: ceil(4 * 1.5) = 6
                MetricReading(external_milli=(1500,))]  # above: 6, a tie
    decision = decide_watermark(parse_watermark(obj), scale(4), pods(4), readings, NOW)
    assert decision.proposal == 6
    assert "b{map[foo:bar]} above target" in decision.reason
    assert decision.condition_true(ABOVE_HIGH_WATERMARK)
    assert [m.proposal for m in decision.metrics] == [4, 6, 6]


def test_any_metric_error_aborts_the_cycle_and_keeps_the_previous_metrics() -> None:
    previous = [{"type": "External", "external": {"metricName": "a", "currentValue": "1"}}]
    obj = wpa(metrics=[ext_metric(1000, 500, "a"), ext_metric(1000, 500, "b")],
              status={"currentMetrics": previous, "desiredReplicas": 4,
                      "lastScaleTime": rfc3339(NOW - 1000)})
    readings = [MetricReading(external_milli=(5000,)), MetricReading(error="no data for b")]
    decision = decide_watermark(parse_watermark(obj), scale(4), pods(4), readings, NOW)
    assert not decision.rescale and decision.metric_failed
    active = next(c for c in decision.conditions() if c["type"] == SCALING_ACTIVE)
    assert (active["status"], active["reason"]) == ("False", "FailedGetExternalMetric")
    assert "no data for b" in active["message"]
    assert decision.status["currentMetrics"] == previous
    assert decision.status["desiredReplicas"] == 4 and decision.status["currentReplicas"] == 4


# --- §4.2 velocity limits and min/max --------------------------------------------------------------


def test_readme_limit_factor_examples() -> None:
    assert limit_replicas(10, 20, 1, 100, 10, 29_000, 29_000).replicas == 12
    assert limit_replicas(10, 1, 1, 100, 10, 29_000, 29_000).replicas == 8
    up = limit_replicas(10, 20, 1, 100, 10, 29_000, 29_000)
    assert (up.condition, up.upscale_capping) == ("ScaleUpLimit", True)
    down = limit_replicas(10, 1, 1, 100, 10, 29_000, 29_000)
    assert (down.condition, down.downscale_capping) == ("ScaleDownLimit", True)


def test_any_non_zero_factor_moves_at_least_one_replica() -> None:
    # 2 replicas, 20 %: floor(0.4) = 0, so the limit is one replica either way.
    assert limit_replicas(2, 10, 1, 100, 2, 20_000, 20_000).replicas == 3
    assert limit_replicas(2, 1, 1, 100, 2, 20_000, 20_000).replicas == 1
    # A factor below 1 % is still not zero (Quantity.Value() rounds up).
    assert limit_replicas(2, 10, 1, 100, 2, 500, 500).replicas == 3


def test_zero_factors_disable_a_direction() -> None:
    assert limit_replicas(5, 9, 1, 100, 5, 0, 20_000).replicas == 5
    assert limit_replicas(5, 1, 1, 100, 5, 50_000, 0).replicas == 5


def test_min_and_max_act_inside_the_velocity_limits() -> None:
    # Down-limit 8, minReplicas 9: the larger wins.
    assert limit_replicas(10, 1, 9, 100, 10, 50_000, 20_000).replicas == 9
    # Up-limit 15, maxReplicas 12: the smaller wins.
    limited = limit_replicas(10, 40, 1, 12, 10, 50_000, 20_000)
    assert (limited.replicas, limited.condition) == (12, "ScaleUpLimit")
    # Within the velocity limits: TooFew / TooMany against min and max.
    assert limit_replicas(10, 9, 10, 100, 10, 50_000, 20_000).condition == "TooFewReplicas"
    assert limit_replicas(10, 11, 1, 10, 10, 50_000, 20_000).condition == "TooManyReplicas"
    within = limit_replicas(10, 11, 1, 20, 10, 50_000, 20_000)
    assert (within.replicas, within.condition) == (11, "DesiredWithinRange")


def test_the_down_limit_never_removes_ready_pods_below_it() -> None:
    # Down-limit 8 but only 5 ready pods: stay at spec.
    assert limit_replicas(10, 1, 1, 100, 5, 50_000, 20_000).replicas == 10


def test_min_replicas_zero_allows_one_and_skips_the_down_limit() -> None:
    limited = limit_replicas(10, 0, 0, 100, 10, 50_000, 20_000)
    assert limited.replicas == 1
    assert limit_replicas(10, 2, 0, 100, 10, 50_000, 20_000).replicas == 2


# --- §4.3 convergence ------------------------------------------------------------------------------


def test_convergence_steps_by_the_modulo_and_skips_the_delays() -> None:
    obj = wpa(metrics=[ext_metric(120001, 75000)], convergeTowardsWatermark="highwatermark",
              tolerance="10m", maxReplicas=10, upscaleDelayAboveWatermarkSeconds=600,
              downscaleDelayBelowWatermarkSeconds=600,
              status={"lastScaleTime": rfc3339(NOW - 1000)})
    decision = decide_watermark(parse_watermark(obj), scale(3), pods(3),
                                [MetricReading(external_milli=(80000,))], NOW)
    assert decision.rescale and decision.desired_replicas == 2
    assert "converge towards watermark" in decision.reason


def test_converging_to_the_low_watermark_stays_above_it() -> None:
    rules = rules_of(wpa(metrics=[ext_metric(40000, 20000)], convergeTowardsWatermark=(
        "lowwatermark"), replicaScalingAbsoluteModulo=2, maxReplicas=10))
    # upper = floor(3 / 20000 * 27000) = 4: 3 + 2 = 5 would cross it.
    assert replica_proposal(rules, rules.metrics[0], 3, 3, 27000.0).replicas == 3
    assert replica_proposal(rules, rules.metrics[0], 3, 3, 34000.0).replicas == 5


# --- §4.5 forbidden windows and delays --------------------------------------------------------------


def gate(spec: int, desired: int, last: float | None, conditions: Conditions | None = None,
         stable: bool = False, **spec_fields: Any) -> Any:
    rules = rules_of(wpa(**spec_fields))
    return scale_gate(rules, last, NOW, spec, desired, conditions or Conditions([], NOW), stable)


def test_no_last_scale_time_allows_scaling_at_once() -> None:
    assert gate(3, 5, None).allowed
    assert gate(3, 3, None).allowed  # even unchanged: the first cycle stamps lastScaleTime


def test_forbidden_windows_count_from_the_single_last_scale_time() -> None:
    conditions = Conditions([], NOW)
    held = gate(3, 5, NOW - 59, conditions)
    assert not held.allowed and held.upscale_countdown == 1.0
    assert held.downscale_countdown == 241.0
    assert conditions.get(ABLE_TO_SCALE) is not None
    assert conditions.get(ABLE_TO_SCALE).reason == "BackoffBoth"  # type: ignore[union-attr]
    assert gate(3, 5, NOW - 60).allowed
    assert not gate(3, 1, NOW - 299).allowed
    assert gate(3, 1, NOW - 300).allowed
    late = Conditions([], NOW)
    assert gate(3, 5, NOW - 100, late).allowed
    assert late.get(ABLE_TO_SCALE).reason == "BackoffDownscale"  # type: ignore[union-attr]
    assert not gate(3, 3, NOW - 1000).allowed  # nothing to change


def test_windows_use_the_cycle_clock() -> None:
    rules = rules_of(wpa(upscaleForbiddenWindowSeconds=30))
    assert not scale_gate(rules, NOW, NOW + 29, 3, 5, Conditions([], NOW), False).allowed
    assert scale_gate(rules, NOW, NOW + 30, 3, 5, Conditions([], NOW), False).allowed


def above_since(seconds: float, status: str = "True") -> Conditions:
    conditions = Conditions([], NOW - seconds)
    conditions.set(ABOVE_HIGH_WATERMARK, status == "True", "r", "m")
    conditions.set(BELOW_LOW_WATERMARK, status == "True", "r", "m")
    return replace(conditions, now=NOW)


def test_delays_measure_the_conditions_transition_time() -> None:
    delays = {"upscaleDelayAboveWatermarkSeconds": 30, "downscaleDelayBelowWatermarkSeconds": 30}
    assert not gate(3, 5, NOW - 1000, above_since(29), **delays).allowed
    assert gate(3, 5, NOW - 1000, above_since(30), **delays).allowed
    rules = rules_of(wpa(**delays))
    # 29.9 s elapsed count as 29 (int32 truncation): still held.
    assert not scale_gate(rules, NOW - 1000, NOW + 0.9, 3, 1, above_since(29), False).allowed
    assert not gate(3, 5, NOW - 1000, above_since(100, "False"), **delays).allowed
    assert not gate(3, 5, NOW - 1000, Conditions([], NOW), **delays).allowed  # missing: False
    # Converging (stable regime) skips the delay checks; the window still applies.
    assert gate(3, 5, NOW - 1000, Conditions([], NOW), stable=True, **delays).allowed
    # The delay passed but the window has not.
    assert not gate(3, 5, NOW - 10, above_since(100), **delays).allowed


def test_condition_transition_time_moves_only_when_the_status_flips() -> None:
    conditions = Conditions([], NOW)
    conditions.set(ABOVE_HIGH_WATERMARK, True, "a", "b")
    first = conditions.get(ABOVE_HIGH_WATERMARK)
    later = Conditions.of(conditions.to_json(), NOW + 100)
    later.set(ABOVE_HIGH_WATERMARK, True, "c", "d")
    assert later.get(ABOVE_HIGH_WATERMARK).last_transition_time == \
        first.last_transition_time  # type: ignore[union-attr]
    later.set(ABOVE_HIGH_WATERMARK, False, "c", "d")
    assert parse_time(later.get(  # type: ignore[union-attr]
        ABOVE_HIGH_WATERMARK).last_transition_time) == NOW + 100


def test_upscale_delay_end_to_end_through_the_status() -> None:
    obj = wpa(metrics=[ext_metric(1000, 500)], upscaleDelayAboveWatermarkSeconds=30,
              status={"lastScaleTime": rfc3339(NOW - 1000)})
    reading = [MetricReading(external_milli=(2000,))]
    first = decide_watermark(parse_watermark(obj), scale(2), pods(2), reading, NOW)
    assert not first.rescale and "delay" in first.reason
    obj["status"] = first.status
    second = decide_watermark(parse_watermark(obj), scale(2), pods(2), reading, NOW + 31)
    assert second.rescale and second.desired_replicas == 3


# --- §4.4 the reconcile decision --------------------------------------------------------------------


def test_first_cycle_writes_the_unchanged_count_and_stamps_last_scale_time() -> None:
    obj = wpa(metrics=[ext_metric(1000, 500)])
    decision = decide_watermark(parse_watermark(obj), scale(2), pods(2),
                                [MetricReading(external_milli=(700,))], NOW)
    assert decision.rescale and decision.scale_to == 2
    assert decision.status["lastScaleTime"] == rfc3339(NOW)
    assert decision.status["scalingEventsCount"] == 1


def test_scaling_up_within_the_limit_factor_then_the_window_holds() -> None:
    obj = wpa(metrics=[ext_metric(1000, 500)], status={"lastScaleTime": rfc3339(NOW - 120)})
    decision = decide_watermark(parse_watermark(obj), scale(4), pods(4),
                                [MetricReading(external_milli=(5000,))], NOW)
    # ceil(4 * 5) = 20, limited to 4 + floor(50 % of 4) = 6.
    assert (decision.proposal, decision.desired_replicas, decision.scale_to) == (20, 6, 6)
    limited = next(c for c in decision.conditions() if c["type"] == SCALING_LIMITED)
    assert (limited["status"], limited["reason"]) == ("True", "ScaleUpLimit")
    assert decision.restricted["upscale_capping"] and not decision.restricted["within_bounds"]
    obj["status"] = decision.status
    held = decide_watermark(parse_watermark(obj), scale(6), pods(6),
                            [MetricReading(external_milli=(9000,))], NOW + 30)
    assert not held.rescale and held.desired_replicas == 6
    assert "upscale forbidden window (30 s left)" in held.reason
    able = next(c for c in held.conditions() if c["type"] == ABLE_TO_SCALE)
    assert (able["status"], able["reason"]) == ("False", "BackoffBoth")


def test_dry_run_records_the_scale_event_but_never_scales() -> None:
    obj = wpa(metrics=[ext_metric(1000, 500)], dryRun=True)
    decision = decide_watermark(parse_watermark(obj), scale(2), pods(2),
                                [MetricReading(external_milli=(5000,))], NOW)
    assert decision.rescale and decision.scale_to is None and decision.desired_replicas == 3
    assert decision.status["lastScaleTime"] == rfc3339(NOW)  # cooldowns simulated too
    assert decision.condition_true("DryRun")
    assert decision.reason.startswith("dry run: would scale to 3")


@pytest.mark.parametrize(("spec", "status", "desired", "rescale", "reason"), [
    (0, 0, 0, False, "scaling is disabled"),
    (40, 40, 30, True, "above Spec.MaxReplicas"),
    (1, 1, 2, True, "below Spec.MinReplicas"),
    (3, 0, 1, True, "must be greater than 0"),
])
def test_overrides_ignore_windows(spec: int, status: int, desired: int, rescale: bool,
                                  reason: str) -> None:
    obj = wpa(metrics=[ext_metric(1000, 500)], minReplicas=2,
              status={"lastScaleTime": rfc3339(NOW - 1)})
    decision = decide_watermark(parse_watermark(obj), scale(spec, status), pods(max(spec, 1)),
                                [MetricReading(external_milli=(700,))], NOW)
    assert (decision.desired_replicas, decision.rescale) == (desired, rescale)
    assert reason in decision.reason


def test_unreadable_scale_holds_with_a_condition() -> None:
    decision = decide_watermark(parse_watermark(wpa()), "scale not found: x", [], [], NOW)
    assert not decision.rescale and decision.valid
    able = next(c for c in decision.conditions() if c["type"] == ABLE_TO_SCALE)
    assert able["status"] == "False" and "scale not found" in able["message"]


def test_a_failed_scale_write_keeps_the_previous_last_scale_time() -> None:
    before = rfc3339(NOW - 1000)
    obj = wpa(metrics=[ext_metric(1000, 500)], status={"lastScaleTime": before})
    decision = decide_watermark(parse_watermark(obj), scale(2), pods(2),
                                [MetricReading(external_milli=(5000,))], NOW)
    failed = scale_failed(decision, "500 boom", NOW)
    assert failed.status["lastScaleTime"] == before and not failed.rescale
    able = next(c for c in failed.conditions() if c["type"] == ABLE_TO_SCALE)
    assert (able["status"], able["reason"]) == ("False", "FailedScale")


def test_status_is_unchanged_when_nothing_moves() -> None:
    obj = wpa(metrics=[ext_metric(1000, 500)], status={"lastScaleTime": rfc3339(NOW - 1000)})
    reading = [MetricReading(external_milli=(700,))]
    first = decide_watermark(parse_watermark(obj), scale(2), pods(2), reading, NOW)
    obj["status"] = first.status
    again = decide_watermark(parse_watermark(obj), scale(2), pods(2), reading, NOW + 15)
    assert not again.status_changed


# --- §5 readiness --------------------------------------------------------------------------------------


def test_owner_check_strips_the_replica_set_hash() -> None:
    assert owned_by(PodState("p", owners=(Owner("ReplicaSet", "web-5d4f8"),)), "web")
    assert not owned_by(PodState("p", owners=(Owner("ReplicaSet", "web-api-5d4f8"),)), "web")
    assert owned_by(PodState("p", owners=(Owner("StatefulSet", "db"),)), "db")


def test_external_readiness_rules() -> None:
    target = scale(6)
    group = [
        PodState("ok", owners=OWNER, ready_transition=NOW),
        PodState("stranger", owners=(Owner("ReplicaSet", "other-1"),)),  # incorrect
        PodState("evicted", owners=OWNER, phase="Failed"),  # incorrect
        PodState("done", owners=OWNER, phase="Succeeded"),  # incorrect
        PodState("no-ready", owners=OWNER, ready=None),  # not ready, counted
        PodState("no-start", owners=OWNER, start_time=None),  # not ready, counted
        PodState("leaving", owners=OWNER, deleting=True),  # not ready, counted
        PodState("pulling", owners=OWNER, phase="Pending", ready="False",
                 ready_transition=NOW - 5),  # tolerated for readinessDelaySeconds
        PodState("stuck", owners=OWNER, phase="Pending", ready="False",
                 ready_transition=NOW - 50),
    ]
    assert count_ready_pods(group, target, 10, 0, NOW, False) == 2
    # ratio = floor(100 * 2 / (9 - 3)) = 33 %
    with pytest.raises(MetricError, match="33 % of the pods are unready"):
        count_ready_pods(group, target, 10, 34, NOW, False)
    # With the skip-owner annotation the stranger counts as a (ready) pod of the target.
    assert count_ready_pods(group, target, 10, 0, NOW, True) == 3


def test_external_ready_count_is_capped_at_status_replicas() -> None:
    assert count_ready_pods(pods(5), scale(5, status=3), 0, 0, NOW, False) == 3


def test_external_none_ready_is_an_error() -> None:
    with pytest.raises(MetricError, match="among the 2 pods, none is ready"):
        count_ready_pods(pods(2, ready="False"), scale(2), 0, 0, NOW, False)
    with pytest.raises(MetricError, match="no pods returned by selector"):
        count_ready_pods([], scale(2), 0, 0, NOW, False)


def test_ready_pods_of_another_owner_are_named_as_such_not_as_unready() -> None:
    """Issue 34 item 6: Ready pods the target does not own were reported as `none is ready`
    (External) and `did not receive metrics for any ready pods` (Resource)."""
    strangers = [PodState(f"api-{i}", owners=(Owner("ReplicaSet", "api-5d4f8"),))
                 for i in range(3)]
    with pytest.raises(PodsNotOwned, match=r"none of the 3 pods that name=test-pod lists is "
                       r"owned by Deployment/foo-bar-123 \(they belong to ReplicaSet/api-5d4f8\)"):
        count_ready_pods(strangers, scale(3), 0, 0, NOW, False)
    rules = rules_of(wpa())
    with pytest.raises(PodsNotOwned, match="skip-owner-check"):
        resource_proposal(rules, rules.metrics[0], MetricReading(
            pod_usage_milli={pod.name: 1 for pod in strangers}), scale(3), strangers)
    assert count_ready_pods(strangers, scale(3), 0, 0, NOW, True) == 3  # the annotation


def test_resource_grouping() -> None:
    group = [
        PodState("ready", owners=OWNER, start_time=0.0, ready_transition=100.0),
        PodState("pending", owners=OWNER, phase="Pending"),
        PodState("failed", owners=OWNER, phase="Failed"),
        PodState("no-sample", owners=OWNER),
        PodState("unready", owners=OWNER, ready="False"),
        PodState("fresh", owners=OWNER, start_time=95.0, ready_transition=100.0),
        PodState("stranger", owners=(Owner("ReplicaSet", "x-1"),)),
    ]
    samples = {name: 1 for name in ("ready", "pending", "failed", "unready", "fresh",
                                    "stranger")}
    cpu = group_pods(group, TARGET, samples, "cpu", 10, False)
    assert cpu.ready == {"ready"}
    assert cpu.ignored == {"pending", "failed", "unready", "fresh"}
    assert cpu.missing == {"no-sample"}
    memory = group_pods(group, TARGET, samples, "memory", 10, False)
    assert memory.ready == {"ready", "unready", "fresh"}  # memory is never readiness-filtered


def test_resource_usage_drops_ignored_samples_but_keeps_the_others() -> None:
    rules = rules_of(wpa(metrics=[cpu_metric(40000, 20000)], tolerance="25m"))
    reading = MetricReading(pod_usage_milli={"test-pod-0": 90000, "test-pod-1": 90000,
                                             "pending": 500000, "elsewhere": 90000})
    group = [*pods(2, start_time=0.0), PodState("pending", owners=OWNER, phase="Pending")]
    proposal = resource_proposal(rules, rules.metrics[0], reading, scale(3), group)
    # The metric selector's pod outside the target still counts (270000); "pending" does not.
    assert (proposal.utilization_milli, proposal.ready) == (270000, 2)


def test_resource_errors() -> None:
    rules = rules_of(wpa(minAvailableReplicaPercentage=80))
    metric = rules.metrics[0]
    with pytest.raises(MetricError, match="no metrics returned from resource metrics API"):
        resource_proposal(rules, metric, MetricReading(), scale(2), pods(2))
    with pytest.raises(MetricError, match="50 % of the pods are unready"):
        resource_proposal(rules, metric, MetricReading(pod_usage_milli={"test-pod-0": 1}),
                          scale(2), pods(2, start_time=0.0))
    with pytest.raises(MetricError, match="did not receive metrics for any ready pods"):
        resource_proposal(replace(rules, min_available_replica_percentage=0), metric,
                          MetricReading(pod_usage_milli={"test-pod-0": 1}), scale(1),
                          pods(1, ["Pending"]))


def test_pod_state_from_api_json() -> None:
    state = pod_state({
        "metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1"}]},
        "spec": {"containers": [{"resources": {"limits": {"memory": "1Gi"}}},
                                {"resources": {"limits": {"memory": "512Mi"}}}]},
        "status": {"phase": "Running", "startTime": "2026-11-21T11:00:00Z",
                   "conditions": [{"type": "Ready", "status": "True",
                                   "lastTransitionTime": "2026-11-21T11:00:05Z"}]},
    })
    assert state.memory_limit_bytes == 1536 * 2**20
    assert state.ready == "True" and state.ready_transition == NOW - 3595
    assert state.start_time == NOW - 3600 and owned_by(state, "web")
    no_limit = pod_state({"metadata": {"name": "q"}, "spec": {"containers": [{}]}})
    assert no_limit.memory_limit_bytes is None and no_limit.ready is None


def test_rfc3339_round_trip_in_whole_seconds() -> None:
    assert rfc3339(NOW + 0.9) == "2026-11-21T12:00:00Z"
    assert parse_time("2026-11-21T12:00:00Z") == NOW
    assert math.isclose(parse_time("2026-11-21T12:00:00+00:00") or 0, NOW)


# --- §2.2 lifecycle control ------------------------------------------------------------------------


LIFECYCLE = {"wpa.datadoghq.com/lifecycle-control.enabled": "true"}


@pytest.mark.parametrize(("monitor", "reason", "message"), [
    (None, "FailedGetDatadogMonitor", "monitor ns/w not found"),
    (MonitorReading(False), "FailedGetDatadogMonitor", "monitor ns/w not found"),
    (MonitorReading(True, None), "DatadogMonitorNotOK", "monitor ns/w state not found"),
    (MonitorReading(True, "Alert"), "DatadogMonitorNotOK", "monitor ns/w is in Alert state"),
])
def test_lifecycle_control_blocks_until_the_monitor_is_ok(
        monitor: MonitorReading | None, reason: str, message: str) -> None:
    obj = wpa(metrics=[ext_metric(1000, 500)], annotations=LIFECYCLE)
    decision = decide_watermark(parse_watermark(obj), scale(2), pods(2),
                                [MetricReading(external_milli=(5000,))], NOW, monitor)
    assert not decision.rescale and decision.lifecycle_blocked is True
    blocked = next(c for c in decision.conditions() if c["type"] == SCALING_BLOCKED)
    assert (blocked["status"], blocked["reason"]) == ("True", reason)
    assert message in blocked["message"]


def test_lifecycle_control_ok_and_unparsable_annotations_proceed() -> None:
    reading = [MetricReading(external_milli=(5000,))]
    ok = decide_watermark(parse_watermark(wpa(metrics=[ext_metric(1000, 500)],
                                              annotations=LIFECYCLE)),
                          scale(2), pods(2), reading, NOW, MonitorReading(True, "OK"))
    assert ok.rescale and ok.lifecycle_blocked is False
    blocked = next(c for c in ok.conditions() if c["type"] == SCALING_BLOCKED)
    assert (blocked["status"], blocked["reason"]) == ("False", "DatadogMonitorOK")
    odd = decide_watermark(parse_watermark(wpa(
        metrics=[ext_metric(1000, 500)],
        annotations={"wpa.datadoghq.com/lifecycle-control.enabled": "maybe"})),
        scale(2), pods(2), reading, NOW)
    assert odd.rescale and odd.lifecycle_blocked is None
    assert next(c for c in odd.conditions() if c["type"] == SCALING_BLOCKED)["reason"] == \
        "FailedGetDatadogMonitor"
    assert lifecycle_control({}) is False and lifecycle_control({
        "wpa.datadoghq.com/lifecycle-control.enabled": "1"}) is True


def test_logs_attributes_are_appended_to_log_lines() -> None:
    assert log_attributes({"wpa.datadoghq.com/logs-attributes": '{"team": "a", "x": 1}'}) == \
        " team=a x=1"
    assert log_attributes({"wpa.datadoghq.com/logs-attributes": "not json"}) == ""


# TestCheckWPAValidity (controllers/datadoghq/watermarkpodautoscaler_controller_test.go): the
# message of each invalid case, word for word after our key path. Quantities print as Go's `%v`
# of a resource.Quantity does: canonical ("5000m" is "5").
CHECK_WPA_VALIDITY = [
    ("missing scaleTarget", {"scaleTargetRef": {"kind": "", "name": ""}},
     "spec.scaleTargetRef: the Spec.ScaleTargetRef should be populated, currently Kind: and/or "
     "Name: are not set properly"),
    ("tolerance is out of bounds", {"minReplicas": 4, "maxReplicas": 7, "tolerance": "5000m"},
     "spec.tolerance: tolerance should be set as a quantity between 0 and 1, currently set to "
     ": 5, which is 500%"),
    ("scaleuplimitfactor < 0", {"minReplicas": 4, "maxReplicas": 7, "scaleUpLimitFactor": -1,
                                "scaleDownLimitFactor": 10, "tolerance": "50m"},
     "spec.scaleUpLimitFactor: scaleuplimitfactor should be set as a positive quantity, "
     "currently set to : -1, which could yield a -1% growth"),
    ("scaledownlimitfactor is out of bounds", {"minReplicas": 4, "maxReplicas": 7,
                                               "scaleUpLimitFactor": 34,
                                               "scaleDownLimitFactor": 134,
                                               "tolerance": "50m"},
     "spec.scaleDownLimitFactor: scaledownlimitfactor should be set as a quantity between 0 and "
     "100 (exc.), currently set to : 134, which could yield a 134% decrease"),
    ("scaleuplimitfactor can be > 100", {"minReplicas": 4, "maxReplicas": 7,
                                         "scaleUpLimitFactor": 101, "scaleDownLimitFactor": 10,
                                         "tolerance": "50m"}, None),
    ("tolerance is not set, spec is valid", {"minReplicas": 4, "maxReplicas": 7,
                                             "scaleUpLimitFactor": 10,
                                             "scaleDownLimitFactor": 10}, None),
    ("correct case", {"minReplicas": 4, "maxReplicas": 7, "tolerance": "500m",
                      "scaleUpLimitFactor": 10, "scaleDownLimitFactor": 10}, None),
]


@pytest.mark.parametrize(("spec", "message"), [case[1:] for case in CHECK_WPA_VALIDITY],
                         ids=[f"TestCheckWPAValidity:{case[0]}" for case in CHECK_WPA_VALIDITY])
def test_check_wpa_validity_messages_are_upstreams(spec: dict[str, Any],
                                                   message: str | None) -> None:
    parsed = parse_watermark(wpa(**spec))
    if message is None:
        assert parsed.problems == () and parsed.rules is not None
    else:
        assert message in parsed.problems, parsed.problems


# --- §2.3 the status a real API server accepts ----------------------------------------------------


def test_every_status_written_holds_the_two_fields_the_crd_requires() -> None:
    """DataDog's CRD requires currentReplicas and desiredReplicas in status; a new WPA that
    cannot scale yet (invalid spec, no target, no metric) used to leave them out, and a real
    API server answered 422, so its conditions never said why it was stuck."""
    invalid = decide_watermark(parse_watermark(wpa(minReplicas=5, maxReplicas=3)),
                               scale(4), pods(4), [], NOW)
    no_target = decide_watermark(parse_watermark(wpa()), "deployments.apps \"x\" not found",
                                 [], [MetricReading()], NOW)
    no_metric = decide_watermark(parse_watermark(wpa(metrics=[ext_metric(1000, 500)])),
                                 scale(4, 3), pods(3), [MetricReading(error="no data")], NOW)
    for decision in (invalid, no_target, no_metric):
        assert {"currentReplicas", "desiredReplicas"} <= set(decision.status), decision.reason
    assert (invalid.status["currentReplicas"], invalid.status["desiredReplicas"]) == (0, 0)
    # what runs, as upstream's setCurrentReplicasInStatus records it
    assert (no_metric.status["currentReplicas"], no_metric.status["desiredReplicas"]) == (3, 0)


def test_the_status_reports_the_running_count_while_the_arithmetic_uses_the_spec() -> None:
    """§1: a rollout's surge (spec 15, status 10 running) is no upscale to the arithmetic, and
    the status's currentReplicas says what runs (upstream's setStatus)."""
    decision = decide_watermark(parse_watermark(wpa(metrics=[ext_metric(10_000, 5_000)])),
                                scale(15, 10), pods(10),
                                [MetricReading(external_milli=(7_000,))], NOW)
    assert decision.current_replicas == 15 and decision.status["currentReplicas"] == 10
