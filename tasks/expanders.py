"""Scale-up from unschedulable pods, the Cluster Autoscaler's way (spec §1.1, §1.2).

Escalator sizes a group from summed requests, so a pod that fits no node can wait forever while
utilization looks fine. CA instead asks, for each group, "how many copies of this group's node
would these pending pods need?", and lets a chain of expanders pick the group. All of it is pure:
records, templates and the clock come in, a plan comes out; the flow does the I/O.

Sections: pending pods; template nodes; the bin-packing estimator; the expanders and their
chain; cluster-wide limits; the plan; the provisioning back-off (kept in the group's Lease).
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import yaml

from tasks.cluster_autoscaler.config import PRIORITY_CONFIGMAP, ClusterAutoscalerConfig, parse_priorities
from tasks.core.api_objects import CPU, MEMORY, PODS, ExtendedResources, Taint
from tasks.core.instance_types import instance_capacity, instance_gpus
from tasks.core.lease_state import annotation_time, format_time, name_list, read_annotation, time_map
from tasks.core.quantity import parse_quantity
from tasks.core.records import ESCALATOR_TAINT_KEY, FORCE_TAINT_KEY, AsgInstance, NodeRecord, PodRecord
from tasks.core.scheduling import fits_constraints, fits_extended, free_extended, sum_extended, take_extended

GiB = 2**30
MiB = 2**20
T = TypeVar("T")

# --- pending pods ------------------------------------------------------------------------


def unschedulable_pods(pods: Iterable[PodRecord]) -> list[PodRecord]:
    """Pods the scheduler gave up on: PodScheduled=False with reason Unschedulable (CA §1.1).

    DaemonSet pods are left out, as CA's pod-list processor does: they are bound to one node
    each and a new node brings its own copy.
    """
    return [pod for pod in pods
            if pod.unschedulable and not pod.node_name and not pod.is_daemonset_pod]


# --- template nodes ----------------------------------------------------------------------

NODE_TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template/"
LABEL_TAG = NODE_TEMPLATE_TAG + "label/"
TAINT_TAG = NODE_TEMPLATE_TAG + "taint/"
RESOURCES_TAG = NODE_TEMPLATE_TAG + "resources/"
DEFAULT_MAX_PODS = 110  # the kubelet's default, CA's template default on AWS
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
class AsgTemplateSource:
    """What CA reads of an ASG to imagine a node of a group that has none (scale from zero).

    `instance_type` is the launch template's type or, with a MixedInstancesPolicy, the first
    override: CA sizes the template from that one only (§1.1).
    """

    asg_name: str
    instance_type: str
    tags: Mapping[str, str] = field(default_factory=dict)
    availability_zones: tuple[str, ...] = ()


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
    daemon = [pod for pod in pods_on_node if pod.is_daemonset_pod or pod.static or pod.mirror]
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


def estimate_nodes(pods: Sequence[PodRecord], template: TemplateNode, max_nodes: int) -> Estimate:
    """First fit decreasing of the pods onto copies of the template, at most `max_nodes` copies.

    As CA's binpacking estimator: pods that fit no fresh copy (selector, affinity, taints, or
    too big) are not helped; once the node limit is reached, the remaining pods may still fill
    room on the nodes already counted but no node is added (CA stops adding, §1.1 limits).
    """
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


def free_slots(nodes: Iterable[NodeRecord], pods: Iterable[PodRecord],
               max_pods: int = DEFAULT_MAX_PODS) -> list[Slot]:
    """What is left on live, schedulable nodes after the requests of the pods bound to them."""
    used: dict[str, list[int]] = {}
    used_other: dict[str, list[ExtendedResources]] = {}
    for pod in pods:
        if pod.node_name:
            entry = used.setdefault(pod.node_name, [0, 0, 0])
            entry[0] += pod.cpu_request_milli
            entry[1] += pod.memory_request_bytes
            entry[2] += 1
            if pod.extended_requests:
                used_other.setdefault(pod.node_name, []).append(pod.extended_requests)
    slots = []
    for node in nodes:
        if not node.ready or node.unschedulable:
            continue
        cpu, memory, count = used.get(node.name, (0, 0, 0))
        slots.append(Slot(node, node.cpu_allocatable_milli - cpu,
                          node.memory_allocatable_bytes - memory, max_pods - count,
                          free_extended(node.extended_allocatable,
                                        sum_extended(used_other.get(node.name, ())))))
    return slots


def filter_out_schedulable(pending: Sequence[PodRecord], slots: Sequence[Slot],
                           ) -> tuple[list[PodRecord], list[PodRecord]]:
    """(still pending, would fit somewhere): CA first places pending pods on existing and
    upcoming nodes, so a pod waiting for a node that is booting does not trigger another."""
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


# --- the expanders ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ScaleUpOption:
    """Grow `group` by `node_count` nodes to help `pods` (CA's expander.Option)."""

    group: str
    asg_name: str
    node_count: int
    pods: tuple[PodRecord, ...]
    template: TemplateNode


@dataclass(frozen=True)
class ExpanderContext:
    """What the expanders read besides the options."""

    prices: Mapping[str, float] = field(default_factory=dict)  # instance type -> $ per hour
    pod_cpu_price_per_hour: float = 0.111 * 0.5 / 2  # CA's AWS price model (config.PodPrices)
    pod_memory_gib_price_per_hour: float = 0.111 * 0.5 / 8
    pod_gpu_price_per_hour: float = 0.700  # per requested nvidia.com/gpu (CA gpuPricePerHour)
    priorities: Mapping[int, Sequence[str]] = field(default_factory=dict)
    cluster_node_count: int = 0  # the price expander's preferred node size depends on it


Filter = Callable[[Sequence[ScaleUpOption], ExpanderContext, random.Random], list[ScaleUpOption]]


def _best(options: Sequence[ScaleUpOption], score: Callable[[ScaleUpOption], float | None],
          ) -> list[ScaleUpOption]:
    """The options with the lowest score, ties kept; a None score drops the option."""
    best: list[ScaleUpOption] = []
    best_score = math.inf
    for option in options:
        value = score(option)
        if value is None:
            continue
        if value < best_score:
            best, best_score = [option], value
        elif value == best_score:
            best.append(option)
    return best


def random_expander(options: Sequence[ScaleUpOption], context: ExpanderContext,
                    rng: random.Random) -> list[ScaleUpOption]:
    """CA `random`: one option, uniformly at random."""
    return [rng.choice(list(options))] if options else []


def most_pods(options: Sequence[ScaleUpOption], context: ExpanderContext,
              rng: random.Random) -> list[ScaleUpOption]:
    """CA `most-pods`: the options that would schedule the most pending pods."""
    return _best(options, lambda option: -len(option.pods))


def waste_score(option: ScaleUpOption) -> float | None:
    """CA `least-waste`: idle fraction of CPU plus idle fraction of memory, on node *capacity*.

    (The FAQ words it as CPU first, memory as tie-break; the code adds the two fractions.)
    """
    available_cpu = option.template.cpu_capacity_milli * option.node_count
    available_memory = option.template.memory_capacity_bytes * option.node_count
    if available_cpu <= 0 or available_memory <= 0:
        return None  # CA has no node info for such a group and skips it
    requested_cpu = sum(pod.cpu_request_milli for pod in option.pods)
    requested_memory = sum(pod.memory_request_bytes for pod in option.pods)
    return ((available_cpu - requested_cpu) / available_cpu
            + (available_memory - requested_memory) / available_memory)


def least_waste(options: Sequence[ScaleUpOption], context: ExpanderContext,
                rng: random.Random) -> list[ScaleUpOption]:
    """CA `least-waste` (the default): lowest waste score wins, ties pass on."""
    return _best(options, waste_score)


def least_nodes(options: Sequence[ScaleUpOption], context: ExpanderContext,
                rng: random.Random) -> list[ScaleUpOption]:
    """CA `least-nodes`: fewest nodes to add; options adding none are skipped."""
    return _best(options, lambda option: option.node_count if option.node_count > 0 else None)


# The price expander's constants (CA expander/price): a 0.5 CPU / 500 MiB pod stabilises the
# node/pod price ratio; GPU groups get a fixed, unattractive unfitness.
STABILIZATION_POD_CPU_MILLI = 500
STABILIZATION_POD_MEMORY_BYTES = 500 * MiB
GPU_UNFITNESS = 1000.0


def preferred_node_cpu_milli(cluster_node_count: int) -> int:
    """CA's SimplePreferredNodeProvider: node size doubles each time the cluster triples."""
    for limit, cpus in ((2, 1), (6, 2), (20, 4), (60, 8), (200, 16)):
        if cluster_node_count <= limit:
            return cpus * 1000
    return 32 * 1000


def pod_price(cpu_milli: int, memory_bytes: int, context: ExpanderContext, gpus: int = 0,
              ) -> float:
    """Price of one hour of a pod's requests. GPUs are charged too, as CA's pricing model
    does (GcePriceModel.PodPrice: base price + getAdditionalPrice, per nvidia.com/gpu), so a
    GPU pod is worth its GPU node's price."""
    return (cpu_milli / 1000 * context.pod_cpu_price_per_hour
            + memory_bytes / GiB * context.pod_memory_gib_price_per_hour
            + gpus * context.pod_gpu_price_per_hour)


def _gpus(pod: PodRecord) -> int:
    return dict(pod.extended_requests).get(GPU_RESOURCE, 0) if pod.extended_requests else 0


def price_score(option: ScaleUpOption, context: ExpanderContext) -> float | None:
    """CA `price`: unfitness x (node price + stab) / (pod price + stab); None if unpriced."""
    node_price = context.prices.get(option.template.instance_type)
    if node_price is None:
        return None  # CA: "Failed to calculate node price", the option is skipped
    total_node_price = node_price * option.node_count
    total_pod_price = sum(pod_price(pod.cpu_request_milli, pod.memory_request_bytes, context,
                                    _gpus(pod)) for pod in option.pods)
    stabilization = pod_price(STABILIZATION_POD_CPU_MILLI, STABILIZATION_POD_MEMORY_BYTES, context)
    price_ratio = (total_node_price + stabilization) / (total_pod_price + stabilization)
    preferred = preferred_node_cpu_milli(context.cluster_node_count)
    node_cpu = option.template.cpu_capacity_milli
    unfitness = max(preferred / node_cpu, node_cpu / preferred) if node_cpu > 0 else 1.0
    suppressed = (unfitness - 1.0) * (1.0 - math.tanh((option.node_count - 1) / 15.0)) + 1.0
    if option.template.has_gpu:
        suppressed = GPU_UNFITNESS
    # CA multiplies by 2 for groups that do not exist yet (autoprovisioning); ASGs always exist.
    return suppressed * price_ratio


def price(options: Sequence[ScaleUpOption], context: ExpanderContext,
          rng: random.Random) -> list[ScaleUpOption]:
    """CA `price`: lowest score wins, ties pass on; options without a price are dropped."""
    return _best(options, lambda option: price_score(option, context))


def priority_of(asg_name: str, priorities: Mapping[int, Sequence[str]]) -> int | None:
    """The highest priority whose regexes match the ASG name anywhere (Go's FindStringIndex)."""
    matching = [priority for priority, patterns in priorities.items()
                if any(re.search(pattern, asg_name) for pattern in patterns)]
    return max(matching) if matching else None


def priority(options: Sequence[ScaleUpOption], context: ExpanderContext,
             rng: random.Random) -> list[ScaleUpOption]:
    """CA `priority`: the options of the highest matching priority; no match at all passes every
    option on (CA: "No options filtered"). CA's code starts its search at -1 and so never picks
    a priority below -1; we follow the documented rule (any integer) instead."""
    ranked = [(priority_of(option.asg_name, context.priorities), option) for option in options]
    matched = [(rank, option) for rank, option in ranked if rank is not None]
    if not matched:
        return list(options)
    top = max(rank for rank, _ in matched)
    return [option for rank, option in matched if rank == top]


EXPANDERS: dict[str, Filter] = {
    "random": random_expander,
    "most-pods": most_pods,
    "least-waste": least_waste,
    "least-nodes": least_nodes,
    "price": price,
    "priority": priority,
}


@dataclass(frozen=True)
class Choice:
    """The chain's answer and how it got there (for `elevator plan`)."""

    option: ScaleUpOption | None
    trace: tuple[tuple[str, tuple[str, ...]], ...]  # (expander, groups it kept)


def choose(options: Sequence[ScaleUpOption], chain: Sequence[str], context: ExpanderContext,
           rng: random.Random) -> Choice:
    """CA's chain (§1.2): each expander keeps its best options for the next; a single survivor
    wins at once; ties left at the end are broken at random. KeyError for an unknown name."""
    remaining = list(options)
    trace: list[tuple[str, tuple[str, ...]]] = []
    for name in chain:
        remaining = EXPANDERS[name](remaining, context, rng)
        trace.append((name, tuple(option.group for option in remaining)))
        if len(remaining) == 1:
            return Choice(remaining[0], tuple(trace))
    if not remaining:
        return Choice(None, tuple(trace))
    winner = rng.choice(remaining)
    trace.append(("random", (winner.group,)))
    return Choice(winner, tuple(trace))


# --- from the config file -------------------------------------------------------------


def priorities_from_configmap(data: Mapping[str, str],
                              source: str = PRIORITY_CONFIGMAP) -> dict[int, tuple[str, ...]]:
    """The `cluster-autoscaler-priority-expander` ConfigMap's data: key `priorities`, a YAML
    mapping of integer priority to a list of regexes (CA §1.2). ValueError says what is wrong,
    naming `source` (the ConfigMap read)."""
    text = data.get("priorities")
    if text is None:
        raise ValueError(f"ConfigMap {source}: no 'priorities' key")
    if not text.strip():
        raise ValueError(f"ConfigMap {source}: 'priorities' is empty")
    try:
        document: Any = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(f"ConfigMap {source}: 'priorities' is not YAML: {error}") from None
    return parse_priorities(document)


def expander_context(config: ClusterAutoscalerConfig, cluster_node_count: int,
                     priorities: Mapping[int, Sequence[str]] | None = None) -> ExpanderContext:
    """The context from the file's `cluster_autoscaler:` section; `priorities` read from the
    ConfigMap replaces the inline ones when the section names a ConfigMap."""
    inline = config.priorities if isinstance(config.priorities, dict) else {}
    return ExpanderContext(
        prices=dict(config.prices),
        pod_cpu_price_per_hour=config.pod_prices.cpu_per_hour,
        pod_memory_gib_price_per_hour=config.pod_prices.memory_gib_per_hour,
        pod_gpu_price_per_hour=config.pod_prices.gpu_per_hour,
        priorities=priorities if priorities is not None else inline,
        cluster_node_count=cluster_node_count,
    )


# --- cluster-wide limits --------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterTotals:
    """Nodes, cores and memory the cluster has or has asked for (CA counts upcoming nodes)."""

    node_count: int = 0
    cores: int = 0
    memory_bytes: int = 0


@dataclass(frozen=True)
class ClusterLimits:
    """`max_nodes_total` (0 = none), `cores_total` and `memory_total` maxima (CA §1.3)."""

    max_nodes_total: int = 0
    max_cores: int = 320_000
    max_memory_bytes: int = 6_400_000 * GiB


def cluster_limits(config: ClusterAutoscalerConfig) -> ClusterLimits:
    """The limits the `cluster_autoscaler:` section sets (CA flags §1.3)."""
    _, max_cores = config.cores_min_max
    _, max_memory = config.memory_min_max_bytes
    return ClusterLimits(config.max_nodes_total, max_cores, max_memory)


def node_cores(cpu_milli: int) -> int:
    """Whole cores of a node, rounded up as CA's Quantity.Value()."""
    return math.ceil(cpu_milli / 1000)


def cluster_totals(nodes: Iterable[NodeRecord],
                   upcoming: Iterable[tuple[TemplateNode, int]] = ()) -> ClusterTotals:
    """Totals over live nodes (capacity, else allocatable) plus nodes asked for but not here."""
    count = cores = memory = 0
    for node in nodes:
        count += 1
        cores += node_cores(node.cpu_capacity_milli or node.cpu_allocatable_milli)
        memory += node.memory_capacity_bytes or node.memory_allocatable_bytes
    for template, number in upcoming:
        if number > 0:
            count += number
            cores += node_cores(template.cpu_capacity_milli) * number
            memory += template.memory_capacity_bytes * number
    return ClusterTotals(count, cores, memory)


def nodes_within_limits(template: TemplateNode, node_count: int, totals: ClusterTotals,
                        limits: ClusterLimits) -> int:
    """Cap a scale-up so the cluster stays within its totals (CA's ApplyLimits); may be 0."""
    allowed = node_count
    if limits.max_nodes_total > 0:
        allowed = min(allowed, limits.max_nodes_total - totals.node_count)
    cores = node_cores(template.cpu_capacity_milli)
    if cores > 0:
        allowed = min(allowed, (limits.max_cores - totals.cores) // cores)
    memory = template.memory_capacity_bytes
    if memory > 0:
        allowed = min(allowed, (limits.max_memory_bytes - totals.memory_bytes) // memory)
    return max(allowed, 0)


def exceeded_limit(template: TemplateNode, totals: ClusterTotals,
                   limits: ClusterLimits) -> str | None:
    """Which limit one more node of the template would break, if any (CA skips such groups)."""
    if limits.max_nodes_total > 0 and totals.node_count + 1 > limits.max_nodes_total:
        return f"max_nodes_total {limits.max_nodes_total} reached"
    if totals.cores + node_cores(template.cpu_capacity_milli) > limits.max_cores:
        return f"cores_total max {limits.max_cores} would be exceeded"
    if totals.memory_bytes + template.memory_capacity_bytes > limits.max_memory_bytes:
        return f"memory_total max {limits.max_memory_bytes // GiB} GiB would be exceeded"
    return None


# --- the plan -------------------------------------------------------------------------------

MAX_NODES_PER_SCALE_UP = 1000  # CA --max-nodes-per-scaleup


@dataclass(frozen=True)
class GroupCandidate:
    """One node group as the scale-up sees it this tick."""

    group: str
    asg_name: str
    template: TemplateNode | None
    target_size: int  # the ASG's desired capacity
    max_size: int
    registered_nodes: int  # nodes of the group that have joined; the rest are upcoming
    backed_off_until: float = 0.0  # unix seconds; see ProvisioningState

    @property
    def upcoming(self) -> int:
        return max(self.target_size - self.registered_nodes, 0)


@dataclass(frozen=True)
class ScaleUpPlan:
    """What to grow, by how much, and why the others were not grown."""

    option: ScaleUpOption | None
    new_target_size: int = 0
    pending: tuple[PodRecord, ...] = ()  # unschedulable pods no upcoming node will take
    unhelped: tuple[PodRecord, ...] = ()  # pending pods the chosen option does not help
    skipped: tuple[tuple[str, str], ...] = ()  # (group, reason)
    trace: tuple[tuple[str, tuple[str, ...]], ...] = ()
    capped_from: int = 0  # the chosen option's node count before the cluster limits


def plan_scale_up(
    unschedulable: Sequence[PodRecord], groups: Sequence[GroupCandidate], totals: ClusterTotals,
    limits: ClusterLimits, chain: Sequence[str], context: ExpanderContext, rng: random.Random,
    now: float, free: Sequence[Slot] = (), max_nodes_per_scale_up: int = MAX_NODES_PER_SCALE_UP,
) -> ScaleUpPlan:
    """One CA scale-up (§1.1): drop pods that fit existing or upcoming nodes, estimate each
    group that may grow, let the chain choose, then cap the choice by the cluster limits."""
    slots = list(free)
    for candidate in groups:
        if candidate.template is not None:
            slots.extend(upcoming_slots(candidate.template, candidate.upcoming))
    pending, _ = filter_out_schedulable(unschedulable, slots)
    if not pending:
        return ScaleUpPlan(None)
    skipped: list[tuple[str, str]] = []
    options: list[ScaleUpOption] = []
    for candidate in sorted(groups, key=lambda c: c.group):
        template = candidate.template
        headroom = candidate.max_size - candidate.target_size
        if template is None:
            skipped.append((candidate.group, "no template node (no live node, no ASG template)"))
            continue
        if now < candidate.backed_off_until:
            skipped.append((candidate.group, "backed off after a failed scale-up until "
                                             f"{format_time(candidate.backed_off_until)}"))
            continue
        if headroom <= 0:
            skipped.append((candidate.group, f"at max size {candidate.max_size}"))
            continue
        limit = exceeded_limit(template, totals, limits)
        if limit is not None:
            skipped.append((candidate.group, limit))
            continue
        cap = min(headroom, max_nodes_per_scale_up)
        if limits.max_nodes_total > 0:
            cap = min(cap, limits.max_nodes_total - totals.node_count)
        estimate = estimate_nodes(pending, template, cap)
        if estimate.node_count == 0:
            skipped.append((candidate.group, "no pending pod fits its template node"))
            continue
        options.append(ScaleUpOption(candidate.group, candidate.asg_name, estimate.node_count,
                                     estimate.pods, template))
    choice = choose(options, chain, context, rng)
    if choice.option is None:
        return ScaleUpPlan(None, pending=tuple(pending), unhelped=tuple(pending),
                           skipped=tuple(skipped), trace=choice.trace)
    chosen = choice.option
    allowed = nodes_within_limits(chosen.template, chosen.node_count, totals, limits)
    if allowed == 0:
        skipped.append((chosen.group, "cluster limits leave no room for a node"))
        return ScaleUpPlan(None, pending=tuple(pending), unhelped=tuple(pending),
                           skipped=tuple(skipped), trace=choice.trace,
                           capped_from=chosen.node_count)
    if allowed < chosen.node_count:
        # CA's ApplyLimits caps the count; we also say which pods the smaller count still helps.
        estimate = estimate_nodes(pending, chosen.template, allowed)
        chosen = replace(chosen, node_count=estimate.node_count, pods=estimate.pods)
    target = next(c.target_size for c in groups if c.group == chosen.group)
    helped = {id(pod) for pod in chosen.pods}
    return ScaleUpPlan(
        chosen,
        new_target_size=target + chosen.node_count,
        pending=tuple(pending),
        unhelped=tuple(pod for pod in pending if id(pod) not in helped),
        skipped=tuple(skipped), trace=choice.trace, capped_from=choice.option.node_count,
    )


# --- the provisioning back-off --------------------------------------------------------------
# CA §1.1: a node that has not registered within --max-node-provision-time is given up on and
# deleted, and its group backs off: 5 min, doubling to 30 min, forgotten 3 h after the last
# failure (utils/backoff/exponential_backoff.go). A scale-up whose nodes all register clears
# the back-off (clusterstate: "scale-out finished successfully ... reset node group backoff").

INITIAL_BACKOFF_SECONDS = 5 * 60.0
MAX_BACKOFF_SECONDS = 30 * 60.0
BACKOFF_RESET_SECONDS = 3 * 3600.0
MAX_NODE_PROVISION_SECONDS = 15 * 60.0

BACKOFF_SECONDS = "elevator.io/backoff-seconds"
BACKOFF_UNTIL = "elevator.io/backoff-until"
LAST_FAILED_SCALE_UP = "elevator.io/last-failed-scale-up"
UNREGISTERED_INSTANCES = "elevator.io/unregistered-instances"
TIMED_OUT_INSTANCES = "elevator.io/timed-out-instances"
_GONE_STATES = ("Terminating", "Terminated", "Detaching", "Detached")


def _backoff_seconds(raw: str) -> float:
    """The back-off as written ("300"); finite and within the back-off's range."""
    value = float(raw or 0) if raw.isascii() else math.nan
    if not 0 <= value <= MAX_BACKOFF_SECONDS:
        raise ValueError(f"expected seconds from 0 to {MAX_BACKOFF_SECONDS:g}")
    return value


@dataclass(frozen=True)
class ProvisioningState:
    """One group's back-off and its instances still waiting to register as Nodes.

    Serialised into the group's Lease annotations (`to_annotations` / `from_annotations`).
    """

    backoff_seconds: float = 0.0  # 0: no failure remembered
    backoff_until: float = 0.0
    last_failure: float = 0.0
    unregistered_since: tuple[tuple[str, float], ...] = ()  # (instance id, first seen), sorted
    timed_out: tuple[str, ...] = ()  # given up on, being terminated

    def backed_off(self, now: float) -> bool:
        return now < self.backoff_until

    def to_annotations(self) -> dict[str, str]:
        return {
            BACKOFF_SECONDS: f"{self.backoff_seconds:g}",
            BACKOFF_UNTIL: format_time(self.backoff_until) if self.backoff_until else "",
            LAST_FAILED_SCALE_UP: format_time(self.last_failure) if self.last_failure else "",
            UNREGISTERED_INSTANCES: json.dumps(
                {instance: format_time(since) for instance, since in self.unregistered_since},
                sort_keys=True),
            TIMED_OUT_INSTANCES: json.dumps(list(self.timed_out)),
        }

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str]) -> ProvisioningState:
        """Read what `to_annotations` wrote; ValueError names the malformed annotation."""
        return cls(
            backoff_seconds=read_annotation(annotations, BACKOFF_SECONDS, _backoff_seconds),
            backoff_until=read_annotation(annotations, BACKOFF_UNTIL, annotation_time),
            last_failure=read_annotation(annotations, LAST_FAILED_SCALE_UP, annotation_time),
            unregistered_since=read_annotation(annotations, UNREGISTERED_INSTANCES, time_map),
            timed_out=read_annotation(annotations, TIMED_OUT_INSTANCES, name_list),
        )


def forget_stale_backoff(state: ProvisioningState, now: float,
                         reset_seconds: float = BACKOFF_RESET_SECONDS) -> ProvisioningState:
    """CA RemoveStaleBackoffData: a failure older than the reset timeout is forgotten."""
    if state.last_failure and state.last_failure + reset_seconds < now:
        return replace(state, backoff_seconds=0.0, backoff_until=0.0, last_failure=0.0)
    return state


def record_failure(state: ProvisioningState, now: float,
                   initial_seconds: float = INITIAL_BACKOFF_SECONDS,
                   max_seconds: float = MAX_BACKOFF_SECONDS,
                   reset_seconds: float = BACKOFF_RESET_SECONDS) -> ProvisioningState:
    """CA Backoff(): 5 min the first time; doubled (to 30 min at most) when the group failed
    again after its back-off ended; unchanged if it fails again while still backed off."""
    state = forget_stale_backoff(state, now, reset_seconds)
    duration = initial_seconds
    if state.last_failure:
        duration = state.backoff_seconds
        if state.backoff_until < now:
            duration = min(2 * state.backoff_seconds, max_seconds)
    return replace(state, backoff_seconds=duration, backoff_until=now + duration,
                   last_failure=now)


def record_success(state: ProvisioningState) -> ProvisioningState:
    """CA RemoveBackoff: every node of the scale-up registered."""
    return replace(state, backoff_seconds=0.0, backoff_until=0.0, last_failure=0.0)


@dataclass(frozen=True)
class ProvisioningCheck:
    """One tick's look at a group's instances: who to terminate and the new state."""

    state: ProvisioningState
    to_terminate: tuple[str, ...] = ()  # instance ids, for terminate-with-decrement
    failed: bool = False  # an instance timed out this tick: the group backed off
    succeeded: bool = False  # the last waiting instances registered: back-off cleared


def check_provisioning(state: ProvisioningState, instances: Iterable[AsgInstance],
                       registered_provider_ids: Collection[str], now: float,
                       max_provision_seconds: float = MAX_NODE_PROVISION_SECONDS,
                       initial_seconds: float = INITIAL_BACKOFF_SECONDS,
                       max_seconds: float = MAX_BACKOFF_SECONDS,
                       reset_seconds: float = BACKOFF_RESET_SECONDS) -> ProvisioningCheck:
    """Track instances without a Node; give up on those past the provision time (CA §1.1).

    An instance counts from the first tick that saw it unregistered. A given-up instance stays
    in `to_terminate` while the ASG lists it unregistered (terminating is idempotent, so a
    failed termination is retried next tick), but backs the group off only once.
    """
    state = forget_stale_backoff(state, now, reset_seconds)
    live = [instance for instance in instances
            if not instance.lifecycle_state.startswith(_GONE_STATES)]
    previously = dict(state.unregistered_since)
    waiting: dict[str, float] = {}
    for instance in live:
        if instance.provider_id not in registered_provider_ids:
            waiting[instance.instance_id] = previously.get(instance.instance_id, now)
    # CA: unregistered since + max provision time is before now.
    timed_out = tuple(sorted(instance for instance, since in waiting.items()
                             if now - since > max_provision_seconds))
    new_state = replace(state, unregistered_since=tuple(sorted(waiting.items())),
                        timed_out=timed_out)
    failed = bool(set(timed_out) - set(state.timed_out))
    if failed:
        new_state = record_failure(new_state, now, initial_seconds, max_seconds, reset_seconds)
    # Success: instances were waiting, none is now, and no failure since the oldest of them.
    oldest = min(previously.values(), default=None)
    succeeded = (not failed and oldest is not None and not waiting
                 and not (state.last_failure and state.last_failure >= oldest))
    if succeeded:
        new_state = record_success(new_state)
    return ProvisioningCheck(new_state, timed_out, failed, succeeded)


__all__ = [
    "EXPANDERS",
    "AsgTemplateSource",
    "Choice",
    "ClusterLimits",
    "ClusterTotals",
    "Estimate",
    "ExpanderContext",
    "GroupCandidate",
    "ProvisioningCheck",
    "ProvisioningState",
    "ScaleUpOption",
    "ScaleUpPlan",
    "Slot",
    "TemplateNode",
    "check_provisioning",
    "choose",
    "cluster_limits",
    "cluster_totals",
    "estimate_nodes",
    "exceeded_limit",
    "expander_context",
    "filter_out_schedulable",
    "fits_empty_template",
    "forget_stale_backoff",
    "free_slots",
    "least_nodes",
    "least_waste",
    "most_pods",
    "nodes_within_limits",
    "plan_scale_up",
    "preferred_node_cpu_milli",
    "price",
    "price_score",
    "priorities_from_configmap",
    "priority",
    "priority_of",
    "random_expander",
    "record_failure",
    "record_success",
    "template_for_group",
    "template_from_asg",
    "template_from_node",
    "unschedulable_pods",
    "upcoming_slots",
    "waste_score",
]
