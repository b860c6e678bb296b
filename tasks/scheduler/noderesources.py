"""NodeResourcesFit (filter and score) and NodeResourcesBalancedAllocation, kube-scheduler v1.35.

Each function follows one upstream file of pkg/scheduler/framework/plugins/noderesources/, in
integer arithmetic where Go's is integer (int64 division truncates; every value here is
non-negative, so Python's `//` is the same) and in float64 where Go's is float:
* fit.go `fitsRequest` (the filter);
* resource_allocation.go `score`, `calculateResourceAllocatableRequest`,
  `calculatePodResourceRequest` (what a node has, what it would have with the pod);
* least_allocated.go, most_allocated.go, requested_to_capacity_ratio.go (NodeResourcesFit's
  three scoring strategies; helper/shape_score.go's broken linear function);
* balanced_allocation.go `balancedResourceScorer` (the v1.35 formula, one minus the standard
  deviation of the fractions; v1.36's, an option here, scores the change of balance the pod
  brings: MaxNodeScore/2 + (MaxNodeScore/2 + with - without)/2, 50-100 for two resources).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kube_elevator.tasks.core.api_objects import CPU, MEMORY
from kube_elevator.tasks.core.gomath import go_round
from kube_elevator.tasks.scheduler.objects import SchedPod

MAX_NODE_SCORE = 100
MAX_CUSTOM_PRIORITY_SCORE = 10  # config.MaxCustomPriorityScore: a shape point's score range
MAX_UTILIZATION = 100
EPHEMERAL_STORAGE = "ephemeral-storage"


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """config.ResourceSpec: a resource a scoring strategy reads, and its weight (1..100)."""

    name: str
    weight: int = 1


DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


def validate_resources(resources: Sequence[ResourceSpec], path: str) -> None:
    """validation.ValidateNodeResourcesFitArgs: each weight within [1, MaxNodeScore]."""
    for index, resource in enumerate(resources):
        if not 1 <= resource.weight <= MAX_NODE_SCORE:
            raise ValueError(f"{path}[{index}].weight: {resource.weight} not in valid range "
                             f"[1, {MAX_NODE_SCORE}]")


class NodeResources(Protocol):
    """What the resource plugins read of a node: its allocatable and its pods' sums."""

    @property
    def allocatable_cpu_milli(self) -> int: ...

    @property
    def allocatable_memory_bytes(self) -> int: ...

    @property
    def allocatable_extended(self) -> Mapping[str, int]: ...

    @property
    def allowed_pods(self) -> int: ...

    @property
    def pod_count(self) -> int: ...

    @property
    def requested_cpu_milli(self) -> int: ...

    @property
    def requested_memory_bytes(self) -> int: ...

    @property
    def requested_extended(self) -> Mapping[str, int]: ...

    @property
    def nonzero_cpu_milli(self) -> int: ...

    @property
    def nonzero_memory_bytes(self) -> int: ...


# --- fit.go -----------------------------------------------------------------------------------


def fits_request(pod: SchedPod, node: NodeResources) -> bool:
    """fit.go fitsRequest: room for one more pod, then each requested resource within what
    the node's allocatable leaves beside its pods' requests (a zero request always fits)."""
    if node.pod_count + 1 > node.allowed_pods:
        return False
    if pod.cpu_milli > 0 and pod.cpu_milli > (node.allocatable_cpu_milli
                                              - node.requested_cpu_milli):
        return False
    if pod.memory_bytes > 0 and pod.memory_bytes > (node.allocatable_memory_bytes
                                                    - node.requested_memory_bytes):
        return False
    if pod.extended:
        allocatable, requested = node.allocatable_extended, node.requested_extended
        for name, amount in pod.extended:
            if amount > allocatable.get(name, 0) - requested.get(name, 0):
                return False
    return True


# --- resource_allocation.go -------------------------------------------------------------------


def pod_request(pod: SchedPod, resource: str, use_requested: bool) -> int:
    """calculatePodResourceRequest: the pod's request of one resource; with `use_requested`
    False (Least/MostAllocated) a missing container cpu or memory request counts 100m / 200Mi."""
    if resource == CPU:
        return pod.cpu_milli if use_requested else pod.nonzero_cpu_milli
    if resource == MEMORY:
        return pod.memory_bytes if use_requested else pod.nonzero_memory_bytes
    for name, amount in pod.extended:
        if name == resource:
            return amount
    return 0


