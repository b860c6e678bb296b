"""The memory autoscaler (`elevator.io/v1alpha1` MemoryAutoscaler): scale on memory use/limits.

Why: the HPA long could not scale on memory, and memory is what many services run out of.
Utilization is the pods' summed working set over their summed memory limits, counting only
running pods of the target that have metrics (the others are left out and counted in the
status).  Outside a ±10 % band around the target the count becomes `ceil(ratio × current)`,
clamped to min/max, at most once per `scaleWindowSeconds`.  State lives in the object's status
(lastScaleTime, conditions), the clock is an input, and the decision is pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from kube_elevator.tasks.core.timefmt import parse_time, rfc3339
from kube_elevator.tasks.core.workload import PodState, TargetScale
from kube_elevator.tasks.pod_autoscalers.wpa.crd import (
    ABLE_TO_SCALE,
    SCALING_ACTIVE,
    SCALING_LIMITED,
    Conditions,
    CrdModel,
    CrossVersionObjectReference,
    Int32,
    ObjectMeta,
    validation_problems,
)
from kube_elevator.tasks.pod_autoscalers.wpa.decide import Decision
from kube_elevator.tasks.pod_autoscalers.wpa.validate import ObjectView

GROUP = "elevator.io"
VERSION = "v1alpha1"
PLURAL = "memoryautoscalers"
KIND = "MemoryAutoscaler"

DEFAULT_MIN_REPLICAS = 1
DEFAULT_SCALE_WINDOW_SECONDS = 300
# Below 0.9 × target scale down, above 1.1 × target scale up (issue 7).
SCALE_DOWN_BELOW = 0.9
SCALE_UP_ABOVE = 1.1


class MemoryAutoscalerSpec(CrdModel):
    scale_target_ref: CrossVersionObjectReference = CrossVersionObjectReference()
    min_replicas: Int32 | None = None
    max_replicas: Int32 | None = None
    target_utilization_percentage: Int32 | None = None
    scale_window_seconds: Int32 | None = None


class MemoryAutoscalerObject(CrdModel):
    api_version: str = f"{GROUP}/{VERSION}"
    kind: str = KIND
    metadata: ObjectMeta = ObjectMeta()
    spec: MemoryAutoscalerSpec = MemoryAutoscalerSpec()


@dataclass(frozen=True)
class MemoryRules:
    """A MemoryAutoscaler's spec with defaults applied."""

    target: CrossVersionObjectReference
    min_replicas: int
    max_replicas: int
    target_utilization_percentage: int
    scale_window_seconds: int


@dataclass(frozen=True)
class ParsedMemory(ObjectView):
    namespace: str
    name: str
    raw: Mapping[str, Any]
    rules: MemoryRules | None
    problems: tuple[str, ...]


    def ref_field(self, key: str) -> str:
        ref = (self.raw.get("spec") or {}).get("scaleTargetRef") or {}
        return str(ref.get(key, "")) if isinstance(ref, Mapping) else ""


def parse_memory_autoscaler(obj: Mapping[str, Any]) -> ParsedMemory:
    """Read a MemoryAutoscaler, apply defaults and check it; every problem names its key."""
    metadata = obj.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "") if isinstance(metadata, Mapping) else ""
    name = str(metadata.get("name") or "") if isinstance(metadata, Mapping) else ""
    try:
        spec = MemoryAutoscalerObject.model_validate(obj).spec
    except ValidationError as error:
        return ParsedMemory(namespace, name, obj, None, tuple(validation_problems(error)))
    problems = []
    ref = spec.scale_target_ref
    if not ref.kind or not ref.name:
        problems.append("spec.scaleTargetRef: kind and name are required")
    minimum = DEFAULT_MIN_REPLICAS if spec.min_replicas is None else spec.min_replicas
    maximum = spec.max_replicas
    if minimum < 1:
        problems.append(f"spec.minReplicas: must be at least 1, not {minimum}")
    if maximum is None:
        problems.append("spec.maxReplicas: required")
    elif maximum < minimum:
        problems.append(f"spec.maxReplicas: must be at least minReplicas ({minimum}), "
                        f"not {maximum}")
    target = spec.target_utilization_percentage
    if target is None:
        problems.append("spec.targetUtilizationPercentage: required")
    elif not 1 <= target <= 100:
        problems.append(f"spec.targetUtilizationPercentage: must be 1..100, not {target}")
    window = (DEFAULT_SCALE_WINDOW_SECONDS if spec.scale_window_seconds is None
              else spec.scale_window_seconds)
    if window < 0:
        problems.append(f"spec.scaleWindowSeconds: must be at least 0, not {window}")
    if problems or maximum is None or target is None:
        return ParsedMemory(namespace, name, obj, None, tuple(problems))
    return ParsedMemory(namespace, name, obj,
                        MemoryRules(ref, minimum, maximum, target, window), ())


