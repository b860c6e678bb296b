"""kube-scheduler's noderesources scoring tables (pkg/scheduler/framework/plugins/noderesources,
v1.35), ported: least_allocated_test.go TestLeastAllocatedScoringStrategy,
most_allocated_test.go TestMostAllocatedScoringStrategy and balanced_allocation_test.go
TestNodeResourcesBalancedAllocation.

Each parametrize id is the upstream case's name (pytest numbers the one name upstream uses
twice). The pods, nodes and expected scores are upstream's; they run through `score_nodes`, the
model's pure entry point, and the plugin's score is read from its answer. Left out: the two
balanced-allocation cases with DRA-backed extended resources (DRA is not modelled), and the
SignPod tests (opportunistic batching's pod signatures, not a score).
"""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.scheduler.framework import score_nodes
from kube_elevator.tasks.scheduler.noderesources import ResourceSpec
from kube_elevator.tasks.scheduler.profiles import (
    BALANCED_ALLOCATION,
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    NODE_RESOURCES_FIT,
    Profile,
)
from tests.builders import MakeNode, MakePod

DEFAULT = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
EXTENDED_RES = "abc.com/xyz"
EXTENDED_SET = (*DEFAULT, ResourceSpec(EXTENDED_RES, 1))


def node(name: str, **capacity: str) -> dict[str, Any]:
    return MakeNode().name(name).capacity(capacity).obj()


TWO_CONTAINERS = MakePod().req({"cpu": "1000", "memory": "2000"}).req(
    {"cpu": "2000", "memory": "3000"})


def fit_scores(strategy: str, resources: tuple[ResourceSpec, ...], pod: dict[str, Any],
               nodes: list[dict[str, Any]], existing: list[dict[str, Any]]) -> list[int]:
    profile = Profile("table", strategy, fit_resources=resources)
    answer = score_nodes(pod, nodes, existing, profile).plugin(NODE_RESOURCES_FIT)
    return [answer[n["metadata"]["name"]] for n in nodes]


# (name, pod, nodes, existing pods, resources, expected scores)
LEAST_ALLOCATED_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]],
                                  list[dict[str, Any]], tuple[ResourceSpec, ...], list[int]]] = [
    ("nothing scheduled, nothing requested", MakePod().obj(),
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="4000", memory="10000")],
     [], DEFAULT, [100, 100]),
    ("nothing scheduled, resources requested, differently sized nodes", TWO_CONTAINERS.obj(),
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="6000", memory="10000")],
     [], DEFAULT, [37, 50]),
    ("no resources requested, pods scheduled", MakePod().obj(),
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="4000", memory="10000")],
     [MakePod().node("node1").obj(), MakePod().node("node1").obj(),
      MakePod().node("node2").obj(), MakePod().node("node2").obj()], DEFAULT, [100, 100]),
    ("no resources requested, pods scheduled with resources", MakePod().obj(),
     [node("node1", cpu="10000", memory="20000"), node("node2", cpu="10000", memory="20000")],
     [MakePod().node("node1").req({"cpu": "3000", "memory": "0"}).obj(),
      MakePod().node("node1").req({"cpu": "3000", "memory": "0"}).obj(),
      MakePod().node("node2").req({"cpu": "3000", "memory": "0"}).obj(),
      MakePod().node("node2").req({"cpu": "3000", "memory": "5000"}).obj()], DEFAULT, [70, 57]),
    ("resources requested, pods scheduled with resources", TWO_CONTAINERS.obj(),
     [node("node1", cpu="10000", memory="20000"), node("node2", cpu="10000", memory="20000")],
     [MakePod().node("node1").req({"cpu": "3000", "memory": "0"}).obj(),
      MakePod().node("node2").req({"cpu": "3000", "memory": "5000"}).obj()], DEFAULT, [57, 45]),
    ("resources requested, pods scheduled with resources, differently sized nodes",
     TWO_CONTAINERS.obj(),
     [node("node1", cpu="10000", memory="20000"), node("node2", cpu="10000", memory="50000")],
     [MakePod().node("node1").req({"cpu": "3000", "memory": "0"}).obj(),
      MakePod().node("node2").req({"cpu": "3000", "memory": "5000"}).obj()], DEFAULT, [57, 60]),
    ("requested resources exceed node capacity",
     MakePod().req({"cpu": "3000", "memory": "0"}).obj(),
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="4000", memory="10000")],
     [MakePod().node("node1").req({"cpu": "3000", "memory": "0"}).obj(),
      MakePod().node("node2").req({"cpu": "3000", "memory": "5000"}).obj()], DEFAULT, [50, 25]),
    ("zero node resources, pods scheduled with resources", MakePod().obj(),
     [MakeNode().name("node1").obj(), MakeNode().name("node2").obj()],
     [MakePod().node("node1").req({"cpu": "3000", "memory": "0"}).obj(),
      MakePod().node("node2").req({"cpu": "3000", "memory": "5000"}).obj()], DEFAULT, [0, 0]),
    ("nothing scheduled, resources requested with different weight on CPU and memory, "
     "differently sized nodes", TWO_CONTAINERS.obj(),
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="6000", memory="10000")],
     [], (ResourceSpec("memory", 2), ResourceSpec("cpu", 1)), [41, 50]),
    ("bypass extended resource if the pod does not request", TWO_CONTAINERS.obj(),
     [node("node1", cpu="6000", memory="10000"),
      MakeNode().name("node2").capacity({"cpu": "6000", "memory": "10000",
                                         EXTENDED_RES: "4"}).obj()],
     [], EXTENDED_SET, [50, 50]),
    ("honor extended resource if the pod requests",
     MakePod().req({"cpu": "3000", "memory": "5000", EXTENDED_RES: "2"}).obj(),
     [MakeNode().name("node1").capacity({"cpu": "6000", "memory": "10000",
                                         EXTENDED_RES: "4"}).obj(),
      MakeNode().name("node2").capacity({"cpu": "6000", "memory": "10000",
                                         EXTENDED_RES: "10"}).obj()],
     [], EXTENDED_SET, [50, 60]),
    ("if the node doesn't have a resource", MakePod().req({"cpu": "3000", "memory": "4000"}).obj(),
     [node("node1", cpu="6000", memory="10000"),
      MakeNode().name("node2").capacity({"cpu": "6000", "memory": "10000",
                                         EXTENDED_RES: "4"}).obj()],
     [], (ResourceSpec(EXTENDED_RES, 2), *DEFAULT), [55, 55]),
]