def allocatable_requested(node: NodeResources, resource: str, pod_amount: int,
                          use_requested: bool) -> tuple[int, int]:
    """calculateResourceAllocatableRequest: (allocatable, requested with the pod) of one
    resource; (0, 0) for an extended resource the pod does not request or the node lacks."""
    if resource == CPU:
        used = node.requested_cpu_milli if use_requested else node.nonzero_cpu_milli
        return node.allocatable_cpu_milli, used + pod_amount
    if resource == MEMORY:
        used = node.requested_memory_bytes if use_requested else node.nonzero_memory_bytes
        return node.allocatable_memory_bytes, used + pod_amount
    if resource == EPHEMERAL_STORAGE:
        return (node.allocatable_extended.get(resource, 0),
                node.requested_extended.get(resource, 0) + pod_amount)
    if pod_amount == 0:  # "bypass scoring on this resource"
        return 0, 0
    allocatable = node.allocatable_extended.get(resource)
    if allocatable is None:
        return 0, 0
    return allocatable, node.requested_extended.get(resource, 0) + pod_amount


def requested_and_allocatable(pod: SchedPod, node: NodeResources,
                              resources: Sequence[ResourceSpec],
                              use_requested: bool) -> tuple[list[int], list[int]]:
    """resourceAllocationScorer.score's two vectors; a resource whose allocatable is 0 is left
    at (0, 0), which every scorer skips."""
    requested = [0] * len(resources)
    allocatable = [0] * len(resources)
    for index, resource in enumerate(resources):
        alloc, req = allocatable_requested(
            node, resource.name, pod_request(pod, resource.name, use_requested), use_requested)
        if alloc == 0:
            continue
        allocatable[index] = alloc
        requested[index] = req
    return requested, allocatable


# --- least_allocated.go, most_allocated.go ------------------------------------------------------


def least_requested_score(requested: int, capacity: int) -> int:
    """The unused share on a 0-100 scale; 0 when the pod would not fit."""
    if capacity == 0:
        return 0
    if requested > capacity:
        return 0
    return ((capacity - requested) * MAX_NODE_SCORE) // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    """The used share on a 0-100 scale; requests past the capacity (defaulted ones) count as
    full."""
    if capacity == 0:
        return 0
    if requested > capacity:
        requested = capacity
    return (requested * MAX_NODE_SCORE) // capacity


def weighted_resource_score(resources: Sequence[ResourceSpec], requested: Sequence[int],
                            allocatable: Sequence[int], most: bool) -> int:
    """leastResourceScorer / mostResourceScorer: the weighted mean of the per-resource scores
    over the resources the node has."""
    node_score = weight_sum = 0
    for index, resource in enumerate(resources):
        if allocatable[index] == 0:
            continue
        score = (most_requested_score if most else least_requested_score)(
            requested[index], allocatable[index])
        node_score += score * resource.weight
        weight_sum += resource.weight
    if weight_sum == 0:
        return 0
    return node_score // weight_sum


# --- requested_to_capacity_ratio.go -------------------------------------------------------------


def _go_div(numerator: int, denominator: int) -> int:
    """Go's int64 division, which truncates toward zero."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator >= 0) == (denominator > 0) else -quotient


def broken_linear(shape: Sequence[tuple[int, int]], utilization: int) -> int:
    """helper.BuildBrokenLinearFunction: linear between the shape's points, flat outside."""
    for index, (point, score) in enumerate(shape):
        if utilization <= point:
            if index == 0:
                return score
            last_point, last_score = shape[index - 1]
            return last_score + _go_div((score - last_score) * (utilization - last_point),
                                        point - last_point)
    return shape[-1][1]


