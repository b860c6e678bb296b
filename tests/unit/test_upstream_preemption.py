"""kube-scheduler's DefaultPreemption victim and node selection (v1.35), ported from
defaultpreemption/default_preemption_test.go: TestPickOneNodeForPreemption (its node sizes,
container sizes and priorities) and the victim lists of TestPreempt's resource cases, run
through `preempt`.

Each parametrize id is the upstream case's name. Left out: "No node needs preemption" and "a
pod that fits on a machine with no preemption", whose expected node has no victim (v1.35's
dry run refuses a candidate without victims: "expected at least one victim pod"; the pod
would have been scheduled there without preemption).
"""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.scheduler.preemption import preempt
from kube_elevator.tasks.scheduler.profiles import Profile

MILLI, MIB = 100, 200 * 1024 * 1024  # schedutil.DefaultMilliCPURequest, DefaultMemoryRequest
SMALL, MEDIUM, LARGE, VERY_LARGE = 1, 2, 3, 5
NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
READY = [{"type": "Ready", "status": "True"}]


def machine(name: str) -> dict[str, Any]:
    """makeNode(name, DefaultMilliCPURequest*5, DefaultMemoryRequest*5)."""
    resources = {"cpu": f"{MILLI * 5}m", "memory": str(MIB * 5), "pods": "100"}
    return {"kind": "Node", "metadata": {"name": name},
            "status": {"capacity": resources, "allocatable": resources, "conditions": READY}}


def pod(name: str, size: int, priority: int, node: str = "",
        start: str = "2019-01-01T01:01:01Z") -> dict[str, Any]:
    spec: dict[str, Any] = {"priority": priority, "containers": [{"name": "c", "resources": {
        "requests": {"cpu": f"{MILLI * size}m", "memory": str(MIB * size)}}}]}
    if node:
        spec["nodeName"] = node
    return {"kind": "Pod", "metadata": {"name": name}, "spec": spec,
            "status": {"phase": "Running", "startTime": start}}


def day(number: int) -> str:
    return f"2019-01-{number:02d}T01:01:01Z"


MACHINES = [machine(f"machine{i}") for i in range(1, 5)]

PICK_ONE = [
    ("a pod that fits on both machines when lower priority pods are preempted",
     pod("machine1", LARGE, HIGH), 2,
     [pod("m1.1", LARGE, MID, "machine1"), pod("m2.1", LARGE, MID, "machine2")],
     {"machine1", "machine2"}),
    ("machine with min highest priority pod is picked", pod("machine1", VERY_LARGE, HIGH), 3,
     [pod("m1.1", MEDIUM, MID, "machine1"), pod("m1.2", LARGE, MID, "machine1"),
      pod("m2.1", MEDIUM, MID, "machine2"), pod("m2.2", MEDIUM, LOW, "machine2"),
      pod("m3.1", MEDIUM, LOW, "machine3"), pod("m3.2", MEDIUM, LOW, "machine3")],
     {"machine3"}),
    ("when highest priorities are the same, minimum sum of priorities is picked",
     pod("machine1", VERY_LARGE, HIGH), 3,
     [pod("m1.1", MEDIUM, MID, "machine1"), pod("m1.2", LARGE, MID, "machine1"),
      pod("m2.1", LARGE, MID, "machine2"), pod("m2.2", MEDIUM, LOW, "machine2"),
      pod("m3.1", MEDIUM, MID, "machine3"), pod("m3.2", MEDIUM, MID, "machine3")],
     {"machine2"}),
    ("when highest priority and sum are the same, minimum number of pods is picked",
     pod("machine1", VERY_LARGE, HIGH), 3,
     [pod("m1.1", SMALL, MID, "machine1"), pod("m1.2", SMALL, NEG, "machine1"),
      pod("m1.3", SMALL, MID, "machine1"), pod("m1.4", SMALL, NEG, "machine1"),
      pod("m2.1", LARGE, MID, "machine2"), pod("m2.2", MEDIUM, NEG, "machine2"),
      pod("m3.1", MEDIUM, MID, "machine3"), pod("m3.2", SMALL, NEG, "machine3"),
      pod("m3.3", SMALL, LOW, "machine3")],
     {"machine2"}),
    ("sum of adjusted priorities is considered", pod("machine1", VERY_LARGE, HIGH), 3,
     [pod("m1.1", SMALL, MID, "machine1"), pod("m1.2", SMALL, NEG, "machine1"),
      pod("m1.3", SMALL, NEG, "machine1"),
      pod("m2.1", LARGE, MID, "machine2"), pod("m2.2", MEDIUM, NEG, "machine2"),
      pod("m3.1", MEDIUM, MID, "machine3"), pod("m3.2", SMALL, NEG, "machine3"),
      pod("m3.3", SMALL, LOW, "machine3")],
     {"machine2"}),
    ("non-overlapping lowest high priority, sum priorities, and number of pods",
     pod("pod1", VERY_LARGE, VERY_HIGH), 4,
     [pod("m1.1", SMALL, MID, "machine1"), pod("m1.2", SMALL, LOW, "machine1"),
      pod("m1.3", SMALL, LOW, "machine1"),
      pod("m2.1", LARGE, HIGH, "machine2"),
      pod("m3.1", MEDIUM, MID, "machine3"), pod("m3.2", SMALL, LOW, "machine3"),
      pod("m3.3", SMALL, LOW, "machine3"), pod("m3.4", MEDIUM, LOW, "machine3"),
      pod("m4.1", MEDIUM, MID, "machine4"), pod("m4.2", SMALL, MID, "machine4"),
      pod("m4.3", SMALL, MID, "machine4"), pod("m4.4", SMALL, NEG, "machine4")],
     {"machine1"}),
    ("same priority, same number of victims, different start time for each machine's pod",
     pod("machine1", VERY_LARGE, HIGH), 3,
     [pod("m1.1", MEDIUM, MID, "machine1", day(3)), pod("m1.2", MEDIUM, MID, "machine1", day(3)),
      pod("m2.1", MEDIUM, MID, "machine2", day(4)), pod("m2.2", MEDIUM, MID, "machine2", day(4)),
      pod("m3.1", MEDIUM, MID, "machine3", day(2)), pod("m3.2", MEDIUM, MID, "machine3", day(2))],
     {"machine2"}),
    ("same priority, same number of victims, different start time for all pods",
     pod("machine1", VERY_LARGE, HIGH), 3,
     [pod("m1.1", MEDIUM, MID, "machine1", day(5)), pod("m1.2", MEDIUM, MID, "machine1", day(3)),
      pod("m2.1", MEDIUM, MID, "machine2", day(6)), pod("m2.2", MEDIUM, MID, "machine2", day(2)),
      pod("m3.1", MEDIUM, MID, "machine3", day(4)), pod("m3.2", MEDIUM, MID, "machine3", day(7))],
     {"machine3"}),
    ("different priority, same number of victims, different start time for all pods",
     pod("machine1", VERY_LARGE, HIGH), 3,
     [pod("m1.1", MEDIUM, LOW, "machine1", day(5)), pod("m1.2", MEDIUM, MID, "machine1", day(3)),
      pod("m2.1", MEDIUM, MID, "machine2", day(7)), pod("m2.2", MEDIUM, LOW, "machine2", day(2)),
      pod("m3.1", MEDIUM, LOW, "machine3", day(4)), pod("m3.2", MEDIUM, MID, "machine3", day(6))],
     {"machine2"}),
]


