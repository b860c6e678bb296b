"""The scheduler profiles a simulation can run under, as KubeSchedulerConfiguration would set them.

Weights are kube-scheduler v1.35's defaults (pkg/scheduler/apis/config/v1/default_plugins.go):
TaintToleration 3, NodeAffinity 2, NodeResourcesFit 1, PodTopologySpread 2, InterPodAffinity 2,
NodeResourcesBalancedAllocation 1, ImageLocality 1. NodeResourcesFit scores with LeastAllocated
over cpu and memory, weight 1 each (apis/config/v1/defaults.go); BalancedAllocation reads cpu
and memory; PodTopologySpread uses the system default constraints; percentageOfNodesToScore is
unset (adaptive, schedule_one.go numFeasibleNodesToFind).

* `default`: that profile.
* `most-allocated`: the same with NodeResourcesFit's strategy MostAllocated (bin packing, as
  batch clusters configure it).
Options a `Profile` may set beyond those: NodeResourcesFit's `RequestedToCapacityRatio`
strategy with its `shape` (utilization, score 0-10 points), PodTopologySpread's `List`
defaulting (`spread_defaults`), InterPodAffinity's `hardPodAffinityWeight` and
`ignorePreferredTermsOfExistingPods`, and v1.36's NodeResourcesBalancedAllocation formula
(`balanced_v136`).

* `first-fit`: the simulator before this model: the oldest node that passes the filters, no
  score (kept so earlier results can be reproduced).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from kube_elevator.tasks.core.field_words import unsupported_value
from kube_elevator.tasks.scheduler.noderesources import (
    DEFAULT_RESOURCES,
    MAX_CUSTOM_PRIORITY_SCORE,
    ResourceSpec,
    validate_resources,
)
from kube_elevator.tasks.scheduler.objects import PreferredTerm, SpreadConstraint

KUBERNETES_VERSION = "v1.35"

NODE_RESOURCES_FIT = "NodeResourcesFit"
BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
INTER_POD_AFFINITY = "InterPodAffinity"
IMAGE_LOCALITY = "ImageLocality"

DEFAULT_WEIGHTS: Mapping[str, int] = {
    TAINT_TOLERATION: 3,
    NODE_AFFINITY: 2,
    NODE_RESOURCES_FIT: 1,
    POD_TOPOLOGY_SPREAD: 2,
    INTER_POD_AFFINITY: 2,
    BALANCED_ALLOCATION: 1,
    IMAGE_LOCALITY: 1,
}

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
FIRST_FIT = "FirstFit"


@dataclass(frozen=True)
class Profile:
    """One scheduler profile: the strategy NodeResourcesFit scores with (or first fit), the
    resources and weights the scores read, and the node sampling."""

    name: str
    strategy: str = LEAST_ALLOCATED
    fit_resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    balanced_resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    # 0: adaptive (50 % less 1 % per 125 nodes, at least 5 %); 1-100: that share
    percentage_of_nodes_to_score: int = 0
    # NodeAffinityArgs.addedAffinity's preferred terms, which every pod gets
    added_preferred_terms: tuple[PreferredTerm, ...] = ()
    # RequestedToCapacityRatio's shape: (utilization 0-100, score 0-10) points, increasing
    shape: tuple[tuple[int, int], ...] = ()
    # PodTopologySpreadArgs: None is `defaultingType: System`, a tuple the `List` of defaults
    spread_defaults: tuple[SpreadConstraint, ...] | None = None
    # NodeResourcesBalancedAllocation scores with v1.36's formula (the change of balance)
    balanced_v136: bool = False
    # InterPodAffinityArgs
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False

    def __post_init__(self) -> None:
        supported = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO, FIRST_FIT)
        if self.strategy not in supported:
            # ValidateNodeResourcesFitArgs: field.NotSupported on scoringStrategy.type
            raise ValueError(unsupported_value("scoringStrategy.type", str(self.strategy),
                                               supported))
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            validate_shape(self.shape)
        if not 0 <= self.hard_pod_affinity_weight <= 100:
            raise ValueError("hardPodAffinityWeight: not in valid range [0, 100]")
        validate_resources(self.fit_resources, "scoringStrategy.resources")
        validate_resources(self.balanced_resources, "resources")
        if not 0 <= self.percentage_of_nodes_to_score <= 100:
            raise ValueError("percentageOfNodesToScore must be within [0, 100]")

    @property
    def first_fit(self) -> bool:
        return self.strategy == FIRST_FIT

    @property
    def most_allocated(self) -> bool:
        return self.strategy == MOST_ALLOCATED


def validate_shape(shape: tuple[tuple[int, int], ...]) -> None:
    """validation.validateFunctionShape: at least one point, utilization within [0, 100] and
    increasing, score within [0, 10]."""
    if not shape:
        raise ValueError("scoringStrategy.shape: Required value: at least one point must be "
                         "specified")
    for index, (utilization, score) in enumerate(shape):
        if not 0 <= utilization <= 100:
            raise ValueError(f"scoringStrategy.shape[{index}].utilization: Invalid value: "
                             f"{utilization}: not in valid range [0, 100]")
        if index and utilization <= shape[index - 1][0]:
            raise ValueError(f"scoringStrategy.shape[{index}].utilization: Invalid value: "
                             f"{utilization}: utilization values must be sorted in increasing "
                             f"order")
        if not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ValueError(f"scoringStrategy.shape[{index}].score: Invalid value: {score}: "
                             f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")


PROFILES: Mapping[str, Profile] = {
    "default": Profile("default", LEAST_ALLOCATED),
    "most-allocated": Profile("most-allocated", MOST_ALLOCATED),
    "first-fit": Profile("first-fit", FIRST_FIT),
}
ProfileName = Literal["default", "most-allocated", "first-fit"]
PROFILE_NAMES: tuple[ProfileName, ...] = ("default", "most-allocated", "first-fit")
DEFAULT_PROFILE: ProfileName = "default"


def profile_named(name: str) -> Profile:
    """A profile by its scenario name (`scheduler.profile`)."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown scheduler profile {name!r}; known: "
                         f"{', '.join(PROFILE_NAMES)}") from None


__all__ = [
    "BALANCED_ALLOCATION",
    "DEFAULT_PROFILE",
    "DEFAULT_WEIGHTS",
    "IMAGE_LOCALITY",
    "INTER_POD_AFFINITY",
    "KUBERNETES_VERSION",
    "MAX_CUSTOM_PRIORITY_SCORE",
    "NODE_AFFINITY",
    "NODE_RESOURCES_FIT",
    "POD_TOPOLOGY_SPREAD",
    "PROFILES",
    "PROFILE_NAMES",
    "REQUESTED_TO_CAPACITY_RATIO",
    "TAINT_TOLERATION",
    "Profile",
    "ProfileName",
    "profile_named",
    "validate_shape",
]
