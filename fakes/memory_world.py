"""The simulated cluster and cloud as plain Python objects: the simulator's fast mode.

`MemoryWorld` holds pods, nodes, Leases, PodDisruptionBudgets, ConfigMaps and ASGs (with their
instances); `MemoryKube` and `MemoryCloud` implement the tick's adapter protocols
(`tasks.adapters.ports`) on it, so `flows.tick.tick(run_plain, LiveSource(adapters), adapters, ...)`
runs the same steps as over HTTP, with no server, no JSON and no moto in between.

The semantics are those of the HTTP path, call for call (tests/test_fast_simulation.py checks
the same call sequences on both):
* the Kubernetes side is `tasks.adapters.kube.KubeClient` on `fakes.kube_api.FakeKubeApi`: one global
  resourceVersion counter, taints written whole with the node's resourceVersion (409, then a
  fresh read, as the client retries), a Lease replaced only at the resourceVersion it was read
  at (else `LeaseConflict`), created only if absent, a write that changes nothing keeping its
  version; evictions honour PodDisruptionBudgets (429 as `EvictionBlocked`); lists in
  (namespace, name) order;
* the cloud side is `tasks.adapters.cloud.AsgClient` on moto: SetDesiredCapacity clamped into
  [MinSize, MaxSize] against a fresh description and not sent when unchanged, instances
  launched at once, terminating an instance removes it and decrements the desired capacity,
  Escalator's MinSize refusals; a one-shot group's fleets as `fakes.memory_asg` says.
  Instance ids are deterministic (`i-` and a counter), unlike moto's random ones.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import msgspec
from kubernetes.client.exceptions import ApiException

from kube_elevator.fakes.kube_api.policy import (
    PDB_MULTIPLE,
    PDB_VIOLATION,
    _ignores_budgets,
    _selector_empty,
    _selector_matches,
    eviction_blocked_by,
    pdb_status,
)
from kube_elevator.fakes.memory_asg import FleetInstance, MemoryAsg, MemoryFleet, subnet_of
from kube_elevator.tasks.adapters.cloud import instance_id_from_provider_id, termination_plan, unique_batch
from kube_elevator.tasks.core.api_objects import Taint
from kube_elevator.tasks.core.errors import CloudError, EvictionBlocked, InputError, LeaseConflict
from kube_elevator.tasks.core.lease_state import (
    HOLDER_IDENTITY,
    LAST_TICK,
    GroupState,
    state_from_annotations,
    state_to_annotations,
)
from kube_elevator.tasks.core.records import (
    ESCALATOR_TAINT_KEY,
    TERMINAL_PHASES,
    AsgInstance,
    AsgTemplateSource,
    AutoScalingGroup,
    NodeRecord,
    PodRecord,
)
from kube_elevator.tasks.core.timefmt import rfc3339

Key = tuple[str, str]  # (namespace, name); nodes are ("", name) in the fake API's order


def _api_error(status: int, reason: str) -> ApiException:
    """What the kubernetes client raises for an HTTP error the adapter does not translate."""
    return ApiException(status=status, reason=reason)


@dataclass
class _Lease:
    annotations: dict[str, str]
    labels: dict[str, str]
    holder: str
    resource_version: str


class MemoryWorld:
    """The object store of the fast simulation (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # a tick acts for its groups on threads
        self._rv = 0
        self.pods: dict[Key, PodRecord] = {}
        self.nodes: dict[str, NodeRecord] = {}
        self.leases: dict[Key, _Lease] = {}
        self.pdbs: dict[Key, dict[str, Any]] = {}
        self.config_maps: dict[Key, dict[str, str]] = {}
        self.asgs: dict[str, MemoryAsg] = {}
        self.terminated_instances: set[str] = set()  # EC2 state "terminated"
        self.fleet_instances: dict[str, FleetInstance] = {}  # launched by fleets, any state
        self._instance_counter = 0
        self._pod_order: list[Key] | None = []
        self._node_order: list[str] | None = []
        # Bumped on every change of the node set or of a node (taints), and of any ASG:
        # the simulation driver recomputes what depends on them only then.
        self.node_version = 0
        self.cloud_version = 0
        # Requests of the pods bound to each node (cpu, memory; extended ones apart), kept as
        # pods come and go: the simulated scheduler's free room without a pass over all pods.
        self.used: dict[str, list[int]] = {}
        self.used_extended: dict[str, dict[str, int]] = {}
        # Told of every pod the Eviction API removed (its controller re-creates it).
        self.on_evicted: Callable[[Key, PodRecord], None] | None = None

    def next_version(self) -> str:
        self._rv += 1
        return str(self._rv)

    # --- pods -------------------------------------------------------------------------------

    def put_pod(self, pod: PodRecord) -> PodRecord:
        """Create or replace a pod (a new resourceVersion is implicit: records carry none)."""
        key = (pod.namespace, pod.name)
        with self.lock:
            self._rv += 1
            old = self.pods.get(key)
            if old is None:
                self._pod_order = None
            elif old.node_name:
                self._unuse(old)
            if pod.node_name:
                room = self.used.setdefault(pod.node_name, [0, 0])
                room[0] += pod.cpu_request_milli
                room[1] += pod.memory_request_bytes
                if pod.extended_requests:
                    other = self.used_extended.setdefault(pod.node_name, {})
                    for name, amount in pod.extended_requests:
                        other[name] = other.get(name, 0) + amount
            self.pods[key] = pod
        return pod

    def delete_pod(self, key: Key) -> PodRecord | None:
        with self.lock:
            pod = self.pods.pop(key, None)
            if pod is not None:
                self._rv += 1
                self._pod_order = None
                if pod.node_name:
                    self._unuse(pod)
            return pod

    def _unuse(self, pod: PodRecord) -> None:
        room = self.used.get(pod.node_name)
        if room is not None:
            room[0] -= pod.cpu_request_milli
            room[1] -= pod.memory_request_bytes
        other = self.used_extended.get(pod.node_name)
        if other is not None:
            for name, amount in pod.extended_requests:
                other[name] -= amount

    def pod_list(self) -> list[PodRecord]:
        """Every pod in (namespace, name) order, as the API lists them."""
        with self.lock:
            if self._pod_order is None:
                self._pod_order = sorted(self.pods)
            pods = self.pods
            return [pods[key] for key in self._pod_order]

    # --- nodes ------------------------------------------------------------------------------

    def put_node(self, node: NodeRecord) -> NodeRecord:
        """Store a node with a new resourceVersion; returns it as stored."""
        with self.lock:
            if node.name not in self.nodes:
                self._node_order = None
            stored = msgspec.structs.replace(node, resource_version=self.next_version())
            self.nodes[node.name] = stored
            self.node_version += 1
            return stored

    def remove_node(self, name: str) -> bool:
        with self.lock:
            if self.nodes.pop(name, None) is None:
                return False
            self._rv += 1
            self._node_order = None
            self.node_version += 1
            self.used.pop(name, None)
            self.used_extended.pop(name, None)
            return True

    def node_list(self) -> list[NodeRecord]:
        with self.lock:
            if self._node_order is None:
                self._node_order = sorted(self.nodes)
            nodes = self.nodes
            return [nodes[name] for name in self._node_order]

    # --- ASGs (moto's model) ----------------------------------------------------------------

    def create_asg(self, name: str, min_size: int, max_size: int, desired: int,
                   instance_type: str = "m5.large",
                   availability_zones: tuple[str, ...] = ("us-east-1a",),
                   tags: dict[str, str] | None = None,
                   launch_template_id: str = "") -> MemoryAsg:
        """As `FakeAws.create_asg`: the ASG and its `desired` instances, started at once."""
        asg = MemoryAsg(name, min_size, max_size, 0, instance_type, availability_zones,
                        dict(tags or {}), launch_template_id=launch_template_id,
                        subnets=tuple(subnet_of(zone) for zone in availability_zones)
                        if launch_template_id else ())
        self.asgs[name] = asg
        self.set_desired(asg, desired)
        return asg

    def next_instance_id(self) -> str:
        self._instance_counter += 1
        return f"i-{self._instance_counter:017x}"

    def set_desired(self, asg: MemoryAsg, desired: int) -> None:
        """moto's SetDesiredCapacity: launch or remove (oldest first) to match, no clamp."""
        with self.lock:
            asg.desired = desired
            while len(asg.instances) < desired:
                zone = asg.zones[len(asg.instances) % len(asg.zones)]
                asg.instances.append(AsgInstance(self.next_instance_id(), zone))
            while len(asg.instances) > desired:
                self.terminated_instances.add(asg.instances.pop(0).instance_id)
            self.cloud_version += 1

    def terminate_instance(self, instance_id: str) -> None:
        """TerminateInstanceInAutoScalingGroup with ShouldDecrementDesiredCapacity=True."""
        with self.lock:
            for asg in self.asgs.values():
                for index, instance in enumerate(asg.instances):
                    if instance.instance_id == instance_id:
                        del asg.instances[index]
                        asg.desired -= 1
                        self.terminated_instances.add(instance_id)
                        self.cloud_version += 1
                        return
        # moto answers an instance in no ASG with an HTML 500 (real AWS: ValidationError).
        raise CloudError(f"failed to terminate instance. err: {instance_id} not found",
                         retryable=True)


# --- the Kubernetes adapter -------------------------------------------------------------------


def _pod_object(pod: PodRecord) -> dict[str, Any]:
    """What the budget maths read of a pod (`fakes.kube_api.pdb_status`)."""
    return {"metadata": {"labels": pod.labels}, "status": {"phase": pod.phase}}


@dataclass
class MemoryKube:
    """`tasks.adapters.ports.KubeActions` on a `MemoryWorld`, with `KubeClient`'s answers."""

    world: MemoryWorld

    def list_pods(self) -> list[PodRecord]:
        # The live list asks the server to leave finished pods out (tasks.adapters.kube.ACTIVE_PODS).
        return [pod for pod in self.world.pod_list() if pod.phase not in TERMINAL_PHASES]

    def list_nodes(self) -> list[NodeRecord]:
        return self.world.node_list()

    def _namespace_pods(self, namespace: str) -> list[dict[str, Any]]:
        return [_pod_object(pod) for (ns, _), pod in self.world.pods.items() if ns == namespace]

    def list_pod_disruption_budgets(self) -> list[dict[str, Any]]:
        """Each budget with the status a disruption controller would write now."""
        with self.world.lock:
            listed = []
            for key in sorted(self.world.pdbs):
                pdb = self.world.pdbs[key]
                status = pdb_status(pdb, self._namespace_pods(key[0]))
                listed.append({**pdb, "status": {**(pdb.get("status") or {}), **status}})
            return listed

    def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        data = self.world.config_maps.get((namespace, name))
        return None if data is None else dict(data)

    # --- the group's Lease ------------------------------------------------------------------

    def read_state(self, namespace: str, name: str) -> GroupState:
        lease = self.world.leases.get((namespace, name))
        if lease is None:
            return GroupState()
        try:
            return state_from_annotations(lease.annotations, lease.resource_version)
        except ValueError as error:
            raise InputError([f"Lease {namespace}/{name}: {error}"]) from None

    def write_state(self, namespace: str, name: str, state: GroupState,
                    now: float) -> GroupState:
        annotations = {**state_to_annotations(state), LAST_TICK: rfc3339(now)}
        labels = {"app.kubernetes.io/managed-by": "kube-elevator"}
        conflict = LeaseConflict(f"Lease {namespace}/{name} was written by another tick")
        world = self.world
        with world.lock:
            lease = world.leases.get((namespace, name))
            if state.resource_version:  # PUT at a resourceVersion
                if lease is None:
                    raise _api_error(404, "Not Found")
                if lease.resource_version != state.resource_version:
                    raise conflict
                if (lease.annotations, lease.labels, lease.holder) != (
                        annotations, labels, HOLDER_IDENTITY):
                    lease.annotations, lease.labels = annotations, labels
                    lease.holder = HOLDER_IDENTITY
                    lease.resource_version = world.next_version()
                version = lease.resource_version
            else:  # POST: 409 AlreadyExists when there is one
                if lease is not None:
                    raise conflict
                version = world.next_version()
                world.leases[(namespace, name)] = _Lease(annotations, labels, HOLDER_IDENTITY,
                                                         version)
        return replace(state, resource_version=version)

    # --- nodes --------------------------------------------------------------------------------

    def _patch_taints(self, name: str, read_version: str, taints: tuple[Taint, ...]) -> bool:
        """The merge patch of spec.taints at `read_version`; False on 409 (changed since)."""
        with self.world.lock:
            node = self.world.nodes.get(name)
            if node is None:
                raise _api_error(404, "Not Found")
            if node.resource_version != read_version:
                return False
            if node.taints != taints:
                self.world.put_node(msgspec.structs.replace(node, taints=taints))
            return True

    def ensure_tainted(self, name: str, value: str, effect: str,
                       key: str = ESCALATOR_TAINT_KEY) -> bool:
        """Escalator §7.2: add the taint unless one with that key is there; True if sent."""
        while True:  # the client's re-read on 409 (nothing else writes here: one retry at most)
            node = self.world.nodes.get(name)
            if node is None:
                return False
            if node.has_taint(key):
                return False
            try:
                if self._patch_taints(name, node.resource_version,
                                      (*node.taints, Taint(key, value, effect))):
                    return True
            except ApiException:
                return False  # deleted between the read and the patch: 404 is "gone"

    def ensure_untainted(self, name: str, key: str = ESCALATOR_TAINT_KEY) -> bool:
        """Escalator §7.2: drop the first taint with that key; True if a change was sent."""
        while True:
            node = self.world.nodes.get(name)
            if node is None or not node.has_taint(key):
                return False
            kept = list(node.taints)
            kept.pop(next(i for i, t in enumerate(kept) if t.key == key))
            try:
                if self._patch_taints(name, node.resource_version, tuple(kept)):
                    return True
            except ApiException:
                return False

    def delete_node(self, name: str) -> bool:
        return self.world.remove_node(name)

    def evict_pod(self, namespace: str, name: str, uid: str = "") -> bool:
        """The Eviction API: False if the pod is gone (or, with `uid`, is another pod now),
        `EvictionBlocked` when a budget is at its limit
        (`fakes.kube_api.FakeKubeApi._check_budgets`), else the pod is deleted."""
        world = self.world
        with world.lock:
            pod = world.pods.get((namespace, name))
            if pod is None or (uid and pod.uid and pod.uid != uid):
                return False
            raw = _pod_object(pod)
            if not _ignores_budgets(raw):
                self._check_budgets(namespace, pod, raw)
            world.delete_pod((namespace, name))
        if world.on_evicted is not None:
            world.on_evicted((namespace, name), pod)
        return True

    def _check_budgets(self, namespace: str, pod: PodRecord, raw: dict[str, Any]) -> None:
        budgets = [pdb for (ns, _), pdb in sorted(self.world.pdbs.items()) if ns == namespace
                   and not _selector_empty((pdb.get("spec") or {}).get("selector"))
                   and _selector_matches(pdb["spec"]["selector"], pod.labels)]
        if not budgets:
            return
        if len(budgets) > 1:
            raise _api_error(500, f"Internal error occurred: {PDB_MULTIPLE}")
        pdb = budgets[0]
        blocked = eviction_blocked_by(pdb, self._namespace_pods(namespace), raw)
        if blocked is not None:
            desired, current = blocked
            budget = (pdb.get("metadata") or {}).get("name")
            raise EvictionBlocked(f"{namespace}/{pod.name}", (
                f"{PDB_VIOLATION}; The disruption budget {budget} needs {desired} healthy "
                f"pods and has {current} currently"))


# --- the cloud adapter ------------------------------------------------------------------------


@dataclass
class MemoryCloud(MemoryFleet):
    """`tasks.adapters.ports.CloudActions` on a `MemoryWorld`, with `AsgClient`'s answers on moto."""

    world: MemoryWorld

    def describe(self, names: Sequence[str]) -> dict[str, AutoScalingGroup]:
        wanted = list(dict.fromkeys(names))
        with self.world.lock:
            return {name: self.world.asgs[name].record() for name in wanted
                    if name in self.world.asgs}

    def group(self, name: str) -> AutoScalingGroup:
        group = self.describe([name]).get(name)
        if group is None:
            raise CloudError(f"auto scaling group {name} not found", retryable=False)
        return group

    def template_sources(self, names: Sequence[str]) -> dict[str, AsgTemplateSource]:
        """Each ASG's launch template instance type, tags and zones (scale from zero)."""
        return {asg.name: AsgTemplateSource(asg.name, asg.instance_type, dict(asg.tags),
                                            asg.zones)
                for name in dict.fromkeys(names) if (asg := self.world.asgs.get(name))}

    def set_desired_capacity(self, group: AutoScalingGroup, target: int) -> int:
        """Clamped into the fresh [MinSize, MaxSize]; never lowers the group (`AsgClient`)."""
        with self.world.lock:
            fresh = self.group(group.name)
            clamped = min(max(target, fresh.min_size), fresh.max_size)
            if fresh.desired_capacity >= clamped:
                return fresh.desired_capacity
            self.world.set_desired(self.world.asgs[fresh.name], clamped)
            return clamped

    def terminate_instances(self, group_name: str, nodes: Sequence[NodeRecord]) -> list[str]:
        """`AsgClient.terminate_instances`: retry-safe, MinSize refused for the whole batch."""
        if not nodes:
            return []
        batch = unique_batch(nodes)
        with self.world.lock:
            group = self.group(group_name)
            members = {instance.provider_id: instance for instance in group.instances}
            gone = self._gone(node.provider_id for node in batch
                              if node.provider_id not in members)
            terminated: list[str] = []
            for step in termination_plan(group, batch, members, gone):
                step.check()
                if step.member is not None:
                    self.world.terminate_instance(step.member.instance_id)
                terminated.append(step.instance_id)
            return terminated

    def launch_times(self, provider_ids: Sequence[str]) -> dict[str, float]:
        """None known: moto's LaunchTime is the wall clock's, which a simulated clock has no
        use for; the registration lag is observed on live ticks only."""
        return {}

    def _gone(self, provider_ids: Iterable[str]) -> frozenset[str]:
        ids = {instance_id for provider_id in provider_ids
               if (instance_id := _instance_id_or_none(provider_id)) is not None}
        return frozenset(ids & self.world.terminated_instances)


def _instance_id_or_none(provider_id: str) -> str | None:
    try:
        return instance_id_from_provider_id(provider_id)
    except CloudError:
        return None


__all__ = ["MemoryAsg", "MemoryCloud", "MemoryKube", "MemoryWorld"]
