"""The simulated cluster: what kubelets, the scheduler and Job controllers would do, on a clock.

Everything goes through the fake API server and moto, so the autoscaler sees exactly what a real
cluster would show: Nodes join for ASG instances after a boot delay, each with a pod of every
DaemonSet of its ASG, pending pods are bound by the scheduler model (`tasks.scheduler`, the
scenario's profile), batch pods finish after their duration, pods of a vanished node go back to
pending and its DaemonSet pods are deleted (as PodGC does).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
import orjson

from kube_elevator.fakes.memory_asg import fleet_template_id
from kube_elevator.fakes.scenario import AsgSpec, DaemonSetSpec, TracePod, Wave
from kube_elevator.fakes.scenario_constraints import WAVE_LABEL, zonal_volume_objects
from kube_elevator.tasks.cluster_autoscaler.templates import GPU_RESOURCE
from kube_elevator.tasks.core.api_objects import OBJECT_DECODER, RawObject
from kube_elevator.tasks.core.instance_types import instance_gpus
from kube_elevator.tasks.core.records import NodeRecord, PodRecord, node_record, pod_record
from kube_elevator.tasks.core.scheduling import (
    fits_constraints as fits_constraints,  # shared with the estimator
)
from kube_elevator.tasks.core.scheduling import tolerates as tolerates
from kube_elevator.tasks.core.timefmt import rfc3339
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.decide import taint_time
from kube_elevator.tasks.scheduler.cycle import QueuedPod, Scheduler
from kube_elevator.tasks.scheduler.objects import SchedPod, Volumes, Workloads, sched_pod
from kube_elevator.tasks.scheduler.profiles import DEFAULT_PROFILE, profile_named

if TYPE_CHECKING:  # the HTTP world's parts: `simulate --fast` never starts them (issue 40)
    from kube_elevator.fakes.aws import FakeAws
    from kube_elevator.fakes.kube_api.server import FakeKubeApi

POD_NAMESPACE = "workload"
DAEMONSET_NAMESPACE = "kube-system"
DAEMONSET_LABEL = "app.kubernetes.io/name"
Key = tuple[str, str]


class SimulatedWorkloads(Workloads):
    """The simulator's workload controllers: the pods of an app (their name less its last
    `-n`) belong to ReplicaSet `<app>` (services) or Job `<app>` (batch), and ReplicaSet `<app>`
    selects `simulator.kube-elevator.io/wave: <app>`; no Service selects them. So the system
    default spreading spreads a service's pods and leaves batch jobs alone (Jobs are not among
    its controllers)."""

    def controller_selector(self, kind: str, namespace: str, name: str) -> Any:
        if kind == "ReplicaSet" and namespace == POD_NAMESPACE:
            return {"matchLabels": {WAVE_LABEL: name}}
        return super().controller_selector(kind, namespace, name)


SIMULATED_WORKLOADS = SimulatedWorkloads()


def simulated_scheduler(profile: str = DEFAULT_PROFILE, seed: int = 1) -> Scheduler:
    """The scheduler a simulation runs: the scenario's profile, its tie-break seeded by the
    scenario's seed. Preemption evicts workload pods only: the DaemonSet pods stand for the
    node-critical pods a cluster runs at system priority."""
    return Scheduler(profile_named(profile), seed,
                     can_evict=lambda key: key[0] == POD_NAMESPACE)


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
    # An extended resource (a GPU) is not overcommitted: the API server requires its limit,
    # equal to the request (core validation, ValidateResourceRequirements).
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": {
        "requests": {"cpu": arrival.cpu, "memory": arrival.memory, **extended},
        **({"limits": extended} if extended else {})}}
    spec: dict[str, Any] = {
        "nodeSelector": dict(node_selector), "tolerations": tolerations,
        "containers": [container]}
    labels = {"app": app, WAVE_LABEL: app}
    if isinstance(arrival, Wave):
        if arrival.priority:
            spec["priority"] = arrival.priority  # as admission resolves priorityClassName
        labels = {"app": app, **arrival.labels, WAVE_LABEL: app}
        if arrival.affinity is not None:
            spec["affinity"] = arrival.affinity.as_api_object()
        if arrival.topology_spread_constraints:
            spec["topologySpreadConstraints"] = [
                constraint.as_api_object() for constraint in arrival.topology_spread_constraints]
        if arrival.ports:
            container["ports"] = [port.as_api_object() for port in arrival.ports]
        if arrival.volume_zone is not None:
            spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {
                "claimName": volume_claim_name(name)}}]
    return {
        "metadata": {"name": name, "namespace": POD_NAMESPACE,
                     "creationTimestamp": rfc3339(now), "labels": labels,
                     "ownerReferences": [{**owner, "name": app, "uid": f"uid-{app}",
                                          "controller": True}]},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def volume_claim_name(pod_name: str) -> str:
    """The claim of a pod's own zonal volume, named as a StatefulSet names it."""
    return f"data-{pod_name}"[:253]


