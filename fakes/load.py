"""Simulated node load, served by the real load watcher (tasks/load_aware/watcher.py).

A pod uses a deterministic fraction of what it requests (its "usage factor", drawn per pod from
the scenario's seed around the scenario's mean), so requests and real load differ as they do in
clusters. The load watcher's HTTP service and caches are the real ones; only its metrics
provider is the simulation instead of Prometheus.
"""

from __future__ import annotations

import asyncio
import hashlib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kube_elevator.fakes.pod_metrics import PodMetricsServer
from kube_elevator.tasks.core.records import NodeRecord, PodRecord
from kube_elevator.tasks.load_aware.scoring import Metric, Window


def usage_factor(pod_name: str, mean: float, spread: float, seed: int) -> float:
    """A pod's share of its requests in use, in [mean - spread, mean + spread], stable per name."""
    digest = hashlib.blake2b(f"{seed}:{pod_name}".encode(), digest_size=8).digest()
    unit = int.from_bytes(digest, "big") / 2**64
    return max(0.0, mean - spread + 2 * spread * unit)


@dataclass
class SimulatedMetricsProvider:
    """The load watcher's provider: per-node CPU and memory utilization of the simulated pods."""

    mean_usage: float = 0.6
    spread: float = 0.3
    seed: int = 1
    history: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    # When set, each pod's usage is also published as cAdvisor series (for Prometheus).
    pod_metrics: PodMetricsServer | None = None
    _published: set[tuple[str, str]] = field(default_factory=set)

    @property
    def name(self) -> str:
        return "simulation"

    def observe(self, nodes: Sequence[NodeRecord], pods: Sequence[PodRecord]) -> None:
        """One sample per node: utilization percent of CPU and memory from the bound pods."""
        used: dict[str, list[float]] = {node.name: [0.0, 0.0] for node in nodes}
        for pod in pods:
            if pod.node_name in used:
                factor = usage_factor(pod.name, self.mean_usage, self.spread, self.seed)
                used[pod.node_name][0] += pod.cpu_request_milli * factor
                used[pod.node_name][1] += pod.memory_request_bytes * factor
        for node in nodes:
            cpu, memory = used[node.name]
            sample = (100 * cpu / max(node.cpu_allocatable_milli, 1),
                      100 * memory / max(node.memory_allocatable_bytes, 1))
            self.history.setdefault(node.name, []).append(sample)
            del self.history[node.name][:-30]  # five simulated minutes at 10 s steps
        for gone in set(self.history) - set(used):
            del self.history[gone]
        if self.pod_metrics is not None:
            self._publish(pods)

    def _publish(self, pods: Sequence[PodRecord]) -> None:
        """cAdvisor-style series that follow the simulated pods (running ones only)."""
        assert self.pod_metrics is not None
        running = set()
        for pod in pods:
            if not pod.node_name:
                continue
            factor = usage_factor(pod.name, self.mean_usage, self.spread, self.seed)
            self.pod_metrics.set_usage(pod.namespace, pod.name,
                                       pod.cpu_request_milli * factor / 1000,
                                       pod.memory_request_bytes * factor)
            running.add((pod.namespace, pod.name))
        for namespace, name in self._published - running:
            self.pod_metrics.remove(namespace, name)
        self._published = running

    def snapshot(self) -> Mapping[str, list[Metric]]:
        metrics: dict[str, list[Metric]] = {}
        for node, samples in self.history.items():
            cpu = [sample[0] for sample in samples]
            memory = [sample[1] for sample in samples]
            metrics[node] = [
                Metric(name="cpu", type="CPU", operator="AVG", rollup="AVG",
                       value=statistics.fmean(cpu)),
                Metric(name="cpu", type="CPU", operator="STD", rollup="STD",
                       value=statistics.pstdev(cpu)),
                Metric(name="memory", type="Memory", operator="AVG", rollup="AVG",
                       value=statistics.fmean(memory)),
                Metric(name="memory", type="Memory", operator="STD", rollup="STD",
                       value=statistics.pstdev(memory)),
            ]
        return metrics

    async def fetch_all_hosts(self, window: Window) -> dict[str, list[Metric]]:
        await asyncio.sleep(0)
        return dict(self.snapshot())

    async def healthy(self) -> bool:
        return True
