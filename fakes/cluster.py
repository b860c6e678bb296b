"""The simulated cluster: what kubelets, the scheduler and Job controllers would do, on a clock.

Everything goes through the fake API server and moto, so the autoscaler sees exactly what a real
cluster would show: Nodes join for ASG instances after a boot delay, pending pods are bound
first-fit (oldest node first) to nodes they fit and tolerate, batch pods finish after their
duration, and pods of a vanished node go back to pending.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import orjson

from fakes.aws import FakeAws
from fakes.kube_api.server import FakeKubeApi
from fakes.memory_asg import fleet_template_id
from fakes.scenario import AsgSpec, TracePod, Wave
from tasks.cluster_autoscaler.templates import GPU_RESOURCE
from tasks.core.api_objects import OBJECT_DECODER, RawObject
from tasks.core.instance_types import instance_gpus
from tasks.core.records import NodeRecord, PodRecord, node_record, pod_record
from tasks.core.scheduling import fits_constraints as fits_constraints  # shared with the estimator
from tasks.core.scheduling import fits_extended, take_extended
from tasks.core.scheduling import tolerates as tolerates
from tasks.core.timefmt import rfc3339
from tasks.escalator.config import NodeGroupConfig
from tasks.escalator.decide import taint_time

POD_NAMESPACE = "workload"


def _decoded(obj: Mapping[str, Any]) -> RawObject:
    """An API object (as the fake store holds it) through the same decoder as live lists."""
    return OBJECT_DECODER.decode(orjson.dumps(obj))


def node_for_instance(instance: Mapping[str, Any], labels: Mapping[str, str], cpu_milli: int,
                      memory_bytes: int, created: float, name: str | None = None,
                      extended: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Node a kubelet registers for an ASG instance (providerID as the AWS cloud provider).

    `extended` is what device plugins advertise beside cpu and memory (`nvidia.com/gpu: "1"`).
    """
    instance_id = instance["InstanceId"]
    resources = {"cpu": f"{cpu_milli}m", "memory": str(memory_bytes), "pods": "110",
                 **(extended or {})}
    zone = instance.get("AvailabilityZone", "us-east-1a")
    node_name = name or instance_id
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node_name, "creationTimestamp": rfc3339(created),
                     "labels": {**labels, "kubernetes.io/hostname": node_name,
                                "topology.kubernetes.io/zone": zone}},
        "spec": {"providerID": f"aws:///{zone}/{instance_id}"},
        "status": {
            "allocatable": dict(resources),
            "capacity": dict(resources),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def pod_body(name: str, arrival: Wave | TracePod, node_selector: Mapping[str, str],
             now: float) -> dict[str, Any]:
    """The Pod a workload controller creates for an arrival (both simulation modes)."""
    tolerations = [t.model_dump() for t in arrival.tolerations] \
        if isinstance(arrival, Wave) else []
    duration = arrival.duration if isinstance(arrival, Wave) else arrival.duration_s
    extended = dict(arrival.extended) if isinstance(arrival, Wave) else {}
    app = name.rsplit("-", 1)[0]
    # Batch pods belong to a Job, services to a ReplicaSet: both re-create evicted pods.
    owner = {"apiVersion": "batch/v1", "kind": "Job"} if duration is not None else \
        {"apiVersion": "apps/v1", "kind": "ReplicaSet"}
    return {
        "metadata": {"name": name, "namespace": POD_NAMESPACE,
                     "creationTimestamp": rfc3339(now), "labels": {"app": app},
                     "ownerReferences": [{**owner, "name": app, "uid": f"uid-{app}",
                                          "controller": True}]},
        "spec": {"nodeSelector": dict(node_selector), "tolerations": tolerations,
                 "containers": [{"name": "main", "image": "busybox", "resources": {
                     "requests": {"cpu": arrival.cpu, "memory": arrival.memory,
                                  **extended}}}]},
        "status": {"phase": "Pending"},
    }


# Chooses among the feasible nodes (oldest first) the one a pod is bound to.
Placement = Callable[[PodRecord, list[NodeRecord], float], NodeRecord | None]


@dataclass
class PodLife:
    """One simulated pod's timeline."""

    namespace: str
    name: str
    arrival: float
    duration: float | None
    pending_since: float
    pending_seconds: float = 0.0
    bound_at: float | None = None
    node: str | None = None
    completed_at: float | None = None
    marked_unschedulable: bool = False


@dataclass
class Termination:
    """A node that went away, and whether that broke a rule (group pods before hard grace)."""

    at: float
    node: str
    group_pods: int
    taint_age_seconds: float | None
    premature: bool


@dataclass
class SimulatedCluster:
    kube: FakeKubeApi
    aws: FakeAws
    asgs: Sequence[AsgSpec]
    groups: Sequence[NodeGroupConfig]
    pods: dict[tuple[str, str], PodLife] = field(default_factory=dict)
    first_seen: dict[str, float] = field(default_factory=dict)
    node_of_instance: dict[str, str] = field(default_factory=dict)
    node_asg: dict[str, AsgSpec] = field(default_factory=dict)
    last_nodes: dict[str, NodeRecord] = field(default_factory=dict)
    terminations: list[Termination] = field(default_factory=list)
    evictions: int = 0
    place: Placement | None = None
    _sequence: dict[str, int] = field(default_factory=dict)
    # Each pod's object as created, for its controller to re-create it after an eviction.
    bodies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    # --- nodes ------------------------------------------------------------------------------

    def create_asgs(self, now: float) -> None:
        """The ASGs and, already joined, the nodes of their initial instances."""
        for asg in self.asgs:
            self.aws.create_asg(asg.name, asg.min, asg.max, asg.desired,
                                instance_type=asg.instance_type,
                                availability_zones=(asg.availability_zone,),
                                launch_template_id=fleet_template_id(self.groups, asg.name))
            for instance in sorted(self.aws.instances(asg.name), key=lambda i: i["InstanceId"]):
                self.first_seen[instance["InstanceId"]] = now - asg.boot_delay
        self.reconcile_instances(now)

    def _next_node_name(self, asg: AsgSpec) -> str:
        # Deterministic names (moto's instance ids are random): `<asg>-<n>` in join order.
        number = self._sequence.get(asg.name, 0) + 1
        self._sequence[asg.name] = number
        return f"{asg.name}-{number:03d}"

    def reconcile_instances(self, now: float) -> None:
        """Join Nodes for instances past their boot delay; drop Nodes of vanished instances."""
        live: set[str] = set()
        for asg in self.asgs:
            instances = sorted(self.aws.instances(asg.name), key=lambda i: i["InstanceId"])
            for instance in instances:
                instance_id = instance["InstanceId"]
                if instance.get("LifecycleState", "InService") != "InService":
                    continue
                live.add(instance_id)
                seen = self.first_seen.setdefault(instance_id, now)
                if instance_id not in self.node_of_instance and now >= seen + asg.boot_delay:
                    name = self._next_node_name(asg)
                    cpu, memory = asg.allocatable
                    gpus = instance_gpus(asg.instance_type)  # the NVIDIA device plugin's
                    self.kube.create("nodes", node_for_instance(
                        instance, asg.node_labels, cpu, memory, now, name,
                        {GPU_RESOURCE: str(gpus)} if gpus else None))
                    self.node_of_instance[instance_id] = name
                    self.node_asg[name] = asg
        for instance_id, name in list(self.node_of_instance.items()):
            if instance_id not in live:
                del self.node_of_instance[instance_id]
                with contextlib.suppress(KeyError):  # the autoscaler deleted it itself
                    self.kube.delete("nodes", name)

    def nodes(self) -> list[NodeRecord]:
        return [node_record(_decoded(raw)) for raw in self.kube.list("nodes")]

    # --- pods -------------------------------------------------------------------------------

    def arrive(self, name: str, arrival: Wave | TracePod, node_selector: Mapping[str, str],
               now: float) -> None:
        body = pod_body(name, arrival, node_selector, now)
        duration = arrival.duration if isinstance(arrival, Wave) else arrival.duration_s
        self.kube.create("pods", copy.deepcopy(body), namespace=POD_NAMESPACE)
        self.bodies[(POD_NAMESPACE, name)] = body
        self.pods[(POD_NAMESPACE, name)] = PodLife(POD_NAMESPACE, name, now, duration, now)

    def complete(self, now: float) -> None:
        """Batch pods whose duration has passed succeed; their Job removes them."""
        for life in self.pods.values():
            if (life.completed_at is None and life.bound_at is not None
                    and life.duration is not None and life.bound_at + life.duration <= now):
                life.completed_at = now
                self.kube.delete("pods", life.name, life.namespace)

    def schedule(self, now: float) -> None:
        """Bind pending pods first-fit, oldest node first; evict pods of vanished nodes."""
        nodes = sorted(self.nodes(), key=lambda n: (n.created_unix_seconds, n.name))
        self._record_terminations(nodes, now)
        by_name = {node.name: node for node in nodes}
        free = {node.name: [node.cpu_allocatable_milli, node.memory_allocatable_bytes]
                for node in nodes}
        free_other = {node.name: dict(node.extended_allocatable) for node in nodes}
        pending: list[tuple[PodLife, PodRecord]] = []
        listed = self.kube.list("pods")
        if self._recreate_evicted({(raw["metadata"]["namespace"], raw["metadata"]["name"])
                                   for raw in listed}, now):
            listed = self.kube.list("pods")
        for raw in listed:
            pod = pod_record(_decoded(raw))
            life = self.pods.get((pod.namespace, pod.name))
            if pod.node_name and pod.node_name not in by_name and life is not None:
                self._evict(life, now)
                pod = msgspec.structs.replace(pod, node_name="")
            if pod.node_name:
                room = free[pod.node_name]
                room[0] -= pod.cpu_request_milli
                room[1] -= pod.memory_request_bytes
                take_extended(free_other[pod.node_name], pod.extended_requests)
            elif pod.phase == "Pending" and life is not None:
                pending.append((life, pod))
        pending.sort(key=lambda item: (item[0].arrival, item[0].name))
        ready = [node for node in nodes if node.ready and not node.unschedulable]
        for life, pod in pending:
            feasible = [node for node in ready if fits_constraints(pod, node)
                        and free[node.name][0] >= pod.cpu_request_milli
                        and free[node.name][1] >= pod.memory_request_bytes
                        and fits_extended(pod.extended_requests, free_other[node.name])]
            # First fit by node age, unless a placement (the scheduler extender) ranks them.
            target = self.place(pod, feasible, now) if self.place and feasible else \
                next(iter(feasible), None)
            if target is None:
                if not life.marked_unschedulable:
                    self._set_pod_status(life, "Pending", scheduled=False)
                    life.marked_unschedulable = True
                continue
            free[target.name][0] -= pod.cpu_request_milli
            free[target.name][1] -= pod.memory_request_bytes
            take_extended(free_other[target.name], pod.extended_requests)
            self.kube.patch("pods", life.name, {"spec": {"nodeName": target.name}},
                            life.namespace)
            self._set_pod_status(life, "Running", scheduled=True)
            life.pending_seconds += now - life.pending_since
            life.bound_at, life.node = now, target.name
        self.last_nodes = by_name

    def _set_pod_status(self, life: PodLife, phase: str, scheduled: bool) -> None:
        condition: dict[str, str] = {"type": "PodScheduled",
                                     "status": "True" if scheduled else "False"}
        if not scheduled:
            condition["reason"] = "Unschedulable"
        self.kube.patch("pods", life.name, {"status": {"phase": phase,
                                                       "conditions": [condition]}},
                        life.namespace)

    def _evict(self, life: PodLife, now: float) -> None:
        """Its node is gone: the pod is re-created pending (as a Job controller would)."""
        self.kube.patch("pods", life.name, {"spec": {"nodeName": None}}, life.namespace)
        self._set_pod_status(life, "Pending", scheduled=False)
        life.bound_at, life.node, life.pending_since = None, None, now
        life.marked_unschedulable = True
        self.evictions += 1

    def _recreate_evicted(self, listed: set[tuple[str, str]], now: float) -> int:
        """A pod evicted through the Eviction API is gone: its controller creates it again,
        pending (under the same name, so its timeline goes on). Returns how many."""
        recreated = 0
        for key, life in self.pods.items():
            if life.completed_at is not None or key in listed:
                continue
            self.kube.create("pods", copy.deepcopy(self.bodies[key]), namespace=life.namespace)
            if life.bound_at is not None:
                life.pending_since = now
            life.bound_at, life.node, life.marked_unschedulable = None, None, False
            self.evictions += 1
            recreated += 1
        return recreated

    def _record_terminations(self, nodes: Sequence[NodeRecord], now: float) -> None:
        present = {node.name for node in nodes}
        for name, node in self.last_nodes.items():
            if name in present:
                continue
            running = [life for life in self.pods.values()
                       if life.node == name and life.completed_at is None]
            tainted_at = taint_time(node)
            age = None if tainted_at is None else now - tainted_at
            hard = self._hard_grace(node)
            premature = bool(running) and (age is None or age <= hard)
            self.terminations.append(Termination(now, name, len(running), age, premature))

    def _hard_grace(self, node: NodeRecord) -> float:
        for group in self.groups:
            if node.labels.get(group.label_key) == group.label_value:
                return group.hard_delete_grace_seconds
        return 0.0

    def advance(self, now: float) -> None:
        """One step of the world: nodes join or leave, pods finish, pending pods are bound."""
        self.reconcile_instances(now)
        self.complete(now)
        self.schedule(now)

    def pod_records(self) -> list[PodRecord]:
        return [pod_record(_decoded(raw)) for raw in self.kube.list("pods")]
