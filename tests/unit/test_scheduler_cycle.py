"""The simulator's scheduler (tasks/scheduler/cycle.py): sampling, queue, tie-break, profiles,
and its cached fast path against the pure `score_nodes` on the same cluster.

TestNumFeasibleNodesToFind and TestFairEvaluationForNodes are ported from kube-scheduler's
pkg/scheduler/schedule_one_test.go (v1.35); ids are upstream's case names.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kube_elevator.tasks.scheduler.cycle import QueuedPod, Scheduler, num_feasible_nodes_to_find
from kube_elevator.tasks.scheduler.framework import score_nodes
from kube_elevator.tasks.scheduler.objects import SchedPod, Workloads, node_from_api, sched_pod
from kube_elevator.tasks.scheduler.profiles import LEAST_ALLOCATED, Profile, profile_named
from tests.builders import MakeNode, MakePod


@pytest.mark.parametrize(("percentage", "nodes", "wanted"), [
    (0, 10, 10), (40, 10, 10), (0, 1000, 420), (40, 1000, 400), (0, 6000, 300),
    (40, 6000, 2400)], ids=[
    "not set percentageOfNodesToScore and nodes number not more than 50",
    "set percentageOfNodesToScore and nodes number not more than 50",
    "not set percentageOfNodesToScore and nodes number more than 50",
    "set percentageOfNodesToScore and nodes number more than 50",
    "not set percentageOfNodesToScore and nodes number more than 50*125",
    "set percentageOfNodesToScore and nodes number more than 50*125"])
def test_num_feasible_nodes_to_find(percentage: int, nodes: int, wanted: int) -> None:
    """TestNumFeasibleNodesToFind: every node below 100; above, the percentage (adaptive:
    50 - nodes/125, at least 5) of them, at least 100."""
    assert num_feasible_nodes_to_find(percentage, nodes) == wanted


def node(name: str, cpu: str = "2", memory: str = "8Gi", zone: str = "z1",
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    builder = MakeNode().name(name).capacity({"cpu": cpu, "memory": memory}) \
        .label("kubernetes.io/hostname", name).label("topology.kubernetes.io/zone", zone)
    for key, value in (labels or {}).items():
        builder.label(key, value)
    obj = builder.obj()
    obj["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return obj


def scheduler_with(profile: str | Profile, nodes: list[dict[str, Any]],
                   seed: int = 1) -> Scheduler:
    chosen = profile_named(profile) if isinstance(profile, str) else profile
    scheduler = Scheduler(chosen, seed)
    scheduler.sync_nodes(node_from_api(obj) for obj in nodes)
    return scheduler


def test_fair_evaluation_for_nodes() -> None:
    """TestFairEvaluationForNodes: with 500 nodes and percentageOfNodesToScore 30, each cycle
    filters 150 nodes from where the last one stopped, so every node gets its turn."""
    count = 500
    scheduler = scheduler_with(Profile("fair", LEAST_ALLOCATED, percentage_of_nodes_to_score=30),
                               [node(str(index)) for index in range(count)])
    wanted = num_feasible_nodes_to_find(30, count)
    pod = sched_pod(MakePod().name("p").obj())
    for index in range(2 * (count // wanted + 1)):
        assert len(scheduler.find_nodes_that_fit(pod)) == wanted
        assert scheduler.next_start_node_index == (index + 1) * wanted % count


def queue(*pods: SchedPod, at: float = 0.0) -> list[QueuedPod]:
    return [QueuedPod((pod.namespace, pod.name), pod, at, at) for pod in pods]


def service_pod(name: str, cpu: str = "500m", priority: int = 0) -> SchedPod:
    obj = MakePod().name(name).namespace("ns").label("app", "api") \
        .req({"cpu": cpu, "memory": "256Mi"}).obj()
    obj["spec"]["priority"] = priority
    return sched_pod(obj)


@pytest.mark.parametrize(("profile", "spread"), [("default", 3), ("most-allocated", 1),
                                                 ("first-fit", 1)])
def test_default_spreads_most_allocated_and_first_fit_pack(profile: str, spread: int) -> None:
    """Three equal pods on three empty equal nodes: LeastAllocated sends each to the emptiest
    node, MostAllocated to the fullest, first-fit to the oldest."""
    scheduler = scheduler_with(profile, [node("a"), node("b"), node("c")])
    decisions = scheduler.schedule_queue(queue(*(service_pod(f"p{i}") for i in range(3))))
    assert len({target for _, target in decisions}) == spread
    assert all(target is not None for _, target in decisions)
    if profile == "first-fit":
        assert {target for _, target in decisions} == {"a"}


def test_priority_goes_first_then_arrival() -> None:
    """PrioritySort: a later pod of higher priority takes the one place left; among equal
    priorities the earlier queued goes first."""
    scheduler = scheduler_with("default", [node("a", cpu="1")])
    low_early = QueuedPod(("ns", "low-early"), service_pod("low-early", "600m"), 0.0, 0.0)
    low_late = QueuedPod(("ns", "low-late"), service_pod("low-late", "600m"), 5.0, 5.0)
    high = QueuedPod(("ns", "high"), service_pod("high", "600m", priority=1000), 9.0, 9.0)
    assert [q.key[1] for q in scheduler.queue_order([low_late, high, low_early])] == \
        ["high", "low-early", "low-late"]
    assert dict(scheduler.schedule_queue([low_late, high, low_early])) == {
        ("ns", "high"): "a", ("ns", "low-early"): None, ("ns", "low-late"): None}


def test_ties_are_drawn_from_the_seeded_generator() -> None:
    """Equal totals: the winner is drawn from the scheduler's generator, so a seed repeats its
    choices and every tied node is chosen in turn over many draws."""
    nodes = [node(name) for name in "abcd"]
    pod = sched_pod(MakePod().name("p").req({"cpu": "100m", "memory": "64Mi"}).obj())

    def choices(seed: int) -> list[str | None]:
        scheduler = scheduler_with("default", nodes, seed)
        return [scheduler.schedule_one(pod) for _ in range(40)]

    assert choices(7) == choices(7)
    assert set(choices(7)) == set("abcd")
    assert choices(7) != choices(8)


def test_a_pod_bound_before_its_node_is_seen_counts_once_it_is() -> None:
    """A DaemonSet pod bound to a node the cache has not seen is held (cache.addPod) and
    counts against the node from the moment it appears."""
    scheduler = Scheduler(profile_named("default"), 1)
    daemon = sched_pod(MakePod().name("ds-a").namespace("kube-system").node("a")
                       .req({"cpu": "1500m", "memory": "1Gi"}).obj())
    scheduler.bind(("kube-system", "ds-a"), daemon, "a")
    scheduler.sync_nodes([node_from_api(node("a"))])
    assert scheduler.cluster.nodes["a"].requested_cpu_milli == 1500
    assert scheduler.schedule_one(service_pod("p", cpu="600m")) is None


def test_cached_scores_agree_with_score_nodes_on_the_same_cluster() -> None:
    """The fast path caches each node's raw scores against its version; after every binding
    its scores for the next pod are score_nodes' on the cluster as API objects."""
    rng = random.Random(5)
    nodes = [node(f"n{i}", cpu=rng.choice(["2", "4"]), memory=rng.choice(["4Gi", "8Gi"]),
                  zone=f"z{i % 2}") for i in range(6)]
    scheduler = scheduler_with("most-allocated", nodes, seed=3)
    bound: list[dict[str, Any]] = []
    workloads = [{"kind": "ReplicaSet", "metadata": {"namespace": "ns", "name": "web"},
                  "spec": {"selector": {"matchLabels": {"app": "web"}}}}]
    for index in range(25):
        obj = MakePod().name(f"p{index}").namespace("ns").label("app", rng.choice(["web", "db"])) \
            .owner_reference("web", "ReplicaSet") \
            .req({"cpu": rng.choice(["100m", "250m", "500m"]),
                  "memory": rng.choice(["128Mi", "512Mi"])}).obj()
        pod = sched_pod(obj, Workloads(workloads))
        feasible = scheduler.find_nodes_that_fit(pod)
        if len(feasible) < 2:
            break
        cached = {s.name: (s.total, dict(s.scores)) for s in scheduler.scores(pod, feasible)}
        by_name = {n["metadata"]["name"]: n for n in nodes}
        pure = score_nodes(obj, [by_name[state.name] for state in feasible], bound,
                           "most-allocated", all_nodes=nodes, workloads=workloads)
        assert cached == {s.name: (s.total, dict(s.scores)) for s in pure.nodes}
        target = scheduler.schedule_one(pod)
        assert target is not None
        scheduler.bind((pod.namespace, pod.name), pod, target)
        bound.append({**obj, "spec": {**obj["spec"], "nodeName": target},
                      "status": {"phase": "Running"}})
    assert len(bound) >= 10