@dataclass(frozen=True)
class MemoryUtilization:
    """Working set over limits of the counted pods, and who was left out."""

    working_set_bytes: float
    limit_bytes: int
    counted: tuple[str, ...]
    not_running: tuple[str, ...]
    without_metrics: tuple[str, ...]
    without_limit: tuple[str, ...]

    @property
    def percent(self) -> float | None:
        if not self.counted or self.limit_bytes <= 0:
            return None
        return 100.0 * self.working_set_bytes / self.limit_bytes


def memory_utilization(pods: Sequence[PodState],
                       working_set_bytes: Mapping[str, float]) -> MemoryUtilization:
    """Sum over running pods with metrics; pods without a memory limit are named apart."""
    counted, not_running, without_metrics, without_limit = [], [], [], []
    used = 0.0
    limits = 0
    for pod in sorted(pods, key=lambda p: p.name):
        if pod.phase != "Running" or pod.deleting:
            not_running.append(pod.name)
            continue
        usage = working_set_bytes.get(pod.name)
        if usage is None or math.isnan(usage):
            without_metrics.append(pod.name)
            continue
        if pod.memory_limit_bytes is None:
            without_limit.append(pod.name)
            continue
        counted.append(pod.name)
        used += usage
        limits += pod.memory_limit_bytes
    return MemoryUtilization(used, limits, tuple(counted), tuple(not_running),
                             tuple(without_metrics), tuple(without_limit))


def proposed_replicas(current: int, utilization_percent: float, target_percent: int
                      ) -> tuple[int, float]:
    """(proposal, ratio): ceil(ratio × current) outside the band, else the current count."""
    ratio = utilization_percent / target_percent
    if ratio < SCALE_DOWN_BELOW or ratio > SCALE_UP_ABOVE:
        return math.ceil(ratio * current), ratio
    return current, ratio


def _decision(parsed: ParsedMemory, conditions: Conditions, reason: str, *,
              current: int | None = None, ready: int | None = None, value: float | None = None,
              proposal: int | None = None, desired: int | None = None, rescale: bool = False,
              valid: bool = True, rules: MemoryRules | None = None,
              fields: Mapping[str, Any] | None = None) -> Decision:
    old = parsed.status
    status = {k: v for k, v in old.items() if k != "conditions"}
    status.update({k: v for k, v in (fields or {}).items() if v is not None})
    if current is not None:
        status["currentReplicas"] = current
    status["conditions"] = conditions.to_json()
    return Decision(
        KIND, parsed.namespace, parsed.name, parsed.ref_field("kind"), parsed.ref_field("name"), current,
        ready, value, proposal, desired if desired is not None else current, rescale, False,
        reason, status, status != dict(old), valid, parsed.problems,
        min_replicas=rules.min_replicas if rules else None,
        max_replicas=rules.max_replicas if rules else None,
        annotations=parsed.annotations, previous_status=old)


