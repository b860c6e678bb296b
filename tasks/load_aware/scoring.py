"""Trimaran's load-aware scores, TargetLoadPacking and LoadVariationRiskBalancing, bit for bit.

Pure functions over slim records and the load-watcher document (spec/trimaran.md §3, §4, §6.2),
so a Python scheduler extender and a real Trimaran plugin sharing one watcher agree on every
node. Go's float order of operations and `math.Round` are reproduced; Python's `round` would
differ on every x.5 (banker's rounding).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kube_elevator.tasks.core.errors import InputError, join_location, shown
from kube_elevator.tasks.core.gomath import go_round as go_round  # re-exported: the tests read it here

log = logging.getLogger(__name__)

# --- ranges and defaults (trimaran.md §1, §2, §5, §8) -------------------------------------

MIN_NODE_SCORE = 0
MAX_NODE_SCORE = 100
MIN_EXTENDER_PRIORITY = 0
MAX_EXTENDER_PRIORITY = 10

DEFAULT_TARGET_UTILIZATION_PERCENT = 40
MAX_TARGET_UTILIZATION_PERCENT = 100
DEFAULT_REQUESTS_CPU_MILLI = 1000
DEFAULT_REQUESTS_MULTIPLIER = 1.5
# Ours, not Trimaran's (which takes any parsable float): a multiplier <= 0 predicts no load, and
# a huge one makes `request × multiplier` overflow to inf, which no score can be rounded from.
MAX_REQUESTS_MULTIPLIER = 1000.0
DEFAULT_SAFE_VARIANCE_MARGIN = 1.0
DEFAULT_SAFE_VARIANCE_SENSITIVITY = 1.0

# §5: the assumed metrics-agent lag; a pod bound less than this before the watcher window's
# end (or after it) is not in the metrics yet.
METRICS_AGENT_REPORTING_INTERVAL_SECONDS = 60

# §6.1: watcher metric types and operators.
CPU = "CPU"
MEMORY = "Memory"
AVERAGE = "AVG"
STD = "STD"
LATEST = "Latest"

# §6.1: CPU and Memory values are percentages of the node. Go trusts them; we check them where
# a document comes in, because a value outside 0..100 gives a meaningless score and one near
# ±1e308 overflows to ±inf, which cannot be rounded to a score (a 500 before this check).
PERCENT_TYPES = frozenset({CPU, MEMORY})
MIN_PERCENT = 0.0
MAX_PERCENT = 100.0
# A real Prometheus answers a busy node's `instance:node_cpu:ratio` with 1.0025 (scrape jitter),
# an idle one's with -0.0001: within this many points of the range a value is read as the bound
# (§4 clamps the used load to the capacity anyway); beyond it, it is a broken answer.
PERCENT_SLACK = 10.0

# §4: memory is scored in MiB; 2**-20 exactly, as Go's `1. / 1024. / 1024.`.
MEGA_FACTOR = 1.0 / 1024.0 / 1024.0


# --- the load-watcher document (trimaran.md §6.2) ------------------------------------------


class _WatcherModel(BaseModel):
    # Strict like Go's decoder: "32.5" is not a number; unknown keys are skipped as gojay does.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True, populate_by_name=True)


class Metric(_WatcherModel):
    """One watcher metric: `value` is a percentage 0–100 of the node."""

    name: str = ""
    type: str = ""
    operator: str = ""
    rollup: str = ""
    value: float = Field(default=0.0, allow_inf_nan=False)


def percent_problem(value: float) -> str | None:
    """Why `value` is no utilisation percentage (finite, 0..100 give or take PERCENT_SLACK);
    None when it is one (`as_percent` then reads it)."""
    if not math.isfinite(value):
        return f"{value!r} is not a finite number"
    if not MIN_PERCENT - PERCENT_SLACK <= value <= MAX_PERCENT + PERCENT_SLACK:
        return f"{value!r} is not a percentage (0..100)"
    return None


def as_percent(value: float) -> float:
    """A value `percent_problem` accepts, within 0..100: 100.25 is a saturated node."""
    return min(max(value, MIN_PERCENT), MAX_PERCENT)


def metric_problem(metric: Metric) -> str | None:
    """Why a metric cannot be scored: CPU and Memory must be percentages, others finite."""
    if metric.type in PERCENT_TYPES:
        return percent_problem(metric.value)
    return None if math.isfinite(metric.value) else f"{metric.value!r} is not a finite number"


def _within_range(metric: Metric) -> Metric:
    if metric.type not in PERCENT_TYPES or as_percent(metric.value) == metric.value:
        return metric
    return metric.model_copy(update={"value": as_percent(metric.value)})


class NodeMetadata(_WatcherModel):
    data_center: str = Field(default="", alias="dataCenter")


class NodeMetrics(_WatcherModel):
    metrics: list[Metric] | None = None
    tags: dict[str, Any] = Field(default_factory=dict)
    metadata: NodeMetadata = Field(default_factory=NodeMetadata)


class Data(_WatcherModel):
    # The capitalised key is the Go field name (no json tag): §6.2.
    node_metrics_map: dict[str, NodeMetrics] | None = Field(default=None, alias="NodeMetricsMap")


class Window(_WatcherModel):
    """The metrics' time window, `[end - duration, end]` in Unix seconds."""

    duration: str = ""
    start: int = 0
    end: int = 0