@pytest.mark.parametrize(("pod", "nodes", "existing", "resources", "expected"),
                         [case[1:] for case in LEAST_ALLOCATED_CASES],
                         ids=[case[0] for case in LEAST_ALLOCATED_CASES])
def test_least_allocated_scoring_strategy(pod: dict[str, Any], nodes: list[dict[str, Any]],
                                          existing: list[dict[str, Any]],
                                          resources: tuple[ResourceSpec, ...],
                                          expected: list[int]) -> None:
    """TestLeastAllocatedScoringStrategy: (allocatable - requested) x 100 / allocatable per
    resource, weighted; a pod with no requests counts 100m and 200Mi per container."""
    assert fit_scores(LEAST_ALLOCATED, resources, pod, nodes, existing) == expected


MOST_ALLOCATED_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]],
                                 list[dict[str, Any]], tuple[ResourceSpec, ...], list[int]]] = [
    ("nothing scheduled, nothing requested", MakePod().obj(),
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="4000", memory="10000")],
     [], DEFAULT, [0, 0]),
    ("nothing scheduled, resources requested, differently sized nodes", TWO_CONTAINERS.obj(),
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="6000", memory="10000")],
     [], DEFAULT, [62, 50]),
    ("no resources requested, pods scheduled with resources", MakePod().obj(),
     [node("node1", cpu="10000", memory="20000"), node("node2", cpu="10000", memory="20000")],
     [MakePod().node("node1").req({"cpu": "3000", "memory": "0"}).obj(),
      MakePod().node("node1").req({"cpu": "3000", "memory": "0"}).obj(),
      MakePod().node("node2").req({"cpu": "3000", "memory": "0"}).obj(),
      MakePod().node("node2").req({"cpu": "3000", "memory": "5000"}).obj()], DEFAULT, [30, 42]),
    ("resources requested, pods scheduled with resources", TWO_CONTAINERS.obj(),
     [node("node1", cpu="10000", memory="20000"), node("node2", cpu="10000", memory="20000")],
     [MakePod().node("node1").req({"cpu": "3000", "memory": "0"}).obj(),
      MakePod().node("node2").req({"cpu": "3000", "memory": "5000"}).obj()], DEFAULT, [42, 55]),
    ("resources requested equal node capacity",
     MakePod().req({"cpu": "2000", "memory": "4000"}).req({"cpu": "3000", "memory": "5000"}).obj(),
     [node("node1", cpu="5000", memory="10000"), node("node2", cpu="10000", memory="9000")],
     [], DEFAULT, [95, 75]),
    ("nothing scheduled, resources requested, differently sized nodes", TWO_CONTAINERS.obj(),
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="6000", memory="10000")],
     [], (ResourceSpec("memory", 2), ResourceSpec("cpu", 1)), [58, 50]),
    ("no resources requested, pods scheduled, nonzero request for resource",
     MakePod().container("container").obj(),
     [node("node1", cpu="250m", memory="1000Mi"), node("node2", cpu="250m", memory="1000Mi")],
     [MakePod().node("node1").container("container").obj(),
      MakePod().node("node1").container("container").obj()], DEFAULT, [80, 30]),
    ("bypass extended resource if the pod does not request", TWO_CONTAINERS.obj(),
     [node("node1", cpu="6000", memory="10000"),
      MakeNode().name("node2").capacity({"cpu": "6000", "memory": "10000",
                                         EXTENDED_RES: "4"}).obj()],
     [], EXTENDED_SET, [50, 50]),
    ("honor extended resource if the pod request",
     MakePod().node("node1").req({"cpu": "3000", "memory": "5000", EXTENDED_RES: "2"}).obj(),
     [MakeNode().name("node1").capacity({"cpu": "6000", "memory": "10000",
                                         EXTENDED_RES: "4"}).obj(),
      MakeNode().name("node2").capacity({"cpu": "6000", "memory": "10000",
                                         EXTENDED_RES: "10"}).obj()],
     [], EXTENDED_SET, [50, 40]),
    ("if the node doesn't have a resource",
     MakePod().node("node1").req({"cpu": "3000", "memory": "4000"}).obj(),
     [node("node1", cpu="6000", memory="10000"),
      MakeNode().name("node2").capacity({"cpu": "6000", "memory": "10000",
                                         EXTENDED_RES: "4"}).obj()],
     [], (ResourceSpec(EXTENDED_RES, 2), *DEFAULT), [45, 45]),
]


