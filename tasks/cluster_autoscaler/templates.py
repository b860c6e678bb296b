"""Template nodes: a live node of the group, else the ASG's launch template and tags (CA §1.1,
scale from zero)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kube_elevator.tasks.core.api_objects import CPU, MEMORY, PODS, ExtendedResources, Taint
from kube_elevator.tasks.core.instance_types import instance_capacity, instance_gpus
from kube_elevator.tasks.core.quantity import parse_quantity
from kube_elevator.tasks.core.records import (
    DEFAULT_MAX_PODS,
    ESCALATOR_TAINT_KEY,
    FORCE_TAINT_KEY,
    AsgTemplateSource,
    NodeRecord,
    PodRecord,
)
from kube_elevator.tasks.core.scheduling import free_extended, sum_extended

T = TypeVar("T")


# --- template nodes ----------------------------------------------------------------------

NODE_TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template/"
LABEL_TAG = NODE_TEMPLATE_TAG + "label/"
TAINT_TAG = NODE_TEMPLATE_TAG + "taint/"
RESOURCES_TAG = NODE_TEMPLATE_TAG + "resources/"
# A template from tags without a `resources/pods` tag admits DEFAULT_MAX_PODS, as CA's AWS one.
GPU_RESOURCE = "nvidia.com/gpu"
AWS_GPU_LABEL = "k8s.amazonaws.com/accelerator"  # CA's GPU label on AWS
HOSTNAME_LABEL = "kubernetes.io/hostname"
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")

# Taints a live node carries for its own state, which a fresh copy would not have: the node
# conditions, start-up taints, and the scale-down markers (CA's sanitizer drops these too).
_TRANSIENT_TAINTS = frozenset({
    ESCALATOR_TAINT_KEY, FORCE_TAINT_KEY,
    "ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler",
    "node.cloudprovider.kubernetes.io/uninitialized",
})
_TRANSIENT_TAINT_PREFIXES = ("node.kubernetes.io/", "ignore-taint.cluster-autoscaler.kubernetes.io/",
                             "startup-taint.cluster-autoscaler.kubernetes.io/")




@dataclass(frozen=True)
class TemplateNode:
    """A node as a new instance of the group would register: what pods can be packed onto."""

    group: str
    asg_name: str
    instance_type: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    cpu_capacity_milli: int
    memory_capacity_bytes: int
    cpu_allocatable_milli: int
    memory_allocatable_bytes: int
    max_pods: int = DEFAULT_MAX_PODS
    # Pods every new node runs before any pending pod lands (DaemonSet and static pods).
    daemon_cpu_milli: int = 0
    daemon_memory_bytes: int = 0
    daemon_pods: int = 0
    source: str = ""
    # Resources besides cpu, memory and pods (`nvidia.com/gpu`, hugepages, ephemeral-storage):
    # what the node has, what pods may request, and what its DaemonSet pods already request.
    extended_capacity: ExtendedResources = ()
    extended_allocatable: ExtendedResources = ()
    daemon_extended: ExtendedResources = ()

    @property
    def name(self) -> str:
        """The node's name, as CA names a template (what a `matchFields` term reads)."""
        return _template_name(self.group)

    @property
    def gpu_count(self) -> int:
        """`nvidia.com/gpu` in the node's capacity."""
        return dict(self.extended_capacity).get(GPU_RESOURCE, 0)

    @property
    def free_extended(self) -> dict[str, int]:
        """Extended allocatable less what the DaemonSet pods request (CA's template NodeInfo)."""
        return free_extended(self.extended_allocatable, self.daemon_extended)

    @property
    def free_cpu_milli(self) -> int:
        return self.cpu_allocatable_milli - self.daemon_cpu_milli

    @property
    def free_memory_bytes(self) -> int:
        return self.memory_allocatable_bytes - self.daemon_memory_bytes

    @property
    def free_pods(self) -> int:
        return self.max_pods - self.daemon_pods

    @property
    def has_gpu(self) -> bool:
        return self.gpu_count > 0 or AWS_GPU_LABEL in self.labels


