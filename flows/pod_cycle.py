"""One composition of a pod-autoscaler cycle (DESIGN.md §3): source -> decide -> actuator.

Reads like the controllers' reconcile loop: list the autoscaler objects, and for each one read
its target's `/scale` and pods, read its metrics, decide (pure), write the decision to the
object's status, where all the state lives, and scale the target through `/scale` (the status
first: it holds the scale windows, so it is the claim a scale is made under). The
`pod-autoscale` flow runs it on the cluster; `elevator pods plan` on files, acting on nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from kube_elevator.tasks.adapters.prometheus import CycleCache, MetricsSource, MetricUnavailable
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.step import Runner, step
from kube_elevator.tasks.core.workload import PodState, TargetScale, pod_state
from kube_elevator.tasks.pod_autoscalers import memory as memory_usage
from kube_elevator.tasks.pod_autoscalers.memory import (
    decide_memory,
    memory_scale_failed,
    parse_memory_autoscaler,
)
from kube_elevator.tasks.pod_autoscalers.wpa import crd as watermark
from kube_elevator.tasks.pod_autoscalers.wpa.crd import LabelSelector
from kube_elevator.tasks.pod_autoscalers.wpa.decide import (
    Decision,
    decide_watermark,
    log_attributes,
    scale_failed,
)
from kube_elevator.tasks.pod_autoscalers.wpa.gates import MonitorReading, lifecycle_control
from kube_elevator.tasks.pod_autoscalers.wpa.proposal import MetricReading
from kube_elevator.tasks.pod_autoscalers.wpa.readings import read_watermark_metrics
from kube_elevator.tasks.pod_autoscalers.wpa.validate import ParsedWatermark, parse_watermark

if TYPE_CHECKING:
    from kube_elevator.tasks.adapters.kube import KubeClient

Logger = logging.Logger | logging.LoggerAdapter[Any]
log = logging.getLogger("kube_elevator.pod_autoscale")


# --- where a cycle reads from -------------------------------------------------------------------


class PodAutoscalerSource(Protocol):
    """What one cycle reads. `KubeClient` is the live one; `elevator pods plan` reads the same
    four answers from `kubectl get -o json` files (`flows.cli.pods.ClusterFiles`), so both run
    `cycle` below and decide alike (DESIGN.md §3)."""

    def list_custom_objects(self, group: str, version: str, plural: str,
                            namespace: str | None) -> list[dict[str, Any]]: ...

    def read_custom_object(self, group: str, version: str, plural: str, namespace: str,
                           name: str) -> dict[str, Any] | None: ...

    def read_scale(self, kind: str, namespace: str, name: str) -> TargetScale | None: ...

    def list_pod_objects(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]: ...


# --- steps ------------------------------------------------------------------------------------------


@step
def list_autoscalers(source: PodAutoscalerSource, group: str, version: str, plural: str,
                     namespace: str | None) -> list[dict[str, Any]] | None:
    """Every object of one autoscaler CRD; None when the CRD is not installed (404)."""
    from kubernetes.client.exceptions import ApiException

    try:
        return source.list_custom_objects(group, version, plural, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


# How to install each CRD, for the note of a cluster that lacks it.
INSTALL_CRD = {
    watermark.KIND: "DataDog's watermarkpodautoscaler Helm chart (or the CRD in that "
                    "repository's config/crd)",
    memory_usage.KIND: "kubectl apply -f deployments/kubernetes/base/memoryautoscaler-crd.yaml "
                       "(or apply the Kustomize base: kubectl apply -k "
                       "deployments/kubernetes/base)",
}


def crd_not_installed(kind: str, crd: tuple[str, str, str]) -> str:
    """The note of a cycle that found no `kind` because its CRD is not installed."""
    group, version, plural = crd
    return (f"the {kind} CRD is not installed (the API answered 404 for {plural}.{group}/"
            f"{version}): no {kind} to scale; install it with {INSTALL_CRD[kind]}")


@step
def read_target_scale(source: PodAutoscalerSource, namespace: str, kind: str, name: str
                      ) -> TargetScale | str:
    """The target's `/scale`, or why it cannot be read (missing, unsupported kind)."""
    try:
        scale = source.read_scale(kind, namespace, name)
    except InputError as error:
        return "; ".join(error.problems)
    return scale if scale is not None else f"scale not found: {kind} {namespace}/{name}"