def pod_volume_objects(name: str, arrival: Wave | TracePod) -> tuple[dict[str, Any], ...]:
    """The pod's zonal volume and its claim, bound to each other (VolumeZone reads the zone),
    as the StatefulSet controller and the provisioner leave them; none for other pods."""
    if not isinstance(arrival, Wave) or arrival.volume_zone is None:
        return ()
    return zonal_volume_objects(volume_claim_name(name), POD_NAMESPACE, arrival.volume_zone)


def daemonset_pod_body(daemonset: DaemonSetSpec, node_name: str, now: float) -> dict[str, Any]:
    """The pod the DaemonSet controller creates for a node: pinned to it by node affinity on
    `metadata.name`, owned by the DaemonSet, running from the node's first moment (the
    simulator binds it at once rather than through the scheduler)."""
    # Names and label values as the API server admits them: at most 253 and 63 characters.
    name = f"{daemonset.name[:252 - len(node_name)].rstrip('.-')}-{node_name}"
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": DAEMONSET_NAMESPACE,
                     "creationTimestamp": rfc3339(now),
                     "labels": {DAEMONSET_LABEL: daemonset.name[:63].rstrip(".-")},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                          "name": daemonset.name,
                                          "uid": f"uid-ds-{daemonset.name}",
                                          "controller": True}]},
        "spec": {"nodeName": node_name,
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                     "nodeSelectorTerms": [{"matchFields": [{
                         "key": "metadata.name", "operator": "In", "values": [node_name]}]}]}}},
                 "tolerations": [{"operator": "Exists", "effect": "NoExecute"},
                                 {"operator": "Exists", "effect": "NoSchedule"}],
                 "containers": [{"name": "main", "image": "busybox", "resources": {
                     "requests": {"cpu": daemonset.cpu, "memory": daemonset.memory}}}]},
    }
    body["status"] = running_status(body, now)
    return body


def running_status(pod: Mapping[str, Any], now: float) -> dict[str, Any]:
    """A bound pod's status as the kubelet reports it once its containers run: phase
    `Running`, `startTime`, the four conditions `True` and a ready status per container (no
    kubelet runs them: a pod is ready once bound, as a Node is once it joins). Without them
    `kubectl get pods` showed 0/1 and a WatermarkPodAutoscaler counted no pod ready."""
    at = rfc3339(now)
    spec = pod.get("spec") or {}
    return {"phase": "Running", "startTime": at,
            "conditions": [{"type": kind, "status": "True", "lastTransitionTime": at}
                           for kind in ("PodScheduled", "Initialized", "ContainersReady",
                                        "Ready")],
            "containerStatuses": [{"name": container.get("name"), "ready": True,
                                   "started": True, "restartCount": 0,
                                   "image": container.get("image", ""), "imageID": "",
                                   "state": {"running": {"startedAt": at}}}
                                  for container in spec.get("containers") or []]}


def queued(key: Key, pod: SchedPod, life: PodLife) -> QueuedPod:
    """A pending pod as the scheduler's queue holds it."""
    return QueuedPod(key, pod, life.arrival, life.pending_since)


# Chooses among the feasible nodes (oldest first) the one a pod is bound to.
Placement = Callable[[PodRecord, list[NodeRecord], float], NodeRecord | None]


