"""The pods the scheduler gave up on, and CA's bin-packing estimator: how many template nodes
they need (CA §1.1).

Pods that need only resources, selectors and taints are packed by the resource bookkeeping
below; when a pod has pod (anti-)affinity, spreading or host ports, or a pod in the cluster has
required anti-affinity, the estimator and `filter_out_schedulable` run the scheduler's filters
on a `FilterSnapshot` (estimator/binpacking_estimator.go, as CA does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from kube_elevator.tasks.cluster_autoscaler.drainability import EXPENDABLE_PRIORITY_CUTOFF
from kube_elevator.tasks.cluster_autoscaler.scheduling import (
    HOSTNAME,
    FilterSnapshot,
    needs_filters,
    pod_key,
    template_record,
)
from kube_elevator.tasks.cluster_autoscaler.templates import TemplateNode
from kube_elevator.tasks.core.api_objects import ExtendedResources
from kube_elevator.tasks.core.records import NodeRecord, PodRecord
from kube_elevator.tasks.core.scheduling import (
    fits_constraints,
    fits_extended,
    free_extended,
    sum_extended,
    take_extended,
)
from kube_elevator.tasks.scheduler.objects import SchedPod, sched_from_record

T = TypeVar("T")


# --- pending pods ------------------------------------------------------------------------


def unschedulable_pods(pods: Iterable[PodRecord], nodes: Iterable[NodeRecord] = ()
                       ) -> list[PodRecord]:
    """Pods the scheduler gave up on: PodScheduled=False with reason Unschedulable (CA §1.1).

    Left out, as CA's pod-list processors leave them: DaemonSet pods (bound to one node each; a
    new node brings its own copy), pods being deleted, pods below the expendable priority
    cutoff (they wait for room; FilterOutExpendableAndSplit), and pods nominated to one of
    `nodes`, which will run there once the lower-priority pods they preempt have gone (their
    room is taken in `free_slots`).
    """
    names = {node.name for node in nodes}
    return [pod for pod in pods
            if pod.unschedulable and not pod.node_name and not pod.is_daemonset_pod
            and not pod.deleting_since_unix_seconds
            and pod.priority >= EXPENDABLE_PRIORITY_CUTOFF
            and pod.nominated_node not in names]


# --- the bin-packing estimator -------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """How many template copies the pods need, and which pods land on each (CA §1.1)."""

    node_count: int
    nodes: tuple[tuple[PodRecord, ...], ...]

    @property
    def pods(self) -> tuple[PodRecord, ...]:
        return tuple(pod for node in self.nodes for pod in node)


def fits_empty_template(pod: PodRecord, template: TemplateNode) -> bool:
    """Would the pod fit a fresh copy of the template: predicates, then resources, extended
    ones included (a GPU pod never fits a CPU-only template)."""
    return (fits_constraints(pod, template)
            and pod.cpu_request_milli <= template.free_cpu_milli
            and pod.memory_request_bytes <= template.free_memory_bytes
            and template.free_pods >= 1
            and (not pod.extended_requests
                 or fits_extended(pod.extended_requests, template.free_extended)))


def _decreasing_score(template: TemplateNode) -> Callable[[PodRecord], float]:
    # CA's DecreasingPodOrderer: cpu/allocatable cpu + memory/allocatable memory, largest first.
    cpu = template.cpu_allocatable_milli or 1
    memory = template.memory_allocatable_bytes or 1
    return lambda pod: pod.cpu_request_milli / cpu + pod.memory_request_bytes / memory


def estimate_nodes(pods: Sequence[PodRecord], template: TemplateNode, max_nodes: int,
                   snapshot: FilterSnapshot | None = None) -> Estimate:
    """First fit decreasing of the pods onto copies of the template, at most `max_nodes` copies.

    As CA's binpacking estimator: pods that fit no fresh copy (selector, affinity, taints, or
    too big) are not helped; once the node limit is reached, the remaining pods may still fill
    room on the nodes already counted but no node is added (CA stops adding, §1.1 limits).
    With a `snapshot` (the cluster as the scheduler sees it) and pods that need the filters,
    `estimate_with_filters` packs them.
    """
    if snapshot is not None and needs_filters(pods):
        return estimate_with_filters(pods, template, max_nodes, snapshot)
    score = _decreasing_score(template)
    fitting = sorted((pod for pod in pods if fits_empty_template(pod, template)),
                     key=score, reverse=True)
    free: list[list[int]] = []  # per new node: [cpu_milli, memory_bytes, pods]
    free_other: list[dict[str, int]] = []  # per new node: extended resources left
    placed: list[list[PodRecord]] = []
    for pod in fitting:
        cpu, memory, other = pod.cpu_request_milli, pod.memory_request_bytes, pod.extended_requests
        for index, room in enumerate(free):
            if (room[0] >= cpu and room[1] >= memory and room[2] >= 1
                    and (not other or fits_extended(other, free_other[index]))):
                room[0] -= cpu
                room[1] -= memory
                room[2] -= 1
                take_extended(free_other[index], other)
                placed[index].append(pod)
                break
        else:
            if len(free) >= max_nodes:
                continue
            free.append([template.free_cpu_milli - cpu, template.free_memory_bytes - memory,
                         template.free_pods - 1])
            fresh = template.free_extended
            take_extended(fresh, other)
            free_other.append(fresh)
            placed.append([pod])
    return Estimate(len(free), tuple(tuple(node) for node in placed))


def estimate_with_filters(pods: Sequence[PodRecord], template: TemplateNode, max_nodes: int,
                          snapshot: FilterSnapshot) -> Estimate:
    """BinpackingNodeEstimator.Estimate with the scheduler's filters, on the snapshot (left as
    it was on return): the pods in decreasing order, grouped by equivalence (same spec and
    labels); each group first on the template copies added so far, then on new copies: the
    last one added, or, for a pod whose hostname spreading refused it there, any other node of
    the snapshot; a new copy only after the last one took a pod, and at most `max_nodes`. The
    count is of the nodes that received a pod (`newNodesWithPods`, which upstream counts even
    when it is a live node the hostname retry used). First fit stands for the snapshot's
    round-robin walk."""
    score = _decreasing_score(template)
    ordered = sorted((pod for pod in pods if fits_empty_template(pod, template)),
                     key=score, reverse=True)
    groups: list[list[tuple[PodRecord, SchedPod]]] = []
    for pod in ordered:
        view = sched_from_record(pod)
        if groups and groups[-1][0][1].filter_shape == view.filter_shape:
            groups[-1].append((pod, view))
        else:
            groups.append([(pod, view)])
    new: list[str] = []
    with_pods: dict[str, list[PodRecord]] = {}
    placed: list[tuple[tuple[str, str], str]] = []
    available = True

    def track(pod: PodRecord, view: SchedPod, name: str) -> None:
        key = (pod.namespace, f"{pod_key(pod)[1]}#estimate{len(placed)}")
        snapshot.place(key, view, name)
        placed.append((key, name))
        with_pods.setdefault(name, []).append(pod)

    def on_new_nodes(group: Sequence[tuple[PodRecord, SchedPod]]) -> bool:
        for pod, view in group:
            if new:
                last = new[-1]
                failure = snapshot.failing(view, last)
                if failure is None:
                    track(pod, view, last)
                    continue
                if failure == "PodTopologySpread" and any(
                        c.topology_key == HOSTNAME for c in view.spread_constraints):
                    other = snapshot.first_fit(view, [n for n in snapshot.names() if n != last])
                    if other is not None:
                        track(pod, view, other)
                        continue
                if last not in with_pods:
                    return True  # an empty copy refused it: so would another
            if len(new) >= max_nodes:
                return False
            name = f"e-{len(new)}"
            snapshot.add_node(template_record(template, name))
            new.append(name)
            if not snapshot.fits(view, name):
                break
            track(pod, view, name)
        return True

    try:
        for group in groups:
            index = 0
            while index < len(group):
                pod, view = group[index]
                name = snapshot.first_fit(view, new)
                if name is None:
                    break
                track(pod, view, name)
                index += 1
            if available:
                available = on_new_nodes(group[index:])
        return Estimate(len(with_pods), tuple(tuple(on) for on in with_pods.values()))
    finally:
        for key, name in placed:
            snapshot.unplace(key, name)
        for name in new:
            snapshot.remove_node(name)


@dataclass(frozen=True)
class Slot:
    """Room on a node that exists or is coming up, where a pending pod might still land."""

    node: TemplateNode | NodeRecord
    cpu_milli: int
    memory_bytes: int
    pods: int
    extended: Mapping[str, int] = field(default_factory=dict)  # extended resources left


def upcoming_slots(template: TemplateNode, count: int) -> list[Slot]:
    """Nodes the group's target size asked for that have not registered yet."""
    return [Slot(template, template.free_cpu_milli, template.free_memory_bytes,
                 template.free_pods, template.free_extended) for _ in range(max(count, 0))]