@step
def list_target_pods(source: PodAutoscalerSource, namespace: str, selector: str
                     ) -> list[PodState]:
    """The pods the target's scale selector picks (§5 filters them further)."""
    return [pod_state(obj) for obj in source.list_pod_objects(namespace, selector)]


@step
def read_wpa_metrics(source: PodAutoscalerSource, metrics: MetricsSource,
                     parsed: ParsedWatermark) -> list[MetricReading]:
    """One reading per metric, from Prometheus (Resource metrics: the pods the selector picks)."""

    def selected(selector: LabelSelector) -> list[str]:
        objects = source.list_pod_objects(parsed.namespace, selector.to_query())
        return [str((obj.get("metadata") or {}).get("name", "")) for obj in objects]

    return read_watermark_metrics(parsed, metrics, selected)


@step
def read_memory_usage(metrics: MetricsSource, namespace: str) -> dict[str, float] | str:
    """Working set per pod of the namespace, or why it is unavailable."""
    try:
        return metrics.pod_usage(namespace, "memory")
    except MetricUnavailable as error:
        return str(error)


@step
def read_datadog_monitor(source: PodAutoscalerSource, namespace: str, name: str
                         ) -> MonitorReading:
    """The WPA's DatadogMonitor (same name and namespace), for lifecycle control (§2.2)."""
    obj = source.read_custom_object(watermark.GROUP, watermark.VERSION,
                                    watermark.MONITOR_PLURAL, namespace, name)
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
                 obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any] | None:
    """Write the new status at the version read: the object as written, or None if another
    writer changed it meanwhile (409). A 409 whose object already holds this very status is our
    own write, applied with its answer lost and then retried: that is no conflict."""
    written = kube.replace_custom_object_status(group, version, plural, obj, status)
    if written is not None:
        return written
    metadata = obj.get("metadata") or {}
    current = kube.read_custom_object(group, version, plural, str(metadata.get("namespace", "")),
                                      str(metadata.get("name", "")))
    return current if current is not None and current.get("status") == status else None


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


def _write_back(run: Runner, actuator: KubeClient | None, crd: tuple[str, str, str],
                obj: dict[str, Any], decision: Decision,
                on_scale_failure: Callable[[Decision, str, float], Decision], now: float
                ) -> AutoscalerResult:
    """Act on a decision: record a scale in the status, then scale (no actuator: neither).

    The status goes first, as a node group's Lease does: its lastScaleTime keeps the next
    cycles inside the scale windows, so a scale whose status write never landed would be made
    again inside its window (a double scale-up). A scale whose answer was lost is read back
    from `/scale` before it counts as failed.
    """
    from kubernetes.client.exceptions import ApiException

    if actuator is None:
        return AutoscalerResult(decision)
    target = decision.scale_to
    if target is None or not (decision.target_kind and decision.target_name):
        written = decision.status_changed and run(
            write_status, actuator, *crd, obj, dict(decision.status)) is not None
        return AutoscalerResult(decision, None, written)
    claimed = run(write_status, actuator, *crd, obj, dict(decision.status))
    if claimed is None:
        return AutoscalerResult(replace(decision, reason=(
            f"{decision.reason}; not scaled: the object changed since it was read, and the "
            "next cycle decides again")))
    try:
        run(scale_target, actuator, decision.namespace, decision.target_kind,
            decision.target_name, target)
    except ApiException as error:
        reached = run(read_target_scale, actuator, decision.namespace, decision.target_kind,
                      decision.target_name)
        if not (isinstance(reached, TargetScale) and reached.spec_replicas == target):
            failed = on_scale_failure(decision, f"{error.status} {error.reason}", now)
            rewritten = run(write_status, actuator, *crd, claimed, dict(failed.status))
            return AutoscalerResult(failed, None, rewritten is not None)
    return AutoscalerResult(decision, decision.current_replicas, True)


