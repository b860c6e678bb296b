"""kube-scheduler's RequestedToCapacityRatio tables (v1.35), ported from
noderesources/requested_to_capacity_ratio_test.go: TestRequestedToCapacityRatioScoringStrategy,
TestBrokenLinearFunction, TestResourceBinPackingSingleExtended and
TestResourceBinPackingMultipleExtended.

Each parametrize id is the upstream case's name; pods, nodes, shapes and expected scores are
upstream's, run through `score_nodes` with NodeResourcesFit's RequestedToCapacityRatio
strategy (the broken linear function directly for its own table).
"""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.scheduler.framework import score_nodes
from kube_elevator.tasks.scheduler.noderesources import ResourceSpec, broken_linear
from kube_elevator.tasks.scheduler.profiles import (
    NODE_RESOURCES_FIT,
    REQUESTED_TO_CAPACITY_RATIO,
    Profile,
)
from tests.builders import MakeNode, MakePod

DEFAULT = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
LEAST_SHAPE = ((0, 10), (100, 0))
BIN_PACKING = ((0, 0), (100, 1))
MIB = 1024 * 1024


def node(name: str, **capacity: str) -> dict[str, Any]:
    return MakeNode().name(name).capacity(capacity).obj()


def extended_node(name: str, milli_cpu: int, memory: int, extended: dict[str, int]
                  ) -> dict[str, Any]:
    """noderesources' makeNode(name, milliCPU, memory, extendedResource)."""
    resources = {"cpu": f"{milli_cpu}m", "memory": str(memory),
                 **{key: str(value) for key, value in extended.items()}}
    return MakeNode().name(name).capacity(resources).obj()


def ratio_scores(pod: dict[str, Any], nodes: list[dict[str, Any]],
                 existing: list[dict[str, Any]], resources: tuple[ResourceSpec, ...],
                 shape: tuple[tuple[int, int], ...]) -> list[int]:
    profile = Profile("table", REQUESTED_TO_CAPACITY_RATIO, fit_resources=resources,
                      shape=shape)
    answer = score_nodes(pod, nodes, existing, profile).plugin(NODE_RESOURCES_FIT)
    return [answer[n["metadata"]["name"]] for n in nodes]


STRATEGY = [
    ("nothing scheduled, nothing requested (default - least requested nodes have priority)",
     MakePod().obj(),
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="4000", memory="10000")],
     [MakePod().node("node1").obj(), MakePod().node("node1").obj()], [100, 100]),
    ("nothing scheduled, resources requested, differently sized nodes (default - least "
     "requested nodes have priority)",
     MakePod().req({"cpu": "1000", "memory": "2000"}).req({"cpu": "2000", "memory": "3000"}
                                                          ).obj(),
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="6000", memory="10000")],
     [MakePod().node("node1").obj(), MakePod().node("node1").obj()], [38, 50]),
    ("no resources requested, pods scheduled with resources (default - least requested nodes "
     "have priority)", MakePod().obj(),
     [node("node1", cpu="4000", memory="10000"), node("node2", cpu="6000", memory="10000")],
     [MakePod().node("node1").req({"cpu": "3000", "memory": "5000"}).obj(),
      MakePod().node("node2").req({"cpu": "3000", "memory": "5000"}).obj()], [38, 50]),
]


@pytest.mark.parametrize(("pod", "nodes", "existing", "expected"), [c[1:] for c in STRATEGY],
                         ids=[c[0] for c in STRATEGY])
def test_requested_to_capacity_ratio_scoring_strategy(
        pod: dict[str, Any], nodes: list[dict[str, Any]], existing: list[dict[str, Any]],
        expected: list[int]) -> None:
    assert ratio_scores(pod, nodes, existing, DEFAULT, LEAST_SHAPE) == expected


