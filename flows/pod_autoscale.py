"""The `pod-autoscale` flow: one cycle of every WatermarkPodAutoscaler and MemoryAutoscaler.

Reads like the controllers' reconcile loop: list the autoscaler objects, and for each one read
its target's `/scale` and pods, read its metrics from Prometheus, decide (pure), scale the
target through `/scale`, and write the decision back to the object's status, where all the
state lives.  The WPA's wpa.md §7 gauges are exported from a registry of our own, every series
rewritten each cycle (1 or 0) and the series of vanished objects removed.
"""

from __future__ import annotations

import logging
import os
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prefect import flow, get_run_logger

from flows.autoscale import Runner, run_as_task
from tasks import memory_usage, watermark
from tasks.errors import InputError
from tasks.memory_usage import decide_memory, memory_scale_failed, parse_memory_autoscaler
from tasks.prometheus import (
    DEFAULT_RATE_WINDOW,
    CycleCache,
    MetricsSource,
    MetricUnavailable,
    PrometheusMetrics,
    read_watermark_metrics,
)
from tasks.retry import step
from tasks.watermark import (
    Decision,
    LabelSelector,
    MetricReading,
    MonitorReading,
    ParsedWatermark,
    PodState,
    TargetScale,
    decide_watermark,
    lifecycle_control,
    log_attributes,
    parse_watermark,
    pod_state,
    scale_failed,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from tasks.kube import KubeClient

Logger = logging.Logger | logging.LoggerAdapter[Any]
log = logging.getLogger("kube_elevator.pod_autoscale")


# --- steps ------------------------------------------------------------------------------------------


@step
def list_autoscalers(kube: KubeClient, group: str, version: str, plural: str,
                     namespace: str | None) -> list[dict[str, Any]]:
    """Every object of one autoscaler CRD; none when the CRD is not installed."""
    from kubernetes.client.exceptions import ApiException

    try:
        return kube.list_custom_objects(group, version, plural, namespace)
    except ApiException as error:
        if error.status == 404:
            return []
        raise


@step
def read_target_scale(kube: KubeClient, namespace: str, kind: str, name: str
                      ) -> TargetScale | str:
    """The target's `/scale`, or why it cannot be read (missing, unsupported kind)."""
    try:
        scale = kube.read_scale(kind, namespace, name)
    except InputError as error:
        return "; ".join(error.problems)
    return scale if scale is not None else f"scale not found: {kind} {namespace}/{name}"


@step
def list_target_pods(kube: KubeClient, namespace: str, selector: str) -> list[PodState]:
    """The pods the target's scale selector picks (§5 filters them further)."""
    return [pod_state(obj) for obj in kube.list_pod_objects(namespace, selector)]


@step
def read_wpa_metrics(kube: KubeClient, source: MetricsSource, parsed: ParsedWatermark
                     ) -> list[MetricReading]:
    """One reading per metric, from Prometheus (Resource metrics: the pods the selector picks)."""

    def selected(selector: LabelSelector) -> list[str]:
        objects = kube.list_pod_objects(parsed.namespace, selector.to_query())
        return [str((obj.get("metadata") or {}).get("name", "")) for obj in objects]

    return read_watermark_metrics(parsed, source, selected)


@step
def read_memory_usage(source: MetricsSource, namespace: str) -> dict[str, float] | str:
    """Working set per pod of the namespace, or why it is unavailable."""
    try:
        return source.pod_usage(namespace, "memory")
    except MetricUnavailable as error:
        return str(error)


@step
def read_datadog_monitor(kube: KubeClient, namespace: str, name: str) -> MonitorReading:
    """The WPA's DatadogMonitor (same name and namespace), for lifecycle control (§2.2)."""
    obj = kube.read_custom_object(watermark.GROUP, watermark.VERSION, watermark.MONITOR_PLURAL,
                                  namespace, name)
    if obj is None:
        return MonitorReading(False)
    state = (obj.get("status") or {}).get("monitorState")
    return MonitorReading(True, state if isinstance(state, str) else None)


@step
def scale_target(kube: KubeClient, namespace: str, kind: str, name: str, replicas: int) -> int:
    """Set the target's replicas through `/scale` (absolute, so a retry is harmless)."""
    return kube.patch_scale(kind, namespace, name, replicas)


@step
def write_status(kube: KubeClient, group: str, version: str, plural: str,
                 obj: dict[str, Any], status: dict[str, Any]) -> bool:
    """Write the new status at the version read; False if the object changed meanwhile."""
    return kube.replace_custom_object_status(group, version, plural, obj, status) is not None


decide_wpa = step(decide_watermark)
decide_memory_autoscaler = step(decide_memory)


# --- one cycle ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AutoscalerResult:
    """One autoscaler's cycle: the decision and what was actually done."""

    decision: Decision
    scaled_from: int | None = None  # set when /scale was written
    status_written: bool = False
    error: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)  # the object's own labels

    @property
    def scaled(self) -> bool:
        return self.scaled_from is not None

    def to_json(self) -> dict[str, Any]:
        return {**self.decision.to_json(), "scaled": self.scaled,
                "status_written": self.status_written, "error": self.error or None}


