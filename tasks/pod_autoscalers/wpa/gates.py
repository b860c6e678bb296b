"""What may stop or bound a scale: velocity limits and min/max (§4.2), forbidden windows and delays
(§4.5), lifecycle control through a DatadogMonitor (§2.2)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from kube_elevator.tasks.core.timefmt import parse_time
from kube_elevator.tasks.pod_autoscalers.wpa.crd import (
    ABLE_TO_SCALE,
    ABOVE_HIGH_WATERMARK,
    BELOW_LOW_WATERMARK,
    DESIRED_WITHIN_RANGE,
    LIFECYCLE_CONTROL_ANNOTATION,
    Condition,
    Conditions,
    _int32,
)
from kube_elevator.tasks.pod_autoscalers.wpa.validate import WatermarkRules

# --- §4.2: velocity limits and min/max ----------------------------------------------------------


@dataclass(frozen=True)
class Limited:
    """convertDesiredReplicasWithRules: the allowed count and the ScalingLimited reason."""

    replicas: int
    condition: str
    message: str
    downscale_capping: bool = False
    upscale_capping: bool = False


def _value(milli: int) -> int:
    """Quantity.Value(): rounded up, so a factor in (0, 1) does not disable scaling."""
    return -((-milli) // 1000)


def scale_down_limit(spec_replicas: int, factor_milli: int) -> int:
    if _value(factor_milli) == 0:
        return spec_replicas  # a zero factor disables downscaling
    # The max(1, …) term lets any non-zero factor move at least one replica.
    return _int32(float(spec_replicas) - max(
        1.0, math.floor(float(factor_milli) / 1000 * float(spec_replicas) / 100)))


def scale_up_limit(spec_replicas: int, factor_milli: int) -> int:
    if _value(factor_milli) == 0:
        return spec_replicas  # a zero factor disables upscaling
    return _int32(float(spec_replicas) + max(
        1.0, math.floor(float(factor_milli) / 1000 * float(spec_replicas) / 100)))


def limit_replicas(spec_replicas: int, desired: int, min_replicas: int, max_replicas: int,
                   ready: int, up_factor_milli: int, down_factor_milli: int) -> Limited:
    """§4.2, base = spec: min/max act inside the velocity limits."""
    down_limit = scale_down_limit(spec_replicas, down_factor_milli)
    condition = message = ""
    capped_down = False
    if min_replicas == 0:
        minimum = 1  # the down-limit is not applied at all
    elif desired < down_limit:
        minimum = max(down_limit, min_replicas)
        condition = "ScaleDownLimit"
        message = "the desired replica count is decreasing faster than the maximum scale rate"
        capped_down = True
        if 0 < ready < minimum:
            minimum = spec_replicas  # do not remove ready pods below the limit
    else:
        minimum = min_replicas
        condition = "TooFewReplicas"
        message = "the desired replica count is below the minimum replica count"
    if desired < minimum:
        return Limited(minimum, condition, message, downscale_capping=capped_down)
    up_limit = scale_up_limit(spec_replicas, up_factor_milli)
    if desired > up_limit:
        maximum = min(up_limit, max_replicas)
        condition = "ScaleUpLimit"
        message = "the desired replica count is increasing faster than the maximum scale rate"
        capped_up = True
    else:
        maximum = max_replicas
        condition = "TooManyReplicas"
        message = "the desired replica count is above the maximum replica count"
        capped_up = False
    if desired > maximum:
        return Limited(maximum, condition, message, capped_down, capped_up)
    return Limited(desired, "DesiredWithinRange", DESIRED_WITHIN_RANGE, capped_down, capped_up)


# --- §4.5: forbidden windows and delays ---------------------------------------------------------


@dataclass(frozen=True)
class Gate:
    """shouldScale: whether this change may happen now, and why not."""

    allowed: bool
    upscale_countdown: float = 0.0
    downscale_countdown: float = 0.0
    why_not: str = ""


def _after_delay(backoff: bool, window_name: str, countdown: float, condition: Condition | None,
                 delay: int, stable: bool, now: float) -> tuple[bool, str]:
    """canScaleAfterDelay: the metric must have been out of bounds for `delay` seconds."""
    if delay == 0 or stable:  # off, or converging
        return (not backoff, f"within the {window_name} forbidden window ({countdown:.0f} s left)"
                if backoff else "")
    transition = parse_time(condition.last_transition_time) if condition is not None else None
    elapsed = _int32(now - transition) if transition is not None else 0
    left = delay - elapsed
    if condition is None or condition.status != "True" or left > 0:
        return False, (f"the {window_name} delay needs the value out of bounds for {delay} s "
                       f"({max(left, 0)} s left)")
    return (not backoff, f"within the {window_name} forbidden window ({countdown:.0f} s left)"
            if backoff else "")


def scale_gate(rules: WatermarkRules, last_scale_time: float | None, now: float,
               spec_replicas: int, desired: int, conditions: Conditions, stable: bool) -> Gate:
    """§4.5 shouldScale, with `now` the cycle's clock (never the metric timestamp)."""
    if last_scale_time is None:
        # The very first cycle may scale (even to the same count) and stamps lastScaleTime.
        return Gate(True)
    down = last_scale_time + rules.downscale_forbidden_window_seconds - now
    up = last_scale_time + rules.upscale_forbidden_window_seconds - now
    backoff_down, backoff_up = down > 0, up > 0
    # A single lastScaleTime for both directions: any scale event restarts both windows.
    if backoff_down:
        conditions.set(ABLE_TO_SCALE, False, "BackoffDownscale",
                       "the time since the previous scale is still within the downscale "
                       "forbidden window")
    if backoff_up:
        if backoff_down:
            conditions.set(ABLE_TO_SCALE, False, "BackoffBoth",
                           "the time since the previous scale is still within both the "
                           "downscale and upscale forbidden windows")
        else:
            conditions.set(ABLE_TO_SCALE, False, "BackoffUpscale",
                           "the time since the previous scale is still within the upscale "
                           "forbidden window")
    countdowns = {"upscale_countdown": max(up, 0.0), "downscale_countdown": max(down, 0.0)}
    if desired > spec_replicas:
        allowed, why = _after_delay(backoff_up, "upscale", up,
                                    conditions.get(ABOVE_HIGH_WATERMARK),
                                    rules.upscale_delay_above_watermark_seconds, stable, now)
        return Gate(allowed, why_not=why, **countdowns)
    if desired < spec_replicas:
        allowed, why = _after_delay(backoff_down, "downscale", down,
                                    conditions.get(BELOW_LOW_WATERMARK),
                                    rules.downscale_delay_below_watermark_seconds, stable, now)
        return Gate(allowed, why_not=why, **countdowns)
    return Gate(False, why_not="the replica count would not change", **countdowns)


# --- §2.2: lifecycle control through a DatadogMonitor ----------------------------------------


_TRUE_WORDS = ("1", "t", "T", "TRUE", "true", "True")
_FALSE_WORDS = ("0", "f", "F", "FALSE", "false", "False")


def lifecycle_control(annotations: Mapping[str, str]) -> bool | str:
    """Whether the annotation enables lifecycle control (Go's strconv.ParseBool), or why not."""
    value = annotations.get(LIFECYCLE_CONTROL_ANNOTATION, "")
    if value in _TRUE_WORDS:
        return True
    if value == "" or value in _FALSE_WORDS:
        return False
    return f'strconv.ParseBool: parsing "{value}": invalid syntax'


@dataclass(frozen=True)
class MonitorReading:
    """The WPA's DatadogMonitor as read: absent, or its `status.monitorState`."""

    found: bool
    state: str | None = None