def test_topology_weights_take_gos_log_which_differs_from_cs_in_the_last_bit() -> None:
    """PodTopologySpread weighs a constraint by Go's log(domains + 2) (src/math/log.go, as
    log_amd64.s computes it): within one ulp of the C library's everywhere, and not equal to it
    for about 1 % of integers (3 among them), which can tip a score rounded at .5."""
    import math

    from kube_elevator.tasks.core.gomath import go_log

    assert go_log(1.0) == 0.0
    differing = [n for n in range(1, 10_001) if go_log(float(n)) != math.log(float(n))]
    assert all(abs(go_log(float(n)) - math.log(float(n))) <= math.ulp(math.log(float(n)))
               for n in differing)
    assert 3 in differing and 50 <= len(differing) <= 200


def web(name: str, priority: int = 0, cpu: str = "500m",
        anti_affinity: bool = True) -> SchedPod:
    pod = MakePod().name(name).namespace("w").label("app", "web").req(
        {"cpu": cpu, "memory": "64Mi"}).obj()
    pod["spec"]["priority"] = priority
    if anti_affinity:
        pod["spec"]["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "web"}},
                "topologyKey": "kubernetes.io/hostname"}]}}
    return sched_pod(pod)


def test_the_simulated_scheduler_keeps_replicas_apart_under_anti_affinity() -> None:
    """Three nodes, four replicas with required hostname anti-affinity: one per node, the
    fourth pending (its shape failing once per pass, as the cache allows)."""
    scheduler = scheduler_with("default", [node(f"n{i}") for i in range(3)])
    decisions = scheduler.schedule_queue(
        QueuedPod(("w", f"web-{i}"), web(f"web-{i}"), float(i), float(i)) for i in range(4))
    placed = [target for _, target in decisions]
    assert sorted(t for t in placed if t) == ["n0", "n1", "n2"] and placed[-1] is None
    # a pod without affinity still lands: only its own labels matter to the others' terms
    other = sched_pod(MakePod().name("db").namespace("w").label("app", "db").req(
        {"cpu": "100m"}).obj())
    assert scheduler.schedule_queue([QueuedPod(("w", "db"), other, 9.0, 9.0)])[0][1]