def decide_memory(parsed: ParsedMemory, target: TargetScale | str | None,
                  pods: Sequence[PodState], working_set_bytes: Mapping[str, float] | str,
                  now: float) -> Decision:
    """One cycle of the memory autoscaler; `working_set_bytes` is per pod, or why it failed."""
    conditions = Conditions.of(parsed.status.get("conditions"), now)
    rules = parsed.rules
    if rules is None:
        message = "; ".join(parsed.problems)
        conditions.set(ABLE_TO_SCALE, False, "FailedSpecCheck",
                       f"Invalid MemoryAutoscaler specification: {message}")
        return _decision(parsed, conditions, f"invalid spec: {message}", valid=False)
    if target is None or isinstance(target, str):
        why = target or "scale not found"
        conditions.set(ABLE_TO_SCALE, False, "FailedGetScale", why)
        return _decision(parsed, conditions, f"cannot read the target's scale: {why}",
                         rules=rules)
    current = target.spec_replicas
    conditions.set(ABLE_TO_SCALE, True, "SucceededGetScale",
                   "the controller was able to get the target's current scale")
    if current == 0:
        conditions.set(SCALING_ACTIVE, False, "ScalingDisabled",
                       "scaling is disabled since the replica count of the target is zero")
        return _decision(parsed, conditions, "not scaling: the target is scaled to zero",
                         current=0, rules=rules)
    if isinstance(working_set_bytes, str):
        conditions.set(SCALING_ACTIVE, False, "FailedGetResourceMetric",
                       f"unable to get memory metrics: {working_set_bytes}")
        return _decision(parsed, conditions, f"holding: {working_set_bytes}", current=current,
                         rules=rules)
    usage = memory_utilization(pods, working_set_bytes)
    counts = {"podsCounted": len(usage.counted), "podsNotRunning": len(usage.not_running),
              "podsWithoutMetrics": len(usage.without_metrics)}
    if usage.without_limit:
        names = ", ".join(usage.without_limit)
        conditions.set(SCALING_ACTIVE, False, "MissingMemoryLimit",
                       f"pods without a memory limit, utilization is undefined: {names}")
        return _decision(parsed, conditions, f"holding: pods without a memory limit: {names}",
                         current=current, rules=rules, fields=counts)
    percent = usage.percent
    if percent is None:
        conditions.set(SCALING_ACTIVE, False, "FailedGetResourceMetric",
                       "no running pod of the target has memory metrics")
        return _decision(parsed, conditions, "holding: no running pod has memory metrics",
                         current=current, rules=rules, fields=counts)
    conditions.set(SCALING_ACTIVE, True, "ValidMetricFound",
                   f"memory utilization {percent:.1f}% of limits over {len(usage.counted)} pods")
    proposal, ratio = proposed_replicas(current, percent, rules.target_utilization_percentage)
    desired = min(max(proposal, rules.min_replicas), rules.max_replicas)
    if desired != proposal:
        condition = "TooFewReplicas" if desired > proposal else "TooManyReplicas"
        conditions.set(SCALING_LIMITED, True, condition,
                       f"the desired replica count {proposal} is outside "
                       f"[{rules.min_replicas}, {rules.max_replicas}]")
    else:
        conditions.set(SCALING_LIMITED, False, "DesiredWithinRange",
                       "the desired count is within the acceptable range")
    fields: dict[str, Any] = {**counts, "currentUtilizationPercentage": math.floor(percent)}
    value = round(percent, 3)
    last = parse_time(parsed.status.get("lastScaleTime"))
    in_range = rules.min_replicas <= current <= rules.max_replicas
    if desired == current:
        fields["desiredReplicas"] = current
        why = (f"utilization {percent:.1f}% is within 10% of the target "
               f"{rules.target_utilization_percentage}% (ratio {ratio:.2f})"
               if proposal == current else
               f"the count is already at its bound ({current})")
        return _decision(parsed, conditions, f"not scaling: {why}", current=current,
                         ready=len(usage.counted), value=value, proposal=proposal, rules=rules,
                         fields=fields)
    if in_range and last is not None and now - last < rules.scale_window_seconds:
        left = rules.scale_window_seconds - (now - last)
        conditions.set(ABLE_TO_SCALE, False, "BackoffWindow",
                       "the time since the previous scale is still within scaleWindowSeconds")
        fields["desiredReplicas"] = current
        return _decision(parsed, conditions,
                         f"not scaling: within the scale window ({left:.0f} s left)",
                         current=current, ready=len(usage.counted), value=value,
                         proposal=proposal, rules=rules, fields=fields)
    # A count outside [min, max] is corrected at once, window or not (as the WPA does).
    reason = (f"memory utilization {percent:.1f}% vs target "
              f"{rules.target_utilization_percentage}% (ratio {ratio:.2f}): "
              f"scale from {current} to {desired}")
    conditions.set(ABLE_TO_SCALE, True, "SuccessfulScale",
                   f"the controller was able to update the target scale to {desired}")
    fields.update(desiredReplicas=desired, lastScaleTime=rfc3339(now))
    return _decision(parsed, conditions, reason, current=current, ready=len(usage.counted),
                     value=value, proposal=proposal, desired=desired, rescale=True, rules=rules,
                     fields=fields)


def memory_scale_failed(decision: Decision, error: str, now: float) -> Decision:
    """The `/scale` write failed: say so, and keep the previous lastScaleTime."""
    previous = decision.previous_status
    conditions = Conditions.of(decision.status.get("conditions"), now)
    conditions.set(ABLE_TO_SCALE, False, "FailedScale",
                   f"the controller was unable to update the target scale: {error}")
    status = {**{k: v for k, v in decision.status.items()
                 if k not in ("lastScaleTime", "desiredReplicas")},
              **{k: previous[k] for k in ("lastScaleTime", "desiredReplicas") if k in previous},
              "conditions": conditions.to_json()}
    return replace(decision, rescale=False, desired_replicas=decision.current_replicas,
                   reason=f"scale failed: {error}", status=status,
                   status_changed=status != dict(previous))
