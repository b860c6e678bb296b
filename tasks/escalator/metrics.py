"""Escalator's Prometheus metrics (spec/escalator.md §11), with its names, types and labels.

Rendered as text exposition by hand: the Python client would rename counters to `*_total`,
and Escalator users' dashboards query the Go client's names. Counters and histograms are
cumulative for the life of the process (`elevator serve` or `run --interval`); a flow run is
short-lived, so each tick pushes everything to a Pushgateway when one is configured.

Beside Escalator's, the process's own metrics carry the `elevator_` prefix (`PROCESS_GAUGES`):
what Escalator has no name for, such as the watch cache's age.
"""

from __future__ import annotations

import threading
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

NAMESPACE = "escalator"
PROCESS_NAMESPACE = "elevator"
# Escalator: 60, 120, ..., 1740 seconds (29 buckets).
LOCK_BUCKETS_SECONDS = tuple(float(60 * n) for n in range(1, 30))
Labels = tuple[tuple[str, str], ...]


@dataclass
class _Family:
    kind: str  # counter | gauge | histogram
    help: str
    namespace: str = NAMESPACE
    samples: dict[Labels, float] = field(default_factory=dict)
    observations: dict[Labels, list[float]] = field(default_factory=lambda: defaultdict(list))


GAUGES = {
    "node_group_nodes": "nodes in the node group",
    "node_group_untainted_nodes": "untainted nodes in the node group",
    "node_group_tainted_nodes": "tainted nodes in the node group",
    "node_group_cordoned_nodes": "cordoned nodes in the node group",
    "node_group_pods": "pods in the node group",
    "node_group_unhealthy_nodes": "1 when the node group is healthy (or the check is off), else 0",
    "node_group_cpu_percent": "requested CPU over untainted allocatable, percent",
    "node_group_mem_percent": "requested memory over untainted allocatable, percent",
    "node_group_cpu_request": "requested CPU, millicores",
    "node_group_mem_request": "requested memory, bytes",
    "node_group_cpu_capacity": "untainted allocatable CPU, millicores",
    "node_group_mem_capacity": "untainted allocatable memory, bytes",
    "node_group_cpu_request_largest_pending_cpu": "CPU of the pending pod asking most CPU",
    "node_group_mem_request_largest_pending_cpu": "memory of the pending pod asking most CPU",
    "node_group_cpu_request_largest_pending_mem": "CPU of the pending pod asking most memory",
    "node_group_mem_request_largest_pending_mem": "memory of the pending pod asking most memory",
    "node_group_cpu_capacity_largest_available_cpu": "free CPU of the node with most free CPU",
    "node_group_mem_capacity_largest_available_cpu": "free memory of the node with most free CPU",
    "node_group_cpu_capacity_largest_available_mem": "free CPU of the node with most free memory",
    "node_group_mem_capacity_largest_available_mem":
        "free memory of the node with most free memory",
    "node_group_taint_event": "nodes asked to be tainted, cumulative",
    "node_group_untaint_event": "nodes asked to be untainted, cumulative",
    "node_group_scale_lock": "1 while the scale lock is held",
    "node_group_scale_delta": "the delta the last tick decided",
    "cloud_provider_min_size": "the ASG's MinSize",
    "cloud_provider_max_size": "the ASG's MaxSize",
    "cloud_provider_target_size": "the ASG's DesiredCapacity",
    "cloud_provider_size": "instances in the ASG",
}
COUNTERS = {
    "run_count": "ticks run",
    "node_group_pods_evicted": "non-daemonset pods still on nodes when they were deleted",
    "node_group_scale_lock_check_was_locked": "ticks that found the scale lock held",
    "node_delete_errors": "failed node removals",
}
# The process's own (`elevator_*`), set by the tick like Escalator's.
PROCESS_GAUGES = {
    "watch_cache_age_seconds": "seconds since the watch cache last heard from the API server on "
                               "this kind's watch, as the last tick read it",
}
HISTOGRAMS = {
    "node_group_scale_lock_duration": "seconds the scale lock was held",
    "node_group_node_registration_lag":
        "seconds from an instance's launch to its node's registration",
}


class EscalatorMetrics:
    """Process-wide metric state, updated once per tick and rendered for a scrape or a push."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: dict[str, _Family] = {}
        for name, text in GAUGES.items():
            self._families[name] = _Family("gauge", text)
        for name, text in COUNTERS.items():
            self._families[name] = _Family("counter", text)
        for name, text in HISTOGRAMS.items():
            self._families[name] = _Family("histogram", text)
        for name, text in PROCESS_GAUGES.items():
            assert name not in self._families, f"{name}: one short name per metric"
            self._families[name] = _Family("gauge", text, PROCESS_NAMESPACE)

    def set(self, name: str, value: float, **labels: str) -> None:
        with self._lock:
            self._families[name].samples[tuple(sorted(labels.items()))] = float(value)

    def add(self, name: str, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            samples = self._families[name].samples
            samples[key] = samples.get(key, 0.0) + value

    def observe(self, name: str, value: float, **labels: str) -> None:
        with self._lock:
            self._families[name].observations[tuple(sorted(labels.items()))].append(value)

    def value(self, name: str, **labels: str) -> float | None:
        return self._families[name].samples.get(tuple(sorted(labels.items())))

    def observed(self, name: str, **labels: str) -> list[float]:
        """A histogram's observations so far."""
        with self._lock:
            return list(self._families[name].observations.get(tuple(sorted(labels.items())),
                                                              ()))

    def render(self) -> str:
        """Prometheus text exposition format 0.0.4."""
        lines: list[str] = []
        with self._lock:
            for name, family in self._families.items():
                full = f"{family.namespace}_{name}"
                if not family.samples and not family.observations:
                    continue
                lines += [f"# HELP {full} {family.help}", f"# TYPE {full} {family.kind}"]
                for labels, value in family.samples.items():
                    lines.append(f"{full}{_labels(labels)} {_number(value)}")
                for labels, values in family.observations.items():
                    lines += _histogram_lines(full, labels, values)
        return "\n".join(lines) + "\n"


def _labels(labels: Iterable[tuple[str, str]]) -> str:
    pairs = [f'{key}="{_escape(value)}"' for key, value in labels]
    return "{" + ",".join(pairs) + "}" if pairs else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def _histogram_lines(name: str, labels: Labels, values: Sequence[float]) -> list[str]:
    lines = []
    for bound in (*LOCK_BUCKETS_SECONDS, float("inf")):
        count = sum(1 for value in values if value <= bound)
        le = "+Inf" if bound == float("inf") else _number(bound)
        lines.append(f"{name}_bucket{_labels((*labels, ('le', le)))} {count}")
    lines.append(f"{name}_sum{_labels(labels)} {_number(float(sum(values)))}")
    lines.append(f"{name}_count{_labels(labels)} {len(values)}")
    return lines


METRICS = EscalatorMetrics()


def push(metrics: EscalatorMetrics, pushgateway_url: str, job: str = "kube-elevator") -> None:
    """PUT the whole exposition to the Pushgateway's job group (replacing the last push)."""
    request = urllib.request.Request(
        f"{pushgateway_url.rstrip('/')}/metrics/job/{job}", data=metrics.render().encode(),
        method="PUT", headers={"Content-Type": "text/plain; version=0.0.4"})
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()