class WatcherMetrics(_WatcherModel):
    """`GET /watcher`'s answer: one window's metrics for every node."""

    timestamp: int = 0
    window: Window = Field(default_factory=Window)
    source: str = ""
    data: Data = Field(default_factory=Data)

    def to_json(self) -> dict[str, Any]:
        """The wire form: every key present, as load-watcher's gojay encoder writes it."""
        nodes = self.data.node_metrics_map or {}
        return {
            "timestamp": self.timestamp,
            "window": {"duration": self.window.duration, "start": self.window.start,
                       "end": self.window.end},
            "source": self.source,
            "data": {"NodeMetricsMap": {
                host: {"metrics": [metric.model_dump() for metric in node.metrics or ()],
                       "tags": {}, "metadata": {"dataCenter": node.metadata.data_center}}
                for host, node in nodes.items()}},
        }

    def only_host(self, host: str) -> WatcherMetrics | None:
        """The document cut down to one node (`/watcher?host=`), None if the node is absent."""
        nodes = self.data.node_metrics_map or {}
        if host not in nodes:
            return None
        return self.model_copy(update={"data": Data(NodeMetricsMap={host: nodes[host]})})


def key_path(location: Iterable[int | str]) -> str:
    """A pydantic error location as `data.NodeMetricsMap.worker-1.metrics[0].value`."""
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def validation_problems(error: ValidationError, source: str, prefix: str = "") -> list[str]:
    """One `<source>: <key path>: <rule>` line per pydantic error."""
    problems = []
    for detail in error.errors():
        path = key_path(detail["loc"])
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        rule = detail["msg"]
        if detail["type"] != "missing" and "input" in detail:
            rule = f"{rule}, got {shown(detail['input'])}"
        problems.append(join_location(source, path, rule))
    return problems


def parse_watcher_metrics(payload: bytes | str, source: str) -> WatcherMetrics:
    """Decode a load-watcher answer; InputError naming `source` (the URL) and the key path.

    A node with a metric out of its range keeps no metrics (see `without_unusable_nodes`).
    """
    try:
        document = WatcherMetrics.model_validate_json(payload)
    except ValidationError as error:
        raise InputError(validation_problems(error, source)) from None
    return without_unusable_nodes(document, source)


def without_unusable_nodes(document: WatcherMetrics, source: str) -> WatcherMetrics:
    """The document with no metrics for nodes that have a metric out of range, logged.

    Such a node is then scored as one the watcher has no data for (the minimum), rather than
    from a value that is wrong (audit rule: validate the watcher's values at the edge). The
    other nodes' metrics are kept: one broken exporter should not blind the whole cluster.
    """
    nodes = document.data.node_metrics_map
    if not nodes:
        return document
    kept = dict(nodes)
    for host, node in nodes.items():
        problems = [join_location(source, f"data.NodeMetricsMap.{host}.metrics[{index}].value",
                                  problem)
                    for index, metric in enumerate(node.metrics or ())
                    if (problem := metric_problem(metric)) is not None]
        if problems:
            log.warning("%s: ignoring the metrics of node %s", "; ".join(problems), host)
            kept[host] = node.model_copy(update={"metrics": None})
        elif node.metrics and (within := [_within_range(m) for m in node.metrics]) != \
                node.metrics:
            kept[host] = node.model_copy(update={"metrics": within})
    if kept == nodes:
        return document
    data = document.data.model_copy(update={"node_metrics_map": kept})
    return document.model_copy(update={"data": data})


