"""One metric's replica proposal (wpa.md §3), readiness (§5) and the readings it is computed from."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kube_elevator.tasks.core.workload import PodState, TargetScale, owned_by
from kube_elevator.tasks.pod_autoscalers.wpa.crd import Position, _int32, _trunc_div, go_map
from kube_elevator.tasks.pod_autoscalers.wpa.validate import MetricRule, WatermarkRules

# --- §3: one metric's proposal ------------------------------------------------------------------


class MetricError(Exception):
    """A metric could not be computed: the WPA holds and says why (§6)."""


class PodsNotOwned(MetricError):
    """§5.1: the selector lists pods, but none of them is the target's: readiness and the
    metrics are not what is missing, and the condition says so (`PodsNotOwnedByTarget`)."""

    condition_reason = "PodsNotOwnedByTarget"


def check_some_owned(pods: Sequence[PodState], target: TargetScale,
                     skip_owner_check: bool) -> None:
    """PodsNotOwned when the selector's pods all belong to something other than the target."""
    if skip_owner_check or not pods or any(owned_by(pod, target.name) for pod in pods):
        return
    owners = sorted({f"{owner.kind}/{owner.name}" for pod in pods for owner in pod.owners})
    shown = ", ".join(owners[:3]) + (f" and {len(owners) - 3} more" if len(owners) > 3 else "")
    raise PodsNotOwned(
        f"none of the {len(pods)} pods that {target.selector or 'the selector'} lists is "
        f"owned by {target.kind}/{target.name} (they belong to {shown or 'no owner'}): the WPA "
        "counts only the target's pods; narrow the target's selector, or annotate the WPA "
        'wpa.datadoghq.com/skip-owner-check: "true" when an object between the target and '
        "its pods owns them")


@dataclass(frozen=True)
class ConvergeNote:
    """What a proposal says about convergence, for the ConvergeToWatermark condition."""

    status: bool
    reason: str
    message: str


CONVERGE_HIGH_ALLOWED = "Allow downscaling to converge to the High Watermark"
CONVERGE_LOW_ALLOWED = "Allow upscaling to converge to the Low Watermark"
CONVERGE_STABLE_ONLY = "Converging to Watermark only allowed in stable regime"
CONVERGE_UNSTABLE = "Proposal could lead to an unstable regime"
CONVERGE_DISABLED = "Feature not enabled"
CONVERGE_ALLOWED_REASON = "Value between Watermarks"


@dataclass(frozen=True)
class Proposal:
    """One metric's replica proposal (§3), with what the status and the gauges report."""

    metric: MetricRule
    replicas: int
    usage: float  # milli-units, after averaging
    ready: int
    position: Position
    converge: ConvergeNote | None = None

    @property
    def utilization_milli(self) -> int:
        """`int(usage)`: what status.currentMetrics and `value` report (truncated, §3)."""
        return _int32(self.usage)


def round_up_to_multiple(replicas: int, modulo: int) -> int:
    """§3 roundUpToMultiple: proposals are rounded up to a multiple of the modulo."""
    remainder = replicas % modulo
    return replicas + (modulo - remainder) if remainder > 0 else replicas


def adjusted_watermarks(high_milli: int, low_milli: int, tolerance_milli: int
                        ) -> tuple[float, float]:
    """§3: tolerance widens both watermarks, in int64 arithmetic, then float."""
    return (float(high_milli + _trunc_div(high_milli * tolerance_milli, 1000)),
            float(low_milli - _trunc_div(low_milli * tolerance_milli, 1000)))


def _clamp(value: int, lowest: int, highest: int) -> int:
    # §4.3: maxReplicas 0 (unset) caps everything to the minimum.
    return max(min(value, highest), lowest)