def _template_name(group: str) -> str:
    return f"template-node-for-{group}"


def _transient(taint: Taint) -> bool:
    return taint.key in _TRANSIENT_TAINTS or taint.key.startswith(_TRANSIENT_TAINT_PREFIXES)


def template_from_node(group: str, asg_name: str, node: NodeRecord,
                       pods_on_node: Iterable[PodRecord] = (), instance_type: str = "",
                       ) -> TemplateNode:
    """Copy a live node of the group, as CA does when the group has one (§1.1).

    Its DaemonSet and static pods come along: a new node will run them too. The hostname label
    is the template's own and transient taints are dropped, as CA's template sanitizer does.
    """
    daemon = [pod for pod in pods_on_node if (pod.is_daemonset_pod or pod.static or pod.mirror)
              and not pod.deleting_since_unix_seconds]  # CA leaves out those being deleted
    labels = {**node.labels, HOSTNAME_LABEL: _template_name(group)}
    return TemplateNode(
        group=group, asg_name=asg_name,
        instance_type=instance_type or node.labels.get("node.kubernetes.io/instance-type", ""),
        labels=labels,
        taints=tuple(taint for taint in node.taints if not _transient(taint)),
        cpu_capacity_milli=node.cpu_capacity_milli or node.cpu_allocatable_milli,
        memory_capacity_bytes=node.memory_capacity_bytes or node.memory_allocatable_bytes,
        cpu_allocatable_milli=node.cpu_allocatable_milli,
        memory_allocatable_bytes=node.memory_allocatable_bytes,
        daemon_cpu_milli=sum(pod.cpu_request_milli for pod in daemon),
        daemon_memory_bytes=sum(pod.memory_request_bytes for pod in daemon),
        daemon_pods=len(daemon),
        source=f"node {node.name}",
        extended_capacity=node.extended_capacity or node.extended_allocatable,
        extended_allocatable=node.extended_allocatable,
        max_pods=node.max_pods,
        daemon_extended=sum_extended(pod.extended_requests for pod in daemon),
    )


def _tag_quantity(source: AsgTemplateSource, resource: str) -> int | None:
    """A `.../resources/<r>` tag, in milli-units for cpu and whole units otherwise."""
    text = source.tags.get(RESOURCES_TAG + resource)
    if text is None:
        return None
    return _tag_value(source, resource, text)


def _tag_value(source: AsgTemplateSource, resource: str, text: str) -> int:
    try:
        value = parse_quantity(text)
    except ValueError:
        raise ValueError(f"ASG {source.asg_name}: tag {RESOURCES_TAG + resource} = {text!r} "
                         f"is not a quantity") from None
    return math.ceil(value * 1000) if resource == "cpu" else math.ceil(value)


def _template_extended(source: AsgTemplateSource) -> ExtendedResources:
    """CA's buildNodeFromTemplate: `nvidia.com/gpu` from the instance type, then every
    `.../resources/<name>` tag (extractAllocatableResourcesFromAsg) set over it, any name:
    `nvidia.com/gpu`, `aws.amazon.com/neuron`, `vpc.amazonaws.com/pod-eni`, hugepages,
    `ephemeral-storage`. Zero amounts are left out, as everywhere in the records."""
    resources = {GPU_RESOURCE: instance_gpus(source.instance_type)}
    for key, text in sorted(source.tags.items()):
        if not key.startswith(RESOURCES_TAG) or len(key) == len(RESOURCES_TAG):
            continue
        name = key[len(RESOURCES_TAG):]
        if name not in (CPU, MEMORY, PODS):
            resources[name] = _tag_value(source, name, text)
    return tuple(sorted((name, value) for name, value in resources.items() if value > 0))