def free_slots(nodes: Iterable[NodeRecord], pods: Iterable[PodRecord]) -> list[Slot]:
    """What is left on live, schedulable nodes after the requests of the pods bound to them, and
    of those nominated to them (CA puts those in its snapshot on their nominated node)."""
    used: dict[str, list[int]] = {}
    used_other: dict[str, list[ExtendedResources]] = {}
    for pod in pods:
        node_name = pod.node_name or pod.nominated_node
        if node_name:
            entry = used.setdefault(node_name, [0, 0, 0])
            entry[0] += pod.cpu_request_milli
            entry[1] += pod.memory_request_bytes
            entry[2] += 1
            if pod.extended_requests:
                used_other.setdefault(node_name, []).append(pod.extended_requests)
    slots = []
    for node in nodes:
        if not node.ready or node.unschedulable:
            continue
        cpu, memory, count = used.get(node.name, (0, 0, 0))
        slots.append(Slot(node, node.cpu_allocatable_milli - cpu,
                          node.memory_allocatable_bytes - memory, node.max_pods - count,
                          free_extended(node.extended_allocatable,
                                        sum_extended(used_other.get(node.name, ())))))
    return slots


def filter_out_schedulable(pending: Sequence[PodRecord], slots: Sequence[Slot],
                           snapshot: FilterSnapshot | None = None,
                           ) -> tuple[list[PodRecord], list[PodRecord]]:
    """(still pending, would fit somewhere): CA first places pending pods on existing and
    upcoming nodes, so a pod waiting for a node that is booting does not trigger another.
    With a `snapshot` and pods that need the filters, they decide (`_filter_with_snapshot`)."""
    if snapshot is not None and needs_filters(pending):
        return _filter_with_snapshot(pending, slots, snapshot)
    rooms = [[slot.cpu_milli, slot.memory_bytes, slot.pods] for slot in slots]
    rooms_other = [dict(slot.extended) for slot in slots]
    remaining: list[PodRecord] = []
    fitted: list[PodRecord] = []
    for pod in pending:
        other = pod.extended_requests
        for slot, room, room_other in zip(slots, rooms, rooms_other, strict=True):
            if (room[0] >= pod.cpu_request_milli and room[1] >= pod.memory_request_bytes
                    and room[2] >= 1 and (not other or fits_extended(other, room_other))
                    and fits_constraints(pod, slot.node)):
                room[0] -= pod.cpu_request_milli
                room[1] -= pod.memory_request_bytes
                room[2] -= 1
                take_extended(room_other, other)
                fitted.append(pod)
                break
        else:
            remaining.append(pod)
    return remaining, fitted


def _filter_with_snapshot(pending: Sequence[PodRecord], slots: Sequence[Slot],
                          snapshot: FilterSnapshot) -> tuple[list[PodRecord], list[PodRecord]]:
    """filter_out_schedulable on the snapshot: upcoming nodes join it as template copies,
    each pending pod goes to the first slot whose node passes the filters and stays there (so
    the estimator sees it, as CA's snapshot does)."""
    names: list[str] = []
    for index, slot in enumerate(slots):
        if isinstance(slot.node, TemplateNode):
            name = f"upcoming-{slot.node.group}-{index}"
            snapshot.add_node(template_record(slot.node, name))
            names.append(name)
        elif slot.node.name in snapshot.cluster.nodes:
            names.append(slot.node.name)
    remaining: list[PodRecord] = []
    fitted: list[PodRecord] = []
    for pod in pending:
        view = sched_from_record(pod)
        target = snapshot.first_fit(view, names)
        if target is None:
            remaining.append(pod)
        else:
            snapshot.place(pod_key(pod), view, target)
            fitted.append(pod)
    return remaining, fitted
