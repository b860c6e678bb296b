"""The Cluster Autoscaler's scale-down beside Escalator's (spec §1.3, §1.4), as pure functions.

Escalator removes whole percentages of a group, oldest node first, whatever runs there. CA
removes one node at a time, and only a node whose pods can all move. With
`cluster_autoscaler.enabled` both ideas use one simulation (`RemovalSimulation`):

- **Escalator's choice, made safe** (`safe_taint_selection`): a node Escalator picked to taint
  that CA could not remove (a blocking pod, or a pod that fits on no other node) is swapped for
  the next node in Escalator's own order, so a node holding a pod only it can run is never
  emptied from under that pod.
- **CA's unneeded nodes** (`plan_scale_down`): a node below `utilization_threshold` whose pods
  could all move elsewhere is *unneeded*. Once it has been unneeded for `unneeded_time`, and no
  scale-up happened within `delay_after_add`, it is tainted like an Escalator node, and
  Escalator's removal path takes it from there (drained first with `scale_down.drain`).

The I/O (Leases, taints) is composed in `flows/cluster_autoscaler.py` from `tasks.steps`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kube_elevator.tasks.cluster_autoscaler.config import ScaleDownOptions
from kube_elevator.tasks.cluster_autoscaler.drainability import (
    NodeDrainability,
    is_gpu_node,
    node_drainability,
    node_utilization,
)
from kube_elevator.tasks.cluster_autoscaler.scheduling import FilterSnapshot, pod_key
from kube_elevator.tasks.core.pdb import PodDisruptionBudget, remaining_pdbs
from kube_elevator.tasks.core.records import (
    FORCE_TAINT_KEY,
    TERMINAL_PHASES,
    AutoScalingGroup,
    NodeRecord,
    PodRecord,
    Resources,
)
from kube_elevator.tasks.core.scheduling import (
    fits_constraints,
    fits_extended,
    free_extended,
    sum_extended,
    take_extended,
)
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.decide import taint_time
from kube_elevator.tasks.escalator.node_selection import nodes_to_taint
from kube_elevator.tasks.escalator.plan import ScalePlan
from kube_elevator.tasks.scheduler.objects import SchedPod, sched_from_record
from kube_elevator.tasks.scheduler.state import Key

# CA --scale-down-non-empty-candidates-count and the candidate pool (ratio, min count): how
# many occupied nodes one tick simulates, which bounds its cost on large clusters.
NON_EMPTY_CANDIDATES = 30
POOL_RATIO = 0.1
POOL_MIN_COUNT = 50


def movable(pod: PodRecord) -> bool:
    """A pod that keeps a node from being empty: not a DaemonSet, mirror or static pod (they
    belong to the node) and not finished (CA's empty-node rule)."""
    return not (pod.is_daemonset_pod or pod.mirror or pod.static
                or pod.phase in TERMINAL_PHASES)


def threshold_of(node: NodeRecord, options: ScaleDownOptions) -> float:
    """CA: a GPU node is compared with the GPU utilization threshold."""
    return options.gpu_utilization_threshold if is_gpu_node(node) else options.utilization_threshold


def leaving(node: NodeRecord) -> bool:
    """Already on its way out: tainted by Escalator (or forced), or cordoned."""
    return taint_time(node) is not None or node.has_taint(FORCE_TAINT_KEY) or node.unschedulable


@dataclass(frozen=True)
class EscalatorTick:
    """What one group's Escalator tick did, as the scale-down needs it."""

    acted: bool  # tainted, untainted, deleted or scaled up: CA leaves the group alone
    requests: Resources
    capacity: Resources


@dataclass(frozen=True)
class ScaleDownOutcome:
    tainted: Mapping[str, tuple[str, ...]]  # group -> nodes tainted for removal
    notes: Mapping[str, tuple[str, ...]]
    paused: str = ""


# --- the simulation -------------------------------------------------------------------------


@dataclass
class _Room:
    node: NodeRecord
    cpu_milli: int
    memory_bytes: int
    pods: int
    extended: dict[str, int] = field(default_factory=dict)  # GPUs, hugepages, ... left


class RemovalSimulation:
    """Where a removed node's pods would go (CA's scale-down simulator), removal after removal.

    Destinations are ready, schedulable nodes that are not leaving. Each accepted removal takes
    its node out of the destinations and uses up the room its pods land in; pods placed on a
    node travel with it if that node is removed later (CA re-validates such hints).
    """

    def __init__(self, nodes: Iterable[NodeRecord], pods_by_node: Mapping[str, Sequence[PodRecord]],
                 pdbs: Sequence[PodDisruptionBudget] = (), now: float = 0.0):
        self.pods_by_node = pods_by_node
        self.now = now  # the drain rules' clock (a pod stuck terminating)
        self.pdbs: tuple[PodDisruptionBudget, ...] = tuple(pdbs)
        self.rooms: dict[str, _Room] = {}
        nodes = list(nodes)
        for node in sorted(nodes, key=lambda n: n.name):
            if not node.ready or leaving(node):
                continue
            live = [pod for pod in pods_by_node.get(node.name, ()) if pod.phase not in TERMINAL_PHASES]
            self.rooms[node.name] = _Room(
                node, node.cpu_allocatable_milli - sum(p.cpu_request_milli for p in live),
                node.memory_allocatable_bytes - sum(p.memory_request_bytes for p in live),
                node.max_pods - len(live),  # CA's simulator counts pods per node too
                free_extended(node.extended_allocatable,
                              sum_extended(p.extended_requests for p in live)))
        self.moved_in: dict[str, list[PodRecord]] = {}
        self._nodes = nodes
        self._snapshot: FilterSnapshot | None = None
        self._needs_filters: bool | None = None

    def _filter_snapshot(self) -> FilterSnapshot | None:
        """The cluster as the scheduler sees it, when a pod has pod (anti-)affinity,
        spreading or host ports (built once; None otherwise: resources and node constraints
        decide alone, as before)."""
        if self._needs_filters is None:
            self._needs_filters = any(pod.placement is not None
                                      for pods in self.pods_by_node.values() for pod in pods)
            if self._needs_filters:
                self._snapshot = FilterSnapshot(
                    self._nodes, [pod for pods in self.pods_by_node.values() for pod in pods])
        return self._snapshot

    def pods_of(self, node: NodeRecord) -> list[PodRecord]:
        """The node's own pods, plus those an earlier removal moved here in the simulation."""
        return [*self.pods_by_node.get(node.name, ()), *self.moved_in.get(node.name, ())]

    def check(self, node: NodeRecord) -> NodeDrainability:
        """Could the node go now? CA §1.4's blockers first, then a destination for every pod.

        Nothing is committed; `remove` commits a removal that `check` allowed.
        """
        pods = [pod for pod in self.pods_of(node) if pod.phase not in TERMINAL_PHASES]
        verdict = node_drainability(node, pods, self.pdbs, now=self.now)
        if not verdict.drainable:
            return verdict
        placement = self._place(node.name, verdict.to_evict)
        if isinstance(placement, str):
            return NodeDrainability(node.name, False, placement)
        return verdict

    def remove(self, node: NodeRecord, verdict: NodeDrainability) -> None:
        placement = self._place(node.name, verdict.to_evict)
        if isinstance(placement, str):  # the caller checked first; state changed since
            raise ValueError(f"{node.name}: {placement}")
        snapshot = self._filter_snapshot()
        if snapshot is not None:  # the node leaves the snapshot, its pods land elsewhere
            snapshot.remove_node(node.name)
            for pod, destination in placement:
                snapshot.place(pod_key(pod), sched_from_record(pod), destination)
        for pod, destination in placement:
            room = self.rooms[destination]
            room.cpu_milli -= pod.cpu_request_milli
            room.memory_bytes -= pod.memory_request_bytes
            room.pods -= 1
            take_extended(room.extended, pod.extended_requests)
            self.moved_in.setdefault(destination, []).append(pod)
        self.rooms.pop(node.name, None)
        self.moved_in.pop(node.name, None)
        self.pdbs = remaining_pdbs(self.pdbs, verdict.to_evict)

    def _place(self, node_name: str, pods: Sequence[PodRecord]) -> list[tuple[PodRecord, str]] | str:
        """First fit of the pods on the other destinations, or why one fits nowhere; with the
        filter snapshot, the scheduler's filters decide too, the node's own pods lifted off it
        and each pod placed counted for the next (CA's scale-down simulator)."""
        snapshot = self._filter_snapshot()
        if snapshot is None:
            return self._first_fit(node_name, pods, None)
        lifted: list[tuple[Key, SchedPod]] = []
        state = snapshot.cluster.nodes.get(node_name)
        if state is not None:
            lifted = list(state.pods.items())
            for key, _ in lifted:
                state.remove_pod(key)
        try:
            return self._first_fit(node_name, pods, snapshot)
        finally:
            if state is not None:
                for key, view in lifted:
                    state.add_pod(key, view)

    def _first_fit(self, node_name: str, pods: Sequence[PodRecord],
                   snapshot: FilterSnapshot | None) -> list[tuple[PodRecord, str]] | str:
        added: list[tuple[Key, str]] = []
        try:
            return self._first_fit_rooms(node_name, pods, snapshot, added)
        finally:
            if snapshot is not None:
                for key, name in added:
                    snapshot.unplace(key, name)

    def _first_fit_rooms(self, node_name: str, pods: Sequence[PodRecord],
                         snapshot: FilterSnapshot | None, added: list[tuple[Key, str]]
                         ) -> list[tuple[PodRecord, str]] | str:
        used: dict[str, list[int]] = {}
        used_other: dict[str, dict[str, int]] = {}  # extended room left, once touched
        placement: list[tuple[PodRecord, str]] = []
        for pod in pods:
            other = pod.extended_requests
            view = sched_from_record(pod) if snapshot is not None else None
            passes = snapshot.checker(view) if snapshot is not None and view is not None \
                else None
            for name, room in self.rooms.items():
                if name == node_name:
                    continue
                taken = used.setdefault(name, [0, 0, 0])
                if (room.cpu_milli - taken[0] >= pod.cpu_request_milli
                        and room.memory_bytes - taken[1] >= pod.memory_request_bytes
                        and room.pods - taken[2] >= 1
                        and (not other or fits_extended(
                            other, used_other.get(name, room.extended)))
                        and fits_constraints(pod, room.node)
                        and (passes is None or passes(name))):
                    if snapshot is not None and view is not None:
                        key = (pod.namespace, f"{pod.name}#moving")
                        snapshot.place(key, view, name)
                        added.append((key, name))
                    taken[0] += pod.cpu_request_milli
                    taken[1] += pod.memory_request_bytes
                    taken[2] += 1
                    if other:
                        take_extended(used_other.setdefault(name, dict(room.extended)), other)
                    placement.append((pod, name))
                    break
            else:
                return (f"pod {pod.namespace}/{pod.name} fits on no other node "
                        "(requests, selector, affinity, spreading, ports or taints)")
        return placement


# --- Escalator's choice, made safe ----------------------------------------------------------


def safe_taint_selection(plan: ScalePlan, group: NodeGroupConfig, members: Sequence[NodeRecord],
                         simulation: RemovalSimulation,
                         cpu_load_percent: Mapping[str, float] | None = None) -> ScalePlan:
    """Escalator's taints, each one a node CA could remove (§1.3 condition 2, §1.4).

    Candidates are taken in Escalator's order (`scale_down_selection`) starting with its own
    picks; a node that cannot go is skipped with its reason in the notes, and the next one is
    tried. Fewer nodes are tainted if not enough can go.
    """
    if not plan.taint:
        return plan
    chosen = set(plan.taint)
    untainted = [node for node in members if not leaving(node)
                 and (node.name not in plan.next_state.dry_mode_tainted or node.name in chosen)]
    order = nodes_to_taint(untainted, len(untainted), group.scale_down_selection,
                           cpu_load_percent)
    order.sort(key=lambda node: node.name not in chosen)  # Escalator's picks first, in order
    for name in plan.taint:  # planned taints are leaving: no pod moves onto them
        simulation.rooms.pop(name, None)
    taint: list[str] = []
    notes = list(plan.notes)
    for node in order:
        if len(taint) == len(plan.taint):
            break
        verdict = simulation.check(node)
        if not verdict.drainable:
            notes.append(f"scale-down skipped {node.name}: {verdict.reason}")
            continue
        simulation.remove(node, verdict)
        taint.append(node.name)
    if taint == list(plan.taint):
        return plan
    if len(taint) < len(plan.taint):
        notes.append(f"scale-down: {len(taint)} of {len(plan.taint)} node(s) can be removed")
    # Nodes dropped from the plan are destinations again for later checks.
    state = plan.next_state
    if plan.dry_mode:
        tracker = [name for name in state.dry_mode_tainted if name not in chosen] + taint
        state = replace(state, dry_mode_tainted=tuple(tracker))
    return replace(plan, taint=tuple(taint), notes=tuple(notes), next_state=state)


# --- CA's unneeded nodes --------------------------------------------------------------------


@dataclass(frozen=True)
class GroupView:
    """One group as CA's scale-down sees it after the Escalator tick of the same group."""

    group: NodeGroupConfig
    asg: AutoScalingGroup
    nodes: Sequence[NodeRecord]
    unneeded_before: Mapping[str, float]  # node -> unix seconds first found unneeded
    escalator_acted: bool  # Escalator changed the group this tick: CA leaves it alone
    requests: Resources  # Escalator's request totals for the group's pods
    capacity: Resources  # allocatable of its untainted nodes


@dataclass(frozen=True)
class GroupScaleDown:
    """CA's scale-down for one group: what is unneeded since when, and what goes now."""

    unneeded_since: tuple[tuple[str, float], ...] = ()
    taint: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScaleDownPlan:
    groups: Mapping[str, GroupScaleDown] = field(default_factory=dict)
    paused: str = ""  # why nothing is removed this tick ("" = not paused)


def _escalator_would_scale_up(view: GroupView, removed: Sequence[NodeRecord]) -> bool:
    """Escalator: the group's requests over its untainted capacity, once these nodes leave,
    must stay below its scale-up threshold, or its next tick would untaint them again."""
    cpu = view.capacity.cpu_milli - sum(n.cpu_allocatable_milli for n in removed)
    memory = view.capacity.memory_bytes - sum(n.memory_allocatable_bytes for n in removed)
    if cpu <= 0 or memory <= 0:
        return not view.requests.empty
    percent = 100 * max(view.requests.cpu_milli / cpu, view.requests.memory_bytes / memory)
    return percent >= view.group.scale_up_threshold_percent


def _removable_count(view: GroupView, untainted: int) -> int:
    """CA: never below the group's minimum; here Escalator's min_nodes and the ASG's MinSize."""
    return max(0, min(untainted - view.group.min_nodes,
                      view.asg.desired_capacity - view.asg.min_size))


def plan_scale_down(views: Sequence[GroupView], simulation: RemovalSimulation,
                    options: ScaleDownOptions, now: float, last_scale_up: float,
                    scaled_up_this_tick: bool) -> ScaleDownPlan:
    """CA's UpdateUnneededNodes then TryToScaleDown (§1.3), over every group at once.

    Unneeded timers are kept up to date every tick, even while removal is paused, as CA does.
    A node is unneeded when it is below the utilization threshold (or empty), not opted out,
    and every pod on it could move; nodes are tried emptiest first, each accepted one using up
    the room its pods would take. Removal waits `delay_after_add` after any scale-up, takes
    nodes unneeded for `unneeded_time`, at most `max_scale_down_parallelism` per tick of which
    `max_drain_parallelism` hold pods (those only with `drain`: a node is never terminated with
    pods on it).
    """
    paused = ""
    if scaled_up_this_tick:
        paused = "a scale-up happened this tick"
    elif now < last_scale_up + options.delay_after_add_seconds:
        paused = (f"within delay_after_add ({options.delay_after_add}) of the last scale-up")
    candidates: list[tuple[bool, float, float, str, NodeRecord, GroupView, bool]] = []
    for view in views:
        if view.escalator_acted or view.group.dry_mode:
            continue
        for node in view.nodes:
            # CA eligibility: unready nodes are candidates unless --scale-down-unready-enabled
            # is off; they are never destinations, so they are not among the simulation's rooms.
            if leaving(node) or (node.ready and node.name not in simulation.rooms):
                continue
            if not node.ready and not options.unready_enabled:
                continue
            pods = simulation.pods_by_node.get(node.name, ())
            occupied = any(movable(pod) for pod in pods)
            usage = node_utilization(node, pods, now)
            if occupied and usage >= threshold_of(node, options):
                continue
            since = view.unneeded_before.get(node.name)
            # Nodes unneeded last tick first (CA's candidate pool keeps them), then emptiest.
            candidates.append((since is None, since or 0.0, usage if occupied else -1.0,
                               node.name, node, view, occupied))
    candidates.sort(key=lambda item: item[:4])
    non_empty_budget = NON_EMPTY_CANDIDATES + max(
        POOL_MIN_COUNT, int(POOL_RATIO * sum(len(view.nodes) for view in views)))

    unneeded: dict[str, dict[str, float]] = {view.group.name: {} for view in views}
    chosen: dict[str, list[NodeRecord]] = {view.group.name: [] for view in views}
    notes: dict[str, list[str]] = {view.group.name: [] for view in views}
    empty_taken = drain_taken = 0
    for _, _, usage, _, node, view, occupied in candidates:
        name = view.group.name
        if occupied:
            if non_empty_budget <= 0:
                continue
            non_empty_budget -= 1
        verdict = simulation.check(node)
        if not verdict.drainable:
            continue  # CA keeps such nodes out of the unneeded list; `elevator plan` says why
        simulation.remove(node, verdict)
        since = view.unneeded_before.get(node.name, now)
        unneeded[name][node.name] = since
        # CA's planner: a ready node must be unneeded for scale-down-unneeded-time, an unready
        # one for scale-down-unready-time (core/scaledown/unneeded, unremovableReason).
        required = options.unneeded_seconds if node.ready else options.unready_seconds
        if paused or now - since < required:
            continue
        if not occupied:
            if empty_taken + drain_taken >= options.max_scale_down_parallelism:
                continue
        elif not options.drain:
            notes[name].append(f"{node.name} unneeded but not empty: removing it needs "
                               "scale_down.drain")
            continue
        elif (drain_taken >= options.max_drain_parallelism
              or empty_taken + drain_taken >= options.max_scale_down_parallelism):
            continue
        untainted = sum(1 for n in view.nodes if not leaving(n))
        if len(chosen[name]) + 1 > _removable_count(view, untainted):
            notes[name].append(f"{node.name} unneeded but the group is at its minimum size")
            continue
        if _escalator_would_scale_up(view, [*chosen[name], node]):
            notes[name].append(f"{node.name} unneeded but without it the group would reach its "
                               f"scale-up threshold ({view.group.scale_up_threshold_percent}%)")
            continue
        chosen[name].append(node)
        del unneeded[name][node.name]  # tainted now: no longer a candidate
        if occupied:
            drain_taken += 1
        else:
            empty_taken += 1
        shown = "empty" if not occupied else f"utilization {max(usage, 0):.0%}"
        if not node.ready:
            shown = f"unready, {shown}"
        notes[name].append(f"scale-down: {node.name} unneeded for {now - since:g}s ({shown}, "
                           f"threshold {threshold_of(node, options):g}): tainted for removal")
    plans = {view.group.name: GroupScaleDown(
        tuple(sorted(unneeded[view.group.name].items())),
        tuple(node.name for node in chosen[view.group.name]),
        tuple(notes[view.group.name])) for view in views}
    return ScaleDownPlan(plans, paused)


__all__ = [
    "EscalatorTick",
    "GroupScaleDown",
    "GroupView",
    "RemovalSimulation",
    "ScaleDownOutcome",
    "ScaleDownPlan",
    "leaving",
    "movable",
    "plan_scale_down",
    "safe_taint_selection",
]
