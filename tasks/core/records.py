"""The slim records the algorithms read, folded from the raw API structs.

Each object becomes a frozen record with its requests already summed in integer units
(milli-CPU, bytes), so no algorithm parses a quantity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from kube_elevator.tasks.core.api_objects import (
    ANNOTATIONS_DECODER,
    CPU,
    MEMORY,
    NO_ANNOTATIONS,
    NO_EXTENDED,
    PODS,
    ExtendedResources,
    HostPort,
    LocalVolume,
    NodeSelectorTerm,
    PodPlacement,
    RawContainer,
    RawObject,
    RawSpec,
    RawStatus,
    RawVolume,
    ResourceList,
    Taint,
    Toleration,
    absent,
)
from kube_elevator.tasks.core.quantity import QuantityText, cpu_milli, memory_bytes

# --- records -----------------------------------------------------------------------------

DAEMONSET_KIND = "DaemonSet"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})  # the phases of a pod that has finished
STATIC_POD_SOURCE = "file"
DEFAULT_TERMINATION_GRACE_SECONDS = 30  # spec.terminationGracePeriodSeconds' default
DEFAULT_MAX_PODS = 110  # the kubelet's --max-pods default: a node that reports no `pods`


class PodRecord(msgspec.Struct, frozen=True, gc=False):
    """What the autoscalers need to know about a pod; requests already summed (spec §5.3).

    `pod_record` builds it positionally: a new field goes last, and into `pod_record` too.

    Example:
        >>> pod = ke.PodRecord("web-0", "default", node_name="", phase="Pending",
        ...     cpu_request_milli=500, memory_request_bytes=2**30)
        >>> pod.cpu_request_milli, pod.is_daemonset_pod
        (500, False)
    """

    name: str
    namespace: str
    node_name: str
    phase: str
    cpu_request_milli: int
    memory_request_bytes: int
    owned_by_daemonset: bool = False
    static: bool = False
    node_selector: dict[str, str] = {}
    required_node_terms: tuple[NodeSelectorTerm, ...] = ()
    has_affinity: bool = False
    scheduled: bool = False
    unschedulable: bool = False
    tolerations: tuple[Toleration, ...] = ()
    uid: str = ""
    # What the scale-down rules read (CA §1.4).
    labels: dict[str, str] = {}
    controller_kind: str = ""  # kind of the ownerReference with controller: true ("" = none)
    mirror: bool = False  # a static pod's mirror (annotation kubernetes.io/config.mirror)
    safe_to_evict: str = ""  # the safe-to-evict annotation's value ("" = absent)
    safe_to_evict_local_volumes: tuple[str, ...] = ()
    local_volumes: tuple[LocalVolume, ...] = ()
    # Requests besides cpu and memory (`nvidia.com/gpu`, hugepages, ephemeral-storage), summed
    # like cpu and memory; empty for most pods.
    extended_requests: ExtendedResources = ()
    # CA: annotation cluster-autoscaler.kubernetes.io/daemonset-pod: "true" (operator-managed
    # DaemonSets whose pods are owned by a custom resource).
    daemonset_pod_annotation: bool = False
    # What CA reads besides (spec §1.1, §1.4): spec.priority (0 when unset), the deletion
    # timestamp (0.0: not being deleted) with the grace period it was given, and the node the
    # scheduler nominated the pod to, preempting lower-priority pods there.
    priority: int = 0
    deleting_since_unix_seconds: float = 0.0
    termination_grace_seconds: int = DEFAULT_TERMINATION_GRACE_SECONDS
    nominated_node: str = ""
    # Pod (anti-)affinity, spreading and host ports (None for a pod with none of them).
    placement: PodPlacement | None = None

    @property
    def is_daemonset_pod(self) -> bool:
        """CA's `pod.IsDaemonSetPod` (utils/pod): owned by a DaemonSet, or annotated
        `daemonset-pod: "true"` whatever its owner. Escalator's own filter reads only the
        owner (`owned_by_daemonset`, its `PodIsDaemonSet`)."""
        return self.owned_by_daemonset or self.daemonset_pod_annotation


class NodeRecord(msgspec.Struct, frozen=True, gc=False):
    """What the autoscalers need to know about a node.

    Example:
        >>> taint = ke.Taint("atlassian.com/escalator", "1795262400", "NoSchedule")
        >>> node = ke.NodeRecord("n1", {"pool": "batch"}, 0.0, 2000, 8 * 2**30, taints=(taint,))
        >>> node.has_taint("atlassian.com/escalator"), node.max_pods
        (True, 110)
    """

    name: str
    labels: dict[str, str]
    created_unix_seconds: float
    cpu_allocatable_milli: int
    memory_allocatable_bytes: int
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    provider_id: str = ""
    ready: bool = True
    no_delete: bool = False
    resource_version: str = ""
    scale_down_disabled: bool = False  # CA §1.3: annotation scale-down-disabled: "true"
    # Capacity (0 = not reported: read allocatable); CA's least-waste and price read capacity.
    cpu_capacity_milli: int = 0
    memory_capacity_bytes: int = 0
    # Every other resource the kubelet reports (`nvidia.com/gpu`, hugepages, ephemeral-storage;
    # not `pods`), from status.allocatable and status.capacity.
    extended_allocatable: ExtendedResources = ()
    extended_capacity: ExtendedResources = ()
    # status.allocatable.pods (0 = not reported): EKS nodes hold 17, 29, 58 ... by instance type.
    pods_allocatable: int = 0

    @property
    def max_pods(self) -> int:
        """How many pods the kubelet admits (the scheduler's "Too many pods")."""
        return self.pods_allocatable or DEFAULT_MAX_PODS

    def taint_value(self, key: str) -> str | None:
        for taint in self.taints:
            if taint.key == key:
                return taint.value
        return None

    def has_taint(self, key: str) -> bool:
        return any(taint.key == key for taint in self.taints)


def parse_timestamp(text: str) -> float:
    """RFC 3339 (`2026-11-21T12:00:00Z`) to Unix seconds."""
    return datetime.fromisoformat(text).timestamp()


def resource_value(quantity: QuantityText | None) -> int:
    """Any quantity but cpu as Quantity.Value() (rounded up): whole units, or bytes."""
    return memory_bytes(quantity)


def extended_resources(resources: ResourceList | None) -> ExtendedResources:
    """The resources of a list besides cpu, memory and pods, sorted, zero amounts left out."""
    if not resources:
        return NO_EXTENDED
    return tuple(sorted(
        (name, value) for name, quantity in resources.items()
        if name not in _NOT_EXTENDED and (value := resource_value(quantity)) > 0))


_NOT_EXTENDED = frozenset({CPU, MEMORY, PODS})


def _add_extended(total: dict[str, int] | None, requests: ResourceList) -> dict[str, int]:
    total = {} if total is None else total
    for name, quantity in requests.items():
        if name not in (CPU, MEMORY):
            total[name] = total.get(name, 0) + resource_value(quantity)
    return total


def _max_into(total: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > total.get(name, 0):
            total[name] = value


def _container_requests(container: RawContainer) -> ResourceList | None:
    resources = container.resources
    return resources.requests if resources is not None else None


def _init_requests(init_containers: list[RawContainer], cpu: int, memory: int,
                   extended: dict[str, int] | None) -> tuple[int, int, dict[str, int] | None]:
    """Fold init containers into the containers' sums, as k8s.io/component-helpers
    AggregateContainerRequests does (KEP-753, sidecar containers).

    Init container i needs its own requests plus those of the restartable init containers
    (`restartPolicy: Always`, native sidecars) started before it; a restartable one also keeps
    running beside the containers, so it adds to their sum. The pod needs the larger of the
    two, per resource. Without restartable init containers this is Escalator's
    max(sum(containers), max(init containers)).
    """
    sidecar_cpu = sidecar_memory = peak_cpu = peak_memory = 0
    sidecar_extended: dict[str, int] = {}
    peak_extended: dict[str, int] = {}
    for container in init_containers:
        requests = _container_requests(container) or {}
        own_cpu = cpu_milli(requests.get(CPU))
        own_memory = memory_bytes(requests.get(MEMORY))
        own_extended = _add_extended(None, requests) if len(requests) > (
            (CPU in requests) + (MEMORY in requests)) else None
        if container.restartPolicy == "Always":
            cpu += own_cpu
            memory += own_memory
            sidecar_cpu += own_cpu
            sidecar_memory += own_memory
            if own_extended:
                extended = extended if extended is not None else {}
                for name, value in own_extended.items():
                    extended[name] = extended.get(name, 0) + value
                    sidecar_extended[name] = sidecar_extended.get(name, 0) + value
            need_cpu, need_memory, need_extended = sidecar_cpu, sidecar_memory, sidecar_extended
        else:
            need_cpu, need_memory = own_cpu + sidecar_cpu, own_memory + sidecar_memory
            need_extended = dict(sidecar_extended)
            for name, value in (own_extended or {}).items():
                need_extended[name] = need_extended.get(name, 0) + value
        peak_cpu = max(peak_cpu, need_cpu)
        peak_memory = max(peak_memory, need_memory)
        _max_into(peak_extended, need_extended)
    if peak_extended:
        extended = extended if extended is not None else {}
        _max_into(extended, peak_extended)
    return max(cpu, peak_cpu), max(memory, peak_memory), extended


def _is_pod_level_resource(name: str) -> bool:
    # component-helpers IsSupportedPodLevelResource: cpu, memory and hugepages-*.
    return name in (CPU, MEMORY) or name.startswith("hugepages-")


def _frozen_extended(extended: dict[str, int] | None) -> ExtendedResources:
    if not extended:
        return NO_EXTENDED
    return tuple(sorted((name, value) for name, value in extended.items() if value > 0))


def pod_requests(spec: RawSpec) -> tuple[int, int, ExtendedResources]:
    """(cpu milli, memory bytes, other resources) the scheduler counts for the pod:
    k8s.io/component-helpers resource.PodRequests with its default options.

    The containers' sum, then the init containers (`_init_requests`), then pod-level
    requests (`spec.resources`: cpu, memory, hugepages) replacing the aggregate for the
    resources they name, then the overhead added. Escalator's published formula
    (max(sum(containers), max(init containers)) + overhead) is exactly this for a pod
    without restartable init containers and pod-level resources.
    """
    cpu = memory = 0
    extended: dict[str, int] | None = None
    for container in spec.containers or ():
        resources = container.resources
        if resources is None:
            continue
        requests = resources.requests
        if not requests:
            continue
        cpu_text = requests.get(CPU)
        memory_text = requests.get(MEMORY)
        cpu += cpu_milli(cpu_text)
        memory += memory_bytes(memory_text)
        # Only a pod with a resource besides cpu and memory pays for the extended sums.
        if len(requests) > (cpu_text is not None) + (memory_text is not None):
            extended = _add_extended(extended, requests)
    if spec.initContainers:
        cpu, memory, extended = _init_requests(spec.initContainers, cpu, memory, extended)
    pod_level = spec.resources.requests if spec.resources is not None else None
    if pod_level and any(_is_pod_level_resource(name) for name in pod_level):
        for name, quantity in pod_level.items():
            if name == CPU:
                cpu = cpu_milli(quantity)
            elif name == MEMORY:
                memory = memory_bytes(quantity)
            elif _is_pod_level_resource(name):
                extended = extended if extended is not None else {}
                extended[name] = resource_value(quantity)
    overhead = spec.overhead
    if overhead:
        cpu += cpu_milli(overhead.get(CPU))
        memory += memory_bytes(overhead.get(MEMORY))
        if len(overhead) > (CPU in overhead) + (MEMORY in overhead):
            extended = _add_extended(extended, overhead)
    return cpu, memory, _frozen_extended(extended)


def _present(raw: msgspec.Raw) -> bool:
    return not absent(raw)


def _host_ports(containers: list[RawContainer] | None,
                init_containers: list[RawContainer] | None) -> tuple[HostPort, ...]:
    """The host ports of the containers and of the restartable init containers (sidecars),
    as NodePorts reads them."""
    found: list[HostPort] = []
    for container in (*(containers or ()), *(c for c in init_containers or ()
                                            if c.restartPolicy == "Always")):
        for port in container.ports or ():
            if port.hostPort > 0:
                found.append((port.hostIP or "0.0.0.0", port.protocol or "TCP", port.hostPort))
    return tuple(found)


def _may_need_placement(spec: RawSpec) -> bool:
    """The cheap test `pod_record` makes before `pod_placement` (most pods have none)."""
    affinity = spec.affinity
    if affinity is not None and (len(affinity.podAffinity) or len(affinity.podAntiAffinity)):
        return True
    if len(spec.topologySpreadConstraints):
        return True
    for container in spec.containers or ():
        if container.ports:
            for port in container.ports:
                if port.hostPort:
                    return True
    init = spec.initContainers
    return init is not None and any(c.ports for c in init)


def pod_placement(spec: RawSpec) -> PodPlacement | None:
    """The pod's PodPlacement, None when it has no pod (anti-)affinity, spreading or host
    port (most pods: three cheap checks)."""
    affinity = spec.affinity
    together = affinity.podAffinity if affinity is not None else msgspec.Raw()
    apart = affinity.podAntiAffinity if affinity is not None else msgspec.Raw()
    spread = spec.topologySpreadConstraints
    ports = _host_ports(spec.containers, spec.initContainers)
    if not (_present(together) or _present(apart) or _present(spread) or ports):
        return None
    return PodPlacement(bytes(together) if _present(together) else b"",
                        bytes(apart) if _present(apart) else b"",
                        bytes(spread) if _present(spread) else b"", ports)


def _local_volumes(volumes: list[RawVolume]) -> tuple[LocalVolume, ...]:
    """hostPath volumes and emptyDir volumes not backed by memory, in the pod's order."""
    found = []
    for volume in volumes:
        if _present(volume.hostPath):
            found.append(LocalVolume(volume.name, "hostPath"))
        elif volume.emptyDir is not None and volume.emptyDir.medium != "Memory":
            found.append(LocalVolume(volume.name, "emptyDir"))
    return tuple(found)


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated list annotation (`v1,v2`), split as CA's getNonBlockingVolumes splits
    it: on commas only, so "v1, v2" names " v2", which no volume is called."""
    return tuple(text.split(","))


def pod_record(raw: RawObject) -> PodRecord:
    """Fold a raw pod into a record; requests as kube-scheduler counts them (`pod_requests`:
    Escalator §5.3's max(sum(containers), max(init)) + overhead when the pod has no native
    sidecars, which are added as k8s.io/component-helpers PodRequests adds them)."""
    spec = raw.spec or RawSpec()
    status = raw.status or RawStatus()
    metadata = raw.metadata
    cpu, memory, extended = pod_requests(spec)
    scheduled = unschedulable = False
    for condition in status.conditions or ():
        if condition.type == "PodScheduled":
            scheduled = condition.status == "True"
            unschedulable = condition.status == "False" and condition.reason == "Unschedulable"
    affinity = spec.affinity
    node_affinity = affinity.nodeAffinity if affinity is not None else None
    required = (
        node_affinity.requiredDuringSchedulingIgnoredDuringExecution
        if node_affinity is not None else None
    )
    # Inlined rather than helpers: this runs 150,000 times per tick.
    raw_annotations = metadata.annotations_raw
    annotations = (ANNOTATIONS_DECODER.decode(raw_annotations) if len(raw_annotations) else None
                   ) or NO_ANNOTATIONS
    owned_by_daemonset = False
    controller_kind = ""
    for owner in metadata.ownerReferences or ():
        if owner.kind == DAEMONSET_KIND:
            owned_by_daemonset = True
        if owner.controller and not controller_kind:
            controller_kind = owner.kind
    local_volumes_text = annotations.safe_to_evict_local_volumes
    # Positional, in PodRecord's field order: msgspec matches keyword arguments against the
    # field names one by one, which cost ~9,000 instructions per pod at 25 fields (cachegrind).
    return PodRecord(
        metadata.name,  # name
        metadata.namespace,  # namespace
        spec.nodeName or "",  # node_name
        status.phase or "",  # phase
        cpu,  # cpu_request_milli
        memory,  # memory_request_bytes
        owned_by_daemonset,  # owned_by_daemonset
        annotations.config_source == STATIC_POD_SOURCE,  # static
        spec.nodeSelector or {},  # node_selector
        required.nodeSelectorTerms if required is not None else (),  # required_node_terms
        affinity is not None and (  # has_affinity
            node_affinity is not None
            or _present(affinity.podAffinity)
            or _present(affinity.podAntiAffinity)
        ),
        scheduled,  # scheduled
        unschedulable,  # unschedulable
        spec.tolerations or (),  # tolerations
        metadata.uid,  # uid
        metadata.labels or {},  # labels
        controller_kind,  # controller_kind
        annotations.config_mirror is not None,  # mirror
        annotations.safe_to_evict or "",  # safe_to_evict
        _names(local_volumes_text) if local_volumes_text else (),  # safe_to_evict_local_volumes
        _local_volumes(spec.volumes) if spec.volumes else (),  # local_volumes
        extended,  # extended_requests
        annotations.daemonset_pod == "true",  # daemonset_pod_annotation
        spec.priority or 0,  # priority
        (parse_timestamp(metadata.deletionTimestamp)  # deleting_since_unix_seconds
         if metadata.deletionTimestamp else 0.0),
        (DEFAULT_TERMINATION_GRACE_SECONDS  # termination_grace_seconds
         if spec.terminationGracePeriodSeconds is None else spec.terminationGracePeriodSeconds),
        status.nominatedNodeName or "",  # nominated_node
        pod_placement(spec) if _may_need_placement(spec) else None,  # placement
    )


def node_record(raw: RawObject) -> NodeRecord:
    """Fold a raw node into a record; a node without a name is bad input."""
    metadata = raw.metadata
    if not metadata.name:
        raise ValueError("node has no metadata.name")
    spec = raw.spec or RawSpec()
    status = raw.status or RawStatus()
    capacity = status.capacity or {}
    # The API server defaults a missing allocatable to the capacity (SetDefaults_NodeStatus);
    # a hand-made snapshot may leave it out.
    allocatable = capacity if status.allocatable is None else status.allocatable
    ready = False
    for condition in status.conditions or ():
        if condition.type == "Ready":
            ready = condition.status == "True"
    annotations = metadata.known_annotations()
    return NodeRecord(
        name=metadata.name,
        labels=metadata.labels or {},
        created_unix_seconds=(
            parse_timestamp(metadata.creationTimestamp) if metadata.creationTimestamp else 0.0
        ),
        cpu_allocatable_milli=cpu_milli(allocatable.get(CPU)),
        memory_allocatable_bytes=memory_bytes(allocatable.get(MEMORY)),
        unschedulable=spec.unschedulable,
        taints=spec.taints or (),
        provider_id=spec.providerID or "",
        ready=ready,
        no_delete=bool(annotations.no_delete),
        resource_version=metadata.resourceVersion,
        scale_down_disabled=annotations.scale_down_disabled == "true",
        cpu_capacity_milli=cpu_milli(capacity.get(CPU)),
        memory_capacity_bytes=memory_bytes(capacity.get(MEMORY)),
        extended_allocatable=extended_resources(allocatable),
        extended_capacity=extended_resources(capacity),
        pods_allocatable=resource_value(allocatable.get(PODS)),
    )


class AsgInstance(msgspec.Struct, frozen=True):
    """One instance of an ASG, as DescribeAutoScalingGroups lists it.

    Example:
        >>> ke.AsgInstance("i-0abc", "us-east-1a").provider_id
        'aws:///us-east-1a/i-0abc'
    """

    instance_id: str
    availability_zone: str
    lifecycle_state: str = "InService"

    @property
    def provider_id(self) -> str:
        return f"aws:///{self.availability_zone}/{self.instance_id}"


class AutoScalingGroup(msgspec.Struct, frozen=True):
    """The part of an ASG description the decision reads (Escalator's node group in the cloud).

    Example:
        >>> instance = ke.AsgInstance("i-0abc", "us-east-1a")
        >>> asg = ke.AutoScalingGroup("batch-asg", 1, 10, 2, instances=(instance,))
        >>> asg.provider_ids()
        frozenset({'aws:///us-east-1a/i-0abc'})
    """

    name: str
    min_size: int
    max_size: int
    desired_capacity: int
    instances: tuple[AsgInstance, ...] = ()
    # True when `instances` is the cloud's list (a description); False for an ASG known only
    # from the config (`elevator plan` without --asg), whose membership is unknown.
    instances_known: bool = False
    tags: tuple[tuple[str, str], ...] = ()  # (key, value), as described

    def has_tag_key(self, key: str) -> bool:
        return any(tag_key == key for tag_key, _ in self.tags)

    def provider_ids(self) -> frozenset[str]:
        return frozenset(instance.provider_id for instance in self.instances)


def describe_to_asgs(document: dict[str, Any]) -> list[AutoScalingGroup]:
    """`aws autoscaling describe-auto-scaling-groups` JSON (or boto3's answer) to records."""
    return [
        AutoScalingGroup(
            name=group["AutoScalingGroupName"],
            min_size=int(group["MinSize"]),
            max_size=int(group["MaxSize"]),
            desired_capacity=int(group["DesiredCapacity"]),
            instances_known=True,
            instances=tuple(
                AsgInstance(
                    instance_id=instance["InstanceId"],
                    availability_zone=instance.get("AvailabilityZone", ""),
                    lifecycle_state=instance.get("LifecycleState", "InService"),
                )
                for instance in group.get("Instances", ())
            ),
            tags=tuple((str(tag["Key"]), str(tag.get("Value", "")))
                       for tag in group.get("Tags", ())),
        )
        for group in document.get("AutoScalingGroups", ())
    ]


@dataclass(frozen=True)
class Resources:
    """CPU in millicores and memory in bytes: a pod's requests, or a node's room.

    Example:
        >>> ke.Resources(cpu_milli=1500, memory_bytes=2**30).empty, ke.Resources().empty
        (False, True)
    """

    cpu_milli: int = 0
    memory_bytes: int = 0

    @property
    def empty(self) -> bool:
        return self.cpu_milli == 0 and self.memory_bytes == 0


ESCALATOR_TAINT_KEY = "atlassian.com/escalator"


FORCE_TAINT_KEY = "atlassian.com/escalator-force"


@dataclass(frozen=True)
class AsgTemplateSource:
    """What CA reads of an ASG to imagine a node of a group that has none (scale from zero).

    `instance_type` is the launch template's type or, with a MixedInstancesPolicy, the first
    override: CA sizes the template from that one only (§1.1).

    Example:
        >>> label = "k8s.io/cluster-autoscaler/node-template/label/pool"
        >>> source = ke.AsgTemplateSource("gpu-asg", "p3.2xlarge", tags={label: "gpu"})
        >>> source.instance_type
        'p3.2xlarge'
    """

    asg_name: str
    instance_type: str
    tags: Mapping[str, str] = field(default_factory=dict)
    availability_zones: tuple[str, ...] = ()
