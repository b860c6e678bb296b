"""The simulated cluster of `fakes.cluster.SimulatedCluster`, on the in-memory world.

Same kubelets, scheduler and controllers, step for step, so `simulate(..., mode="memory")`
gives the tick records of the HTTP mode (tests/test_fast_simulation.py). What differs is only
bookkeeping: what the HTTP driver recomputes from full lists every step is kept up to date as
things change (the free room of each node, the pending pods, each group's requests, the
completion times in a heap), and the instance and node passes run only when the cloud or the
nodes changed since the last one.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from kube_elevator.fakes.cluster import (
    DAEMONSET_NAMESPACE,
    POD_NAMESPACE,
    SIMULATED_WORKLOADS,
    PodLife,
    Termination,
    _decoded,
    daemonset_pod_body,
    node_for_instance,
    pod_body,
    pod_volume_objects,
    queued,
    simulated_scheduler,
)
from kube_elevator.fakes.memory_asg import fleet_template_id
from kube_elevator.fakes.memory_world import Key, MemoryCloud, MemoryKube, MemoryWorld
from kube_elevator.fakes.scenario import AsgSpec, TracePod, Wave
from kube_elevator.tasks.cluster_autoscaler.config import ClusterAutoscalerConfig
from kube_elevator.tasks.cluster_autoscaler.templates import GPU_RESOURCE
from kube_elevator.tasks.core.instance_types import instance_gpus
from kube_elevator.tasks.core.records import NodeRecord, PodRecord, node_record, pod_record
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.decide import taint_time
from kube_elevator.tasks.escalator.filter_nodes import classify_nodes, pods_by_group
from kube_elevator.tasks.scheduler.cycle import Scheduler
from kube_elevator.tasks.scheduler.objects import SchedPod, Volumes, sched_pod
from kube_elevator.tasks.steps.node_groups import Adapters


@dataclass
class MemoryCluster:
    """`SimulatedCluster`'s world on a `MemoryWorld` (see the module docstring)."""

    world: MemoryWorld
    asgs: Sequence[AsgSpec]
    groups: Sequence[NodeGroupConfig]
    cluster_autoscaler: ClusterAutoscalerConfig | None = None
    scheduler: Scheduler = field(default_factory=simulated_scheduler)
    pods: dict[Key, PodLife] = field(default_factory=dict)
    first_seen: dict[str, float] = field(default_factory=dict)
    node_of_instance: dict[str, str] = field(default_factory=dict)
    node_asg: dict[str, AsgSpec] = field(default_factory=dict)
    last_nodes: dict[str, NodeRecord] = field(default_factory=dict)
    terminations: list[Termination] = field(default_factory=list)
    evictions: int = 0
    _sequence: dict[str, int] = field(default_factory=dict)
    # Each pod as created, to re-create it after an eviction, and the groups it belongs to.
    _created: dict[Key, PodRecord] = field(default_factory=dict)
    _templates: dict[tuple[Any, ...], tuple[PodRecord, SchedPod, tuple[str, ...]]] = field(
        default_factory=dict)
    _sched: dict[Key, SchedPod] = field(default_factory=dict)  # the scheduler's view
    _daemons_on: dict[str, list[Key]] = field(default_factory=dict)  # DaemonSet pods by node
    _joined: dict[str, int] = field(default_factory=dict)  # join order of nodes
    _pod_groups: dict[Key, tuple[str, ...]] = field(default_factory=dict)
    _requested: dict[str, list[int]] = field(default_factory=dict)  # group -> [cpu, memory]
    _pending: dict[Key, None] = field(default_factory=dict)  # unbound pods, arrival order
    _on_node: dict[str, dict[Key, None]] = field(default_factory=dict)  # by life.node
    _completions: list[tuple[float, int, Key, float]] = field(default_factory=list)
    _order: dict[Key, int] = field(default_factory=dict)  # arrival order
    _evicted: list[Key] = field(default_factory=list)  # by the Eviction API, to re-create
    _cloud_seen: int = -1
    _next_join: float = math.inf
    _nodes_seen: int = -1

    def __post_init__(self) -> None:
        self.world.on_evicted = self._evicted_by_api
        self._requested = {group.name: [0, 0] for group in self.groups}
        self.adapters = Adapters(MemoryKube(self.world), MemoryCloud(self.world))

    # --- nodes ------------------------------------------------------------------------------

    def create_asgs(self, now: float) -> None:
        """The ASGs and, already joined, the nodes of their initial instances."""
        for asg in self.asgs:
            self.world.create_asg(asg.name, asg.min, asg.max, asg.desired,
                                  instance_type=asg.instance_type,
                                  availability_zones=(asg.availability_zone,),
                                  launch_template_id=fleet_template_id(self.groups, asg.name))
            for instance in self.world.asgs[asg.name].instances:
                self.first_seen[instance.instance_id] = now - asg.boot_delay
        self.reconcile_instances(now)

    def _next_node_name(self, asg: AsgSpec) -> str:
        number = self._sequence.get(asg.name, 0) + 1
        self._sequence[asg.name] = number
        return f"{asg.name}-{number:03d}"

    def reconcile_instances(self, now: float) -> None:
        """Join Nodes for instances past their boot delay; drop Nodes of vanished instances.
        A pass only when the cloud changed or a booting instance is due."""
        if self.world.cloud_version == self._cloud_seen and now < self._next_join:
            return
        self._cloud_seen = self.world.cloud_version
        self._next_join = math.inf
        live: set[str] = set()
        for asg in self.asgs:
            # moto lists every instance InService at once; ordered as the HTTP driver does.
            for instance in sorted(self.world.asgs[asg.name].instances,
                                   key=lambda i: i.instance_id):
                instance_id = instance.instance_id
                live.add(instance_id)
                seen = self.first_seen.setdefault(instance_id, now)
                if instance_id in self.node_of_instance:
                    continue
                if now >= seen + asg.boot_delay:
                    name = self._next_node_name(asg)
                    cpu, memory = asg.allocatable
                    gpus = instance_gpus(asg.instance_type)
                    raw = node_for_instance(
                        {"InstanceId": instance_id,
                         "AvailabilityZone": instance.availability_zone},
                        asg.node_labels, cpu, memory, now, name,
                        {GPU_RESOURCE: str(gpus)} if gpus else None)
                    self.world.put_node(node_record(_decoded(raw)))
                    self.node_of_instance[instance_id] = name
                    self.node_asg[name] = asg
                    self._joined[name] = len(self._joined)
                    self._start_daemonsets(asg, name, now)
                else:
                    self._next_join = min(self._next_join, seen + asg.boot_delay)
        for instance_id, name in list(self.node_of_instance.items()):
            if instance_id not in live:
                del self.node_of_instance[instance_id]
                self.world.remove_node(name)  # unless the autoscaler deleted it itself

    def _start_daemonsets(self, asg: AsgSpec, node_name: str, now: float) -> None:
        """A pod of each of the ASG's DaemonSets on the node that just joined, bound."""
        for daemonset in asg.daemonsets:
            body = daemonset_pod_body(daemonset, node_name, now)
            key = (DAEMONSET_NAMESPACE, body["metadata"]["name"])
            self.world.put_pod(pod_record(_decoded(body)))
            self.scheduler.bind(key, sched_pod(body), node_name)
            self._daemons_on.setdefault(node_name, []).append(key)

    # --- pods -------------------------------------------------------------------------------

    def arrive(self, name: str, arrival: Wave | TracePod, node_selector: Mapping[str, str],
               now: float) -> None:
        duration = arrival.duration if isinstance(arrival, Wave) else arrival.duration_s
        app = name.rsplit("-", 1)[0]
        # One decoded record per kind of pod; each pod is that record under its own name.
        shape = (app, arrival.cpu, arrival.memory, duration is None,
                 tuple(sorted(node_selector.items())),
                 tuple((t.key, t.operator, t.value, t.effect) for t in arrival.tolerations)
                 if isinstance(arrival, Wave) else (),
                 tuple(sorted(arrival.extended.items())) if isinstance(arrival, Wave) else (),
                 arrival.priority if isinstance(arrival, Wave) else 0,
                 _placement_key(arrival) if isinstance(arrival, Wave) else "")
        known = self._templates.get(shape)
        if known is None:
            body = pod_body(name, arrival, node_selector, now)
            template = pod_record(_decoded(body))
            # A zonal pod's own claim differs by name only: the zone its volume pins is what
            # the template keeps (VolumeZone reads the zone, not the claim).
            volumes = pod_volume_objects(name, arrival)
            known = template, sched_pod(body, SIMULATED_WORKLOADS,
                                        Volumes(volumes) if volumes else None), tuple(
                group for group, members in pods_by_group([template], self.groups).items()
                if members)
            self._templates[shape] = known
        key = (POD_NAMESPACE, name)
        record = msgspec.structs.replace(known[0], name=name, uid=f"uid-{name}")
        self._created[key] = record
        self._sched[key] = replace(known[1], name=name)
        self._order[key] = len(self._order)
        self._pod_groups[key] = known[2]
        self.pods[key] = PodLife(POD_NAMESPACE, name, now, duration, now)
        self._add(key, record)

    def _add(self, key: Key, record: PodRecord) -> None:
        """A pod (re-)created pending."""
        self.world.put_pod(record)
        self._pending[key] = None
        for group in self._pod_groups[key]:
            requested = self._requested[group]
            requested[0] += record.cpu_request_milli
            requested[1] += record.memory_request_bytes

    def _removed(self, key: Key, record: PodRecord) -> None:
        for group in self._pod_groups[key]:
            requested = self._requested[group]
            requested[0] -= record.cpu_request_milli
            requested[1] -= record.memory_request_bytes

    def _evicted_by_api(self, key: Key, record: PodRecord) -> None:
        if key not in self._pod_groups:
            return  # not a workload pod (CA leaves DaemonSet pods alone)
        self._removed(key, record)
        self.scheduler.unbind(key)
        self._evicted.append(key)

    def complete(self, now: float) -> None:
        """Batch pods whose duration has passed succeed; their Job removes them."""
        heap = self._completions
        while heap and heap[0][0] <= now:
            _, _, key, bound_at = heapq.heappop(heap)
            life = self.pods[key]
            if life.completed_at is not None or life.bound_at != bound_at:
                continue  # evicted since: this binding never ran to its end
            life.completed_at = now
            self.scheduler.unbind(key)
            gone = self.world.delete_pod(key)
            if gone is not None:
                self._removed(key, gone)
            if life.node is not None:
                self._on_node.get(life.node, {}).pop(key, None)

    def schedule(self, now: float) -> None:
        """Bind pending pods as the scheduler model decides; evict pods of vanished nodes and
        delete their DaemonSet pods."""
        world = self.world
        vanished: list[str] = []
        if world.node_version != self._nodes_seen:
            self._nodes_seen = world.node_version
            nodes = sorted(world.nodes.values(), key=lambda n: (n.created_unix_seconds, n.name))
            by_name = {node.name: node for node in nodes}
            vanished = [name for name in self.last_nodes if name not in by_name]
            self._record_terminations(vanished, now)
            self.last_nodes = by_name
            # The informer saw the nodes in the order they joined.
            self.scheduler.sync_nodes(sorted(nodes, key=lambda n: self._joined.get(n.name, -1)))
        self._recreate_evicted(now)
        unbound_now: set[Key] = set()
        for name in vanished:
            for key in self._daemons_on.pop(name, ()):  # PodGC: pods of a deleted node
                world.delete_pod(key)
            for key in sorted(self._on_node.pop(name, {})):
                if key in world.pods:
                    self._evict(self.pods[key], now)
                    unbound_now.add(key)  # listed as Running this step: pending from the next
        if not self._pending:
            return
        lives, sched = self.pods, self._sched
        decisions = self.scheduler.schedule_queue(
            (queued(key, sched[key], lives[key]) for key in self._pending
             if key not in unbound_now), now)
        preempted = self.scheduler.take_preempted()
        for key, target in decisions:
            life = lives[key]
            pod = world.pods[key]
            if target is None:
                if not life.marked_unschedulable:
                    world.put_pod(msgspec.structs.replace(
                        pod, phase="Pending", scheduled=False, unschedulable=True))
                    life.marked_unschedulable = True
                continue
            world.put_pod(msgspec.structs.replace(pod, node_name=target, phase="Running",
                                                  scheduled=True, unschedulable=False))
            del self._pending[key]
            life.pending_seconds += now - life.pending_since
            life.bound_at, life.node = now, target
            self._on_node.setdefault(target, {})[key] = None
            if life.duration is not None:
                heapq.heappush(self._completions,
                               (life.bound_at + life.duration, self._order[key], key, now))
        for key, node in preempted:  # their controllers re-create them pending
            if key in lives:
                self._on_node.get(node, {}).pop(key, None)
                self._evict(lives[key], now)

    def _evict(self, life: PodLife, now: float) -> None:
        """Its node is gone, or preemption evicted it: the pod is re-created pending (as its
        controller would)."""
        key = (life.namespace, life.name)
        pod = self.world.pods[key]
        self.world.put_pod(msgspec.structs.replace(pod, node_name="", phase="Pending",
                                                   scheduled=False, unschedulable=True))
        self._pending[key] = None
        life.bound_at, life.node, life.pending_since = None, None, now
        life.marked_unschedulable = True
        self.evictions += 1

    def _recreate_evicted(self, now: float) -> None:
        """A pod evicted through the Eviction API is gone: its controller creates it again,
        pending, under the same name."""
        evicted, self._evicted = self._evicted, []
        for key in sorted(set(evicted), key=self._order.__getitem__):
            life = self.pods[key]
            if life.completed_at is not None or key in self.world.pods:
                continue
            self._add(key, self._created[key])
            if life.node is not None:
                self._on_node.get(life.node, {}).pop(key, None)
            if life.bound_at is not None:
                life.pending_since = now
            life.bound_at, life.node, life.marked_unschedulable = None, None, False
            self.evictions += 1

    def _record_terminations(self, vanished: Sequence[str], now: float) -> None:
        for name in vanished:
            node = self.last_nodes[name]
            running = [key for key in self._on_node.get(name, {})
                       if self.pods[key].completed_at is None]
            tainted_at = taint_time(node)
            age = None if tainted_at is None else now - tainted_at
            hard = next((group.hard_delete_grace_seconds for group in self.groups
                         if node.labels.get(group.label_key) == group.label_value), 0.0)
            premature = bool(running) and (age is None or age <= hard)
            self.terminations.append(Termination(now, name, len(running), age, premature))

    def advance(self, now: float) -> None:
        """One step of the world: nodes join or leave, pods finish, pending pods are bound."""
        self.reconcile_instances(now)
        self.complete(now)
        self.schedule(now)

    # --- what the simulation reports ----------------------------------------------------------

    def run_tick(self, now: float) -> list[dict[str, Any]]:
        """The tick of `flows/tick.py` on the in-memory adapters, its steps called directly."""
        from kube_elevator.flows.tick import tick
        from kube_elevator.tasks.core.step import run_plain
        from kube_elevator.tasks.steps.source import LiveSource

        return [outcome.to_json() for outcome in tick(
            run_plain, LiveSource(self.adapters), self.adapters, self.groups, now,
            cluster_autoscaler=self.cluster_autoscaler, concurrent_groups=False)]

    def tick_record(self, offset: float, outcomes: list[dict[str, Any]]) -> dict[str, Any]:
        """`flows.simulation._tick_record`'s line, from the world's state."""
        nodes = self.world.node_list()
        counts = {group.name: [0, 0] for group in self.groups}  # pending, running
        groups_of = self._pod_groups
        for key, pod in self.world.pods.items():
            for name in groups_of.get(key, ()):
                counts[name][1 if pod.node_name else 0] += 1
        by_name = {outcome["name"]: outcome for outcome in outcomes}
        record: dict[str, Any] = {"t": round(offset, 3), "node_groups": {}}
        for group in self.groups:
            members = [n for n in nodes if n.labels.get(group.label_key) == group.label_value]
            classes = classify_nodes(members)
            outcome = by_name[group.name]
            asg = self.world.asgs.get(group.cloud_provider_group_name)
            record["node_groups"][group.name] = {
                "nodes": len(members),
                "untainted": len(classes.untainted),
                "tainted": len(classes.tainted),
                "asg_desired": asg.desired if asg else 0,
                "instances": len(asg.instances) if asg else 0,
                "pending_pods": counts[group.name][0],
                "running_pods": counts[group.name][1],
                "cpu_percent": _round(outcome["cpu_percent"]),
                "mem_percent": _round(outcome["mem_percent"]),
                "delta": outcome["delta"],
                "status": outcome["status"],
                # the decision's why and the notes it leaves, for the tick line (as `run`'s)
                "reason": outcome.get("reason") or "",
                "notes": list(outcome.get("notes") or ()),
            }
        return record

    def node_count(self) -> int:
        return len(self.world.nodes)

    def requested(self) -> Mapping[str, Sequence[int]]:
        """Each group's requested (milli-CPU, bytes) of the pods present, pending or bound."""
        return self._requested


def _placement_key(wave: Wave) -> str:
    """What a wave says about placement beyond requests, selectors and tolerations (its labels,
    affinity, spreading, host ports, volume zone): two waves of one app that differ here are
    two kinds of pod. Empty for the usual wave, so it costs nothing there."""
    if not (wave.constrained or wave.labels):
        return ""
    return wave.model_dump_json(include=_PLACEMENT_FIELDS)


_PLACEMENT_FIELDS = {"labels", "affinity", "topology_spread_constraints", "ports",
                     "volume_zone"}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


__all__ = ["MemoryCluster"]