def ratio_score(resources: Sequence[ResourceSpec], requested: Sequence[int],
                allocatable: Sequence[int], shape: Sequence[tuple[int, int]]) -> int:
    """buildRequestedToCapacityRatioScorerFunction: each resource's utilization through the
    shape (scores scaled from 0-10 to 0-100; full above capacity), the weighted mean of the
    resources scoring above 0, rounded half away from zero."""
    scaled = [(point, score * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE))
              for point, score in shape]
    node_score = weight_sum = 0
    for index, resource in enumerate(resources):
        capacity = allocatable[index]
        if capacity == 0:
            continue
        used = requested[index]
        utilization = MAX_UTILIZATION if used > capacity else used * MAX_UTILIZATION // capacity
        score = broken_linear(scaled, utilization)
        if score > 0:
            node_score += score * resource.weight
            weight_sum += resource.weight
    if weight_sum == 0:
        return 0
    return go_round(float(node_score) / float(weight_sum))


def fit_score(pod: SchedPod, node: NodeResources, resources: Sequence[ResourceSpec],
              most: bool, shape: Sequence[tuple[int, int]] = ()) -> int:
    """NodeResourcesFit's score with the LeastAllocated (`most` False), MostAllocated or, given
    a `shape`, RequestedToCapacityRatio strategy; an empty resource list is the plugin's error
    ("resources not found")."""
    if not resources:
        raise ValueError("resources not found")
    requested, allocatable = requested_and_allocatable(pod, node, resources,
                                                       use_requested=False)
    if shape:
        return ratio_score(resources, requested, allocatable, shape)
    return weighted_resource_score(resources, requested, allocatable, most)


# --- balanced_allocation.go ---------------------------------------------------------------------


def balanced_resource_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """balancedResourceScorer (v1.35): (1 - std) * 100, std over the fractions requested /
    allocatable (each at most 1) of the resources the node has; for two resources std is
    |f0 - f1| / 2. Float64 arithmetic in Go's order, truncated to int64."""
    fractions: list[float] = []
    total = 0.0
    for index, used in enumerate(requested):
        if allocatable[index] == 0:
            continue
        fraction = float(used) / float(allocatable[index])
        if fraction > 1:
            fraction = 1
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / float(len(fractions))
        squares = 0.0
        for fraction in fractions:
            squares = squares + (fraction - mean) * (fraction - mean)
        std = math.sqrt(squares / float(len(fractions)))
    return int((1 - std) * float(MAX_NODE_SCORE))


def best_effort(pod: SchedPod, resources: Sequence[ResourceSpec]) -> bool:
    """isBestEffortPod: no request of any scored resource (PreScore then skips the plugin, so
    best-effort pods do not pile onto one node, kubernetes#129138)."""
    return all(pod_request(pod, resource.name, True) == 0 for resource in resources)


def balanced_score(pod: SchedPod, node: NodeResources,
                   resources: Sequence[ResourceSpec], change: bool = False) -> int:
    """NodeResourcesBalancedAllocation's score (actual requests, `useRequested: true`); with
    `change`, v1.36's: how much the pod improves the node's balance (`balance_change`)."""
    requested, allocatable = requested_and_allocatable(pod, node, resources,
                                                       use_requested=True)
    with_pod = balanced_resource_score(requested, allocatable)
    if not change:
        return with_pod
    before = [used - pod_request(pod, resource.name, True) if allocatable[index] else 0
              for index, (used, resource) in enumerate(zip(requested, resources, strict=True))]
    return balance_change(with_pod, balanced_resource_score(before, allocatable))


def balance_change(with_pod: int, without_pod: int) -> int:
    """v1.36's balancedResourceScorer from the two balances (Go's integer division)."""
    return MAX_NODE_SCORE // 2 + _go_div(MAX_NODE_SCORE // 2 + with_pod - without_pod, 2)


__all__ = [
    "DEFAULT_RESOURCES",
    "MAX_CUSTOM_PRIORITY_SCORE",
    "MAX_NODE_SCORE",
    "NodeResources",
    "ResourceSpec",
    "balance_change",
    "balanced_resource_score",
    "balanced_score",
    "best_effort",
    "broken_linear",
    "fit_score",
    "fits_request",
    "least_requested_score",
    "most_requested_score",
    "ratio_score",
    "requested_and_allocatable",
    "validate_resources",
    "weighted_resource_score",
]
