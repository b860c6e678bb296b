"""kube-scheduler's PodTopologySpread scoring tables (v1.35), ported from
podtopologyspread/scoring_test.go: TestPodTopologySpreadScore (system defaulting, as upstream
runs it), the system-default case of TestPreScoreStateEmptyNodes and TestPreScoreSkip.

Each parametrize id is the upstream case's name. `nodes` are the candidates, `failed` the nodes
that did not pass the filters (their pods still count). Left out: "matchLabelKeys ignored when
feature gate disabled" (MatchLabelKeysInPodTopologySpread is on in v1.35, as are the node
inclusion policies the other cases switch on) and the internal-state comparisons of
TestPreScoreStateEmptyNodes's cases with the pod's own constraints (their scores are covered by
TestPodTopologySpreadScore); its `defaultingType: List` cases run against a `Profile` with
`spread_defaults`.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.scheduler.framework import score_nodes
from kube_elevator.tasks.scheduler.objects import SpreadConstraint, Workloads, node_from_api, sched_pod
from kube_elevator.tasks.scheduler.podtopologyspread import (
    HOSTNAME,
    ZONE,
    pre_score,
    topology_normalizing_weight,
)
from kube_elevator.tasks.scheduler.profiles import POD_TOPOLOGY_SPREAD, Profile
from kube_elevator.tasks.scheduler.state import cluster_from
from tests.builders import MakeNode, MakePod, exists_selector

ANYWAY = "ScheduleAnyway"
FOO = exists_selector("foo")
BAR = exists_selector("bar")
TAINTS = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]


def host(name: str, **labels: str) -> dict[str, Any]:
    node = MakeNode().name(name).label(HOSTNAME, name)
    for key, value in labels.items():
        node.label(key, value)
    return node.obj()


def zoned(name: str, zone: str) -> dict[str, Any]:
    return MakeNode().name(name).label("zone", zone).label(HOSTNAME, name).obj()


def labelled(name: str, **labels: str) -> dict[str, Any]:
    node = MakeNode().name(name)
    for key, value in labels.items():
        node.label(key, value)
    return node.obj()


def on(node: str, name: str, *labels: str, namespace: str | None = None) -> dict[str, Any]:
    pod = MakePod().name(name).node(node)
    if namespace:
        pod.namespace(namespace)
    for label in labels:
        pod.label(label, "")
    return pod.obj()


def spread(*constraints: tuple[Any, ...], labels: tuple[str, ...] = ("foo",)) -> MakePod:
    pod = MakePod().name("p")
    for label in labels:
        pod.label(label, "")
    for constraint in constraints:
        pod.spread_constraint(*constraint)
    return pod


def counts(spec: dict[str, int], label: str = "foo") -> list[dict[str, Any]]:
    """`{"node-a": 2}`: node-a holds p-a1 and p-a2, each labelled `label`."""
    return [on(node, f"p-{node[-1]}{index + 1}", label)
            for node, count in spec.items() for index in range(count)]


ON_NODE_1 = (1, HOSTNAME, ANYWAY, FOO)
ABCD = [host("node-a"), host("node-b"), host("node-c"), host("node-d")]

# (name, pod, existing pods, candidate nodes, failed nodes, workloads, expected)
CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]],
                  list[dict[str, Any]], list[dict[str, Any]], list[int]]] = [
    ("one constraint on node, no existing pods", spread(ON_NODE_1).obj(), [],
     [host("node-a"), host("node-b")], [], [], [100, 100]),
    ("one constraint on node, only one node is candidate", spread(ON_NODE_1).obj(),
     counts({"node-a": 2, "node-b": 1}), [host("node-a")], [host("node-b")], [], [100]),
    ("one constraint on node, all nodes have the same number of matching pods",
     spread(ON_NODE_1).obj(), counts({"node-a": 1, "node-b": 1}),
     [host("node-a"), host("node-b")], [], [], [100, 100]),
    ("one constraint on node, all 4 nodes are candidates", spread(ON_NODE_1).obj(),
     counts({"node-a": 2, "node-b": 1, "node-d": 3}), ABCD, [], [], [20, 60, 100, 0]),
    ("one constraint on node, null selector", spread((1, HOSTNAME, ANYWAY, None)).obj(),
     counts({"node-a": 2, "node-b": 1, "node-d": 3}), ABCD, [], [], [100, 100, 100, 100]),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=2",
     spread((2, HOSTNAME, ANYWAY, FOO)).obj(), counts({"node-a": 2, "node-b": 1, "node-d": 3}),
     ABCD, [], [], [33, 66, 100, 16]),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=3",
     spread((3, HOSTNAME, ANYWAY, FOO)).obj(),
     counts({"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}), ABCD, [], [],
     [44, 66, 77, 100]),
    ("system defaulting, nodes don't have zone, pods match service",
     MakePod().name("p").label("foo", "").obj(),
     counts({"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}), ABCD, [],
     [{"kind": "Service", "metadata": {}, "spec": {"selector": {"foo": ""}}}],
     [44, 66, 77, 100]),
    ("one constraint on node, 3 out of 4 nodes are candidates", spread(ON_NODE_1).obj(),
     counts({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}),
     [host("node-a"), host("node-b"), host("node-x")], [host("node-y")], [], [33, 83, 100]),
    ("one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match "
     "topology key", spread(ON_NODE_1).obj(),
     counts({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}),
     [host("node-a"), labelled("node-b", n="node-b"), host("node-x")], [host("node-y")], [],
     [16, 0, 100]),
    ("one constraint on zone, 3 out of 4 nodes are candidates",
     spread((1, "zone", ANYWAY, FOO)).obj(),
     counts({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}),
     [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2")],
     [zoned("node-y", "zone2")], [], [75, 75, 100]),
    ("two Constraints on zone and node, 2 out of 4 nodes are candidates",
     spread((1, "zone", ANYWAY, FOO), ON_NODE_1).obj(),
     counts({"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4}),
     [zoned("node-a", "zone1"), zoned("node-x", "zone2")],
     [zoned("node-b", "zone1"), zoned("node-y", "zone2")], [], [100, 63]),
    ("two Constraints on zone and node, with different labelSelectors",
     spread((1, "zone", ANYWAY, FOO), (1, HOSTNAME, ANYWAY, BAR), labels=("foo", "bar")).obj(),
     [on("node-a", "p-a1", "foo"), on("node-b", "p-b1", "foo", "bar"),
      on("node-y", "p-y1", "foo"), on("node-y", "p-y2", "bar")],
     [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2"),
      zoned("node-y", "zone2")], [], [], [60, 20, 100, 60]),
    ("two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
     spread((1, "zone", ANYWAY, FOO), (1, HOSTNAME, ANYWAY, BAR), labels=("foo", "bar")).obj(),
     [on("node-b", "p-b1", "bar"), on("node-x", "p-x1", "foo"),
      on("node-y", "p-y1", "foo", "bar")],
     [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2"),
      zoned("node-y", "zone2")], [], [], [100, 60, 40, 0]),
    ("two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are "
     "candidates",
     spread((1, "zone", ANYWAY, FOO), (1, HOSTNAME, ANYWAY, BAR), labels=("foo", "bar")).obj(),
     [on("node-a", "p-a1", "foo"), on("node-b", "p-b1", "foo", "bar"),
      on("node-y", "p-y1", "foo"), on("node-y", "p-y2", "bar")],
     [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2")],
     [zoned("node-y", "zone2")], [], [50, 25, 100]),
    ("existing pods in a different namespace do not count", spread(ON_NODE_1).obj(),
     [on("node-a", "p-a1", "foo", namespace="ns1"), on("node-a", "p-a2", "foo"),
      on("node-b", "p-b1", "foo"), on("node-b", "p-b2", "foo")],
     [host("node-a"), host("node-b")], [], [], [100, 33]),
    ("terminating Pods should be excluded", spread(ON_NODE_1).obj(),
     [MakePod().name("p-a").node("node-a").label("foo", "").terminating().obj(),
      on("node-b", "p-b", "foo")], [host("node-a"), host("node-b")], [], [], [100, 0]),
    ("minDomains has no effect when ScheduleAnyway",
     spread((2, "node", ANYWAY, FOO, 10)).obj(),
     counts({"node-a": 2, "node-b": 2, "node-c": 1}),
     [labelled("node-a", node="node-a"), labelled("node-b", node="node-b"),
      labelled("node-c", node="node-c")], [], [], [75, 75, 100]),
    ("NodeAffinityPolicy honoed with labelSelectors",
     spread((1, "node", ANYWAY, FOO)).node_selector({"foo": ""}).obj(),
     counts({"node-a": 2, "node-b": 1, "node-c": 1}),
     [labelled("node-a", node="node-a", foo=""), labelled("node-b", node="node-b", foo=""),
      labelled("node-c", node="node-c")], [], [], [0, 33, 100]),
    ("NodeAffinityPolicy ignored with labelSelectors",
     spread((1, "node", ANYWAY, FOO, None, "Ignore")).node_selector({"foo": ""}).obj(),
     counts({"node-a": 2, "node-b": 1, "node-c": 1}),
     [labelled("node-a", node="node-a", foo=""), labelled("node-b", node="node-b", foo=""),
      labelled("node-c", node="node-c")], [], [], [66, 100, 100]),
    ("NodeAffinityPolicy honoed with nodeAffinity",
     spread((1, "node", ANYWAY, FOO)).node_affinity_in("foo", [""]).obj(),
     counts({"node-a": 2, "node-b": 1, "node-c": 1}),
     [labelled("node-a", node="node-a", foo=""), labelled("node-b", node="node-b", foo=""),
      labelled("node-c", node="node-c")], [], [], [0, 33, 100]),
    ("NodeAffinityPolicy ignored with nodeAffinity",
     spread((1, "node", ANYWAY, FOO, None, "Ignore")).node_affinity_in("foo", [""]).obj(),
     counts({"node-a": 2, "node-b": 1, "node-c": 1}),
     [labelled("node-a", node="node-a", foo=""), labelled("node-b", node="node-b", foo=""),
      labelled("node-c", node="node-c")], [], [], [66, 100, 100]),
    ("NodeTaintsPolicy honored", spread((1, "node", ANYWAY, FOO, None, None, "Honor")).obj(),
     counts({"node-a": 2, "node-b": 1, "node-c": 1}),
     [labelled("node-a", node="node-a"), labelled("node-b", node="node-b"),
      MakeNode().name("node-c").label("node", "node-c").taints(TAINTS).obj()], [], [],
     [0, 33, 100]),
    ("NodeTaintsPolicy ignored", spread((1, "node", ANYWAY, FOO)).obj(),
     counts({"node-a": 2, "node-b": 1, "node-c": 1}),
     [labelled("node-a", node="node-a"), labelled("node-b", node="node-b"),
      MakeNode().name("node-c").label("node", "node-c").taints(TAINTS).obj()], [], [],
     [66, 100, 100]),
    ("matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
     spread((1, "zone", ANYWAY, {}, None, None, None, ["foo"]),
            (1, HOSTNAME, ANYWAY, {}, None, None, None, ["bar"]), labels=("foo", "bar")).obj(),
     [on("node-a", "p-a1", "foo"), on("node-b", "p-b1", "foo", "bar"),
      on("node-c", "p-y1", "foo"), on("node-c", "p-y2", "bar")],
     [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-c", "zone2"),
      zoned("node-d", "zone2")], [], [], [60, 20, 60, 100]),
    ("matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
     spread((1, "zone", ANYWAY, FOO),
            (1, HOSTNAME, ANYWAY, BAR, None, None, None, ["baz"]),
            labels=("foo", "bar", "baz")).obj(),
     [on("node-a", "p-a1", "foo"), on("node-b", "p-b1", "foo", "bar", "baz"),
      on("node-c", "p-c1", "foo"), on("node-c", "p-c2", "bar"),
      on("node-c", "p-d3", "bar", "baz")],
     [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-c", "zone2"),
      zoned("node-d", "zone2")], [], [], [60, 20, 60, 100]),
]


@pytest.mark.parametrize(("pod", "existing", "nodes", "failed", "workloads", "expected"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_pod_topology_spread_score(pod: dict[str, Any], existing: list[dict[str, Any]],
                                   nodes: list[dict[str, Any]], failed: list[dict[str, Any]],
                                   workloads: list[dict[str, Any]], expected: list[int]) -> None:
    """TestPodTopologySpreadScore: matching pods per domain x log(domains + 2) + maxSkew - 1,
    normalised so the emptiest domain scores 100."""
    answer = score_nodes(pod, nodes, existing, all_nodes=[*nodes, *failed],
                         workloads=workloads).plugin(POD_TOPOLOGY_SPREAD)
    assert [answer[n["metadata"]["name"]] for n in nodes] == expected


RS1 = {"kind": "ReplicaSet", "metadata": {"namespace": "default", "name": "rs1"},
       "spec": {"selector": FOO}}


def test_system_default_constraints_and_a_replicaset() -> None:
    """TestPreScoreStateEmptyNodes "system default constraints and a replicaset": hostname
    maxSkew 3 and zone maxSkew 5 with the ReplicaSet's selector; nodes without a zone are not
    left out but form the domain "" (weights log(4 + 2) and log(2 + 2))."""
    pod = sched_pod(MakePod().name("p").namespace("default").label("foo", "tar")
                    .label("baz", "sup").owner_reference("rs1", "ReplicaSet").obj(),
                    Workloads([RS1]))
    nodes = [MakeNode().name("node-a").label(HOSTNAME, "node-a").label(ZONE, "mars").obj(),
             MakeNode().name("node-b").label(HOSTNAME, "node-b").label(ZONE, "mars").obj(),
             host("node-c"), host("node-d")]
    cluster = cluster_from([node_from_api(node) for node in nodes], [])
    state = pre_score(pod, cluster.order(), cluster.order())
    assert state is not None
    assert [(c.max_skew, c.topology_key) for c in state.constraints] == [(3, HOSTNAME),
                                                                         (5, ZONE)]
    assert all(c.selector == pod.default_selector for c in state.constraints)
    assert state.counts == [{}, {"mars": 0, "": 0}]
    assert state.weights == [topology_normalizing_weight(4), topology_normalizing_weight(2)]
    assert state.ignored == set()


@pytest.mark.parametrize("pod", [
    MakePod().name("p").namespace("default").obj(),
    MakePod().name("p").namespace("default").label("foo", "bar").label("baz", "sup")
    .owner_reference("rs2", "ReplicaSet").obj(),
], ids=["the pod doesn't have soft topology spread Constraints",
        "default constraints and a replicaset that doesn't match"])
def test_pre_score_skip(pod: dict[str, Any]) -> None:
    """TestPreScoreSkip: no constraint of its own and no Service or existing controller to
    take a selector from: the plugin is skipped, it scores no node."""
    nodes = [host("node-a"), host("node-b")]
    workloads = [{"kind": "ReplicaSet", "metadata": {"namespace": "default", "name": "rs1"},
                  "spec": {"selector": exists_selector("tar")}}]
    answer = score_nodes(pod, nodes, workloads=workloads)
    assert answer.plugin(POD_TOPOLOGY_SPREAD) == {}


LIST_DEFAULTS = (SpreadConstraint(1, HOSTNAME, ANYWAY, None),
                 SpreadConstraint(2, "rack", "DoNotSchedule", None),
                 SpreadConstraint(2, "planet", ANYWAY, None))


@pytest.mark.parametrize(("pod", "defaults", "node", "rs_selector", "expected"), [
    (MakePod().name("p").namespace("default").label("foo", "tar").label("baz", "sup")
     .owner_reference("rs1", "ReplicaSet").obj(), LIST_DEFAULTS,
     MakeNode().name("node-a").label("rack", "rack1").label(HOSTNAME, "node-a")
     .label("planet", "mars").obj(), FOO,
     ([(1, HOSTNAME, FOO), (2, "planet", FOO)], [{}, {"mars": 0}], [1, 1])),
    (MakePod().name("p").namespace("default").label("foo", "bar").label("baz", "sup").obj(),
     (SpreadConstraint(2, "planet", ANYWAY, None),),
     MakeNode().name("node-a").label("planet", "mars").obj(), exists_selector("tar"), None),
    (MakePod().name("p").namespace("default").label("foo", "bar").label("baz", "sup")
     .owner_reference("rs1", "ReplicaSet")
     .spread_constraint(1, "zone", "DoNotSchedule", {"matchLabels": {"foo": "bar"}})
     .spread_constraint(2, "planet", ANYWAY, {"matchLabels": {"baz": "sup"}}).obj(),
     (SpreadConstraint(2, "galaxy", ANYWAY, None),),
     MakeNode().name("node-a").label("planet", "mars").label("galaxy", "andromeda").obj(), FOO,
     ([(2, "planet", {"matchLabels": {"baz": "sup"}})], [{"mars": 0}], [1])),
], ids=["defaults constraints and a replica set",
        "defaults constraints and a replica set that doesn't match",
        "defaults constraints and a replica set, but pod has constraints"])
def test_pre_score_state_list_defaulting(pod: dict[str, Any],
                                         defaults: tuple[SpreadConstraint, ...],
                                         node: dict[str, Any], rs_selector: dict[str, Any],
                                         expected: Any) -> None:
    """TestPreScoreStateEmptyNodes with `defaultingType: List`: the listed ScheduleAnyway
    defaults take the controller's selector, every topology key is required, and a pod with
    constraints of its own uses those. Upstream's second case predates DefaultSelector reading
    the controller reference: its pod has none, so no ReplicaSet gives it a selector."""
    workloads = Workloads([{"kind": "ReplicaSet",
                            "metadata": {"namespace": "default", "name": "rs1"},
                            "spec": {"selector": rs_selector}}])
    scheduled = sched_pod(pod, workloads)
    cluster = cluster_from([node_from_api(node)], [])
    state = pre_score(scheduled, cluster.order(), cluster.order(), defaults)
    if expected is None:
        assert state is None
        answer = score_nodes(pod, [node], profile=Profile("list", spread_defaults=defaults),
                             workloads=[{"kind": "ReplicaSet",
                                         "metadata": {"namespace": "default", "name": "rs1"},
                                         "spec": {"selector": rs_selector}}])
        assert answer.plugin(POD_TOPOLOGY_SPREAD) == {}
        return
    constraints, counts, sizes = expected
    assert state is not None
    assert [(c.max_skew, c.topology_key) for c in state.constraints] == [
        (skew, key) for skew, key, _ in constraints]
    assert [c.selector for c in state.constraints] == [
        sched_pod({"metadata": {}, "spec": {"topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "k", "labelSelector": selector}]}}
        ).spread_constraints[0].selector for _, _, selector in constraints]
    assert state.counts == counts
    assert state.weights == [topology_normalizing_weight(size) for size in sizes]
    assert state.ignored == set()