def node_metrics(document: WatcherMetrics | None, node_name: str) -> list[Metric] | None:
    """`Collector.GetNodeMetrics` (§5): None when never populated, node absent or no metrics."""
    if document is None or document.data.node_metrics_map is None:
        return None
    node = document.data.node_metrics_map.get(node_name)
    if node is None or not node.metrics:
        return None
    return node.metrics


# --- records the scores read ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerLoad:
    """A container's CPU limit and requests; None means the key is absent (not zero)."""

    cpu_limit_milli: int | None = None
    cpu_request_milli: int | None = None
    memory_request_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class PodLoad:
    """The parts of a pod both scores read."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    containers: tuple[ContainerLoad, ...] = ()
    init_containers: tuple[ContainerLoad, ...] = ()
    overhead_cpu_milli: int = 0
    overhead_memory_bytes: int = 0


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """TLP divides by CPU capacity, LVRB by allocatable (§3, §4)."""

    name: str
    cpu_capacity_milli: int = 0
    cpu_allocatable_milli: int = 0
    memory_allocatable_bytes: int = 0


@dataclass(frozen=True, slots=True)
class BoundPod:
    """A pod the scheduler bound recently, and when (§5 ScheduledPodsCache entry)."""

    pod: PodLoad
    bound_at_unix_seconds: float


@dataclass(frozen=True, slots=True)
class TargetLoadPackingArgs:
    """`TargetLoadPackingArgs` with Go's defaulting: a target ≤ 0 becomes 40 (§2).

    A target above 100 % becomes 40 as well (ours: Go keeps it, and every score is then
    meaningless); a multiplier outside (0, 1000] is a ValueError (see MAX_REQUESTS_MULTIPLIER).
    """

    target_utilization_percent: int = DEFAULT_TARGET_UTILIZATION_PERCENT
    default_requests_cpu_milli: int = DEFAULT_REQUESTS_CPU_MILLI
    default_requests_multiplier: float = DEFAULT_REQUESTS_MULTIPLIER

    def __post_init__(self) -> None:
        if not 0 < self.target_utilization_percent <= MAX_TARGET_UTILIZATION_PERCENT:
            object.__setattr__(self, "target_utilization_percent",
                               DEFAULT_TARGET_UTILIZATION_PERCENT)
        if not 0 < self.default_requests_multiplier <= MAX_REQUESTS_MULTIPLIER:  # also NaN
            raise ValueError("default_requests_multiplier must be a number in "
                             f"(0, {MAX_REQUESTS_MULTIPLIER:g}]")


@dataclass(frozen=True, slots=True)
class LoadVariationRiskBalancingArgs:
    """`LoadVariationRiskBalancingArgs` with Go's defaulting: negatives become 1 (§2)."""

    safe_variance_margin: float = DEFAULT_SAFE_VARIANCE_MARGIN
    safe_variance_sensitivity: float = DEFAULT_SAFE_VARIANCE_SENSITIVITY

    def __post_init__(self) -> None:
        if self.safe_variance_margin < 0:
            object.__setattr__(self, "safe_variance_margin", DEFAULT_SAFE_VARIANCE_MARGIN)
        if self.safe_variance_sensitivity < 0:
            object.__setattr__(self, "safe_variance_sensitivity",
                               DEFAULT_SAFE_VARIANCE_SENSITIVITY)


# --- TargetLoadPacking (trimaran.md §3) ---------------------------------------------------


def predicted_container_cpu_milli(container: ContainerLoad, args: TargetLoadPackingArgs) -> int:
    """`PredictUtilisation`: the limit, else round(request × multiplier), else the default."""
    if container.cpu_limit_milli is not None:
        return container.cpu_limit_milli
    if container.cpu_request_milli is not None:
        return go_round(float(container.cpu_request_milli) * args.default_requests_multiplier)
    return args.default_requests_cpu_milli


def predicted_pod_cpu_milli(pod: PodLoad, args: TargetLoadPackingArgs) -> int:
    """Σ predictions over the app containers (init containers ignored) + overhead (§3)."""
    return (sum(predicted_container_cpu_milli(c, args) for c in pod.containers)
            + pod.overhead_cpu_milli)


