"""CA's scale-down beside Escalator's (spec §1.3): the removal simulation, unneeded timers,
delay after add, minimums and parallelism, and Escalator's taints made safe. Pure logic."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from kube_elevator.tasks.cluster_autoscaler.config import ScaleDownOptions
from kube_elevator.tasks.cluster_autoscaler.drain import pods_on_nodes
from kube_elevator.tasks.cluster_autoscaler.unneeded import (
    GroupView,
    RemovalSimulation,
    plan_scale_down,
    safe_taint_selection,
)
from kube_elevator.tasks.core.api_objects import Taint
from kube_elevator.tasks.core.lease_state import GroupState
from kube_elevator.tasks.core.pdb import PodDisruptionBudget
from kube_elevator.tasks.core.records import NodeRecord, PodRecord, Resources
from kube_elevator.tasks.core.selectors import label_selector
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.decide import plan_group
from kube_elevator.tasks.escalator.plan import ScalePlan
from tests.builders import MiB, make_asg, make_group, make_node, make_pod

NOW = 1_000_000.0
MINUTE = 60.0


def pod(name: str, node: str, cpu: int = 100, **fields: Any) -> PodRecord:
    fields.setdefault("controller_kind", "ReplicaSet")
    return make_pod(name, cpu=cpu, memory=10 * MiB, node=node, **fields)


def view(nodes: Sequence[NodeRecord], before: dict[str, float] | None = None,
         min_nodes: int = 0, asg_min: int = 0, requests_cpu: int = 0, acted: bool = False,
         **group: Any) -> GroupView:
    capacity = Resources(sum(n.cpu_allocatable_milli for n in nodes),
                         sum(n.memory_allocatable_bytes for n in nodes))
    return GroupView(make_group(min_nodes=min_nodes, **group),
                     make_asg(len(nodes), min_size=asg_min), nodes, before or {}, acted,
                     Resources(requests_cpu, 0), capacity)


def options(**fields: Any) -> ScaleDownOptions:
    return ScaleDownOptions(**fields)


def plan(nodes: Sequence[NodeRecord], pods: Sequence[PodRecord], before: dict[str, float] | None = None,
         now: float = NOW, last_scale_up: float = 0.0, scaled_up: bool = False,
         pdbs: Sequence[PodDisruptionBudget] = (), opts: ScaleDownOptions | None = None,
         **view_fields: Any) -> tuple[tuple[tuple[str, float], ...], tuple[str, ...], tuple[str, ...], str]:
    simulation = RemovalSimulation(nodes, pods_on_nodes(pods), pdbs)
    result = plan_scale_down([view(nodes, before, **view_fields)], simulation, opts or options(),
                             now, last_scale_up, scaled_up)
    decided = result.groups["batch"]
    return decided.unneeded_since, decided.taint, decided.notes, result.paused


# A busy 2-CPU node (40%), and two lightly used 1-CPU ones whose pods fit elsewhere.
NODES = [make_node("a", created=1, cpu=2000), make_node("b", created=2),
         make_node("c", created=3)]
PODS = [pod("busy", "a", cpu=800), pod("light-1", "b", cpu=100), pod("light-2", "c", cpu=150)]


def test_a_node_below_the_threshold_whose_pods_fit_elsewhere_becomes_unneeded_now() -> None:
    unneeded, taint, _, paused = plan(NODES, PODS)
    # b goes first (emptiest, its pod to a); then c's pod can no longer count on b, but fits a.
    assert unneeded == (("b", NOW), ("c", NOW))
    assert taint == () and paused == ""


def test_a_node_at_or_above_the_threshold_is_needed() -> None:
    unneeded, *_ = plan(NODES, PODS, opts=options(utilization_threshold=0.15))
    assert [name for name, _ in unneeded] == ["b"]  # c at 15% is not below 0.15


def test_it_is_removed_only_after_unneeded_time_and_the_timer_is_kept() -> None:
    early = NOW - 9 * MINUTE
    unneeded, taint, _, _ = plan(NODES, PODS, before={"b": early}, opts=options(drain=True))
    assert taint == () and dict(unneeded)["b"] == early
    due = NOW - 10 * MINUTE
    unneeded, taint, notes, _ = plan(NODES, PODS, before={"b": due}, opts=options(drain=True))
    assert taint == ("b",)
    assert "b" not in dict(unneeded)  # tainted: no longer tracked
    assert any("b unneeded for 600s" in note for note in notes)


def test_a_node_needed_again_loses_its_timer() -> None:
    busy_again = [*PODS[:1], pod("light-1", "b", cpu=900), PODS[2]]
    unneeded, *_ = plan(NODES, busy_again, before={"b": NOW - 20 * MINUTE})
    assert "b" not in dict(unneeded)


def test_a_pod_that_fits_on_no_other_node_keeps_its_node() -> None:
    big = [pod("busy", "a", cpu=1700), pod("big", "b", cpu=400), pod("light-2", "c", cpu=150)]
    unneeded, *_ = plan(NODES, big, opts=options(utilization_threshold=0.5))
    # c (15%) goes first and its pod takes a's last room: b's 400m pod then fits nowhere.
    assert "c" in dict(unneeded)
    assert "b" not in dict(unneeded)


def test_one_removal_uses_up_the_room_the_next_one_would_need() -> None:
    # Two nodes at 40%: either could move to the other, not both.
    nodes = [make_node("x", created=1), make_node("y", created=2)]
    pods = [pod("p1", "x", cpu=400), pod("p2", "y", cpu=400)]
    unneeded, *_ = plan(nodes, pods)
    assert [name for name, _ in unneeded] == ["x"]


def test_a_destination_holds_no_more_pods_than_its_node_admits() -> None:
    # CA's simulator counts pods per node: y has CPU to spare but admits 3 pods and holds 3.
    for admits, movable in ((3, False), (4, True), (0, True)):  # 0: not reported, so 110
        nodes = [make_node("x", created=1), make_node("y", created=2, pods_allocatable=admits)]
        pods = [pod("p1", "x"), *(pod(f"q{index}", "y") for index in range(3))]
        verdict = RemovalSimulation(nodes, pods_on_nodes(pods)).check(nodes[0])
        assert verdict.drainable is movable, (admits, verdict.reason)


def test_pods_moved_onto_a_node_in_the_simulation_travel_with_it() -> None:
    simulation = RemovalSimulation(NODES, pods_on_nodes(PODS))
    node_b = NODES[1]
    simulation.remove(node_b, simulation.check(node_b))
    receiver = next(name for name, moved in simulation.moved_in.items() if moved)
    assert [p.name for p in simulation.pods_of(next(n for n in NODES if n.name == receiver))
            ][-1] == "light-1"


def test_empty_nodes_go_whatever_the_threshold_and_occupied_ones_need_drain() -> None:
    nodes = [*NODES, make_node("d", created=4)]
    due = {name: NOW - 11 * MINUTE for name in ("b", "c", "d")}
    _, taint, notes, _ = plan(nodes, PODS, before=due, opts=options(utilization_threshold=0.0))
    assert taint == ("d",)  # threshold 0: only empty nodes
    _, taint, notes, _ = plan(nodes, PODS, before=due)
    assert taint == ("d",)
    assert any("needs scale_down.drain" in note for note in notes)
    _, taint, _, _ = plan(nodes, PODS, before=due, opts=options(drain=True))
    assert taint == ("d", "b")  # one occupied node per tick (max_drain_parallelism 1)
    _, taint, _, _ = plan(nodes, PODS, before=due, opts=options(drain=True, max_drain_parallelism=2))
    assert taint == ("d", "b", "c")
    _, taint, _, _ = plan(nodes, PODS, before=due,
                          opts=options(drain=True, max_drain_parallelism=2, max_scale_down_parallelism=2))
    assert taint == ("d", "b")


def test_removal_waits_delay_after_add_but_timers_keep_running() -> None:
    due = {"b": NOW - 11 * MINUTE}
    unneeded, taint, _, paused = plan(NODES, PODS, before=due, last_scale_up=NOW - 9 * MINUTE,
                                      opts=options(drain=True))
    assert taint == () and "delay_after_add" in paused
    assert dict(unneeded)["b"] == due["b"]
    _, taint, _, paused = plan(NODES, PODS, before=due, last_scale_up=NOW - 10 * MINUTE,
                               opts=options(drain=True))
    assert taint == ("b",) and paused == ""
    _, taint, _, paused = plan(NODES, PODS, before=due, scaled_up=True, opts=options(drain=True))
    assert taint == () and paused == "a scale-up happened this tick"


def test_the_group_minimum_and_the_asg_minimum_hold() -> None:
    due = {"b": NOW - 11 * MINUTE, "c": NOW - 11 * MINUTE}
    opts = options(drain=True, max_drain_parallelism=5)
    _, taint, notes, _ = plan(NODES, PODS, before=due, opts=opts, min_nodes=2)
    assert taint == ("b",)
    assert any("minimum size" in note for note in notes)
    _, taint, _, _ = plan(NODES, PODS, before=due, opts=opts, asg_min=3)
    assert taint == ()


def test_no_removal_that_would_make_escalator_scale_up_again() -> None:
    due = {"b": NOW - 11 * MINUTE}
    # 2,050m requested of 4,000m; without b: 2,050/3,000 = 68% < 70%: fine.
    _, taint, _, _ = plan(NODES, PODS, before=due, opts=options(drain=True), requests_cpu=2050)
    assert taint == ("b",)
    # 2,150m: 72% of the 3,000m left reaches scale_up_threshold_percent 70.
    _, taint, notes, _ = plan(NODES, PODS, before=due, opts=options(drain=True), requests_cpu=2150)
    assert taint == ()
    assert any("scale-up threshold (70%)" in note for note in notes)


def test_groups_escalator_changed_this_tick_and_blocked_nodes_are_left_alone() -> None:
    due = {"b": NOW - 11 * MINUTE}
    unneeded, taint, _, _ = plan(NODES, PODS, before=due, acted=True, opts=options(drain=True))
    assert unneeded == () and taint == ()
    disabled = [NODES[0], msgspec.structs.replace(NODES[1], scale_down_disabled=True), NODES[2]]
    unneeded, *_ = plan(disabled, PODS)
    assert "b" not in dict(unneeded)
    guarded = PodDisruptionBudget("default", "light", label_selector({"app": "light"}), 0)
    labelled = [PODS[0], msgspec.structs.replace(PODS[1], labels={"app": "light"}), PODS[2]]
    unneeded, *_ = plan(NODES, labelled, pdbs=[guarded])
    assert "b" not in dict(unneeded)


def test_tainted_and_cordoned_nodes_are_neither_candidates_nor_destinations() -> None:
    nodes = [make_node("a", created=1, tainted_at=int(NOW)), NODES[1], NODES[2]]
    pods = [pod("light-1", "b", cpu=600), pod("light-2", "c", cpu=300)]
    unneeded, *_ = plan(nodes, pods, opts=options(utilization_threshold=0.7))
    # c's 300m fits on b (400m free); then b's 600m has nowhere to go: a is tainted, c leaves.
    assert "a" not in dict(unneeded)
    assert dict(unneeded).keys() == {"c"}


# --- Escalator's taints made safe ------------------------------------------------------------


def escalator_plan(nodes: Sequence[NodeRecord], pods: Sequence[PodRecord],
                   dry_mode: bool = False) -> tuple[NodeGroupConfig, ScalePlan]:
    group = make_group(min_nodes=1, dry_mode=dry_mode, taint_upper_capacity_threshold_percent=60,
                       taint_lower_capacity_threshold_percent=5)
    return group, plan_group(group, pods, nodes, make_asg(len(nodes)), GroupState(), NOW)


def test_a_node_escalator_picks_whose_pod_fits_nowhere_else_is_swapped_for_the_next() -> None:
    # Oldest first would taint "a", whose 700m pod fits on no other node.
    nodes = [make_node("a", created=1), make_node("b", created=2), make_node("c", created=3)]
    pods = [pod("big", "a", cpu=700), pod("small", "b", cpu=400), pod("tiny", "c", cpu=350)]
    group, escalator = escalator_plan(nodes, pods)
    assert escalator.taint[:1] == ("a",)
    safe = safe_taint_selection(escalator, group, nodes, RemovalSimulation(nodes, pods_on_nodes(pods)))
    assert "a" not in safe.taint
    assert len(safe.taint) == len(escalator.taint)
    assert any("scale-down skipped a: pod default/big fits on no other node" in n for n in safe.notes)


def test_fewer_nodes_are_tainted_when_not_enough_can_go_and_dry_mode_tracks_the_swap() -> None:
    nodes = [make_node("a", created=1), make_node("b", created=2)]
    pods = [pod("big-1", "a", cpu=700), pod("big-2", "b", cpu=400, safe_to_evict="false")]
    group, escalator = escalator_plan(nodes, pods, dry_mode=True)
    assert escalator.taint == ("a",)
    assert escalator.next_state.dry_mode_tainted == ("a",)
    safe = safe_taint_selection(escalator, group, nodes, RemovalSimulation(nodes, pods_on_nodes(pods)))
    assert safe.taint == ()
    assert safe.next_state.dry_mode_tainted == ()
    assert any("0 of 1 node(s) can be removed" in note for note in safe.notes)


def test_a_plan_without_taints_is_unchanged() -> None:
    nodes = [make_node("a", created=1)]
    pods = [pod("big", "a", cpu=900)]
    group, escalator = escalator_plan(nodes, pods)
    assert escalator.taint == ()
    assert safe_taint_selection(escalator, group, nodes,
                                RemovalSimulation(nodes, pods_on_nodes(pods))) is escalator


def test_a_pod_may_not_move_onto_a_node_whose_taint_it_does_not_tolerate() -> None:
    special = msgspec.structs.replace(NODES[0], taints=(Taint("dedicated", "gpu", "NoSchedule"),))
    nodes = [special, NODES[1]]
    pods = [pod("light-1", "b", cpu=100)]
    unneeded, *_ = plan(nodes, pods)
    assert "b" not in dict(unneeded)
    assert "a" in dict(unneeded)  # empty


UNREADY = [make_node("a", created=1, cpu=2000), make_node("b", created=2, ready=False),
           make_node("c", created=3)]
UNREADY_PODS = [pod("busy", "a", cpu=800), pod("stranded", "b", cpu=100),
                pod("light", "c", cpu=900)]


def test_ca_scale_down_unready_node_is_unneeded_after_unready_time() -> None:
    """CA core/scaledown/unneeded `unremovableReason`: an unready node is removable once unneeded
    for --scale-down-unready-time (default 20m), not --scale-down-unneeded-time (10m)."""
    unneeded, taint, _, _ = plan(UNREADY, UNREADY_PODS)
    assert [name for name, _ in unneeded] == ["b"]  # c at 90% is needed
    opts = options(drain=True)
    assert plan(UNREADY, UNREADY_PODS, before={"b": NOW - 19 * MINUTE}, opts=opts)[1] == ()
    unneeded, taint, notes, _ = plan(UNREADY, UNREADY_PODS, before={"b": NOW - 20 * MINUTE},
                                     opts=opts)
    assert taint == ("b",)
    assert any("unready" in note for note in notes)
    faster = options(drain=True, unready_time="5m")
    assert plan(UNREADY, UNREADY_PODS, before={"b": NOW - 6 * MINUTE}, opts=faster)[1] == ("b",)


def test_ca_scale_down_unready_disabled_keeps_unready_nodes() -> None:
    """CA eligibility: with --scale-down-unready-enabled=false an unready node is never removed
    (ScaleDownUnreadyDisabled)."""
    opts = options(drain=True, unready_enabled=False)
    unneeded, taint, _, _ = plan(UNREADY, UNREADY_PODS, before={"b": NOW - 60 * MINUTE},
                                 opts=opts)
    assert taint == () and unneeded == ()


def test_ca_scale_down_unready_node_is_never_a_destination() -> None:
    """An unready node cannot take another node's pods (CA's simulator skips it)."""
    nodes = [make_node("a", created=1, ready=False), make_node("b", created=2)]
    unneeded, _, _, _ = plan(nodes, [pod("p", "b", cpu=100)])
    # b's pod could only go to unready a: b is needed; a (empty, unready) is unneeded.
    assert [name for name, _ in unneeded] == ["a"]