@pytest.mark.parametrize(("incoming", "machines", "existing", "expected"),
                         [c[1:] for c in PICK_ONE], ids=[c[0] for c in PICK_ONE])
def test_pick_one_node_for_preemption(incoming: dict[str, Any], machines: int,
                                      existing: list[dict[str, Any]],
                                      expected: set[str]) -> None:
    found = preempt(incoming, MACHINES[:machines], existing)
    assert found is not None
    assert found[0] in expected


def test_basic_preemption_logic() -> None:
    """TestPreempt "basic preemption logic": machine1's two low-priority pods go."""
    existing = [pod("m1.1", SMALL, LOW, "machine1"), pod("m1.2", SMALL, LOW, "machine1"),
                pod("m2.1", LARGE, HIGH, "machine2"), pod("m3.1", MEDIUM, MID, "machine3")]
    assert preempt(pod("pod1", VERY_LARGE, HIGH), MACHINES[:3], existing) == (
        "machine1", ["m1.1", "m1.2"])


def test_fewest_and_lowest_victims_are_chosen() -> None:
    """SelectVictimsOnNode reprieves the most important pods first: of three low pods and a
    mid one, room for a LARGE pod on a full node costs the low pods only as far as needed."""
    existing = [pod("a", SMALL, MID, "machine1"), pod("b", SMALL, LOW, "machine1", day(2)),
                pod("c", SMALL, LOW, "machine1", day(3)), pod("d", MEDIUM, NEG, "machine1")]
    assert preempt(pod("p", LARGE, HIGH), MACHINES[:1], existing) == ("machine1", ["c", "d"])


def test_budget_violating_pods_are_reprieved_first() -> None:
    """filterPodsWithPDBViolation: pods whose budget forbids eviction are kept when they can
    be; a node whose only way costs a violation loses to one that costs none."""
    existing = [pod("m1.1", LARGE, LOW, "machine1"), pod("m2.1", LARGE, LOW, "machine2")]
    assert preempt(pod("p", LARGE, HIGH), MACHINES[:2], existing, violating=["m1.1"]) == (
        "machine2", ["m2.1"])


@pytest.mark.parametrize("policy_pod", [
    {**pod("p", VERY_LARGE, HIGH), "spec": {**pod("p", VERY_LARGE, HIGH)["spec"],
                                            "preemptionPolicy": "Never"}},
    pod("p", VERY_LARGE, LOW),
], ids=["preemptionPolicy Never", "no pod of lower priority"])
def test_no_preemption(policy_pod: dict[str, Any]) -> None:
    existing = [pod("m1.1", SMALL, LOW, "machine1")]
    assert preempt(policy_pod, MACHINES[:1], existing, Profile("default")) is None


def test_anti_affinity_is_resolvable_by_preemption() -> None:
    """A pod refused for a lower-priority pod's anti-affinity may evict it (Unschedulable,
    resolvable), a node it may not run on (its node selector) is never a candidate."""
    web = pod("web-1", SMALL, LOW, "machine1")
    web["metadata"]["labels"] = {"app": "web"}
    web["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "web"}},
            "topologyKey": "kubernetes.io/hostname"}]}}
    nodes = [machine("machine1"), machine("machine2")]
    for node in nodes:
        node["metadata"]["labels"] = {"kubernetes.io/hostname": node["metadata"]["name"]}
    nodes[1]["spec"] = {"unschedulable": True}
    incoming = pod("p", SMALL, HIGH)
    incoming["metadata"]["labels"] = {"app": "web"}
    assert preempt(incoming, nodes, [web]) == ("machine1", ["web-1"])
