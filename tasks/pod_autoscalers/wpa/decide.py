"""The Watermark Pod Autoscaler (DataDog's `datadoghq.com/v1alpha1` CRD), as pure functions.

Why a band: a WPA scales up only above a high watermark and down only below a low one, at most
by its limit factors per event and never inside its forbidden windows, so a noisy metric does
not make the target flap.  This module holds the object model (the real CRD's schema, so
existing objects work unchanged), its defaults and validation (wpa.md §2), and the decision of
wpa.md §3-6: usage, per-metric proposals, velocity limits, forbidden windows and delays,
readiness, dry run and convergence.  The clock is an input; state lives only in the object's
`status` (lastScaleTime and condition transition times), which `decide_watermark` reads and
returns updated.  It also holds what the memory autoscaler shares with it: pod and scale
records, label selectors and HPA-style conditions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from kube_elevator.tasks.core.timefmt import parse_time, rfc3339
from kube_elevator.tasks.core.workload import PodState, TargetScale
from kube_elevator.tasks.pod_autoscalers.wpa.crd import (
    ABLE_TO_SCALE,
    ABOVE_HIGH_WATERMARK,
    BELOW_LOW_WATERMARK,
    CONVERGE_TO_WATERMARK,
    DRY_RUN,
    KIND,
    LOGS_ATTRIBUTES_ANNOTATION,
    SCALING_ACTIVE,
    SCALING_BLOCKED,
    SCALING_LIMITED,
    Conditions,
    format_milli,
)
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
    Proposal,
    external_proposal,
    resource_proposal,
)
from kube_elevator.tasks.pod_autoscalers.wpa.validate import ParsedWatermark, WatermarkRules

# --- §4.4: the reconcile decision ---------------------------------------------------------------


@dataclass(frozen=True)
class MetricGauge:
    """Per-metric figures §7 exports."""

    name: str
    value_milli: float
    high_milli: int
    low_milli: int
    proposal: int


@dataclass(frozen=True)
class Decision:
    """One autoscaler's cycle: what to do to the target and the status to write back.

    `scale_to` is set when the target's `/scale` must be written (never in dry run);
    `status` is the whole new status, `status_changed` whether it differs from the old one.
    """

    kind: str
    namespace: str
    name: str
    target_kind: str
    target_name: str
    current_replicas: int | None
    ready_replicas: int | None
    value: float | None  # the winning metric, in its own unit
    proposal: int | None
    desired_replicas: int | None
    rescale: bool
    dry_run: bool
    reason: str
    status: Mapping[str, Any]
    status_changed: bool
    valid: bool = True
    problems: tuple[str, ...] = ()
    metrics: tuple[MetricGauge, ...] = ()
    min_replicas: int | None = None
    max_replicas: int | None = None
    restricted: Mapping[str, bool] = field(default_factory=dict)
    upscale_countdown: float = 0.0
    downscale_countdown: float = 0.0
    metric_failed: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)
    previous_status: Mapping[str, Any] = field(default_factory=dict)
    lifecycle_blocked: bool | None = None  # None: lifecycle control is off

    @property
    def scale_to(self) -> int | None:
        return self.desired_replicas if self.rescale and not self.dry_run else None

    def conditions(self) -> list[dict[str, Any]]:
        return list(self.status.get("conditions") or [])

    def condition_true(self, kind: str) -> bool:
        return any(c.get("type") == kind and c.get("status") == "True"
                   for c in self.conditions())

    def to_json(self) -> dict[str, Any]:
        """The `elevator pods plan --output json` entry."""
        return {
            "kind": self.kind, "namespace": self.namespace, "name": self.name,
            "current_replicas": self.current_replicas, "ready_replicas": self.ready_replicas,
            "value": self.value, "proposal": self.proposal,
            "desired_replicas": self.desired_replicas, "reason": self.reason,
            "conditions": [{"type": c.get("type"), "status": c.get("status"),
                            "reason": c.get("reason", "")} for c in self.conditions()],
        }


def _status(old: Mapping[str, Any], conditions: Conditions, **fields: Any) -> dict[str, Any]:
    status = {k: v for k, v in old.items() if k not in ("conditions",)}
    status.update({k: v for k, v in fields.items() if v is not None})
    # DataDog's CRD requires both (status.required); upstream's int32 fields have no omitempty,
    # so a WPA that never scaled says 0. Without them a real API server answers 422, and the
    # conditions saying why the WPA is stuck are never recorded.
    for required in ("currentReplicas", "desiredReplicas"):
        status.setdefault(required, 0)
    status["conditions"] = conditions.to_json()
    if conditions.last_type:
        status["lastConditionType"] = conditions.last_type
        status["lastConditionState"] = conditions.last_status
    return status


def _metric_status(proposal: Proposal) -> dict[str, Any]:
    """An autoscaling/v2beta1 MetricStatus, as upstream writes it."""
    metric = proposal.metric
    value = format_milli(proposal.utilization_milli)
    if metric.type == "External":
        return {"type": "External", "external": {
            "metricName": metric.name,
            "metricSelector": metric.selector.model_dump(by_alias=True, exclude_none=True),
            "currentValue": value}}
    return {"type": "Resource", "resource": {"name": metric.name, "currentAverageValue": value}}


def _hold(parsed: ParsedWatermark, conditions: Conditions, reason: str, *,
          current: int | None = None, valid: bool = True, rules: WatermarkRules | None = None,
          metric_failed: bool = False, dry_run: bool = False,
          blocked: bool | None = None, running: int | None = None) -> Decision:
    """No scaling this cycle; the status records why, and the target's running count
    (`running`, its Scale.Status.Replicas) when known."""
    old = parsed.status
    status = _status(old, conditions, currentReplicas=running)
    return Decision(
        KIND, parsed.namespace, parsed.name, parsed.target_kind, parsed.target_name,
        current, None, None, None, current, False, dry_run, reason, status,
        status != dict(old), valid, parsed.problems,
        min_replicas=rules.min_replicas if rules else None,
        max_replicas=rules.max_replicas if rules else None,
        metric_failed=metric_failed, annotations=parsed.annotations, previous_status=old,
        lifecycle_blocked=blocked)


def decide_watermark(parsed: ParsedWatermark, target: TargetScale | str | None,
                     pods: Sequence[PodState], readings: Sequence[MetricReading],
                     now: float, monitor: MonitorReading | None = None) -> Decision:
    """§4.4 reconcileWPA for one WPA: validate, read, propose, limit, gate, override.

    `target` is the `/scale` read (a string says why it could not be read); `readings` has
    one entry per `rules.metrics`; `monitor` is the DatadogMonitor when lifecycle control is
    on (§2.2).  Pure: the caller scales and writes the returned status.
    """
    conditions = Conditions.of(parsed.status.get("conditions"), now)
    # Upstream defaults ScalingActive to False each reconcile; success sets it True below.
    conditions.set(SCALING_ACTIVE, False, "FailedProcessWPA",
                   "Error happened while processing the WPA")
    rules = parsed.rules
    if rules is None:
        message = "; ".join(parsed.problems)
        conditions.set(ABLE_TO_SCALE, False, "FailedSpecCheck",
                       f"Invalid WPA specification: {message}")
        return _hold(parsed, conditions, f"invalid spec: {message}", valid=False)
    blocked: bool | None = None
    control = lifecycle_control(parsed.annotations)
    if isinstance(control, str):  # unparsable: ignored, and said so
        conditions.set(SCALING_BLOCKED, False, "FailedGetDatadogMonitor",
                       f"Lifecycle Control is not correctly enabled: {control}")
    elif control:
        monitor_name = f"{parsed.namespace}/{parsed.name}"
        blocked = True
        if monitor is None or not monitor.found:
            conditions.set(SCALING_BLOCKED, True, "FailedGetDatadogMonitor",
                           f"monitor {monitor_name} not found, blocking the WPA from proceeding")
            return _hold(parsed, conditions, f"blocked: DatadogMonitor {monitor_name} not found",
                         rules=rules, blocked=True)
        if monitor.state != "OK":
            why = (f"monitor {monitor_name} state not found" if monitor.state is None else
                   f"monitor {monitor_name} is in {monitor.state} state")
            conditions.set(SCALING_BLOCKED, True, "DatadogMonitorNotOK",
                           f"{why}, blocking the WPA from proceeding")
            return _hold(parsed, conditions, f"blocked: {why}", rules=rules, blocked=True)
        blocked = False
        conditions.set(SCALING_BLOCKED, False, "DatadogMonitorOK",
                       f"monitor {monitor_name} is in a OK state, allowing the WPA from "
                       "proceeding")
    if target is None or isinstance(target, str):
        why = target or "scale not found"
        conditions.set(ABLE_TO_SCALE, False, "FailedProcessWPA",
                       f"Error happened while processing the WPA: {why}")
        return _hold(parsed, conditions, f"cannot read the target's scale: {why}", rules=rules,
                     blocked=blocked)
    current = target.spec_replicas  # §1: Scale.Spec.Replicas, not Status.Replicas
    if rules.dry_run:
        conditions.set(DRY_RUN, True, "DryRun mode enabled", "Scaling changes won't be applied")
    else:
        conditions.set(DRY_RUN, False, "DryRun mode disabled", "Scaling changes can be applied")
    conditions.set(ABLE_TO_SCALE, True, "SucceededGetScale",
                   "the WPA controller was able to get the target's current scale")
    if target.spec_replicas == 0:
        # §4.4.3: a target scaled to zero disables the WPA; no metric is read for it.
        why = "scaling is disabled since the replica count of the target is zero"
        conditions.set(SCALING_ACTIVE, False, "ScalingDisabled", why)
        hold = _hold(parsed, conditions, f"not scaling: {why}", current=0, rules=rules,
                     dry_run=rules.dry_run, blocked=blocked, running=target.status_replicas)
        return replace(hold, desired_replicas=0)
    if len(readings) != len(rules.metrics):
        raise ValueError(f"{len(rules.metrics)} metrics but {len(readings)} readings")

    # §4.1: each metric independently; any error aborts the cycle (§6).
    proposals: list[Proposal] = []
    for metric, reading in zip(rules.metrics, readings, strict=True):
        try:
            if metric.type == "External":
                proposal = external_proposal(rules, metric, reading, target, pods, now)
            else:
                proposal = resource_proposal(rules, metric, reading, target, pods)
        except MetricError as error:
            if isinstance(error, PodsNotOwned):
                reason = error.condition_reason
            else:
                reason = ("FailedGetExternalMetric" if metric.type == "External"
                          else "FailedGetResourceMetric")
            # Above/BelowWatermark are left as they were: an outage neither starts nor resets
            # the delay clocks (upstream's snapshot also resets them; wpa.md §6 is silent).
            conditions.set(SCALING_ACTIVE, False, reason,
                           f"the WPA was unable to compute the replica count: {error}")
            return _hold(parsed, conditions, f"holding: {error}", current=current, rules=rules,
                         metric_failed=True, dry_run=rules.dry_run,
                         running=target.status_replicas)
        if proposal.converge is not None:
            note = proposal.converge
            conditions.set(CONVERGE_TO_WATERMARK, note.status, note.reason, note.message)
        proposals.append(proposal)
    winner = proposals[0]
    for proposal in proposals[1:]:
        if winner.replicas == 0 or proposal.replicas > winner.replicas:  # ties keep the earlier
            winner = proposal
    above = any(p.position == "above" for p in proposals)
    below = any(p.position == "below" for p in proposals)
    stable = not above and not below
    conditions.set(ABOVE_HIGH_WATERMARK, above, "Value above High Watermark",
                   "Allow upscaling if the value stays over the Watermark")
    conditions.set(BELOW_LOW_WATERMARK, below, "Value above Low Watermark",
                   "Allow downscaling if the value stays under the Watermark")
    conditions.set(SCALING_ACTIVE, True, "ValidMetricFound",
                   "the WPA was able to successfully calculate a replica count from "
                   f"{winner.metric.display_name}")

    desired = winner.replicas
    reason = ""
    if desired > current:
        reason = f"{winner.metric.display_name} above target"
    if desired < current:
        reason = "All metrics below target"
    limited = limit_replicas(current, desired, rules.min_replicas, rules.max_replicas,
                             winner.ready, rules.scale_up_limit_factor_milli,
                             rules.scale_down_limit_factor_milli)
    conditions.set(SCALING_LIMITED, limited.replicas != desired, limited.condition,
                   limited.message)
    desired = limited.replicas
    if stable and desired != current:
        reason = "Metric within watermarks, attempting to scale to converge towards watermark"
    last_scale = parse_time(parsed.status.get("lastScaleTime"))
    gate = scale_gate(rules, last_scale, now, current, desired, conditions, stable)
    rescale = gate.allowed
    why_not = gate.why_not
    metric_statuses: list[dict[str, Any]] | None = [_metric_status(p) for p in proposals]

    # Overrides, first match wins; forced corrections ignore windows and delays (a target
    # scaled to zero, the first override, returned above).
    if current > rules.max_replicas:
        reason, desired, rescale = "Current number of replicas above Spec.MaxReplicas", \
            rules.max_replicas, True
        metric_statuses = None  # upstream keeps the previous currentMetrics
    elif current < rules.min_replicas:
        reason, desired, rescale = "Current number of replicas below Spec.MinReplicas", \
            rules.min_replicas, True
        metric_statuses = None
    elif target.status_replicas == 0:
        # wpa.md §4.4: checked on Status.Replicas although the arithmetic uses Spec.Replicas.
        reason, desired, rescale = "Current number of replicas must be greater than 0", 1, True
        metric_statuses = None

    # The status reports what runs (Scale.Status.Replicas, upstream's setStatus); the
    # arithmetic above used Spec.Replicas (§1).
    status_fields: dict[str, Any] = {"currentReplicas": target.status_replicas}
    if metric_statuses is not None:
        status_fields["currentMetrics"] = metric_statuses
    if rescale:
        conditions.set(ABLE_TO_SCALE, True, "ReadyForScale",
                       "the last scaling time was sufficiently old as to warrant a new scale")
        if not rules.dry_run:
            conditions.set(ABLE_TO_SCALE, True, "SuccessfulScale",
                           f"the WPA controller was able to update the target scale to {desired}")
        # Dry run too: cooldowns are simulated from the recorded lastScaleTime (§4.4.4).
        status_fields.update(desiredReplicas=desired, lastScaleTime=rfc3339(now),
                             scalingEventsCount=int(parsed.status.get("scalingEventsCount")
                                                    or 0) + 1)
        reason = reason or "no previous scale event: the count is written and lastScaleTime set"
        if rules.dry_run:
            reason = f"dry run: would scale to {desired}: {reason}"
    else:
        desired = current
        status_fields["desiredReplicas"] = desired
        reason = f"not scaling: {why_not}" if why_not else "not scaling"
    old = parsed.status
    status = _status(old, conditions, **status_fields)
    return Decision(
        KIND, parsed.namespace, parsed.name, target.kind, target.name, current, winner.ready,
        winner.usage / 1000, winner.replicas, desired, rescale, rules.dry_run, reason, status,
        status != dict(old),
        metrics=tuple(MetricGauge(p.metric.name, p.usage, p.metric.high_milli,
                                  p.metric.low_milli, p.replicas) for p in proposals),
        min_replicas=rules.min_replicas, max_replicas=rules.max_replicas,
        restricted={"within_bounds": stable, "upscale_capping": limited.upscale_capping,
                    "downscale_capping": limited.downscale_capping},
        upscale_countdown=gate.upscale_countdown, downscale_countdown=gate.downscale_countdown,
        annotations=parsed.annotations, previous_status=old, lifecycle_blocked=blocked)


def scale_failed(decision: Decision, error: str, now: float) -> Decision:
    """The `/scale` write failed: AbleToScale=False FailedScale; only currentReplicas is
    recorded (setCurrentReplicasInStatus), so lastScaleTime is not stamped."""
    previous = decision.previous_status
    conditions = Conditions.of(decision.status.get("conditions"), now)
    conditions.set(ABLE_TO_SCALE, False, "FailedScale",
                   f"the WPA controller was unable to update the target scale: {error}")
    status = _status(previous, conditions, currentReplicas=decision.status.get(
        "currentReplicas", decision.current_replicas))
    return replace(decision, rescale=False, desired_replicas=decision.current_replicas,
                   reason=f"scale failed: {error}", status=status,
                   status_changed=status != dict(previous))


def log_attributes(annotations: Mapping[str, str]) -> str:
    """§2.2 `wpa.datadoghq.com/logs-attributes`: ` key=value` pairs for every log line."""
    raw = annotations.get(LOGS_ATTRIBUTES_ANNOTATION)
    if not raw:
        return ""
    try:
        pairs = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(pairs, dict):
        return ""
    return "".join(f" {key}={value}" for key, value in sorted(pairs.items()))