def _write_back(run: Runner, kube: KubeClient, crd: tuple[str, str, str], obj: dict[str, Any],
                decision: Decision, dry_run: bool,
                on_scale_failure: Callable[[Decision, str, float], Decision], now: float
                ) -> AutoscalerResult:
    """Act on a decision: scale (unless dry run), then write the status if it changed."""
    from kubernetes.client.exceptions import ApiException

    if dry_run:
        return AutoscalerResult(decision)
    scaled_from = None
    target = decision.scale_to
    if target is not None and decision.target_kind and decision.target_name:
        try:
            run(scale_target, kube, decision.namespace, decision.target_kind,
                decision.target_name, target)
            scaled_from = decision.current_replicas
        except ApiException as error:
            decision = on_scale_failure(decision, f"{error.status} {error.reason}", now)
    written = False
    if decision.status_changed:
        written = bool(run(write_status, kube, *crd, obj, dict(decision.status)))
    return AutoscalerResult(decision, scaled_from, written)


def autoscale_watermark(run: Runner, kube: KubeClient, source: MetricsSource,
                        obj: dict[str, Any], now: float, dry_run: bool) -> AutoscalerResult:
    """One WPA: validate, read scale, pods and metrics, decide, act."""
    parsed = parse_watermark(obj)
    target: TargetScale | str | None = None
    pods: list[PodState] = []
    readings: list[MetricReading] = []
    monitor: MonitorReading | None = None
    if parsed.rules is not None and lifecycle_control(parsed.annotations) is True:
        monitor = run(read_datadog_monitor, kube, parsed.namespace, parsed.name)
    if parsed.rules is not None and (monitor is None or monitor.state == "OK"):
        ref = parsed.rules.target
        target = run(read_target_scale, kube, parsed.namespace, ref.kind, ref.name)
        if isinstance(target, TargetScale) and target.spec_replicas > 0:
            pods = run(list_target_pods, kube, parsed.namespace, target.selector)
            readings = run(read_wpa_metrics, kube, source, parsed)
    decision = run(decide_wpa, parsed, target, pods, readings, now, monitor)
    return _write_back(run, kube, (watermark.GROUP, watermark.VERSION, watermark.PLURAL), obj,
                       decision, dry_run, scale_failed, now)


def autoscale_memory(run: Runner, kube: KubeClient, source: MetricsSource,
                     obj: dict[str, Any], now: float, dry_run: bool) -> AutoscalerResult:
    """One MemoryAutoscaler: validate, read scale, pods and working sets, decide, act."""
    parsed = parse_memory_autoscaler(obj)
    target: TargetScale | str | None = None
    pods: list[PodState] = []
    usage: dict[str, float] | str = {}
    if parsed.rules is not None:
        ref = parsed.rules.target
        target = run(read_target_scale, kube, parsed.namespace, ref.kind, ref.name)
        if isinstance(target, TargetScale) and target.spec_replicas > 0:
            pods = run(list_target_pods, kube, parsed.namespace, target.selector)
            usage = run(read_memory_usage, source, parsed.namespace)
    decision = run(decide_memory_autoscaler, parsed, target, pods, usage, now)
    return _write_back(run, kube, (memory_usage.GROUP, memory_usage.VERSION,
                                   memory_usage.PLURAL), obj, decision, dry_run,
                       memory_scale_failed, now)


def _failed(kind: str, obj: dict[str, Any], error: BaseException) -> AutoscalerResult:
    metadata = obj.get("metadata") or {}
    decision = Decision(kind, str(metadata.get("namespace", "")), str(metadata.get("name", "")),
                        "", "", None, None, None, None, None, False, False,
                        f"the cycle failed: {type(error).__name__}: {error}",
                        dict(obj.get("status") or {}), False)
    return AutoscalerResult(decision, error=f"{type(error).__name__}: {error}")


def report(result: AutoscalerResult, logger: Logger) -> None:
    """A log line per autoscaler; invalid objects and holds are warnings."""
    decision = result.decision
    line = (f"{decision.kind} {decision.namespace}/{decision.name}: "
            f"{decision.reason}{log_attributes(decision.annotations)}")
    if result.scaled:
        line += f" (scaled {decision.target_kind} {decision.target_name} from " \
                f"{result.scaled_from} to {decision.desired_replicas})"
    if result.error:
        logger.error(line)
    elif not decision.valid or decision.metric_failed:
        logger.warning(line)
    else:
        logger.info(line)


