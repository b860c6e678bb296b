"""Cluster-wide resource limits: --cores-total, --memory-total, --max-nodes-total (CA §1.3)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from kube_elevator.tasks.cluster_autoscaler.config import ClusterAutoscalerConfig
from kube_elevator.tasks.cluster_autoscaler.templates import TemplateNode
from kube_elevator.tasks.core.quantity import GiB
from kube_elevator.tasks.core.records import NodeRecord

T = TypeVar("T")


# --- cluster-wide limits --------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterTotals:
    """Nodes, cores and memory the cluster has or has asked for (CA counts upcoming nodes)."""

    node_count: int = 0
    cores: int = 0
    memory_bytes: int = 0


@dataclass(frozen=True)
class ClusterLimits:
    """`max_nodes_total` (0 = none), `cores_total` and `memory_total` maxima (CA §1.3)."""

    max_nodes_total: int = 0
    max_cores: int = 320_000
    max_memory_bytes: int = 6_400_000 * GiB


def cluster_limits(config: ClusterAutoscalerConfig) -> ClusterLimits:
    """The limits the `cluster_autoscaler:` section sets (CA flags §1.3)."""
    _, max_cores = config.cores_min_max
    _, max_memory = config.memory_min_max_bytes
    return ClusterLimits(config.max_nodes_total, max_cores, max_memory)


def node_cores(cpu_milli: int) -> int:
    """Whole cores of a node, rounded up as CA's Quantity.Value()."""
    return math.ceil(cpu_milli / 1000)


def cluster_totals(nodes: Iterable[NodeRecord],
                   upcoming: Iterable[tuple[TemplateNode, int]] = ()) -> ClusterTotals:
    """Totals over live nodes (capacity, else allocatable) plus nodes asked for but not here."""
    count = cores = memory = 0
    for node in nodes:
        count += 1
        cores += node_cores(node.cpu_capacity_milli or node.cpu_allocatable_milli)
        memory += node.memory_capacity_bytes or node.memory_allocatable_bytes
    for template, number in upcoming:
        if number > 0:
            count += number
            cores += node_cores(template.cpu_capacity_milli) * number
            memory += template.memory_capacity_bytes * number
    return ClusterTotals(count, cores, memory)


def nodes_within_limits(template: TemplateNode, node_count: int, totals: ClusterTotals,
                        limits: ClusterLimits) -> int:
    """Cap a scale-up so the cluster stays within its totals (CA's ApplyLimits); may be 0."""
    allowed = node_count
    if limits.max_nodes_total > 0:
        allowed = min(allowed, limits.max_nodes_total - totals.node_count)
    cores = node_cores(template.cpu_capacity_milli)
    if cores > 0:
        allowed = min(allowed, (limits.max_cores - totals.cores) // cores)
    memory = template.memory_capacity_bytes
    if memory > 0:
        allowed = min(allowed, (limits.max_memory_bytes - totals.memory_bytes) // memory)
    return max(allowed, 0)


def exceeded_limit(template: TemplateNode, totals: ClusterTotals,
                   limits: ClusterLimits) -> str | None:
    """Which limit one more node of the template would break, if any (CA skips such groups)."""
    if limits.max_nodes_total > 0 and totals.node_count + 1 > limits.max_nodes_total:
        return f"max_nodes_total {limits.max_nodes_total} reached"
    if totals.cores + node_cores(template.cpu_capacity_milli) > limits.max_cores:
        return f"cores_total max {limits.max_cores} would be exceeded"
    if totals.memory_bytes + template.memory_capacity_bytes > limits.max_memory_bytes:
        return f"memory_total max {limits.max_memory_bytes // GiB} GiB would be exceeded"
    return None
