"""Requests against capacity: Escalator §5.3 and §5.4."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kube_elevator.tasks.core.records import NodeRecord, PodRecord, Resources

# Escalator's sentinel for "no untainted capacity but work to do": scale up from zero.
SCALE_FROM_ZERO = sys.float_info.max


class PercentCalculationError(Exception):
    """Capacity is zero while untainted nodes exist (Escalator §5.4)."""




@dataclass(frozen=True)
class Utilization:
    """A group's requests and capacity, and the pods and nodes scale-on-starve compares.

    Example:
        >>> pod = ke.PodRecord("web-0", "default", node_name="", phase="Pending",
        ...     cpu_request_milli=500, memory_request_bytes=2**30)
        >>> node = ke.NodeRecord("n1", {"pool": "batch"}, created_unix_seconds=0.0,
        ...     cpu_allocatable_milli=2000, memory_allocatable_bytes=8 * 2**30)
        >>> usage = ke.compute_utilization.fn([pod], [node])
        >>> usage.requests
        Resources(cpu_milli=500, memory_bytes=1073741824)
        >>> usage.capacity.cpu_milli, usage.capacity.memory_bytes // 2**30
        (2000, 8)
    """

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


_USES_NODE_PHASES = frozenset(("Pending", "Running"))


def _uses_node(pod: PodRecord) -> bool:
    """Escalator counts a pod against its node's free room while it is bound and not done."""
    return pod.scheduled and pod.phase in _USES_NODE_PHASES


@dataclass(frozen=True)
class GroupPods:
    """What the decision reads of a group's pods: their count and total requests, the pending
    ones, and each node's pods and the room they take.

    Summed from a list (`summarize_pods`), or kept current change by change by a watch cache
    (`PodTally`), so a tick's cost follows the nodes and what changed, not every pod.

    Example:
        >>> pod = ke.PodRecord("web-0", "default", node_name="", phase="Pending",
        ...     cpu_request_milli=500, memory_request_bytes=2**30)
        >>> node = ke.NodeRecord("n1", {"pool": "batch"}, created_unix_seconds=0.0,
        ...     cpu_allocatable_milli=2000, memory_allocatable_bytes=8 * 2**30)
        >>> pods = ke.GroupPods(count=1, requests=ke.Resources(500, 2**30))
        >>> ke.compute_utilization.fn(pods, [node]).requests.cpu_milli
        500
    """

    count: int = 0
    requests: Resources = field(default_factory=Resources)
    pending: tuple[PodRecord, ...] = ()  # in listing order: the first strictly larger wins
    on_node: Mapping[str, Sequence[PodRecord]] = field(default_factory=dict)
    used_on_node: Mapping[str, Resources] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.count


class PodTally:
    """A `GroupPods` kept current as pods come, change and go (a cache's group index).

    Copy on write: a change replaces a node's tuple of pods and its room, never edits them, so
    a snapshot copies two dicts of references (a tick at 150,000 pods copies no pod list).
    """

    def __init__(self) -> None:
        self.count = self.cpu_milli = self.memory_bytes = 0
        self.pending: dict[object, PodRecord] = {}
        self.on_node: dict[str, tuple[PodRecord, ...]] = {}
        self.keys_on_node: dict[str, tuple[object, ...]] = {}
        self.used_on_node: dict[str, Resources] = {}

    def add(self, key: object, pod: PodRecord) -> None:
        self._count(pod, 1)
        if pod.phase == "Pending":
            self.pending[key] = pod
        if pod.node_name:
            self._bind(key, pod)

    def remove(self, key: object, pod: PodRecord) -> None:
        self._count(pod, -1)
        self.pending.pop(key, None)
        if pod.node_name:
            self._unbind(key, pod.node_name)

    def replace(self, key: object, old: PodRecord, new: PodRecord) -> None:
        """A changed pod keeps its place among the pending and on its node, as in the list;
        one newly bound goes last on its node (only the count of a node's pods is read)."""
        self._count(old, -1)
        self._count(new, 1)
        if new.phase == "Pending":
            self.pending[key] = new
        else:
            self.pending.pop(key, None)
        if old.node_name and old.node_name != new.node_name:
            self._unbind(key, old.node_name)
        if new.node_name:
            self._bind(key, new)

    def _bind(self, key: object, pod: PodRecord) -> None:
        keys = self.keys_on_node.get(pod.node_name, ())
        pods = self.on_node.get(pod.node_name, ())
        if key in keys:
            at = keys.index(key)
            self.on_node[pod.node_name] = (*pods[:at], pod, *pods[at + 1:])
        else:
            self.keys_on_node[pod.node_name] = (*keys, key)
            self.on_node[pod.node_name] = (*pods, pod)

    def _unbind(self, key: object, node_name: str) -> None:
        keys = self.keys_on_node.get(node_name, ())
        if key not in keys:
            return
        at = keys.index(key)
        if len(keys) == 1:
            del self.keys_on_node[node_name], self.on_node[node_name]
            return
        pods = self.on_node[node_name]
        self.keys_on_node[node_name] = (*keys[:at], *keys[at + 1:])
        self.on_node[node_name] = (*pods[:at], *pods[at + 1:])

    def _count(self, pod: PodRecord, sign: int) -> None:
        self.count += sign
        self.cpu_milli += sign * pod.cpu_request_milli
        self.memory_bytes += sign * pod.memory_request_bytes
        if pod.node_name and _uses_node(pod):
            used = self.used_on_node.get(pod.node_name, Resources())
            room = Resources(used.cpu_milli + sign * pod.cpu_request_milli,
                             used.memory_bytes + sign * pod.memory_request_bytes)
            if room.empty:
                self.used_on_node.pop(pod.node_name, None)
            else:
                self.used_on_node[pod.node_name] = room

    def snapshot(self) -> GroupPods:
        """An immutable view: the watch goes on changing the tally while a tick decides."""
        return GroupPods(
            count=self.count, requests=Resources(self.cpu_milli, self.memory_bytes),
            pending=tuple(self.pending.values()), on_node=dict(self.on_node),
            used_on_node=dict(self.used_on_node))


