"""kube-scheduler's InterPodAffinity scoring tables (v1.35), ported from
interpodaffinity/scoring_test.go: TestPreferredAffinity and
TestPreferredAffinityWithHardPodAffinitySymmetricWeight.

Each parametrize id is the upstream case's name (a suffix tells apart two cases upstream
names alike); pods, nodes, namespaces and expected scores are upstream's, run through
`score_nodes`. Upstream's Skip status is the plugin scoring no node (`None` below); its Error
status for an invalid selector value is `SchedulingError`.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.scheduler.framework import score_nodes
from kube_elevator.tasks.scheduler.objects import SchedulingError
from kube_elevator.tasks.scheduler.profiles import INTER_POD_AFFINITY, Profile

MAX = 100
NAMESPACES = [
    {"kind": "Namespace", "metadata": {"name": "subteam1.team1", "labels": {"team": "team1"}}},
    {"kind": "Namespace", "metadata": {"name": "subteam2.team1", "labels": {"team": "team1"}}},
    {"kind": "Namespace", "metadata": {"name": "subteam1.team2", "labels": {"team": "team2"}}},
    {"kind": "Namespace", "metadata": {"name": "subteam2.team2", "labels": {"team": "team2"}}},
]
CHINA = {"region": "China"}
INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    found: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        found["values"] = list(values)
    return found


def term(topology: str, *expressions: dict[str, Any], namespaces: list[str] | None = None,
         namespace_selector: dict[str, Any] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"labelSelector": {"matchExpressions": list(expressions)},
                             "topologyKey": topology}
    if namespaces is not None:
        found["namespaces"] = namespaces
    if namespace_selector is not None:
        found["namespaceSelector"] = namespace_selector
    return found


def weighted(weight: int, the_term: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": the_term}


PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
TEAM1 = {"matchExpressions": [expr("team", "In", "team1")]}

STAY_WITH_S1_IN_REGION = {"podAffinity": {PREFERRED: [
    weighted(5, term("region", expr("security", "In", "S1")))]}}
STAY_WITH_S2_IN_REGION = {"podAffinity": {PREFERRED: [
    weighted(6, term("region", expr("security", "In", "S2")))]}}
AFFINITY3 = {"podAffinity": {PREFERRED: [
    weighted(8, term("region", expr("security", "NotIn", "S1"), expr("security", "In", "S2"))),
    weighted(2, term("region", expr("security", "Exists"),
                     expr("wrongkey", "DoesNotExist")))]}}
HARD_AFFINITY = {"podAffinity": {REQUIRED: [
    term("region", expr("security", "In", "S1", "value2")),
    term("region", expr("security", "Exists"), expr("wrongkey", "DoesNotExist"))]}}
AWAY_FROM_S1_IN_AZ = {"podAntiAffinity": {PREFERRED: [
    weighted(5, term("az", expr("security", "In", "S1")))]}}
AWAY_FROM_S2_IN_AZ = {"podAntiAffinity": {PREFERRED: [
    weighted(5, term("az", expr("security", "In", "S2")))]}}
STAY_WITH_S1_AWAY_FROM_S2 = {
    "podAffinity": {PREFERRED: [weighted(8, term("region", expr("security", "In", "S1")))]},
    "podAntiAffinity": {PREFERRED: [weighted(5, term("az", expr("security", "In", "S2")))]}}
AFFINITY_NAMESPACE_SELECTOR = {"podAffinity": {PREFERRED: [weighted(5, term(
    "region", expr("security", "In", "S1"), namespaces=["subteam2.team2"],
    namespace_selector=TEAM1))]}}
ANTI_AFFINITY_NAMESPACE_SELECTOR = {"podAntiAffinity": {PREFERRED: [weighted(5, term(
    "region", expr("security", "In", "S1"), namespaces=["subteam2.team2"],
    namespace_selector=TEAM1))]}}
INVALID_AFFINITY = {"podAffinity": {PREFERRED: [
    weighted(8, term("region", expr("security", "In", "{{.bad-value.}}")))]}}
INVALID_ANTI_AFFINITY = {"podAntiAffinity": {PREFERRED: [
    weighted(5, term("az", expr("security", "In", "{{.bad-value.}}")))]}}


def pod(labels: dict[str, str] | None = None, affinity: dict[str, Any] | None = None,
        node: str = "", namespace: str = "", name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": []}
    if node:
        spec["nodeName"] = node
    if affinity is not None:
        spec["affinity"] = affinity
    metadata: dict[str, Any] = {"labels": dict(labels or {})}
    if namespace:
        metadata["namespace"] = namespace
    if name:
        metadata["name"] = name
    return {"kind": "Pod", "metadata": metadata, "spec": spec}


def node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": dict(labels)},
            "status": {"allocatable": {"pods": "110"}}}


def nodes(*labels: dict[str, str]) -> list[dict[str, Any]]:
    return [node(f"node{index + 1}", label) for index, label in enumerate(labels)]


def with_ns(namespace: str, on: str, labels: dict[str, str]) -> dict[str, Any]:
    return pod(labels, node=on, namespace=namespace)


PREFERRED_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]],
                            list[int] | None, bool]] = [
    ("all nodes are same priority as Affinity is nil", pod(S1), [],
     nodes(CHINA, INDIA, AZ1), None, False),
    ("Affinity: pod that matches topology key & pods in nodes will get high score comparing to "
     "otherswhich doesn't match either pods in nodes or in topology key",
     pod(S1, STAY_WITH_S1_IN_REGION),
     [pod(S1, node="node1"), pod(S2, node="node2"), pod(S1, node="node3")],
     nodes(CHINA, INDIA, AZ1), [MAX, 0, 0], False),
    ("All the nodes that have the same topology key & label value with one of them has an "
     "existing pod that match the affinity rules, have the same score",
     pod(None, STAY_WITH_S1_IN_REGION), [pod(S1, node="node1")],
     nodes(CHINA, CHINA_AZ1, INDIA), [MAX, MAX, 0], False),
    ("Affinity: nodes in one region has more matching pods comparing to other region, so the "
     "region which has more matches will get high score",
     pod(S1, STAY_WITH_S2_IN_REGION),
     [pod(S2, node=n) for n in ("node1", "node1", "node2", "node3", "node4", "node5")],
     nodes(CHINA, INDIA, CHINA, CHINA, INDIA), [MAX, 0, MAX, MAX, 0], False),
    ("Affinity: different Label operators and values for pod affinity scheduling preference, "
     "including some match failures ", pod(S1, AFFINITY3),
     [pod(S1, node="node1"), pod(S2, node="node2"), pod(S1, node="node3")],
     nodes(CHINA, INDIA, AZ1), [20, MAX, 0], False),
    ("Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in "
     "pod affinity symmetry", pod(S2),
     [pod(S1, STAY_WITH_S1_IN_REGION, node="node1"), pod(S2, STAY_WITH_S2_IN_REGION, "node2")],
     nodes(CHINA, INDIA, AZ1), [0, MAX, 0], False),
    ("Affinity symmetry with namespace selector", pod(S1, namespace="subteam1.team1"),
     [pod(S1, AFFINITY_NAMESPACE_SELECTOR, "node1"), pod(S2, STAY_WITH_S2_IN_REGION, "node2")],
     nodes(CHINA, INDIA, AZ1), [MAX, 0, 0], False),
    ("AntiAffinity symmetry with namespace selector", pod(S1, namespace="subteam1.team1"),
     [pod(S1, ANTI_AFFINITY_NAMESPACE_SELECTOR, "node1"),
      pod(S2, STAY_WITH_S2_IN_REGION, "node2")],
     nodes(CHINA, INDIA, AZ1), [0, MAX, MAX], False),
    ("Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod "
     "affinity symmetry", pod(S1),
     [pod(S1, HARD_AFFINITY, "node1"), pod(S2, HARD_AFFINITY, "node2")],
     nodes(CHINA, INDIA, AZ1), [MAX, MAX, 0], False),
    ("Anti Affinity: pod that does not match existing pods in node will get high score ",
     pod(S1, AWAY_FROM_S1_IN_AZ), [pod(S1, node="node1"), pod(S2, node="node2")],
     nodes(AZ1, CHINA), [0, MAX], False),
    ("Anti Affinity: pod that does not match topology key & match the pods in nodes will get "
     "higher score comparing to others ", pod(S1, AWAY_FROM_S1_IN_AZ),
     [pod(S1, node="node1"), pod(S1, node="node2")], nodes(AZ1, CHINA), [0, MAX], False),
    ("Anti Affinity: one node has more matching pods comparing to other node, so the node which "
     "has more unmatches will get high score", pod(S1, AWAY_FROM_S1_IN_AZ),
     [pod(S1, node="node1"), pod(S1, node="node1"), pod(S2, node="node2")],
     nodes(AZ1, INDIA), [0, MAX], False),
    ("Anti Affinity symmetry: the existing pods in node which has anti affinity match will get "
     "high score", pod(S2),
     [pod(S1, AWAY_FROM_S2_IN_AZ, "node1"), pod(S2, AWAY_FROM_S1_IN_AZ, "node2")],
     nodes(AZ1, AZ2), [0, MAX], False),
    ("Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution "
     "in both pod affinity & anti affinity", pod(S1, STAY_WITH_S1_AWAY_FROM_S2),
     [pod(S1, node="node1"), pod(S1, node="node2")], nodes(CHINA, AZ1), [MAX, 0], False),
    ("Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to "
     "schedule and existing pods have the same labels", pod(S1, STAY_WITH_S1_AWAY_FROM_S2),
     [pod(S1, node=n) for n in ("node1", "node1", "node2", "node3", "node3", "node4", "node5")],
     nodes(CHINA_AZ1, INDIA, CHINA, CHINA, INDIA), [MAX, 0, MAX, MAX, 0], False),
    ("Affinity and Anti Affinity and symmetry: considered only "
     "preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity & "
     "symmetry", pod(S1, STAY_WITH_S1_AWAY_FROM_S2),
     [pod(S1, node="node1"), pod(S2, node="node2"),
      pod(None, STAY_WITH_S1_AWAY_FROM_S2, "node3"), pod(None, AWAY_FROM_S1_IN_AZ, "node4")],
     nodes(CHINA, AZ1, INDIA, AZ2), [MAX, 0, MAX, 0], False),
    ("Avoid panic when partial nodes in a topology don't have pods with affinity", pod(S1),
     [pod(S1, node="node1"), pod(None, STAY_WITH_S1_AWAY_FROM_S2, "node2")],
     nodes(CHINA, CHINA), [0, 0], False),
    ("Affinity with pods matching NamespaceSelector",
     pod(S1, AFFINITY_NAMESPACE_SELECTOR, namespace="subteam1.team1"),
     [with_ns("subteam1.team1", "node1", S1), with_ns("subteam1.team1", "node1", S1),
      with_ns("subteam1.team2", "node1", S1), with_ns("subteam2.team1", "node2", S1)],
     nodes(CHINA, INDIA), [MAX, 0], False),
    ("Affinity with pods matching both NamespaceSelector and Namespaces fields",
     pod(S1, AFFINITY_NAMESPACE_SELECTOR, namespace="subteam1.team1"),
     [with_ns("subteam1.team1", "node1", S1), with_ns("subteam1.team1", "node1", S1),
      with_ns("subteam2.team2", "node1", S1), with_ns("subteam2.team1", "node2", S1)],
     nodes(CHINA, INDIA), [MAX, 0], False),
    ("Affinity with pods matching NamespaceSelector (anti-affinity)",
     pod(S1, ANTI_AFFINITY_NAMESPACE_SELECTOR, namespace="subteam1.team1"),
     [with_ns("subteam1.team1", "node1", S1), with_ns("subteam1.team1", "node1", S1),
      with_ns("subteam1.team2", "node1", S1), with_ns("subteam2.team1", "node2", S1)],
     nodes(CHINA, INDIA), [0, MAX], False),
    ("Affinity with pods matching both NamespaceSelector and Namespaces fields (anti-affinity)",
     pod(S1, ANTI_AFFINITY_NAMESPACE_SELECTOR, namespace="subteam1.team1"),
     [with_ns("subteam1.team1", "node1", S1), with_ns("subteam1.team1", "node1", S1),
      with_ns("subteam2.team2", "node1", S1), with_ns("subteam2.team1", "node2", S1)],
     nodes(CHINA, INDIA), [0, MAX], False),
    ("Ignore preferred terms of existing pods", pod(S2),
     [pod(S1, STAY_WITH_S1_AWAY_FROM_S2, "node1"), pod(S2, STAY_WITH_S2_IN_REGION, "node2")],
     nodes(CHINA, INDIA), None, True),
    ("Do not ignore preferred terms of existing pods", pod(S2),
     [pod(S1, STAY_WITH_S1_AWAY_FROM_S2, "node1"), pod(S2, STAY_WITH_S2_IN_REGION, "node2")],
     nodes(CHINA, INDIA), [0, MAX], False),
    ("No nodes to score", pod(S2), [], [], None, False),
]


def affinity_scores(incoming: dict[str, Any], existing: list[dict[str, Any]],
                    listed: list[dict[str, Any]], profile: Profile) -> list[int] | None:
    named = [{**p, "metadata": {**p["metadata"], "name": p["metadata"].get("name")
                                or f"p{index}"}} for index, p in enumerate(existing)]
    scores = score_nodes(incoming, listed, named, profile, namespaces=NAMESPACES)
    column = scores.plugin(INTER_POD_AFFINITY)
    return [column[n["metadata"]["name"]] for n in listed] if column else None


@pytest.mark.parametrize(("incoming", "existing", "listed", "expected", "ignore"),
                         [case[1:] for case in PREFERRED_CASES],
                         ids=[case[0] for case in PREFERRED_CASES])
def test_preferred_affinity(incoming: dict[str, Any], existing: list[dict[str, Any]],
                            listed: list[dict[str, Any]], expected: list[int] | None,
                            ignore: bool) -> None:
    profile = Profile("default", ignore_preferred_terms_of_existing_pods=ignore)
    assert affinity_scores(incoming, existing, listed, profile) == expected


@pytest.mark.parametrize("affinity", [INVALID_AFFINITY, INVALID_ANTI_AFFINITY],
                         ids=["invalid Affinity fails PreScore",
                              "invalid AntiAffinity fails PreScore"])
def test_invalid_affinity_fails_pre_score(affinity: dict[str, Any]) -> None:
    with pytest.raises(SchedulingError, match=r"\{\{\.bad-value\.\}\}"):
        score_nodes(pod(None, affinity), nodes(CHINA, CHINA))


SERVICE_S1 = {"service": "S1"}
HARD_POD_AFFINITY = {"podAffinity": {REQUIRED: [term(
    "region", expr("service", "In", "S1"), namespaces=["", "subteam2.team2"],
    namespace_selector=TEAM1)]}}
SYMMETRIC_EXISTING = [pod(None, HARD_POD_AFFINITY, "node1"),
                      pod(None, HARD_POD_AFFINITY, "node2")]


@pytest.mark.parametrize(("namespace", "weight", "expected"), [
    ("", 1, [MAX, MAX, 0]),
    ("", 0, None),
    ("subteam1.team2", 1, None),
    ("subteam1.team1", 1, [MAX, MAX, 0]),
    ("subteam2.team2", 1, [MAX, MAX, 0]),
], ids=["with default weight", "with zero weight", "with no matching namespace",
        "with matching NamespaceSelector", "with matching Namespaces"])
def test_preferred_affinity_with_hard_pod_affinity_symmetric_weight(
        namespace: str, weight: int, expected: list[int] | None) -> None:
    profile = Profile("default", hard_pod_affinity_weight=weight)
    assert affinity_scores(pod(SERVICE_S1, namespace=namespace), SYMMETRIC_EXISTING,
                           nodes(CHINA, INDIA, AZ1), profile) == expected
