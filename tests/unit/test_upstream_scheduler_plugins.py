"""kube-scheduler's TaintToleration and NodeAffinity scoring tables (v1.35), ported:
tainttoleration/taint_toleration_test.go TestTaintTolerationScore and
nodeaffinity/node_affinity_test.go TestNodeAffinityPriority.

Each parametrize id is the upstream case's name; pods, nodes and expected scores are
upstream's, run through `score_nodes`; "PreScore returns error when an incoming Pod has a
broken affinity" is `score_nodes` raising `SchedulingError` with upstream's message.
Upstream's "all nodes are same priority as NodeAffinity is nil" calls Score without PreScore (0
everywhere); through the framework, as here, PreScore skips the plugin, so it scores no node,
which adds the same 0 to every total.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.core.api_objects import MatchExpression, NodeSelectorTerm
from kube_elevator.tasks.scheduler.framework import score_nodes
from kube_elevator.tasks.scheduler.objects import PreferredTerm, SchedulingError
from kube_elevator.tasks.scheduler.profiles import (
    LEAST_ALLOCATED,
    NODE_AFFINITY,
    TAINT_TOLERATION,
    Profile,
)
from tests.builders import MakeNode, MakePod


def tainted(name: str, *taints: tuple[str, str, str]) -> dict[str, Any]:
    return MakeNode().name(name).taints(
        [{"key": key, "value": value, "effect": effect} for key, value, effect in taints]).obj()


def toleration(key: str, value: str, effect: str) -> dict[str, str]:
    return {"key": key, "operator": "Equal", "value": value, "effect": effect}


PREFER = "PreferNoSchedule"
ARM = ("cpu-type", "arm64", PREFER)
SSD = ("disk-type", "ssd", PREFER)

TAINT_CASES: list[tuple[str, list[dict[str, str]], list[dict[str, Any]], list[int]]] = [
    ("node with taints tolerated by the pod, gets a higher score than those node with "
     "intolerable taints", [toleration("foo", "bar", PREFER)],
     [tainted("nodeA", ("foo", "bar", PREFER)), tainted("nodeB", ("foo", "blah", PREFER))],
     [100, 0]),
    ("the nodes that all of their taints are tolerated by the pod, get the same score, no "
     "matter how many tolerable taints a node has",
     [toleration("cpu-type", "arm64", PREFER), toleration("disk-type", "ssd", PREFER)],
     [tainted("nodeA"), tainted("nodeB", ARM), tainted("nodeC", ARM, SSD)], [100, 100, 100]),
    ("the more intolerable taints a node has, the lower score it gets.",
     [toleration("foo", "bar", PREFER)],
     [tainted("nodeA"), tainted("nodeB", ARM), tainted("nodeC", ARM, SSD)], [100, 50, 0]),
    ("only taints and tolerations that have effect PreferNoSchedule are checked by "
     "taints-tolerations priority function",
     [toleration("cpu-type", "arm64", "NoSchedule"), toleration("disk-type", "ssd", "NoSchedule")],
     [tainted("nodeA"), tainted("nodeB", ("cpu-type", "arm64", "NoSchedule")),
      tainted("nodeC", ARM, SSD)], [100, 100, 0]),
    ("Default behaviour No taints and tolerations, lands on node with no taints", [],
     [tainted("nodeA"), tainted("nodeB", ARM)], [100, 0]),
]


@pytest.mark.parametrize(("tolerations", "nodes", "expected"),
                         [case[1:] for case in TAINT_CASES], ids=[c[0] for c in TAINT_CASES])
def test_taint_toleration_score(tolerations: list[dict[str, str]], nodes: list[dict[str, Any]],
                                expected: list[int]) -> None:
    """TestTaintTolerationScore: intolerable PreferNoSchedule taints counted, normalised in
    reverse (none: 100)."""
    pod = MakePod().name("pod1").tolerations(tolerations).obj()
    answer = score_nodes(pod, nodes).plugin(TAINT_TOLERATION)
    assert [answer[n["metadata"]["name"]] for n in nodes] == expected


LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}
AFFINITY1 = [(2, [("foo", ["bar"])])]
AFFINITY2 = [(2, [("foo", ["bar"])]), (4, [("key", ["value"])]),
             (5, [("foo", ["bar"]), ("key", ["value"]), ("az", ["az1"])])]


def labelled(name: str, labels: dict[str, str]) -> dict[str, Any]:
    builder = MakeNode().name(name)
    for key, value in labels.items():
        builder.label(key, value)
    return builder.obj()


def added(weight: int, key: str, values: list[str]) -> PreferredTerm:
    return PreferredTerm(weight, NodeSelectorTerm(
        matchExpressions=(MatchExpression(key, "In", tuple(values)),)))


AFFINITY_CASES: list[tuple[str, list[Any] | None, list[dict[str, Any]],
                           tuple[PreferredTerm, ...], list[int] | None]] = [
    ("all nodes are same priority as NodeAffinity is nil", None,
     [labelled("node1", LABEL1), labelled("node2", LABEL2), labelled("node3", LABEL3)], (),
     None),
    ("Skip is returned in PreScore when NodeAffinity is nil", None,
     [labelled("node1", LABEL1)], (), None),
    ("no node matches preferred scheduling requirements in NodeAffinity of pod so all nodes' "
     "priority is zero", AFFINITY1,
     [labelled("node1", LABEL4), labelled("node2", LABEL2), labelled("node3", LABEL3)], (),
     [0, 0, 0]),
    ("only node1 matches the preferred scheduling requirements of pod", AFFINITY1,
     [labelled("node1", LABEL1), labelled("node2", LABEL2), labelled("node3", LABEL3)], (),
     [100, 0, 0]),
    ("all nodes matches the preferred scheduling requirements of pod but with different "
     "priorities ", AFFINITY2,
     [labelled("node1", LABEL1), labelled("node5", LABEL5), labelled("node2", LABEL2)], (),
     [18, 100, 36]),
    ("added affinity", None, [labelled("node1", LABEL1), labelled("node2", LABEL2)],
     (added(2, "foo", ["bar"]),), [100, 0]),
    ("added affinity and pod has default affinity", AFFINITY1,
     [labelled("node1", LABEL1), labelled("node2", LABEL2), labelled("node3", LABEL5)],
     (added(3, "key", ["value"]),), [40, 60, 100]),
    ("calculate the priorities correctly even if PreScore is not called", AFFINITY2,
     [labelled("node1", LABEL1), labelled("node5", LABEL5), labelled("node2", LABEL2)], (),
     [18, 100, 36]),
]


@pytest.mark.parametrize(("affinity", "nodes", "added_terms", "expected"),
                         [case[1:] for case in AFFINITY_CASES],
                         ids=[c[0] for c in AFFINITY_CASES])
def test_node_affinity_priority(affinity: list[Any] | None, nodes: list[dict[str, Any]],
                                added_terms: tuple[PreferredTerm, ...],
                                expected: list[int] | None) -> None:
    """TestNodeAffinityPriority: the weights of the matched preferred terms (the profile's
    addedAffinity with them), normalised; no term: PreScore skips the plugin (None)."""
    pod = MakePod()
    if affinity is not None:
        pod.preferred_node_affinity(affinity)
    profile = Profile("table", LEAST_ALLOCATED, added_preferred_terms=added_terms)
    answer = score_nodes(pod.obj(), nodes, profile=profile).plugin(NODE_AFFINITY)
    if expected is None:
        assert answer == {}
    else:
        assert [answer[n["metadata"]["name"]] for n in nodes] == expected


def test_pre_score_returns_error_when_an_incoming_pod_has_a_broken_affinity() -> None:
    """TestNodeAffinityPriority's case of that name: a preferred term whose label key is not a
    qualified name is the plugin's PreScore error, never a term that matches nothing."""
    pod = MakePod().preferred_node_affinity([(2, [("invalid key", ["bar"])])]).obj()
    # kube-scheduler's words: the value Go-quoted, as field.Invalid prints it (issue 42)
    with pytest.raises(SchedulingError, match=r'^\[0\]\.matchExpressions\[0\]\.key: Invalid '
                                              r'value: "invalid key": '):
        score_nodes(pod, [MakeNode().name("node1").label("foo", "bar").obj()])