def summarize_pods(pods: Iterable[PodRecord]) -> GroupPods:
    """A list's `GroupPods`, in one pass."""
    count = cpu_milli = memory_bytes = 0
    pending: list[PodRecord] = []
    on_node: dict[str, list[PodRecord]] = {}
    # (milli-CPU, bytes) a node: the tick's hottest loop (every pod of a group, every tick of a
    # simulated day) builds no Resources per pod.
    used_on_node: dict[str, tuple[int, int]] = {}
    for pod in pods:
        count += 1
        pod_cpu_milli, pod_memory_bytes = pod.cpu_request_milli, pod.memory_request_bytes
        cpu_milli += pod_cpu_milli
        memory_bytes += pod_memory_bytes
        phase, node_name = pod.phase, pod.node_name
        if phase == "Pending":
            pending.append(pod)
        if node_name:
            bound = on_node.get(node_name)
            if bound is None:
                on_node[node_name] = [pod]
            else:
                bound.append(pod)
            if pod.scheduled and phase in _USES_NODE_PHASES:  # `_uses_node`, inlined
                used_cpu_milli, used_memory_bytes = used_on_node.get(node_name, (0, 0))
                used_on_node[node_name] = (used_cpu_milli + pod_cpu_milli,
                                           used_memory_bytes + pod_memory_bytes)
    return GroupPods(count, Resources(cpu_milli, memory_bytes), tuple(pending),
                     {name: tuple(bound) for name, bound in on_node.items()},
                     {name: Resources(*used) for name, used in used_on_node.items()
                      if used != (0, 0)})


def measure_utilization(
    pods: GroupPods,
    nodes: Sequence[NodeRecord],
    untainted: Sequence[NodeRecord],
) -> Utilization:
    """Totals over all group pods, capacity over untainted nodes (§5.3)."""
    largest_pending_cpu = largest_pending_memory = Resources()
    for pod in pods.pending:
        # First strictly larger wins, as in Escalator.
        if pod.cpu_request_milli > largest_pending_cpu.cpu_milli:
            largest_pending_cpu = Resources(pod.cpu_request_milli, pod.memory_request_bytes)
        if pod.memory_request_bytes > largest_pending_memory.memory_bytes:
            largest_pending_memory = Resources(pod.cpu_request_milli, pod.memory_request_bytes)
    largest_available_cpu = largest_available_memory = Resources()
    nothing_used = Resources()
    for node in untainted:
        used = pods.used_on_node.get(node.name, nothing_used)
        free = Resources(node.cpu_allocatable_milli - used.cpu_milli,
                         node.memory_allocatable_bytes - used.memory_bytes)
        if free.cpu_milli > largest_available_cpu.cpu_milli:
            largest_available_cpu = free
        if free.memory_bytes > largest_available_memory.memory_bytes:
            largest_available_memory = free
    return Utilization(
        requests=pods.requests,
        capacity=node_capacity(untainted),
        largest_pending_cpu=largest_pending_cpu,
        largest_pending_memory=largest_pending_memory,
        largest_available_cpu=largest_available_cpu,
        largest_available_memory=largest_available_memory,
        # Escalator's node_info_map: an entry for every node of the group, pods elsewhere out.
        pods_on_node={node.name: pods.on_node.get(node.name, ()) for node in nodes},
    )


def group_utilization(pods: Sequence[PodRecord] | GroupPods, nodes: Sequence[NodeRecord],
                      untainted: Sequence[NodeRecord]) -> Utilization:
    """Escalator steps 8 and 9 for one group: node_info_map, requests, capacity."""
    summary = pods if isinstance(pods, GroupPods) else summarize_pods(pods)
    return measure_utilization(summary, nodes, untainted)


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