def autoscale_watermark(run: Runner, source: PodAutoscalerSource, metrics: MetricsSource,
                        obj: dict[str, Any], now: float, actuator: KubeClient | None
                        ) -> AutoscalerResult:
    """One WPA: validate, read scale, pods and metrics, decide, act."""
    parsed = parse_watermark(obj)
    target: TargetScale | str | None = None
    pods: list[PodState] = []
    readings: list[MetricReading] = []
    monitor: MonitorReading | None = None
    if parsed.rules is not None and lifecycle_control(parsed.annotations) is True:
        monitor = run(read_datadog_monitor, source, parsed.namespace, parsed.name)
    if parsed.rules is not None and (monitor is None or monitor.state == "OK"):
        ref = parsed.rules.target
        target = run(read_target_scale, source, parsed.namespace, ref.kind, ref.name)
        if isinstance(target, TargetScale) and target.spec_replicas > 0:
            pods = run(list_target_pods, source, parsed.namespace, target.selector)
            readings = run(read_wpa_metrics, source, metrics, parsed)
    decision = run(decide_wpa, parsed, target, pods, readings, now, monitor)
    return _write_back(run, actuator, (watermark.GROUP, watermark.VERSION, watermark.PLURAL),
                       obj, decision, scale_failed, now)


def autoscale_memory(run: Runner, source: PodAutoscalerSource, metrics: MetricsSource,
                     obj: dict[str, Any], now: float, actuator: KubeClient | None
                     ) -> AutoscalerResult:
    """One MemoryAutoscaler: validate, read scale, pods and working sets, decide, act."""
    parsed = parse_memory_autoscaler(obj)
    target: TargetScale | str | None = None
    pods: list[PodState] = []
    usage: dict[str, float] | str = {}
    if parsed.rules is not None:
        ref = parsed.rules.target
        target = run(read_target_scale, source, parsed.namespace, ref.kind, ref.name)
        if isinstance(target, TargetScale) and target.spec_replicas > 0:
            pods = run(list_target_pods, source, parsed.namespace, target.selector)
            usage = run(read_memory_usage, metrics, parsed.namespace)
    decision = run(decide_memory_autoscaler, parsed, target, pods, usage, now)
    return _write_back(run, actuator, (memory_usage.GROUP, memory_usage.VERSION,
                                       memory_usage.PLURAL), obj, decision,
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


def cycle(run: Runner, source: PodAutoscalerSource, metrics: MetricsSource, now: float,
          actuator: KubeClient | None, namespace: str | None = None,
          logger: Logger = log, notes: list[str] | None = None) -> list[AutoscalerResult]:
    """Every WPA, then every MemoryAutoscaler; one object's failure does not stop the others.

    The one composition of a pod-autoscaler cycle: the flow passes the cluster as both source
    and actuator (None in a dry run); `elevator pods plan` passes its files and no actuator.
    A CRD the cluster does not serve is a warning, and a line in `notes`.
    """
    cached = CycleCache(metrics)
    results = []
    kinds: list[tuple[str, tuple[str, str, str], Any]] = [
        (watermark.KIND, (watermark.GROUP, watermark.VERSION, watermark.PLURAL),
         autoscale_watermark),
        (memory_usage.KIND, (memory_usage.GROUP, memory_usage.VERSION, memory_usage.PLURAL),
         autoscale_memory),
    ]
    for kind, crd, autoscale_one in kinds:
        listed = run(list_autoscalers, source, *crd, namespace)
        if listed is None:
            note = crd_not_installed(kind, crd)
            logger.warning(note)
            if notes is not None:
                notes.append(note)
            continue
        for obj in listed:
            try:
                result = autoscale_one(run, source, cached, obj, now, actuator)
            except Exception as error:
                result = _failed(kind, obj, error)
            labels = (obj.get("metadata") or {}).get("labels") or {}
            result = replace(result, labels=dict(labels))
            report(result, logger)
            results.append(result)
    return results