def cycle(run: Runner, kube: KubeClient, source: MetricsSource, now: float,
          dry_run: bool = False, namespace: str | None = None,
          logger: Logger = log) -> list[AutoscalerResult]:
    """Every WPA, then every MemoryAutoscaler; one object's failure does not stop the others."""
    metrics = CycleCache(source)
    results = []
    kinds: list[tuple[str, tuple[str, str, str], Any]] = [
        (watermark.KIND, (watermark.GROUP, watermark.VERSION, watermark.PLURAL),
         autoscale_watermark),
        (memory_usage.KIND, (memory_usage.GROUP, memory_usage.VERSION, memory_usage.PLURAL),
         autoscale_memory),
    ]
    for kind, crd, autoscale_one in kinds:
        for obj in run(list_autoscalers, kube, *crd, namespace):
            try:
                result = autoscale_one(run, kube, metrics, obj, now, dry_run)
            except Exception as error:
                result = _failed(kind, obj, error)
            labels = (obj.get("metadata") or {}).get("labels") or {}
            result = replace(result, labels=dict(labels))
            report(result, logger)
            results.append(result)
    return results


# --- wpa.md §7 gauges -----------------------------------------------------------------------------

BASE_LABELS = ("wpa_name", "wpa_namespace", "resource_namespace", "resource_name",
               "resource_kind", "target_name", "namespace", "dry_run")