def converge(rules: WatermarkRules, spec_replicas: int, ready: int, usage: float,
             high_milli: int, low_milli: int) -> tuple[int, ConvergeNote]:
    """§4.3: inside the band, step by the modulo towards a watermark if that stays inside it."""
    kind = rules.converge_towards_watermark
    if kind not in ("highwatermark", "lowwatermark"):
        return spec_replicas, ConvergeNote(False, CONVERGE_DISABLED, CONVERGE_ALLOWED_REASON)
    min_r = rules.min_replicas if rules.min_replicas > 0 else 1
    max_r = rules.max_replicas
    step = rules.modulo
    if kind == "highwatermark":
        # The fewest replicas keeping usage at or under the high watermark.
        lower = spec_replicas if high_milli == 0 else _clamp(
            math.ceil(float(ready) / float(high_milli) * usage), min_r, max_r)
        candidate = max(spec_replicas - step, 1)
        if candidate < lower:
            return spec_replicas, ConvergeNote(False, CONVERGE_HIGH_ALLOWED, CONVERGE_UNSTABLE)
        return candidate, ConvergeNote(True, CONVERGE_HIGH_ALLOWED, CONVERGE_ALLOWED_REASON)
    # The most replicas keeping usage at or over the low watermark.
    upper = spec_replicas if low_milli == 0 else _clamp(
        math.floor(float(ready) / float(low_milli) * usage), min_r, max_r)
    candidate = spec_replicas + step
    if candidate > upper:
        return spec_replicas, ConvergeNote(False, CONVERGE_LOW_ALLOWED, CONVERGE_UNSTABLE)
    return candidate, ConvergeNote(True, CONVERGE_LOW_ALLOWED, CONVERGE_ALLOWED_REASON)


def usage_of(total_milli: float, ready: int, algorithm: str) -> float:
    """§3: the summed value as is ("absolute"), or divided by the ready count ("average")."""
    return float(total_milli) / (float(ready) if algorithm == "average" else 1.0)


def replica_proposal(rules: WatermarkRules, metric: MetricRule, spec_replicas: int, ready: int,
                     usage: float) -> Proposal:
    """§3 getReplicaCount: ceil above the band, floor below it, converge inside it."""
    high, low = metric.high_milli, metric.low_milli
    adjusted_high, adjusted_low = adjusted_watermarks(high, low, rules.tolerance_milli)
    if usage > adjusted_high:  # strictly above
        replicas = math.ceil(float(ready) * usage / float(high))  # raw HW, not adjusted
        replicas = round_up_to_multiple(replicas, rules.modulo)
        replicas = max(replicas, spec_replicas)  # an upscale never proposes fewer than spec
        return Proposal(metric, replicas, usage, ready, "above",
                        ConvergeNote(False, CONVERGE_HIGH_ALLOWED, CONVERGE_STABLE_ONLY))
    if usage < adjusted_low:  # strictly below
        replicas = math.floor(float(ready) * usage / float(low))  # raw LW
        replicas = max(replicas, 1)
        replicas = round_up_to_multiple(replicas, rules.modulo)  # rounds up even when shrinking
        replicas = min(replicas, spec_replicas)  # a downscale never proposes more than spec
        return Proposal(metric, replicas, usage, ready, "below",
                        ConvergeNote(False, CONVERGE_STABLE_ONLY, CONVERGE_STABLE_ONLY))
    replicas, note = converge(rules, spec_replicas, ready, usage, high, low)
    return Proposal(metric, replicas, usage, ready, "within", note)


# --- §5: readiness --------------------------------------------------------------------------------


def count_ready_pods(pods: Sequence[PodState], target: TargetScale, readiness_delay_seconds: int,
                     min_available_percentage: int, now: float, skip_owner_check: bool) -> int:
    """§5 for External metrics: the ready count, or MetricError when too few are ready."""
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    check_some_owned(pods, target, skip_owner_check)
    ready = incorrect = 0
    for pod in pods:
        if not skip_owner_check and not owned_by(pod, target.name):
            incorrect += 1  # §5.1: the selector is broader than the target
            continue
        if pod.phase in ("Failed", "Succeeded"):
            incorrect += 1  # §5.2: evicted or completed pods leave the denominator
            continue
        if pod.ready is None or pod.start_time is None or pod.deleting:
            continue  # §5.3: not ready, still counted
        if pod.phase == "Running" and pod.ready == "True":
            ready += 1
        elif pod.phase == "Pending" and pod.ready_transition is not None and \
                now - pod.ready_transition < readiness_delay_seconds:
            ready += 1  # §5.4: image pulls are tolerated for readinessDelaySeconds
    if ready == 0:
        raise MetricError(f"unable to get the number of ready pods across all namespaces for "
                          f"{target.selector}: among the {len(pods)} pods, none is ready. "
                          "Skipping recommendation")
    ready = min(ready, target.status_replicas)  # §5.6
    ratio = 100 * ready // (len(pods) - incorrect)
    if ratio < min_available_percentage:
        raise MetricError(f"{ratio} % of the pods are unready, will not autoscale "
                          f"{target.namespace}/{target.name}")
    return ready


