"""The `pod-autoscale` flow: one cycle of every WatermarkPodAutoscaler and MemoryAutoscaler.

The cycle is `flows/pod_cycle.py`'s composition, read from the cluster and Prometheus and acted
on through the same client, each step a recorded task run. The WPA's wpa.md §7 gauges are
exported from a registry of our own, every series
rewritten each cycle (1 or 0) and the series of vanished objects removed.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prefect import flow, get_run_logger
from prefect.client.schemas.objects import State

from kube_elevator.flows.pod_cycle import AutoscalerResult, cycle
from kube_elevator.flows.run_state import Results, final_state, tag_run
from kube_elevator.tasks.adapters.prometheus import (
    DEFAULT_RATE_WINDOW,
    MetricUnavailable,
    PrometheusMetrics,
)
from kube_elevator.tasks.core.step import run_as_task
from kube_elevator.tasks.core.words import counted
from kube_elevator.tasks.pod_autoscalers.wpa import crd as watermark
from kube_elevator.tasks.steps.report import DRY_RUN, FAILED, NOTHING, OUTCOME_CHARACTERS

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


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
) -> State[Any]:
    """One cycle of every WatermarkPodAutoscaler and MemoryAutoscaler in the cluster.

    `now` (default: the current time) is the clock of forbidden windows and delays;
    `dry_run` decides and reports without scaling or writing status.

    Example:
        ```python
        state = ke.pod_autoscale("http://prometheus:9090", dry_run=True)   # one cycle, deciding only
        ```
    """
    from kube_elevator.tasks.adapters.kube import KubeClient

    kube = KubeClient.from_config(kubeconfig)
    metrics = PrometheusMetrics(prometheus_url, rate_window=rate_window)
    moment = (now or datetime.now(UTC)).timestamp()
    logger = get_run_logger()
    notes: list[str] = []
    results = cycle(run_as_task, kube, metrics, moment, None if dry_run else kube, namespace,
                    logger, notes)
    if not results:
        # No autoscaler asked Prometheus: ask it here, so its absence is not found only once
        # the first autoscaler is created (with one, each reason says it).
        unreachable = prometheus_problem(metrics)
        if unreachable:
            logger.warning(unreachable)
            notes.append(unreachable)
    controller_metrics().export(results)
    returned: Results = [result.to_json() for result in results]
    # A cycle that raised (not a metric Prometheus lacks, which WPA reports as a condition).
    failures = [(f"{result.decision.kind} {result.decision.namespace}/{result.decision.name}",
                 result.error) for result in results if result.error]
    tag_run(cycle_tags(results, dry_run))
    return final_state("autoscalers", failures, len(results), returned,
                       cycle_line(results), notes)


def prometheus_problem(metrics: PrometheusMetrics) -> str | None:
    """Why the autoscalers could not read Prometheus (unreachable, refusing), or None."""
    try:
        metrics.query("vector(1)")
    except MetricUnavailable as error:
        return f"{error}: no autoscaler could read its metrics"
    return None


def _named(result: AutoscalerResult) -> str:
    decision = result.decision
    return f"{decision.kind} {decision.namespace}/{decision.name}"


def cycle_line(results: Sequence[AutoscalerResult]) -> str:
    """The cycle in one line, for the flow run's state message: each autoscaler that scaled
    (`WatermarkPodAutoscaler shop/web 3 → 5: <reason>`); else `nothing`."""
    parts = []
    for result in results:
        decision = result.decision
        if result.scaled:
            reason = " ".join(decision.reason.split())[:OUTCOME_CHARACTERS]
            parts.append(f"{_named(result)} {result.scaled_from} → "
                         f"{decision.desired_replicas}: {reason}")
    idle = sum(1 for result in results if not result.scaled and not result.error)
    if idle:
        parts.append(f"nothing: {counted(idle, 'autoscaler')}")
    return "; ".join(parts) or "nothing"


def cycle_tags(results: Sequence[AutoscalerResult], dry_run: bool) -> list[str]:
    """`scaled-up`, `scaled-down`, `failed`, else `nothing` (`dry-run` for a dry run), and
    `autoscaler:<namespace>/<name>` for each one that scaled or failed."""
    tags = []
    for result in results:
        found = [tag for tag, happened in (
            ("scaled-up", result.scaled and (result.decision.desired_replicas or 0)
             > (result.scaled_from or 0)),
            ("scaled-down", result.scaled and (result.decision.desired_replicas or 0)
             < (result.scaled_from or 0)),
            (FAILED, bool(result.error))) if happened]
        tags += found
        if found or result.scaled:
            tags.append(f"autoscaler:{result.decision.namespace}/{result.decision.name}")
    if dry_run:
        tags.append(DRY_RUN)
    elif not tags:
        tags.append(NOTHING)
    return sorted(set(tags))
