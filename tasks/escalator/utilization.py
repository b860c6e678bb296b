"""Requests against capacity: Escalator §5.3 and §5.4."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tasks.core.records import NodeRecord, PodRecord, Resources

# Escalator's sentinel for "no untainted capacity but work to do": scale up from zero.
SCALE_FROM_ZERO = sys.float_info.max


class PercentCalculationError(Exception):
    """Capacity is zero while untainted nodes exist (Escalator §5.4)."""




@dataclass(frozen=True)
class Utilization:
    """A group's requests and capacity, and the pods and nodes scale-on-starve compares."""

    requests: Resources
    capacity: Resources
    largest_pending_cpu: Resources
    largest_pending_memory: Resources
    largest_available_cpu: Resources
    largest_available_memory: Resources
    # Escalator's node_info_map: node name -> this group's pods bound to it.
    pods_on_node: Mapping[str, Sequence[PodRecord]] = field(default_factory=dict)


def pod_requests(pods: Iterable[PodRecord]) -> Resources:
    cpu = memory = 0
    for pod in pods:
        cpu += pod.cpu_request_milli
        memory += pod.memory_request_bytes
    return Resources(cpu, memory)


def node_capacity(nodes: Iterable[NodeRecord]) -> Resources:
    cpu = memory = 0
    for node in nodes:
        cpu += node.cpu_allocatable_milli
        memory += node.memory_allocatable_bytes
    return Resources(cpu, memory)


def pods_by_node(pods: Iterable[PodRecord], nodes: Iterable[NodeRecord]) -> dict[str, list[PodRecord]]:
    """Escalator's node_info_map: every listed node gets an entry; other pods are dropped."""
    by_node: dict[str, list[PodRecord]] = {node.name: [] for node in nodes}
    for pod in pods:
        bound = by_node.get(pod.node_name)
        if bound is not None:
            bound.append(pod)
    return by_node


def measure_utilization(
    pods: Sequence[PodRecord],
    untainted: Sequence[NodeRecord],
    pods_on_node: Mapping[str, Sequence[PodRecord]],
) -> Utilization:
    """Totals over all group pods, capacity over untainted nodes (§5.3)."""
    largest_pending_cpu = largest_pending_memory = Resources()
    for pod in pods:
        if pod.phase != "Pending":
            continue
        # First strictly larger wins, as in Escalator.
        if pod.cpu_request_milli > largest_pending_cpu.cpu_milli:
            largest_pending_cpu = Resources(pod.cpu_request_milli, pod.memory_request_bytes)
        if pod.memory_request_bytes > largest_pending_memory.memory_bytes:
            largest_pending_memory = Resources(pod.cpu_request_milli, pod.memory_request_bytes)
    largest_available_cpu = largest_available_memory = Resources()
    for node in untainted:
        used_cpu = used_memory = 0
        for pod in pods_on_node.get(node.name, ()):
            if pod.scheduled and pod.phase in ("Pending", "Running"):
                used_cpu += pod.cpu_request_milli
                used_memory += pod.memory_request_bytes
        free = Resources(node.cpu_allocatable_milli - used_cpu,
                         node.memory_allocatable_bytes - used_memory)
        if free.cpu_milli > largest_available_cpu.cpu_milli:
            largest_available_cpu = free
        if free.memory_bytes > largest_available_memory.memory_bytes:
            largest_available_memory = free
    return Utilization(
        requests=pod_requests(pods),
        capacity=node_capacity(untainted),
        largest_pending_cpu=largest_pending_cpu,
        largest_pending_memory=largest_pending_memory,
        largest_available_cpu=largest_available_cpu,
        largest_available_memory=largest_available_memory,
        pods_on_node=pods_on_node,
    )


def group_utilization(pods: Sequence[PodRecord], nodes: Sequence[NodeRecord],
                      untainted: Sequence[NodeRecord]) -> Utilization:
    """Escalator steps 8 and 9 for one group: node_info_map, requests, capacity."""
    return measure_utilization(pods, untainted, pods_by_node(pods, nodes))


def calc_percent_usage(
    requests: Resources, capacity: Resources, untainted_count: int
) -> tuple[float, float]:
    """(cpu %, memory %) of requests over capacity; the sentinel asks to scale up from zero."""
    if requests.empty and capacity.empty and untainted_count == 0:
        return 0.0, 0.0
    if capacity.cpu_milli == 0 or capacity.memory_bytes == 0:
        if untainted_count == 0:
            return SCALE_FROM_ZERO, SCALE_FROM_ZERO
        raise PercentCalculationError("cannot divide by zero in percent calculation")
    return (requests.cpu_milli / capacity.cpu_milli * 100,
            requests.memory_bytes / capacity.memory_bytes * 100)
