"""kube-scheduler's InterPodAffinity filtering tables (v1.35), ported from
interpodaffinity/filtering_test.go: TestRequiredAffinitySingleNode and the first cases of
TestRequiredAffinityMultipleNodes.

Each parametrize id is the upstream case's name; pods, nodes and the nodes that pass (upstream's
nil status) are upstream's, run through `filter_nodes`. Upstream's pods are built by
createPodWithAffinityTerms, which gives every pod a podAffinity and a podAntiAffinity (their
required terms possibly empty); so are these.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.scheduler.framework import filter_nodes

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
SERVICE_SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}
READY = [{"type": "Ready", "status": "True"}]
MACHINE1 = {"kind": "Node", "metadata": {"name": "machine1",
                                         "labels": {"region": "r1", "zone": "z11"}},
            "status": {"allocatable": {"pods": "110"}, "conditions": READY}}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    found: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        found["values"] = list(values)
    return found


def term(topology: str, *expressions: dict[str, Any],
         namespaces: list[str] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"labelSelector": {"matchExpressions": list(expressions)}}
    if topology:
        found["topologyKey"] = topology
    if namespaces is not None:
        found["namespaces"] = namespaces
    return found


def with_terms(labels: dict[str, str] | None, affinity: list[dict[str, Any]] | None,
               anti: list[dict[str, Any]] | None, node: str = "", namespace: str = "",
               name: str = "") -> dict[str, Any]:
    """createPodWithAffinityTerms."""
    pod = plain(labels, node, namespace, name)
    pod["spec"]["affinity"] = {"podAffinity": {REQUIRED: affinity or []},
                               "podAntiAffinity": {REQUIRED: anti or []}}
    return pod


def plain(labels: dict[str, str] | None, node: str = "", namespace: str = "",
          name: str = "") -> dict[str, Any]:
    metadata: dict[str, Any] = {"labels": dict(labels or {}), "name": name}
    if namespace:
        metadata["namespace"] = namespace
    spec: dict[str, Any] = {"containers": []}
    if node:
        spec["nodeName"] = node
    return {"kind": "Pod", "metadata": metadata, "spec": spec}


def named(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for index, pod in enumerate(pods):
        pod["metadata"]["name"] = pod["metadata"]["name"] or f"existing-{index}"
    return pods


SCAN_IN_REGION = term("region", expr("service", "In", "securityscan", "value2"))
ANTIVIRUS_ON_NODE = term("node", expr("service", "In", "antivirusscan", "value2"))
SCAN_IN_ZONE = term("zone", expr("service", "In", "securityscan", "value2"))
ON_MACHINE1 = [plain(SERVICE_SCAN, "machine1")]

SINGLE_NODE = [
    ("A pod that has no required pod affinity scheduling rules can schedule onto a node with no "
     "existing pods", plain(None), [], True),
    ("satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In "
     "operator that matches the existing pod", with_terms(S1, [SCAN_IN_REGION], None),
     ON_MACHINE1, True),
    ("satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using "
     "not in operator in labelSelector that matches the existing pod",
     with_terms(S1, [term("region", expr("service", "NotIn", "securityscan3", "value3"))], None),
     ON_MACHINE1, True),
    ("Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
     with_terms(S1, [term("", expr("service", "In", "securityscan", "value2"),
                          namespaces=["DiffNameSpace"])], None),
     [plain(SERVICE_SCAN, "machine1", "ns")], False),
    ("Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
     with_terms(SERVICE_SCAN, [term("", expr("service", "In", "antivirusscan", "value2"))],
                None), ON_MACHINE1, False),
    ("satisfies the PodAffinity with different label Operators in multiple "
     "RequiredDuringSchedulingIgnoredDuringExecution ",
     with_terms(S1, [term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
                     term("region", expr("service", "In", "securityscan"),
                          expr("service", "NotIn", "WrongValue"))], None), ON_MACHINE1, True),
    ("The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot "
     "schedule onto the node because one of the matchExpression item don't match.",
     with_terms(S1, [term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
                     term("region", expr("service", "In", "securityscan2"),
                          expr("service", "NotIn", "WrongValue"))], None), ON_MACHINE1, False),
    ("satisfies the PodAffinity and PodAntiAffinity with the existing pod",
     with_terms(S1, [SCAN_IN_REGION], [ANTIVIRUS_ON_NODE]), ON_MACHINE1, True),
    ("satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the "
     "existing pod", with_terms(S1, [SCAN_IN_REGION], [ANTIVIRUS_ON_NODE]),
     [with_terms(SERVICE_SCAN, None, [ANTIVIRUS_ON_NODE], "machine1")], True),
    ("satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
     with_terms(S1, [SCAN_IN_REGION], [SCAN_IN_ZONE]), ON_MACHINE1, False),
    ("satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry "
     "with the existing pod", with_terms(SERVICE_SCAN, [SCAN_IN_REGION], [ANTIVIRUS_ON_NODE]),
     [with_terms(SERVICE_SCAN, None, [SCAN_IN_ZONE], "machine1")], False),
    ("pod matches its own Label in PodAffinity and that matches the existing pod Labels",
     with_terms(SERVICE_SCAN, [term("region", expr("service", "NotIn", "securityscan",
                                                   "value2"))], None),
     [plain(SERVICE_SCAN, "machine2")], False),
    ("verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity "
     "constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",
     plain(SERVICE_SCAN), [with_terms(SERVICE_SCAN, None, [SCAN_IN_ZONE], "machine1")], False),
    ("verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity "
     "constraints. satisfy PodAntiAffinity symmetry with the existing pod", plain(SERVICE_SCAN),
     [with_terms(SERVICE_SCAN, None, [term("zone", expr("service", "NotIn", "securityscan",
                                                        "value2"))], "machine1")], True),
    ("satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity "
     "symmetry with incoming pod",
     with_terms(SERVICE_SCAN, None, [term("region", expr("service", "Exists")),
                                     term("region", expr("security", "Exists"))]),
     [with_terms(S1, None, [term("zone", expr("security", "Exists"))], "machine1")], False),
    ("PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other "
     "on AffinityTerms",
     with_terms(SERVICE_SCAN, None, [term("zone", expr("service", "Exists")),
                                     term("zone", expr("security", "Exists"))]),
     [with_terms(S1, None, [term("zone", expr("security", "Exists"))], "machine1")], False),
    ("PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other "
     "on AffinityTerms", with_terms(S1, None, [term("zone", expr("security", "Exists"))]),
     [with_terms(SERVICE_SCAN, None, [term("zone", expr("service", "Exists")),
                                      term("zone", expr("security", "Exists"))], "machine1")],
     False),
    ("PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other "
     "on AffinityTerms",
     with_terms({"abc": "", "xyz": ""}, None, [term("zone", expr("abc", "Exists")),
                                               term("zone", expr("def", "Exists"))]),
     [with_terms({"def": "", "xyz": ""}, None, [term("zone", expr("abc", "Exists")),
                                                term("zone", expr("def", "Exists"))],
                 "machine1")], False),
    ("PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other "
     "on AffinityTerms",
     with_terms({"def": "", "xyz": ""}, None, [term("zone", expr("abc", "Exists")),
                                               term("zone", expr("def", "Exists"))]),
     [with_terms({"abc": "", "xyz": ""}, None, [term("zone", expr("abc", "Exists")),
                                                term("zone", expr("def", "Exists"))],
                 "machine1")], False),
]


@pytest.mark.parametrize(("incoming", "existing", "passes"), [c[1:] for c in SINGLE_NODE],
                         ids=[c[0] for c in SINGLE_NODE])
def test_required_affinity_single_node(incoming: dict[str, Any], existing: list[dict[str, Any]],
                                       passes: bool) -> None:
    assert filter_nodes(incoming, [MACHINE1], named(existing)) == (["machine1"] if passes
                                                                   else [])


def node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"pods": "110"}, "conditions": READY}}


CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}
FOO_ABC_IN_REGION = term("region", expr("foo", "In", "abc"))

MULTIPLE_NODES = [
    ("A pod can be scheduled onto all the nodes that have the same topology key & label value "
     "with one of them has an existing pod that matches the affinity rules",
     with_terms(None, [term("region", expr("foo", "In", "bar"))], None),
     [plain({"foo": "bar"}, "machine1", name="p1")],
     [node("machine1", CHINA), node("machine2", CHINA_AZ1), node("machine3", INDIA)],
     ["machine1", "machine2"]),
    ("The affinity rule is to schedule all of the pods of this collection to the same zone. The "
     "first pod of the collection should not be blocked from being scheduled onto any node, even "
     "there's no existing pod that matches the rule anywhere.",
     with_terms({"foo": "bar", "service": "securityscan"},
                [term("zone", expr("foo", "In", "bar")),
                 term("zone", expr("service", "In", "securityscan"))], None),
     [plain({"foo": "bar"}, "nodeA", name="p1")],
     [node("nodeA", {"zone": "az1", "hostname": "h1"}),
      node("nodeB", {"zone": "az2", "hostname": "h2"})], ["nodeA", "nodeB"]),
    ("NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that "
     "matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
     with_terms(None, None, [FOO_ABC_IN_REGION]), [plain({"foo": "abc"}, "nodeA")],
     [node("nodeA", {"region": "r1", "hostname": "nodeA"}),
      node("nodeB", {"region": "r1", "hostname": "nodeB"})], []),
    ("This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule "
     "matches a pod.",
     with_terms(None, None, [FOO_ABC_IN_REGION,
                             term("zone", expr("service", "In", "securityscan"))]),
     [plain({"foo": "abc", "service": "securityscan"}, "nodeA")],
     [node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
      node("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"})], []),
    ("NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that "
     "matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB but "
     "can be scheduled onto nodeC", with_terms(None, None, [FOO_ABC_IN_REGION]),
     [plain({"foo": "abc"}, "nodeA")],
     [node("nodeA", CHINA), node("nodeB", CHINA_AZ1), node("nodeC", INDIA)], ["nodeC"]),
]


@pytest.mark.parametrize(("incoming", "existing", "nodes", "passing"),
                         [c[1:] for c in MULTIPLE_NODES], ids=[c[0] for c in MULTIPLE_NODES])
def test_required_affinity_multiple_nodes(incoming: dict[str, Any],
                                          existing: list[dict[str, Any]],
                                          nodes: list[dict[str, Any]],
                                          passing: list[str]) -> None:
    assert filter_nodes(incoming, nodes, named(existing)) == passing