def counts_as_missing(bound_at_unix_seconds: float, window_end_unix_seconds: int) -> bool:
    """Bound after the window's end, or less than 60 s before it: not in the metrics yet (§5)."""
    bound_at = math.floor(bound_at_unix_seconds)  # Go compares Timestamp.Unix(): whole seconds
    return (bound_at > window_end_unix_seconds
            or window_end_unix_seconds - bound_at < METRICS_AGENT_REPORTING_INTERVAL_SECONDS)


def missing_cpu_milli(recently_bound: Iterable[BoundPod], window_end_unix_seconds: int,
                      args: TargetLoadPackingArgs) -> int:
    """CPU the watcher cannot have seen yet: the recently bound pods' predictions (§3)."""
    return sum(predicted_pod_cpu_milli(entry.pod, args) for entry in recently_bound
               if counts_as_missing(entry.bound_at_unix_seconds, window_end_unix_seconds))


def cpu_utilization_percent(metrics: Sequence[Metric]) -> float | None:
    """The LAST metric of type CPU with operator AVG or Latest; None when there is none (§3)."""
    found: float | None = None
    for metric in metrics:
        if metric.type == CPU and metric.operator in (AVERAGE, LATEST):
            found = metric.value
    return found


def target_load_packing_score(pod: PodLoad, node: NodeLoad, document: WatcherMetrics | None,
                              recently_bound: Iterable[BoundPod] = (),
                              args: TargetLoadPackingArgs | None = None) -> int:
    """TLP's raw score (0..100; negative only if the watcher reports negative load).

    Rises linearly from T (idle) to 100 at U = T, then drops to ≈T and falls to 0 at 100 %.
    """
    args = args or TargetLoadPackingArgs()
    metrics = node_metrics(document, node.name)
    if metrics is None or document is None:
        return MIN_NODE_SCORE  # never populated, node absent: avoid the node
    util_percent = cpu_utilization_percent(metrics)
    if util_percent is None:
        return MIN_NODE_SCORE  # "Cpu metric not found in node metrics"
    pod_milli = predicted_pod_cpu_milli(pod, args)
    missing_milli = missing_cpu_milli(recently_bound, document.window.end, args)
    capacity_milli = float(node.cpu_capacity_milli)
    util_milli = (util_percent / 100) * capacity_milli
    predicted_percent = 0.0
    if capacity_milli != 0:
        predicted_percent = (100 * (util_milli + float(pod_milli) + float(missing_milli))
                             / capacity_milli)
    target = float(args.target_utilization_percent)
    if predicted_percent > target:  # strict: U == T still scores 100
        if predicted_percent > 100:
            return MIN_NODE_SCORE
        return go_round(target * (100 - predicted_percent) / (100 - target))
    return go_round((100 - target) * predicted_percent / target + target)


# --- LoadVariationRiskBalancing (trimaran.md §4) ------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    """A pod's requests as the scheduler sums them: max(Σ containers, each init) + overhead."""

    cpu_milli: int = 0
    memory_bytes: int = 0


def requested_resources(pod: PodLoad) -> ResourceRequest:
    """`GetResourceRequested`: absent requests count 0 (no default request in LVRB)."""
    cpu = sum(c.cpu_request_milli or 0 for c in pod.containers)
    memory = sum(c.memory_request_bytes or 0 for c in pod.containers)
    for init in pod.init_containers:
        if init.cpu_request_milli is not None:
            cpu = max(cpu, init.cpu_request_milli)
        if init.memory_request_bytes is not None:
            memory = max(memory, init.memory_request_bytes)
    return ResourceRequest(cpu + pod.overhead_cpu_milli, memory + pod.overhead_memory_bytes)


@dataclass(frozen=True, slots=True)
class ResourceStats:
    """One resource on one node, in absolute units (millicores or MiB)."""

    capacity: float
    requested: float
    used_average: float
    used_stdev: float


def resource_data(metrics: Sequence[Metric], metric_type: str) -> tuple[float, float, bool]:
    """`GetResourceData`: (average, stdev, any metric of that type present).

    AVG wins; "" or Latest count as the average only while no AVG has been seen.
    """
    average = stdev = 0.0
    average_found = valid = False
    for metric in metrics:
        if metric.type != metric_type:
            continue
        if metric.operator == AVERAGE:
            average, average_found = metric.value, True
        elif metric.operator == STD:
            stdev = metric.value
        elif metric.operator in ("", LATEST) and not average_found:
            average = metric.value
        valid = True
    return average, stdev, valid