@pytest.mark.parametrize(("points", "assertions"), [
    (((10, 1), (90, 9)), [(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (19, 1), (20, 2),
                          (89, 8), (90, 9), (99, 9), (100, 9), (110, 9)]),
    (((0, 2), (40, 10), (100, 0)), [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5),
                                    (100, 0), (110, 0)]),
    (((0, 2), (40, 2), (100, 2)), [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2),
                                   (100, 2), (110, 2)]),
], ids=["case_0", "case_1", "case_2"])
def test_broken_linear_function(points: tuple[tuple[int, int], ...],
                                assertions: list[tuple[int, int]]) -> None:
    assert [broken_linear(points, p) for p, _ in assertions] == [e for _, e in assertions]


FOO = "intel.com/foo"
BAR = "intel.com/bar"
SINGLE_NODES = [extended_node("node1", 4000, 10000 * MIB, {FOO: 8}),
                extended_node("node2", 4000, 10000 * MIB, {FOO: 4})]
SINGLE = [
    ("nothing scheduled, nothing requested", MakePod().obj(), [], [0, 0]),
    ("resources requested, pods scheduled with less resources", MakePod().req({FOO: "2"}).obj(),
     [MakePod().obj()], [2, 5]),
    ("resources requested, pods scheduled with resources, on node with existing pod running ",
     MakePod().req({FOO: "2"}).obj(), [MakePod().req({FOO: "2"}).node("node2").obj()], [2, 10]),
    ("resources requested, pods scheduled with more resources", MakePod().req({FOO: "4"}).obj(),
     [MakePod().obj()], [5, 10]),
]


@pytest.mark.parametrize(("pod", "existing", "expected"), [c[1:] for c in SINGLE],
                         ids=[c[0] for c in SINGLE])
def test_resource_bin_packing_single_extended(pod: dict[str, Any],
                                              existing: list[dict[str, Any]],
                                              expected: list[int]) -> None:
    assert ratio_scores(pod, SINGLE_NODES, existing, (ResourceSpec(FOO, 1),),
                        BIN_PACKING) == expected


MULTIPLE_NODES = [extended_node("node1", 4000, 10000 * MIB, {FOO: 8, BAR: 4}),
                  extended_node("node2", 4000, 10000 * MIB, {FOO: 4, BAR: 8})]
POD1 = {FOO: "2", BAR: "2"}
POD2 = {FOO: "4", BAR: "2"}
MULTIPLE = [
    ("nothing scheduled, nothing requested", MakePod().obj(), [MakePod().obj()], [0, 0]),
    ("resources requested, pods scheduled with less resources", MakePod().req(POD1).obj(),
     [MakePod().obj()], [4, 3]),
    ("resources requested, pods scheduled with resources, on node with existing pod running ",
     MakePod().req(POD1).obj(), [MakePod().req(POD2).node("node2").obj()], [4, 7]),
    ("resources requested, pods scheduled with more resources", MakePod().req(POD2).obj(),
     [MakePod().obj()], [5, 5]),
]


@pytest.mark.parametrize(("pod", "existing", "expected"), [c[1:] for c in MULTIPLE],
                         ids=[c[0] for c in MULTIPLE])
def test_resource_bin_packing_multiple_extended(pod: dict[str, Any],
                                                existing: list[dict[str, Any]],
                                                expected: list[int]) -> None:
    assert ratio_scores(pod, MULTIPLE_NODES, existing,
                        (ResourceSpec(FOO, 3), ResourceSpec(BAR, 5)), BIN_PACKING) == expected


@pytest.mark.parametrize(("shape", "message"), [
    ((), "at least one point"),
    (((0, 1), (0, 2)), r"shape\[1\]\.utilization.*increasing"),
    (((0, 11),), r"shape\[0\]\.score.*\[0, 10\]"),
    (((101, 1),), r"shape\[0\]\.utilization.*\[0, 100\]"),
])
def test_shape_validation(shape: tuple[tuple[int, int], ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Profile("table", REQUESTED_TO_CAPACITY_RATIO, shape=shape)