@pytest.mark.parametrize(("pod", "nodes", "existing", "resources", "expected"),
                         [case[1:] for case in MOST_ALLOCATED_CASES],
                         ids=[case[0] for case in MOST_ALLOCATED_CASES])
def test_most_allocated_scoring_strategy(pod: dict[str, Any], nodes: list[dict[str, Any]],
                                         existing: list[dict[str, Any]],
                                         resources: tuple[ResourceSpec, ...],
                                         expected: list[int]) -> None:
    """TestMostAllocatedScoringStrategy: requested x 100 / allocatable per resource, weighted;
    requests past the allocatable (defaulted ones) count as full."""
    assert fit_scores(MOST_ALLOCATED, resources, pod, nodes, existing) == expected


@pytest.mark.parametrize("strategy", [LEAST_ALLOCATED, MOST_ALLOCATED])
def test_resources_not_set_pods_scheduled_with_error(strategy: str) -> None:
    """Both tables' "Resources not set, pods scheduled with error": no resource to score is the
    plugin's error, not a score."""
    with pytest.raises(ValueError, match="resources not found"):
        fit_scores(strategy, (), TWO_CONTAINERS.obj(), [node("node1", cpu="4000",
                                                                memory="10000")], [])


@pytest.mark.parametrize(("resources", "index"), [
    ((ResourceSpec("memory", -1), ResourceSpec("cpu", 1)), 0),
    ((ResourceSpec("memory", 1), ResourceSpec("cpu", 0)), 1),
    ((ResourceSpec("memory", 1), ResourceSpec("cpu", 101)), 1),
], ids=["resource with negative weight", "resource with zero weight",
        "resource weight larger than MaxNodeScore"])
def test_resource_weights_outside_1_to_100_are_refused(resources: tuple[ResourceSpec, ...],
                                                       index: int) -> None:
    """The tables' weight cases: ValidateNodeResourcesFitArgs refuses the profile, naming
    scoringStrategy.resources[i].weight."""
    with pytest.raises(ValueError, match=rf"scoringStrategy\.resources\[{index}\]\.weight"):
        Profile("table", LEAST_ALLOCATED, fit_resources=resources)


# --- balanced_allocation_test.go ----------------------------------------------------------------


def spec_pod(node_name: str, containers: list[dict[str, str]]) -> dict[str, Any]:
    pod = MakePod().node(node_name)
    for requests in containers:
        pod.req(requests)
    return pod.obj()


CPU_AND_MEMORY = [{"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"}]
CPU_ONLY = [{"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"}]
CPU_MEMORY_GPU = [{"cpu": "1000m", "memory": "2000"},
                  {"cpu": "2000m", "memory": "3000", "nvidia.com/gpu": "3"}]
GPU_SET = (*DEFAULT, ResourceSpec("nvidia.com/gpu", 1))


def make_node(name: str, milli_cpu: int, memory: int, gpus: int = 0) -> dict[str, Any]:
    """noderesources/test_util.go makeNode(name, milliCPU, memory, extendedResource)."""
    capacity = {"cpu": f"{milli_cpu}m", "memory": str(memory)}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    return MakeNode().name(name).capacity(capacity).obj()