def test_a_pod_of_higher_priority_preempts_and_its_victims_are_listed() -> None:
    """One 2-CPU node full of low-priority 500m pods: a 1-CPU pod of priority 100 evicts the
    two least important (the latest started, among equals) and binds at once; the victims
    are listed most important first, as upstream orders them."""
    scheduler = scheduler_with("default", [node("n0")])
    low = [QueuedPod(("w", f"low-{i}"), web(f"low-{i}", anti_affinity=False), float(i),
                     float(i)) for i in range(4)]
    for queued in low:
        assert scheduler.schedule_queue([queued], now=queued.arrival)[0][1] == "n0"
    high = web("high", priority=100, cpu="1", anti_affinity=False)
    assert scheduler.schedule_queue([QueuedPod(("w", "high"), high, 9.0, 9.0)], now=9.0) == [
        (("w", "high"), "n0")]
    assert scheduler.take_preempted() == [(("w", "low-2"), "n0"), (("w", "low-3"), "n0")]
    assert scheduler.take_preempted() == []
    assert set(scheduler.node_of) == {("w", "low-0"), ("w", "low-1"), ("w", "high")}


def test_a_pod_of_equal_priority_waits_and_first_fit_never_preempts() -> None:
    for profile in ("default", "first-fit"):
        scheduler = scheduler_with(profile, [node("n0")])
        for i in range(4):
            pod = web(f"low-{i}", priority=0 if profile == "default" else -1,
                      anti_affinity=False)
            scheduler.schedule_queue([QueuedPod(("w", f"low-{i}"), pod, float(i), float(i))])
        waiting = web("same", cpu="1", anti_affinity=False)
        assert scheduler.schedule_queue([QueuedPod(("w", "same"), waiting, 9.0, 9.0)]) == [
            (("w", "same"), None)]
        assert scheduler.take_preempted() == []