def resource_stats(metrics: Sequence[Metric], node: NodeLoad, request: ResourceRequest,
                   metric_type: str) -> ResourceStats | None:
    """`CreateResourceStats`: percentages to absolute use of ALLOCATABLE; None without data."""
    average, stdev, valid = resource_data(metrics, metric_type)
    if not valid:
        return None
    if metric_type == CPU:
        capacity = float(node.cpu_allocatable_milli)
        requested = float(request.cpu_milli)
    else:
        capacity = float(node.memory_allocatable_bytes) * MEGA_FACTOR
        requested = float(request.memory_bytes) * MEGA_FACTOR
    return ResourceStats(capacity=capacity, requested=requested,
                         used_average=average * capacity / 100,
                         used_stdev=stdev * capacity / 100)


def _clamp(value: float, low: float, high: float) -> float:
    return max(min(value, high), low)


def _go_pow(base: float, exponent: float) -> float:
    # Go's math.Pow takes Sqrt for 0.5 (sensitivity 2, the README's advice); elsewhere libm's
    # pow is used, which may differ from Go's by an ulp: invisible after rounding to 0..100.
    if exponent == 0.5:
        return math.sqrt(base)
    return float(base**exponent)


def risk_score(stats: ResourceStats, margin: float, sensitivity: float) -> float:
    """`computeScore`: (1 − (mu + sigma)/2) × 100, with the pod's request added to the mean only.

    `margin` and `sensitivity` are taken as given (the args defaulting lives in
    LoadVariationRiskBalancingArgs), so the upstream unit-test table applies unchanged.
    """
    if stats.capacity <= 0:
        return 0.0
    requested = max(stats.requested, 0.0)
    used_average = _clamp(stats.used_average, 0.0, stats.capacity)
    used_stdev = _clamp(stats.used_stdev, 0.0, stats.capacity)
    mu = _clamp((used_average + requested) / stats.capacity, 0.0, 1.0)
    sigma = _clamp(used_stdev / stats.capacity, 0.0, 1.0)
    if sensitivity >= 0:
        # Go: 1/0 is +Inf, so sensitivity 0 sends every sigma < 1 to 0.
        exponent = math.inf if sensitivity == 0 else 1 / sensitivity
        sigma = _go_pow(sigma, exponent)
    sigma = _clamp(sigma * margin, 0.0, 1.0)
    risk = (mu + sigma) / 2
    return (1.0 - risk) * MAX_NODE_SCORE


def load_variation_risk_balancing_score(
        pod: PodLoad, node: NodeLoad, document: WatcherMetrics | None,
        args: LoadVariationRiskBalancingArgs | None = None) -> int:
    """LVRB's score 0..100: the worse of CPU and memory when both have data (§4).

    Recently bound pods are not used: LVRB registers the handler but never reads it.
    """
    args = args or LoadVariationRiskBalancingArgs()
    metrics = node_metrics(document, node.name)
    if metrics is None:
        return MIN_NODE_SCORE
    request = requested_resources(pod)
    scores: dict[str, float] = {}
    for metric_type in (CPU, MEMORY):
        stats = resource_stats(metrics, node, request, metric_type)
        if stats is not None:
            scores[metric_type] = risk_score(stats, args.safe_variance_margin,
                                             args.safe_variance_sensitivity)
    # Both valid: the worse resource wins; one valid: max(its score, 0) as in Go.
    total = min(scores.values()) if len(scores) == 2 else max([*scores.values(), 0.0])
    return go_round(total)


# --- the extender's range (trimaran.md §8) --------------------------------------------------


def extender_priority(score: int) -> int:
    """0..100 to the extender's 0..10: Go-round(score / 10), clamped.

    kube-scheduler multiplies an extender's priority by MaxNodeScore / MaxExtenderPriority (10)
    and does not clamp it, so the extender must.
    """
    scaled = go_round(score * MAX_EXTENDER_PRIORITY / MAX_NODE_SCORE)
    return int(_clamp(scaled, MIN_EXTENDER_PRIORITY, MAX_EXTENDER_PRIORITY))
