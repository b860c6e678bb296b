"""kube-scheduler's PodTopologySpread filtering tables (v1.35), ported from
podtopologyspread/filtering_test.go: TestSingleConstraint and TestMultipleConstraints, run
against the plugin as upstream runs them (PreFilter over the snapshot, then Filter on each
node: no other plugin, so the nodeAffinity case keeps upstream's "in real case, it's false").

Each parametrize id is the upstream case's name, `fits` the nodes whose status is Success.
The last table checks minDomains, the node inclusion policies and matchLabelKeys on the API
reference's own examples (TopologySpreadConstraint's field descriptions), as the upstream
table's newer cases for them are not in the source index.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.scheduler import podtopologyspread_filter
from kube_elevator.tasks.scheduler.objects import node_from_api, sched_pod
from kube_elevator.tasks.scheduler.state import cluster_from
from tests.builders import MakeNode, MakePod, exists_selector
from tests.unit.test_upstream_podtopologyspread import spread as incoming

DNS = "DoNotSchedule"
FOO = exists_selector("foo")
BAR = exists_selector("bar")


def zoned(name: str, zone: str | None, *, zone_key: str = "zone",
          node_label: bool = True) -> dict[str, Any]:
    node = MakeNode().name(name)
    if zone is not None:
        node.label(zone_key, zone)
    if node_label:
        node.label("node", name)
    return node.obj()


FOUR = [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2"),
        zoned("node-y", "zone2")]


def existing(spec: str, *labels: str) -> list[dict[str, Any]]:
    """`"a:2,b:1"`: p-a1, p-a2 on node-a, p-b1 on node-b, each labelled `labels`."""
    pods = []
    for part in spec.split(","):
        node, count = part.split(":")
        for index in range(int(count)):
            pod = MakePod().name(f"p-{node}{index + 1}").node(f"node-{node}")
            for label in labels:
                pod.label(label, "")
            pods.append(pod.obj())
    return pods


def fits(pod: dict[str, Any], nodes: list[dict[str, Any]],
         pods: list[dict[str, Any]]) -> list[str]:
    scheduled = sched_pod(pod)
    cluster = cluster_from([node_from_api(n) for n in nodes],
                           [((p["metadata"].get("namespace", ""), p["metadata"]["name"]),
                             sched_pod(p)) for p in pods])
    state = podtopologyspread_filter.pre_filter(scheduled, cluster.order())
    assert state is not None
    return [node.name for node in cluster.order()
            if podtopologyspread_filter.satisfies(state, scheduled, node.labels)]


A2_B1_Y3 = existing("a:2,b:1,y:3", "foo")
ON_ZONE = (1, "zone", DNS, FOO)
ON_NODE = (1, "node", DNS, FOO)

SINGLE = [
    ("no existing pods", incoming(ON_ZONE).obj(), FOUR, [],
     ["node-a", "node-b", "node-x", "node-y"]),
    ("no existing pods, incoming pod doesn't match itself", incoming((1, "zone", DNS, BAR)).obj(),
     FOUR, [], ["node-a", "node-b", "node-x", "node-y"]),
    ("existing pods in a different namespace do not count", incoming(ON_ZONE).obj(), FOUR,
     [MakePod().name("p-a1").namespace("ns1").node("node-a").label("foo", "").obj(),
      MakePod().name("p-b1").namespace("ns2").node("node-a").label("foo", "").obj(),
      *existing("x:1,y:1", "foo")], ["node-a", "node-b"]),
    ("pods spread across zones as 3/3, all nodes fit", incoming(ON_ZONE).obj(), FOUR, A2_B1_Y3,
     ["node-a", "node-b", "node-x", "node-y"]),
    ("pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
     incoming(ON_ZONE).obj(),
     [zoned("node-a", "zone1"), zoned("node-b", "zone1", zone_key="zon"),
      zoned("node-x", "zone2"), zoned("node-y", "zone2")],
     existing("a:1,b:1,x:1,y:1", "foo"), ["node-a"]),
    ("pod cannot be scheduled as all nodes don't have label 'rack'",
     incoming((1, "rack", DNS, FOO)).obj(), [zoned("node-a", "zone1"), zoned("node-x", "zone2")],
     [], []),
    ("pods spread across nodes as 2/1/0/3, only node-x fits", incoming(ON_NODE).obj(), FOUR,
     A2_B1_Y3, ["node-x"]),
    ("pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
     incoming((2, "node", DNS, FOO)).obj(), FOUR, A2_B1_Y3, ["node-b", "node-x"]),
    ("pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
     incoming(ON_NODE, labels=("bar",)).obj(), FOUR, A2_B1_Y3, ["node-b", "node-x"]),
    ("incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
     incoming(ON_NODE).node_affinity_in("node", ["node-a", "node-y"]).obj(), FOUR, A2_B1_Y3,
     ["node-a", "node-b", "node-x"]),
    ("terminating Pods should be excluded", incoming(ON_NODE).obj(),
     [zoned("node-a", None), zoned("node-b", None)],
     [MakePod().name("p-a").node("node-a").label("foo", "").terminating().obj(),
      MakePod().name("p-b").node("node-b").label("foo", "").obj()], ["node-a"]),
]

ZONE_FOO, NODE_BAR = (1, "zone", DNS, FOO), (1, "node", DNS, BAR)
MULTIPLE = [
    ("two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
     incoming(ON_ZONE, ON_NODE).obj(), FOUR, A2_B1_Y3, ["node-x"]),
    ("two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
     incoming(ON_ZONE, ON_NODE).obj(), FOUR, existing("a:2,b:1,y:4", "foo"), []),
    ("Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
     incoming(ZONE_FOO, NODE_BAR, labels=("foo", "bar")).obj(), FOUR,
     [*existing("a:1", "foo"), *existing("y:1", "bar")], ["node-x"]),
    ("Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
     incoming(ZONE_FOO, NODE_BAR, labels=("foo", "bar")).obj(), FOUR,
     [*existing("a:1", "foo"), *existing("x:1,y:1", "bar")], []),
    ("Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
     incoming(ZONE_FOO, NODE_BAR, labels=("foo", "bar")).obj(), FOUR,
     [MakePod().name("p-a1").node("node-a").label("foo", "").obj(),
      MakePod().name("p-a2").node("node-a").label("foo", "").label("bar", "").obj(),
      MakePod().name("p-y1").node("node-y").label("foo", "").obj(),
      MakePod().name("p-y2").node("node-y").label("foo", "").label("bar", "").obj(),
      MakePod().name("p-y3").node("node-y").label("foo", "").obj()], ["node-b"]),
    ("Constraints hold different labelSelectors but pod doesn't match itself on 'zone' "
     "constraint", incoming(ZONE_FOO, NODE_BAR, labels=("bar",)).obj(), FOUR,
     [*existing("a:1", "foo"), *existing("x:1,y:1", "bar")], ["node-a", "node-b"]),
    ("two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, "
     "1/0/0/1]", incoming(ON_ZONE, ON_NODE).obj(),
     [zoned("node-a", "zone1"), zoned("node-b", "zone1"),
      zoned("node-x", "zone2", node_label=False), zoned("node-y", "zone2")],
     [*existing("a:1", "foo"), MakePod().name("p-y3").node("node-y").label("foo", "").obj()],
     ["node-b"]),
]


@pytest.mark.parametrize(("pod", "nodes", "pods", "passing"), [c[1:] for c in SINGLE],
                         ids=[c[0] for c in SINGLE])
def test_single_constraint(pod: dict[str, Any], nodes: list[dict[str, Any]],
                           pods: list[dict[str, Any]], passing: list[str]) -> None:
    assert sorted(fits(pod, nodes, pods)) == passing


@pytest.mark.parametrize(("pod", "nodes", "pods", "passing"), [c[1:] for c in MULTIPLE],
                         ids=[c[0] for c in MULTIPLE])
def test_multiple_constraints(pod: dict[str, Any], nodes: list[dict[str, Any]],
                              pods: list[dict[str, Any]], passing: list[str]) -> None:
    assert sorted(fits(pod, nodes, pods)) == passing


THREE_ZONES = [zoned("node-a", "zone1"), zoned("node-b", "zone2"), zoned("node-c", "zone3")]
TWO_TWO_ONE = existing("a:2,b:2,c:1", "foo")
TAINTED_C = [zoned("node-a", "zone1"), zoned("node-b", "zone2"),
             MakeNode().name("node-c").label("zone", "zone3").label("node", "node-c").taints(
                 [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]).obj()]
DOCUMENTED = [
    ("maxSkew 1 over 2/2/1: only zone3", incoming(ON_ZONE).obj(), THREE_ZONES, TWO_TWO_ONE,
     ["node-c"]),
    ("maxSkew 2 over 2/2/1: any zone", incoming((2, "zone", DNS, FOO)).obj(), THREE_ZONES,
     TWO_TWO_ONE, ["node-a", "node-b", "node-c"]),
    ("minDomains 4 over 3 domains: the global minimum is 0",
     incoming((2, "zone", DNS, FOO, 4)).obj(), THREE_ZONES, TWO_TWO_ONE, ["node-c"]),
    ("minDomains 3 over 3 domains: the global minimum is the minimum",
     incoming((2, "zone", DNS, FOO, 3)).obj(), THREE_ZONES, TWO_TWO_ONE,
     ["node-a", "node-b", "node-c"]),
    ("nodeTaintsPolicy Ignore counts a tainted node's domain", incoming(ON_ZONE).obj(),
     TAINTED_C, existing("a:1,b:1", "foo"), ["node-c"]),
    ("nodeTaintsPolicy Honor leaves out a tainted node's domain",
     incoming((1, "zone", DNS, FOO, None, None, "Honor")).obj(), TAINTED_C,
     existing("a:1,b:1", "foo"), ["node-a", "node-b", "node-c"]),
    ("nodeAffinityPolicy Honor leaves out domains the pod may not go to",
     incoming(ON_ZONE).node_affinity_in("zone", ["zone1", "zone2"]).obj(), THREE_ZONES,
     existing("a:1,b:1", "foo"), ["node-a", "node-b", "node-c"]),
    ("nodeAffinityPolicy Ignore counts them",
     incoming((1, "zone", DNS, FOO, None, "Ignore")).node_affinity_in(
         "zone", ["zone1", "zone2"]).obj(), THREE_ZONES, existing("a:1,b:1", "foo"),
     ["node-c"]),
    ("matchLabelKeys: only the pods of the incoming pod's revision count",
     incoming((1, "zone", DNS, FOO, None, None, None, ["rev"])).label("rev", "2").obj(),
     THREE_ZONES,
     [*existing("a:1,b:1", "foo"), MakePod().name("p-c1").node("node-c").label(
         "foo", "").label("rev", "2").obj()], ["node-a", "node-b"]),
]


@pytest.mark.parametrize(("pod", "nodes", "pods", "passing"), [c[1:] for c in DOCUMENTED],
                         ids=[c[0] for c in DOCUMENTED])
def test_documented_fields(pod: dict[str, Any], nodes: list[dict[str, Any]],
                           pods: list[dict[str, Any]], passing: list[str]) -> None:
    assert sorted(fits(pod, nodes, pods)) == passing