BALANCED_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]],
                           tuple[ResourceSpec, ...], list[int] | None]] = [
    ("nothing scheduled, nothing requested, skip in PreScore", MakePod().obj(),
     [make_node("node1", 4000, 10000), make_node("node2", 4000, 10000)], [], DEFAULT, None),
    ("nothing scheduled, resources requested, differently sized nodes",
     spec_pod("node2", CPU_AND_MEMORY),
     [make_node("node1", 4000, 10000), make_node("node2", 6000, 10000)], [], DEFAULT,
     [87, 100]),
    ("resources requested, pods scheduled with resources", spec_pod("node2", CPU_AND_MEMORY),
     [make_node("node1", 10000, 20000), make_node("node2", 10000, 20000)],
     [spec_pod("node1", CPU_ONLY), spec_pod("node2", CPU_AND_MEMORY)], DEFAULT, [82, 95]),
    ("resources requested, pods scheduled with resources, differently sized nodes",
     spec_pod("node2", CPU_AND_MEMORY),
     [make_node("node1", 10000, 20000), make_node("node2", 10000, 50000)],
     [spec_pod("node1", CPU_ONLY), spec_pod("node2", CPU_AND_MEMORY)], DEFAULT, [82, 80]),
    ("requested resources at node capacity", spec_pod("node1", CPU_ONLY),
     [make_node("node1", 6000, 10000), make_node("node2", 6000, 10000)],
     [spec_pod("node1", CPU_ONLY), spec_pod("node2", CPU_AND_MEMORY)], DEFAULT, [50, 75]),
    ("include scalar resource on a node for balanced resource allocation",
     MakePod().req({"memory": "0", "nvidia.com/gpu": "1"}).obj(),
     [make_node("node1", 3500, 40000, gpus=8), make_node("node2", 3500, 40000, gpus=8)],
     [spec_pod("node2", CPU_AND_MEMORY), spec_pod("node1", CPU_MEMORY_GPU)], GPU_SET, [70, 65]),
    ("node without the scalar resource should skip the scalar resource",
     spec_pod("node2", CPU_AND_MEMORY),
     [make_node("node1", 3500, 40000, gpus=8), make_node("node2", 3500, 40000)], [], GPU_SET,
     [63, 63]),
    ("resources requested, pods scheduled with resources if PreScore not called",
     spec_pod("node2", CPU_AND_MEMORY),
     [make_node("node1", 10000, 20000), make_node("node2", 10000, 20000)],
     [spec_pod("node1", CPU_ONLY), spec_pod("node2", CPU_AND_MEMORY)], DEFAULT, [82, 95]),
]


@pytest.mark.parametrize(("pod", "nodes", "existing", "resources", "expected"),
                         [case[1:] for case in BALANCED_CASES],
                         ids=[case[0] for case in BALANCED_CASES])
def test_node_resources_balanced_allocation(pod: dict[str, Any], nodes: list[dict[str, Any]],
                                            existing: list[dict[str, Any]],
                                            resources: tuple[ResourceSpec, ...],
                                            expected: list[int] | None) -> None:
    """TestNodeResourcesBalancedAllocation (v1.35): (1 - std of requested/allocatable) x 100 over
    the resources the node has; a best-effort pod skips the plugin (None: not scored)."""
    profile = Profile("table", LEAST_ALLOCATED, balanced_resources=resources)
    answer = score_nodes(pod, nodes, existing, profile).plugin(BALANCED_ALLOCATION)
    if expected is None:
        assert answer == {}
    else:
        assert [answer[n["metadata"]["name"]] for n in nodes] == expected


@pytest.mark.parametrize(("cpu", "memory", "expected"), [
    ("1", "2500", 75),   # fractions 25 % and 25 %: the balance stays perfect
    ("2", "0", 62),      # 50 % cpu, no memory: std 0.25, a loss of 25 points
    ("0", "5000", 62),   # the mirror case
])
def test_balanced_allocation_v1_36_scores_the_change_of_balance(cpu: str, memory: str,
                                                              expected: int) -> None:
    """v1.36's formula (an option, `balanced_v136`): MaxNodeScore/2 + (MaxNodeScore/2 +
    with - without)/2 on an empty 4-CPU, 10000-byte node."""
    pod = MakePod().req({"cpu": cpu, "memory": memory}).obj()
    profile = Profile("v1.36", LEAST_ALLOCATED, balanced_v136=True)
    answer = score_nodes(pod, [node("node1", cpu="4", memory="10000")], [], profile)
    assert answer.plugin(BALANCED_ALLOCATION) == {"node1": expected}