def _label_name(key: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


class WatermarkMetrics:
    """The WPA controller's metrics (wpa.md §7), on a registry of their own."""

    def __init__(self, registry: CollectorRegistry | None = None,
                 labels_as_tags: Sequence[str] | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        self.registry = registry or CollectorRegistry()
        if labels_as_tags is None:
            labels_as_tags = re.split(r"[\s,]+", os.environ.get("DD_LABELS_AS_TAGS", "").strip())
        self.labels_as_tags = [key for key in labels_as_tags if key]
        metric = (*BASE_LABELS, "metric_name")

        def gauge(name: str, doc: str, labels: Sequence[str]) -> Gauge:
            return Gauge(f"wpa_controller_{name}", doc, list(labels), registry=self.registry)

        self.gauges: dict[str, Gauge] = {
            "value": gauge("value", "Usage after averaging (milli-units)", metric),
            "high_watermark": gauge("high_watermark", "High watermark (milli-units)", metric),
            "low_watermark": gauge("low_watermark", "Low watermark (milli-units)", metric),
            "high_watermak": gauge("high_watermak", "Legacy misspelled high watermark", metric),
            "low_watermak": gauge("low_watermak", "Legacy misspelled low watermark", metric),
            "replicas_scaling_proposal": gauge(
                "replicas_scaling_proposal", "Per-metric proposal before limits", metric),
            "replicas_scaling_effective": gauge(
                "replicas_scaling_effective", "Replicas targeted this cycle", BASE_LABELS),
            "restricted_scaling": gauge("restricted_scaling", "1 when that restriction applied",
                                        (*BASE_LABELS, "reason")),
            "transition_countdown": gauge(
                "transition_countdown", "Seconds left in the forbidden window",
                (*BASE_LABELS, "transition")),
            "min_replicas": gauge("min_replicas", "spec.minReplicas", BASE_LABELS),
            "max_replicas": gauge("max_replicas", "spec.maxReplicas", BASE_LABELS),
            "dry_run": gauge("dry_run", "1 in dry run", BASE_LABELS),
            "scaling_active": gauge("scaling_active", "1 if ScalingActive is True", BASE_LABELS),
            "conditions": gauge("conditions", "Condition status, 0/1",
                                (*BASE_LABELS, "condition")),
            "lifecycle_control_status": gauge(
                "lifecycle_control_status", "1 while a DatadogMonitor blocks the WPA, 0 if OK",
                ("wpa_name", "wpa_namespace", "lifecycle_status", "monitor_name",
                 "monitor_namespace", "dry_run")),
            "labels_info": gauge("labels_info", "Join helper, always 1", (
                *[_label_name(k) for k in self.labels_as_tags], "wpa_name", "wpa_namespace",
                "resource_namespace", "namespace", "dry_run")),
        }
        self.upscale = Counter("wpa_controller_upscale_replicas", "Replicas added by scaling",
                               list(BASE_LABELS), registry=self.registry)
        self.downscale = Counter("wpa_controller_downscale_replicas",
                                 "Replicas removed by scaling", list(BASE_LABELS),
                                 registry=self.registry)
        self._last: dict[str, set[tuple[str, ...]]] = {}

    def export(self, results: Sequence[AutoscalerResult]) -> None:
        """Rewrite every series for this cycle's WPAs; drop those of WPAs no longer seen."""
        fresh: dict[str, dict[tuple[str, ...], float]] = defaultdict(dict)
        for result in results:
            decision = result.decision
            if decision.kind != watermark.KIND:
                continue
            dry = "true" if decision.dry_run else "false"
            base = (decision.name, decision.namespace, decision.namespace, decision.target_name,
                    decision.target_kind, decision.target_name, decision.namespace, dry)
            conditions = {c.get("type"): c.get("status") == "True"
                          for c in decision.conditions()}
            fresh["conditions"][(*base, "able_to_scale")] = float(
                conditions.get(watermark.ABLE_TO_SCALE, False))
            fresh["conditions"][(*base, "scaling_limited")] = float(
                conditions.get(watermark.SCALING_LIMITED, False))
            fresh["conditions"][(*base, "scaling_blocked")] = float(
                conditions.get("ScalingBlocked", False))
            fresh["scaling_active"][base] = float(conditions.get(watermark.SCALING_ACTIVE, False))
            tags = result.labels
            if decision.lifecycle_blocked is not None:
                fresh["lifecycle_control_status"][(
                    decision.name, decision.namespace, "blocked", decision.name,
                    decision.namespace, dry)] = 1.0 if decision.lifecycle_blocked else 0.0
            fresh["labels_info"][(*[tags.get(k, "") for k in self.labels_as_tags],
                                  decision.name, decision.namespace, decision.namespace,
                                  decision.namespace, dry)] = 1.0
            if not decision.valid or decision.min_replicas is None:
                continue
            fresh["min_replicas"][base] = float(decision.min_replicas)
            fresh["max_replicas"][base] = float(decision.max_replicas or 0)
            fresh["dry_run"][base] = 1.0 if decision.dry_run else 0.0
            if decision.current_replicas is None:
                continue
            fresh["replicas_scaling_effective"][base] = float(
                decision.desired_replicas if decision.desired_replicas is not None
                else decision.current_replicas)
            fresh["transition_countdown"][(*base, "upscale")] = decision.upscale_countdown
            fresh["transition_countdown"][(*base, "downscale")] = decision.downscale_countdown
            # wpa.md §6: a failed fetch drops value, proposal and restricted_scaling.
            for reason, applied in decision.restricted.items():
                fresh["restricted_scaling"][(*base, reason)] = 1.0 if applied else 0.0
            for gauge in decision.metrics:
                labels = (*base, gauge.name)
                fresh["value"][labels] = gauge.value_milli
                for key in ("high_watermark", "high_watermak"):
                    fresh[key][labels] = float(gauge.high_milli)
                for key in ("low_watermark", "low_watermak"):
                    fresh[key][labels] = float(gauge.low_milli)
                fresh["replicas_scaling_proposal"][labels] = float(gauge.proposal)
            if result.scaled and result.scaled_from is not None \
                    and decision.desired_replicas is not None:
                delta = decision.desired_replicas - result.scaled_from
                if delta > 0:
                    self.upscale.labels(*base).inc(delta)
                elif delta < 0:
                    self.downscale.labels(*base).inc(-delta)
        for name, gauge_metric in self.gauges.items():
            current = fresh.get(name, {})
            for stale in self._last.get(name, set()) - current.keys():
                gauge_metric.remove(*stale)
            for series, value in current.items():
                gauge_metric.labels(*series).set(value)
        self._last = {name: set(values) for name, values in fresh.items()}


_METRICS: WatermarkMetrics | None = None


def controller_metrics() -> WatermarkMetrics:
    """The process' exporter, served by `elevator pods run --metrics-port`."""
    global _METRICS
    if _METRICS is None:
        _METRICS = WatermarkMetrics()
    return _METRICS


@flow(name="pod-autoscale", log_prints=False)
def pod_autoscale(
    prometheus_url: str,
    kubeconfig: str | None = None,
    now: datetime | None = None,
    dry_run: bool = False,
    namespace: str | None = None,
    rate_window: str = DEFAULT_RATE_WINDOW,
) -> list[dict[str, Any]]:
    """One cycle of every WatermarkPodAutoscaler and MemoryAutoscaler in the cluster.

    `now` (default: the current time) is the clock of forbidden windows and delays;
    `dry_run` decides and reports without scaling or writing status.
    """
    from tasks.kube import KubeClient

    kube = KubeClient.from_config(kubeconfig)
    source = PrometheusMetrics(prometheus_url, rate_window=rate_window)
    moment = (now or datetime.now(UTC)).timestamp()
    results = cycle(run_as_task, kube, source, moment, dry_run, namespace, get_run_logger())
    controller_metrics().export(results)
    return [result.to_json() for result in results]