def _tag_taints(tags: Mapping[str, str]) -> tuple[Taint, ...]:
    """`.../taint/<key>` = `<value>:<Effect>`; CA skips a value that names no valid effect."""
    taints = []
    for key, text in sorted(tags.items()):
        if not key.startswith(TAINT_TAG) or len(key) == len(TAINT_TAG):
            continue
        value, separator, effect = text.partition(":")
        if separator and effect in TAINT_EFFECTS:
            taints.append(Taint(key[len(TAINT_TAG):], value, effect))
    return tuple(taints)


def template_from_asg(group: str, source: AsgTemplateSource, reserved_cpu_milli: int = 0,
                      reserved_memory_bytes: int = 0) -> TemplateNode:
    """Imagine a node from the ASG alone, as CA does for scale from zero on AWS (§1.1).

    Capacity is the instance type's (vCPU, memory, NVIDIA GPUs), overridden by
    `.../resources/<r>` tags (CA ≥1.14; any resource name, extended ones too); labels
    are the generic ones (os, arch, instance type, zone) overridden by `.../label/<k>` tags;
    taints come from `.../taint/<k>` tags. CA sets allocatable = capacity; `reserved_*` lets a
    caller subtract what the kubelet keeps, which CA does not know. ValueError when neither the
    instance type nor the tags tell the node's CPU and memory.
    """
    known = instance_capacity(source.instance_type)
    cpu, memory = known if known is not None else (None, None)
    cpu = _tag_quantity(source, "cpu") or cpu
    memory = _tag_quantity(source, "memory") or memory
    if cpu is None or memory is None:
        raise ValueError(
            f"ASG {source.asg_name}: instance type {source.instance_type!r} is unknown and the "
            f"tags {RESOURCES_TAG}cpu and {RESOURCES_TAG}memory do not give its capacity")
    extended = _template_extended(source)
    zone = source.availability_zones[0] if source.availability_zones else ""
    labels = {
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": source.instance_type,
        HOSTNAME_LABEL: _template_name(group),
    }
    if zone:
        labels["topology.kubernetes.io/zone"] = zone
        labels["topology.kubernetes.io/region"] = zone[:-1]
    labels.update({key[len(LABEL_TAG):]: value for key, value in source.tags.items()
                   if key.startswith(LABEL_TAG) and len(key) > len(LABEL_TAG)})
    return TemplateNode(
        group=group, asg_name=source.asg_name, instance_type=source.instance_type,
        labels=labels, taints=_tag_taints(source.tags),
        cpu_capacity_milli=cpu, memory_capacity_bytes=memory,
        cpu_allocatable_milli=max(cpu - reserved_cpu_milli, 0),
        memory_allocatable_bytes=max(memory - reserved_memory_bytes, 0),
        max_pods=_tag_quantity(source, "pods") or DEFAULT_MAX_PODS,
        source="asg tags",
        # CA: "TODO: use proper allocatable!!": allocatable = capacity.
        extended_capacity=extended, extended_allocatable=extended,
    )


_LEAVING_TAINTS = (ESCALATOR_TAINT_KEY, FORCE_TAINT_KEY, "ToBeDeletedByClusterAutoscaler")


def _good_template(node: NodeRecord) -> bool:
    # CA copies only a node that is ready, schedulable and not on its way out.
    return (node.ready and not node.unschedulable
            and not any(node.has_taint(key) for key in _LEAVING_TAINTS))


def template_for_group(group: str, asg_name: str, nodes: Sequence[NodeRecord],
                       pods_by_node: Mapping[str, Sequence[PodRecord]],
                       source: AsgTemplateSource | None) -> TemplateNode | None:
    """A live node of the group if one is fit to copy (oldest first), else the ASG's tags.

    None when the group has neither: CA cannot consider such a group for scale-up.
    """
    candidates = sorted((node for node in nodes if _good_template(node)),
                        key=lambda node: (node.created_unix_seconds, node.name))
    if candidates:
        node = candidates[0]
        instance_type = source.instance_type if source is not None else ""
        return template_from_node(group, asg_name, node, pods_by_node.get(node.name, ()),
                                  instance_type)
    if source is not None:
        return template_from_asg(group, source)
    return None