def place_queue(scheduler: Scheduler, pending: list[QueuedPod], place: Placement,
                records: Callable[[Key], PodRecord], now: float) -> list[tuple[Key, str | None]]:
    """The queue with an extender choosing among the feasible nodes (oldest first) in place of
    the profile's scores: load-aware placement, HTTP mode only."""
    decisions: list[tuple[Key, str | None]] = []
    for item in scheduler.queue_order(pending):
        feasible = [state.record for state in scheduler.feasible_by_age(item.pod)]
        target = place(records(item.key), feasible, now) if feasible else None
        if target is not None:
            scheduler.bind(item.key, item.pod, target.name)
        decisions.append((item.key, None if target is None else target.name))
    return decisions


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
    scheduler: Scheduler = field(default_factory=simulated_scheduler)
    _sequence: dict[str, int] = field(default_factory=dict)
    # Each pod's object as created, for its controller to re-create it after an eviction.
    bodies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # The scheduler's view of each pod (workload and DaemonSet), and the join order of nodes.
    sched_pods: dict[Key, SchedPod] = field(default_factory=dict)
    daemon_pods: set[Key] = field(default_factory=set)
    joined: dict[str, int] = field(default_factory=dict)
    # The harness's world: pending pods someone else created (the code under test, through the
    # API) are bound too, as bare pods with no controller (deleted with their node, as PodGC
    # does, and forgotten once deleted). A simulation creates every pod itself: off.
    adopt_pods: bool = False
    adopted: set[Key] = field(default_factory=set)

    # --- nodes ------------------------------------------------------------------------------

    def create_asgs(self, now: float) -> None:
        """The ASGs and, already joined, the nodes of their initial instances."""
        for asg in self.asgs:
            self._create_asg(asg, now)
        self.reconcile_instances(now)

    def add_asg(self, asg: AsgSpec, now: float) -> None:
        """One more ASG, created in moto, its initial instances joined as Nodes at once (the
        harness's `add_node_group`)."""
        self.asgs = [*self.asgs, asg]
        self._create_asg(asg, now)
        self.reconcile_instances(now)

    def _create_asg(self, asg: AsgSpec, now: float) -> None:
        self.aws.create_asg(asg.name, asg.min, asg.max, asg.desired,
                            instance_type=asg.instance_type,
                            availability_zones=(asg.availability_zone,),
                            launch_template_id=fleet_template_id(self.groups, asg.name))
        for instance in sorted(self.aws.instances(asg.name), key=lambda i: i["InstanceId"]):
            self.first_seen[instance["InstanceId"]] = now - asg.boot_delay

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
                    self.joined[name] = len(self.joined)
                    for daemonset in asg.daemonsets:
                        body = daemonset_pod_body(daemonset, name, now)
                        self.kube.create("pods", copy.deepcopy(body),
                                         namespace=DAEMONSET_NAMESPACE)
                        key = (DAEMONSET_NAMESPACE, body["metadata"]["name"])
                        self.sched_pods[key] = sched_pod(body)
                        self.daemon_pods.add(key)
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
        volumes = pod_volume_objects(name, arrival)
        for volume in volumes:
            plural = "persistentvolumes" if volume["kind"] == "PersistentVolume" else \
                "persistentvolumeclaims"
            self.kube.create(plural, copy.deepcopy(volume),
                             namespace=volume["metadata"].get("namespace"))
        self.sched_pods[(POD_NAMESPACE, name)] = sched_pod(body, SIMULATED_WORKLOADS,
                                                           Volumes(volumes) if volumes else None)
        self.pods[(POD_NAMESPACE, name)] = PodLife(POD_NAMESPACE, name, now, duration, now)

    def complete(self, now: float) -> None:
        """Batch pods whose duration has passed succeed; their Job removes them."""
        for life in self.pods.values():
            if (life.completed_at is None and life.bound_at is not None
                    and life.duration is not None and life.bound_at + life.duration <= now):
                life.completed_at = now
                self.kube.delete("pods", life.name, life.namespace)

    def schedule(self, now: float) -> None:
        """Bind pending pods as the scheduler model decides; evict pods of vanished nodes and
        delete their DaemonSet pods."""
        nodes = sorted(self.nodes(), key=lambda n: (n.created_unix_seconds, n.name))
        self._record_terminations(nodes, now)
        by_name = {node.name: node for node in nodes}
        listed = self.kube.list("pods")
        if self._recreate_evicted({(raw["metadata"]["namespace"], raw["metadata"]["name"])
                                   for raw in listed}, now):
            listed = self.kube.list("pods")
        bound: dict[Key, str] = {}
        pending: list[QueuedPod] = []
        records: dict[Key, PodRecord] = {}
        for raw in listed:
            pod = pod_record(_decoded(raw))
            key = (pod.namespace, pod.name)
            life = self.pods.get(key)
            if life is None and self.adopt_pods and not pod.node_name and pod.phase == "Pending":
                life = self._adopt(key, raw, now)
            if pod.node_name and pod.node_name not in by_name:
                if key in self.daemon_pods or key in self.adopted:  # PodGC deletes the pods
                    self.kube.delete("pods", pod.name, pod.namespace)  # of a deleted node
                    self._forget(key)
                    continue
                if life is not None:
                    self._evict(life, now)
                    pod = msgspec.structs.replace(pod, node_name="")
            if pod.node_name:
                if key not in self.sched_pods:  # a pod someone else created: it counts too
                    self.sched_pods[key] = sched_pod(raw, SIMULATED_WORKLOADS)
                bound[key] = pod.node_name
            elif pod.phase == "Pending" and life is not None:
                pending.append(queued(key, self.sched_pods[key], life))
                records[key] = pod
        # The informer saw the nodes in the order they joined.
        self.scheduler.sync_nodes(sorted(nodes, key=lambda n: self.joined.get(n.name, -1)))
        self.scheduler.sync_pods(bound, self.sched_pods.__getitem__)
        decisions = (place_queue(self.scheduler, pending, self.place, records.__getitem__, now)
                     if self.place else self.scheduler.schedule_queue(pending, now))
        for key, _ in self.scheduler.take_preempted():  # their controllers re-create them
            if key in self.pods:
                self._evict(self.pods[key], now)
        for key, target in decisions:
            life = self.pods[key]
            if target is None:
                if not life.marked_unschedulable:
                    self._set_pending(life)
                    life.marked_unschedulable = True
                continue
            placed = self.kube.patch("pods", life.name, {"spec": {"nodeName": target}},
                                     life.namespace)
            self.kube.patch("pods", life.name, {"status": running_status(placed, now)},
                            life.namespace)
            life.pending_seconds += now - life.pending_since
            life.bound_at, life.node = now, target
        self.last_nodes = by_name

    def _adopt(self, key: Key, raw: Mapping[str, Any], now: float) -> PodLife:
        """A pending pod the simulator did not create: the scheduler binds it from now on."""
        self.sched_pods[key] = sched_pod(raw)
        self.adopted.add(key)
        life = self.pods[key] = PodLife(key[0], key[1], now, None, now)
        return life

    def _forget(self, key: Key) -> None:
        """A DaemonSet or adopted pod that is gone for good."""
        self.daemon_pods.discard(key)
        self.adopted.discard(key)
        self.pods.pop(key, None)
        self.sched_pods.pop(key, None)

    def _set_pending(self, life: PodLife) -> None:
        """Pending and unschedulable (a merge patch: what its running status said goes)."""
        self.kube.patch("pods", life.name, {"status": {
            "phase": "Pending", "startTime": None, "containerStatuses": None,
            "conditions": [{"type": "PodScheduled", "status": "False",
                            "reason": "Unschedulable"}]}}, life.namespace)

    def _evict(self, life: PodLife, now: float) -> None:
        """Its node is gone, or preemption evicted it: the pod is re-created pending (as its
        controller would)."""
        self.kube.patch("pods", life.name, {"spec": {"nodeName": None}}, life.namespace)
        self._set_pending(life)
        life.bound_at, life.node, life.pending_since = None, None, now
        life.marked_unschedulable = True
        self.evictions += 1

    def _recreate_evicted(self, listed: set[tuple[str, str]], now: float) -> int:
        """A pod evicted through the Eviction API is gone: its controller creates it again,
        pending (under the same name, so its timeline goes on). Returns how many."""
        recreated = 0
        for key in [key for key in self.adopted if key not in listed]:
            self._forget(key)  # a bare pod: no controller brings it back
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
