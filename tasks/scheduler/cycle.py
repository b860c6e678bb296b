"""The scheduler the simulator runs: its cache kept as pods and nodes change, the queue, and one
scheduling cycle per pending pod (pkg/scheduler/schedule_one.go, v1.35).

A cycle (`schedule_one`):
1. the filters on the snapshot's nodes (`ClusterState.order`, the node tree's round robin over
   zones) from `nextStartNodeIndex`, stopping once `numFeasibleNodesToFind` nodes passed: all of
   them below 100 nodes, else `percentageOfNodesToScore` of them (adaptive: 50 % less 1 % per 125
   nodes, at least 5 %) and never fewer than 100; the index then moves past the nodes processed;
2. one feasible node is taken as it is; several are scored (`framework.score_feasible`);
3. the best total wins. Ties: v1.35 pops a heap of the scores (newSortedNodeScores), which
   without an extender compares the totals only, so among equal totals it returns whichever
   the heap's layout of the feasible list puts first; that list is filled by 16 goroutines in
   the order they finish (kubernetes PR 141024: "the scores were already in random order due
   to the feasibleNodes slice being constructed in non-deterministic order"). Here the winner
   among equal totals is drawn uniformly from a generator seeded by the scenario, which is
   what the heap gives over a feasible list in random order (by symmetry).

The queue is PrioritySort's: higher `spec.priority` first, then the earlier time the pod was
queued (its creation, or its re-creation after an eviction). Pods that do not fit stay pending
and are tried again each step in that order. A pod no node takes runs DefaultPreemption
(`tasks.scheduler.preemption`): when evicting pods of lower priority from one node makes room,
those victims leave the cache at once (`take_preempted` tells the simulator, which evicts them:
their controllers re-create them pending) and the pod is bound there in the same cycle (the
victims' graceful termination and the nominated node's wait are not modelled).

`first-fit` keeps the simulator's earlier rule: the oldest node (creation time, then name) that
passes the same filters, the queue in arrival order (with priorities first).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube_elevator.tasks.core.records import NodeRecord
from kube_elevator.tasks.scheduler.framework import (
    ClusterFilters,
    NodeScore,
    ResourceScores,
    cluster_filters,
    node_admits,
    plugin_scores,
    resource_scores,
    score_feasible,
    weighted_totals,
)
from kube_elevator.tasks.scheduler.noderesources import fits_request
from kube_elevator.tasks.scheduler.objects import NamespaceLabels, SchedPod
from kube_elevator.tasks.scheduler.preemption import eligible, find_victims
from kube_elevator.tasks.scheduler.profiles import Profile
from kube_elevator.tasks.scheduler.state import ClusterState, Key, NodeState

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
CACHE_ENTRIES_BOUND = 200_000  # per cache: cleared whole past this (shapes x nodes)


def num_feasible_nodes_to_find(percentage_of_nodes_to_score: int, num_all_nodes: int) -> int:
    """schedule_one.go numFeasibleNodesToFind."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    percentage = percentage_of_nodes_to_score
    if percentage == 0:
        percentage = 50 - num_all_nodes // 125
        if percentage < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            percentage = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num_nodes = num_all_nodes * percentage // 100
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return MIN_FEASIBLE_NODES_TO_FIND
    return num_nodes


@dataclass(frozen=True)
class QueuedPod:
    """A pending pod as the queue holds it: `arrival` is when it first arrived, `queued_at`
    when the pod now pending was created (later after an eviction re-created it)."""

    key: Key
    pod: SchedPod
    arrival: float
    queued_at: float