@dataclass(frozen=True)
class PodGroups:
    """§5 groupPods for Resource metrics."""

    ready: frozenset[str]
    ignored: frozenset[str]
    missing: frozenset[str]


def group_pods(pods: Sequence[PodState], target_name: str, pod_metrics: Mapping[str, int],
               resource: str, readiness_delay_seconds: int, skip_owner_check: bool) -> PodGroups:
    """§5 Resource readiness: pending/failed ignored; CPU also ignores not-yet-ready pods."""
    ready, ignored, missing = set(), set(), set()
    for pod in pods:
        if not skip_owner_check and not owned_by(pod, target_name):
            continue  # skipped, but still in the denominator
        if pod.phase in ("Failed", "Pending"):
            ignored.add(pod.name)
            continue
        if pod.name not in pod_metrics:
            missing.add(pod.name)
            continue
        if resource == "cpu":  # memory is never readiness-filtered
            if pod.ready is None or pod.start_time is None:
                ignored.add(pod.name)
                continue
            transition = pod.ready_transition if pod.ready_transition is not None else 0.0
            if pod.ready == "False" or pod.start_time + readiness_delay_seconds > transition:
                ignored.add(pod.name)
                continue
        ready.add(pod.name)
    return PodGroups(frozenset(ready), frozenset(ignored), frozenset(missing))


# --- readings: what the metrics adapter returned for each metric --------------------------------


@dataclass(frozen=True)
class MetricReading:
    """One metric's raw values: External samples, or usage per pod (milli-units), or why not."""

    external_milli: tuple[int, ...] = ()
    pod_usage_milli: Mapping[str, int] = field(default_factory=dict)
    error: str | None = None


def external_proposal(rules: WatermarkRules, metric: MetricRule, reading: MetricReading,
                      target: TargetScale, pods: Sequence[PodState], now: float) -> Proposal:
    """GetExternalMetricReplicas: ready pods, summed samples, zero handling, §3."""
    ready = count_ready_pods(pods, target, rules.readiness_delay_seconds,
                             rules.min_available_replica_percentage, now, rules.skip_owner_check)
    if reading.error is not None:
        raise MetricError(f"unable to get external metric {target.namespace}/{metric.name}/"
                          f"{go_map(metric.selector.match_labels)}: {reading.error}")
    if not reading.external_milli:
        raise MetricError(f"unable to get external metric {target.namespace}/{metric.name}/"
                          f"{go_map(metric.selector.match_labels)}: no data")
    total = sum(reading.external_milli)
    if total == 0 and not rules.tolerate_zero:
        # §3 zero handling: "within" at the ready count (which may be below spec).
        return Proposal(metric, ready, 0.0, ready, "within")
    return replica_proposal(rules, metric, target.spec_replicas, ready,
                            usage_of(total, ready, rules.algorithm))


def resource_proposal(rules: WatermarkRules, metric: MetricRule, reading: MetricReading,
                      target: TargetScale, pods: Sequence[PodState]) -> Proposal:
    """GetResourceReplicas: per-pod usage summed over the ready pods (§3, §5)."""
    if reading.error is not None:
        raise MetricError(f"unable to get resource metric {target.namespace}/{metric.name}/"
                          f"{go_map(metric.selector.match_labels)}: {reading.error}")
    if not reading.pod_usage_milli:
        raise MetricError(f"unable to get resource metric {target.namespace}/{metric.name}/"
                          f"{go_map(metric.selector.match_labels)}: no metrics returned from "
                          "resource metrics API")
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    check_some_owned(pods, target, rules.skip_owner_check)
    groups = group_pods(pods, target.name, reading.pod_usage_milli, metric.name,
                        rules.readiness_delay_seconds, rules.skip_owner_check)
    counted = len(pods) - len(groups.ignored)
    if counted == 0:
        raise MetricError("did not receive metrics for any ready pods")
    ratio = 100 * len(groups.ready) // counted
    if ratio < rules.min_available_replica_percentage:
        raise MetricError(f"{ratio} % of the pods are unready, will not autoscale "
                          f"{target.namespace}/{target.name}")
    # Ignored pods' samples are dropped; every other selected pod's sample counts.
    samples = {pod: value for pod, value in reading.pod_usage_milli.items()
               if pod not in groups.ignored}
    if not samples or not groups.ready:
        raise MetricError("did not receive metrics for any ready pods")
    ready = len(groups.ready)
    return replica_proposal(rules, metric, target.spec_replicas, ready,
                            usage_of(sum(samples.values()), ready, rules.algorithm))