class Scheduler:
    """The simulated kube-scheduler (see the module docstring); `seed` seeds the tie-break."""

    def __init__(self, profile: Profile, seed: int,
                 namespaces: NamespaceLabels | None = None,
                 can_evict: Callable[[Key], bool] | None = None) -> None:
        self.profile = profile
        self.namespaces: NamespaceLabels = dict(namespaces or {})
        # which bound pods preemption may evict (the simulator's DaemonSet pods it may not)
        self.can_evict = can_evict
        self.start_times: dict[Key, float] = {}  # when each bound pod started (preemption)
        self._preempted: list[tuple[Key, str]] = []
        self._clock = 0.0
        self.cluster = ClusterState()
        self.next_start_node_index = 0
        self.rng = random.Random(seed)
        self.node_of: dict[Key, str] = {}
        # pods bound to a node the cache has not seen yet (cache.addPod keeps them the same way)
        self._waiting: dict[str, dict[Key, SchedPod]] = {}
        self._by_age: list[NodeState] | None = None
        # answers cached: the nodes admitting a pod shape (until a node changes: `_epoch`), and
        # the resource scores of a pod shape on a node state (the same for every such node)
        self._epoch = 0
        self._admits: dict[tuple[Any, ...], tuple[int, list[tuple[int, NodeState]]]] = {}
        self._resource_scores_cache: dict[tuple[Any, ...], tuple[int, int]] = {}

    # --- the cache: nodes and pods --------------------------------------------------------------

    def sync_nodes(self, nodes: Iterable[NodeRecord]) -> list[str]:
        """Make the cache's nodes these: new ones are added in the order given (the order the
        informer saw them created), changed ones updated; returns the names of nodes gone,
        whose pods left the cache with them."""
        seen: set[str] = set()
        cluster = self.cluster
        changed = False
        for record in nodes:
            seen.add(record.name)
            state = cluster.nodes.get(record.name)
            if state is None:
                state = cluster.add_node(record)
                for key, pod in self._waiting.pop(record.name, {}).items():
                    state.add_pod(key, pod)
                changed = True
            elif state.record is not record and state.record != record:
                cluster.update_node(record)
                changed = True
        gone = [name for name in cluster.nodes if name not in seen]
        for name in gone:
            state = cluster.remove_node(name)
            if state is not None:
                for key in state.pods:
                    self.node_of.pop(key, None)
            changed = True
        if changed:
            self._epoch += 1
            self._by_age = None
        return gone

    def bind(self, key: Key, pod: SchedPod, node_name: str) -> None:
        """The pod is on `node_name` (assumed by the scheduler, or bound by another actor, as
        a DaemonSet pod is before its node is in the cache)."""
        self.unbind(key)
        self.node_of[key] = node_name
        self.start_times[key] = self._clock
        state = self.cluster.nodes.get(node_name)
        if state is not None:
            state.add_pod(key, pod)
        else:
            self._waiting.setdefault(node_name, {})[key] = pod

    def unbind(self, key: Key) -> None:
        """The pod left its node (finished, evicted, deleted); nothing when it had none."""
        node_name = self.node_of.pop(key, None)
        self.start_times.pop(key, None)
        if node_name is None:
            return
        state = self.cluster.nodes.get(node_name)
        if state is not None:
            state.remove_pod(key)
        else:
            self._waiting.get(node_name, {}).pop(key, None)

    def sync_pods(self, bound: Mapping[Key, str], pod_of: Callable[[Key], SchedPod]) -> None:
        """Make the cache's bound pods these (`bound`: pod -> node), as an informer would from
        a full list; `pod_of` gives a newly bound pod's scheduler view."""
        for key in [key for key, node in self.node_of.items() if bound.get(key) != node]:
            self.unbind(key)
        for key, node_name in bound.items():
            if self.node_of.get(key) != node_name:
                self.bind(key, pod_of(key), node_name)

    # --- the queue ------------------------------------------------------------------------------

    def queue_order(self, pending: Iterable[QueuedPod]) -> list[QueuedPod]:
        """PrioritySort's Less: priority, then the time queued; the name breaks exact ties."""
        if self.profile.first_fit:
            return sorted(pending, key=lambda q: (-q.pod.priority, q.arrival, q.key[1]))
        return sorted(pending, key=lambda q: (-q.pod.priority, q.queued_at, q.key[1]))

    def schedule_queue(self, pending: Iterable[QueuedPod],
                       now: float = 0.0) -> list[tuple[Key, str | None]]:
        """One pass over the queue: each pod's cycle, in queue order, the chosen node assumed
        (bound in the cache) before the next pod's; a pod no node takes may preempt
        (`take_preempted` then lists its victims). A pod with the filters' shape of one that
        found no node in this pass finds none either (nodes only fill up within a pass) and is
        not tried again. `now` is the pass's time, each bound pod's start."""
        self._clock = now
        decisions: list[tuple[Key, str | None]] = []
        failed: set[tuple[Any, ...]] = set()
        for queued in self.queue_order(pending):
            pod = queued.pod
            shape = pod.filter_shape
            node_name = None if shape in failed else self.schedule_one(pod)
            if node_name is None and shape not in failed:
                node_name = self.preempt(pod)
            if node_name is not None:
                self.bind(queued.key, queued.pod, node_name)
            elif not (pod.hard_spread or (pod.affinity is not None and pod.affinity.required)):
                # a pod placed may satisfy another's affinity or even out a spread: only the
                # others are skipped
                failed.add(shape)
            decisions.append((queued.key, node_name))
        return decisions

    def preempt(self, pod: SchedPod) -> str | None:
        """DefaultPreemption for a pod no node took: the node whose victims leave (removed
        from the cache, listed for `take_preempted`), or None."""
        if self.profile.first_fit or not eligible(pod, min(self.cluster.priorities,
                                                           default=None)):
            return None
        found = find_victims(
            pod, self.cluster.order(), self.profile, self.start_times.__getitem__,
            namespaces=self.namespaces, affinity_counts=self.cluster.affinity_counts,
            lowest_priority=min(self.cluster.priorities, default=None),
            can_evict=self.can_evict)
        if found is None:
            return None
        for key, _ in found.pods:
            self.unbind(key)
            self._preempted.append((key, found.node))
        return found.node

    def take_preempted(self) -> list[tuple[Key, str]]:
        """The pods preemption evicted since the last call, with the node each left."""
        taken, self._preempted = self._preempted, []
        return taken

    # --- one cycle ------------------------------------------------------------------------------
    # The filters are split as upstream's plugins are: those that read the node object
    # (`node_admits`) are answered once per node version and pod shape, in node order; only
    # NodeResourcesFit, which reads the node's pods, runs per cycle.

    def _admitting(self, pod: SchedPod) -> list[tuple[int, NodeState]]:
        """(position in the snapshot's order, node) of every node whose object admits pods of
        this pod's shape (selector, affinity, tolerations)."""
        shape = (tuple(sorted(pod.node_selector.items())), pod.required_terms, pod.tolerations)
        hit = self._admits.get(shape)
        if hit is not None and hit[0] == self._epoch:
            return hit[1]
        if len(self._admits) > CACHE_ENTRIES_BOUND // 100:
            self._admits.clear()
        admitting = [(position, node) for position, node in enumerate(self.cluster.order())
                     if node_admits(pod, node)]
        self._admits[shape] = (self._epoch, admitting)
        return admitting

    def feasible_by_age(self, pod: SchedPod) -> list[NodeState]:
        """Every node that passes the filters, oldest first (first-fit's candidates)."""
        if self._by_age is None:
            self._by_age = sorted(self.cluster.nodes.values(),
                                  key=lambda s: (s.record.created_unix_seconds, s.name))
        admitted = {node.name for _, node in self._admitting(pod)}
        filters = self._cluster_filters(pod)
        return [node for node in self._by_age
                if node.name in admitted and fits_request(pod, node)
                and (filters is None or filters.admits(node))]

    def _cluster_filters(self, pod: SchedPod) -> ClusterFilters | None:
        """The PreFilter answers of the filters reading other pods (None: none applies)."""
        return cluster_filters(pod, self.cluster.order(), self.profile, self.namespaces,
                               self.cluster.affinity_counts)

    def find_nodes_that_fit(self, pod: SchedPod) -> list[NodeState]:
        """findNodesThatPassFilters: the nodes that pass, in the order of a walk of the
        snapshot from nextStartNodeIndex that stops at numFeasibleNodesToFind; the index then
        moves past the nodes the walk processed."""
        count = len(self.cluster.order())
        if count == 0:
            return []
        wanted = num_feasible_nodes_to_find(self.profile.percentage_of_nodes_to_score, count)
        start = self.next_start_node_index
        passing = [(position, node) for position, node in self._admitting(pod)
                   if fits_request(pod, node)]
        filters = self._cluster_filters(pod)
        if filters is not None:
            passing = [(position, node) for position, node in passing if filters.admits(node)]
        split = bisect.bisect_left(passing, start, key=lambda item: item[0])
        walked = passing[split:] + passing[:split]
        if len(walked) < wanted:
            processed = count
        else:
            walked = walked[:wanted]
            processed = (walked[-1][0] - start) % count + 1
        self.next_start_node_index = (start + processed) % count
        return [node for _, node in walked]

    def _resource_scores(self, pod: SchedPod) -> ResourceScores:
        """`resource_scores` cached by the pod's requests and the node's resource state."""
        profile = self.profile
        shape = (pod.cpu_milli, pod.memory_bytes, pod.nonzero_cpu_milli,
                 pod.nonzero_memory_bytes, pod.extended)
        cache = self._resource_scores_cache
        if len(cache) > CACHE_ENTRIES_BOUND:
            cache.clear()

        def resources(node: NodeState) -> tuple[int, int]:
            key = (shape, node.resource_key)
            answer = cache.get(key)
            if answer is None:
                answer = cache[key] = resource_scores(pod, node, profile)
            return answer

        return resources

    def scores(self, pod: SchedPod, feasible: Sequence[NodeState]) -> list[NodeScore]:
        """The feasible nodes' scores, the resource scores served from the cache."""
        return score_feasible(pod, feasible, self.cluster.order(), self.profile,
                              self._resource_scores(pod), namespaces=self.namespaces,
                              affinity_counts=self.cluster.affinity_counts)

    def schedule_one(self, pod: SchedPod) -> str | None:
        """schedulePod: the node for the pod, None when none passes the filters."""
        if self.profile.first_fit:
            candidates = self.feasible_by_age(pod)
            return candidates[0].name if candidates else None
        feasible = self.find_nodes_that_fit(pod)
        if not feasible:
            return None
        if len(feasible) == 1:
            return feasible[0].name
        totals = weighted_totals(plugin_scores(pod, feasible, self.cluster.order(),
                                               self.profile, self._resource_scores(pod),
                                               namespaces=self.namespaces,
                                               affinity_counts=self.cluster.affinity_counts),
                                 self.profile)
        best = max(totals)
        winners = [node.name for node, total in zip(feasible, totals, strict=True)
                   if total == best]
        if len(winners) == 1:
            return winners[0]
        return winners[self.rng.randrange(len(winners))]


__all__ = ["QueuedPod", "Scheduler", "num_feasible_nodes_to_find"]
