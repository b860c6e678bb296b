"""The decision (spec/escalator.md §5 to §9): worked examples and each rule, as pure functions."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kube_elevator.tasks.core.api_objects import MatchExpression, NodeSelectorTerm, Taint
from kube_elevator.tasks.core.lease_state import GroupState, ScaleLock
from kube_elevator.tasks.core.records import Resources
from kube_elevator.tasks.escalator.decide import calc_scale_up_delta, is_group_healthy, plan_group
from kube_elevator.tasks.escalator.filter_nodes import classify_nodes, pod_matches_group, pods_by_group
from kube_elevator.tasks.escalator.plan import ScalePlan
from kube_elevator.tasks.escalator.utilization import (
    SCALE_FROM_ZERO,
    PercentCalculationError,
    calc_percent_usage,
)
from tests.builders import MiB, make_asg, make_group, make_node, make_pod

NOW = 1_800_000_000.0


def tick(nodes: list[Any], pods: list[Any], asg: Any = None, state: GroupState | None = None,
         now: float = NOW, dry_mode: bool = False, **group: Any) -> ScalePlan:
    return plan_group(make_group(**group), pods, nodes, asg or make_asg(len(nodes)),
                  state or GroupState(), now, dry_mode)


# --- §5.4 percent usage ----------------------------------------------------------------------

def test_percent_all_zero_is_zero() -> None:
    assert calc_percent_usage(Resources(), Resources(), 0) == (0.0, 0.0)


def test_percent_no_capacity_no_untainted_is_scale_from_zero_sentinel() -> None:
    assert calc_percent_usage(Resources(500, 1), Resources(), 0) == (SCALE_FROM_ZERO,
                                                                     SCALE_FROM_ZERO)


def test_percent_zero_capacity_with_untainted_nodes_is_an_error() -> None:
    with pytest.raises(PercentCalculationError, match="cannot divide by zero in percent"):
        calc_percent_usage(Resources(500, 1), Resources(0, 100), 1)


def test_percent_is_requests_over_capacity() -> None:
    assert calc_percent_usage(Resources(500, 50), Resources(2000, 400), 2) == (25.0, 12.5)


def test_untainted_zero_with_zero_requests_does_not_scale_from_zero() -> None:
    plan = tick([make_node("n1", tainted_at=int(NOW))], [make_pod(cpu=0, memory=0)],
                min_nodes=0, max_nodes=5)
    assert plan.cpu_percent == 0.0 and plan.delta <= 0


# --- §5.6 scale-up delta ------------------------------------------------------------------

def test_scale_up_delta_worked_example() -> None:
    # 2 nodes, cpu 250 %, threshold 70 => ceil(2 * 2.5714) = 6
    assert calc_scale_up_delta(2, 250.0, 10.0, 70, Resources(), None) == 6


def test_scale_up_delta_from_zero_uses_cached_node_capacity() -> None:
    requests = Resources(5000, 1000 * MiB)
    capacity = Resources(1000, 4000 * MiB)
    # ceil(5000 / 1000 / 70 * 100) = 8 ; memory ceil(0.25/0.7) = 1
    assert calc_scale_up_delta(0, SCALE_FROM_ZERO, SCALE_FROM_ZERO, 70, requests, capacity) == 8


def test_scale_up_delta_from_zero_without_cache_is_one() -> None:
    assert calc_scale_up_delta(0, SCALE_FROM_ZERO, SCALE_FROM_ZERO, 70, Resources(9000, 1),
                               None) == 1


def test_spec_worked_example_ten_pods_two_nodes() -> None:
    nodes = [make_node("n1", created=1), make_node("n2", created=2)]
    pods = [make_pod(f"p{i}") for i in range(10)]
    plan = tick(nodes, pods)
    assert (plan.cpu_percent, plan.mem_percent) == (250.0, 12.5)
    assert plan.delta == 6 and plan.cloud_increase == 6 and plan.asg_desired == 8
    assert plan.locked and plan.next_state.lock == ScaleLock(True, 6, NOW, desired_before=2,
                                                             desired_target=8)


# --- §5.8 thresholds (upper 40, lower 10, scale-up 70) -----------------------------------------

@pytest.mark.parametrize(
    ("percent", "expected"),
    [(110, "up"), (75, "up"), (70, 0), (50, 0), (40, 0), (38, -1), (10, -1), (9, -2), (0, -2)],
)
def test_threshold_example(percent: int, expected: int | str) -> None:
    nodes = [make_node(f"n{i}", created=i, cpu=1000, memory=100_000 * MiB) for i in range(4)]
    # 4 nodes of 1000m: requests of 40 * percent millicores give `percent` %.
    pods = [make_pod("p", cpu=40 * percent, memory=0)] if percent else []
    plan = tick(nodes, pods, max_nodes=10, min_nodes=1)
    assert plan.cpu_percent == pytest.approx(percent)
    if expected == "up":
        assert plan.delta > 0
    else:
        assert plan.delta == expected


# --- §5.5 early exits ----------------------------------------------------------------------------

def test_no_nodes_no_pods_does_nothing() -> None:
    plan = tick([], [], min_nodes=0, max_nodes=5)
    assert (plan.delta, plan.error, plan.changes_anything) == (0, None, False)


def test_fewer_nodes_than_minimum_is_an_error_and_no_action() -> None:
    plan = tick([make_node("n1")], [make_pod()], min_nodes=2, max_nodes=5)
    assert plan.delta == 0 and plan.error == "node count less than the minimum"
    assert not plan.changes_anything


def test_untainted_below_minimum_untaints_then_scales_up_even_when_locked() -> None:
    nodes = [make_node("n1", created=1, tainted_at=int(NOW) - 5),
             make_node("n2", created=2, tainted_at=int(NOW) - 5),
             make_node("n3", created=3, tainted_at=int(NOW) - 5)]
    locked = GroupState(lock=ScaleLock(True, 4, NOW - 10))
    plan = tick(nodes, [], state=locked, asg=make_asg(3, max_size=10), min_nodes=2, max_nodes=5)
    # newest first
    assert plan.untaint == ("n3", "n2") and plan.delta == 2 and plan.cloud_increase == 0


def test_zero_capacity_with_untainted_nodes_reports_error() -> None:
    plan = tick([make_node("n1", cpu=0)], [make_pod()])
    assert plan.error == "cannot divide by zero in percent calculation" and plan.delta == 0


def test_lock_held_returns_requested_nodes_and_does_nothing_else() -> None:
    nodes = [make_node("n1", created=1), make_node("n2", created=2, tainted_at=1)]
    state = GroupState(lock=ScaleLock(True, 6, NOW - 60))
    plan = tick(nodes, [], state=state, scale_up_cool_down_period="2m")
    assert plan.delta == 6 and plan.locked and not plan.changes_anything
    assert plan.error is None


def test_lock_expires_after_cool_down() -> None:
    state = GroupState(lock=ScaleLock(True, 6, NOW - 120))
    plan = tick([make_node("n1"), make_node("n2")], [make_pod(cpu=800)], state=state,
                scale_up_cool_down_period="2m")
    assert not plan.locked and plan.next_state.lock.is_locked is False and plan.delta == 0


# --- §6 scale up --------------------------------------------------------------------------------

def test_scale_up_untaints_newest_tainted_first_then_asks_cloud_for_remainder() -> None:
    nodes = [make_node("old", created=1), make_node("t-old", created=2, tainted_at=1),
             make_node("t-new", created=9, tainted_at=1), make_node("t-mid", created=5,
                                                                    tainted_at=1)]
    pods = [make_pod(f"p{i}", cpu=1000) for i in range(4)]  # 400% of one node => delta 5
    plan = tick(nodes, pods, asg=make_asg(4, max_size=20))
    assert plan.delta == 5
    assert plan.untaint == ("t-new", "t-mid", "t-old")
    assert plan.untaint_requested == 5  # §6: untaint_event counts the requested amount
    assert plan.cloud_increase == 2 and plan.asg_desired == 6
    assert plan.next_state.lock.requested_nodes == 2


def test_scale_up_untaint_only_takes_no_lock() -> None:
    nodes = [make_node("a", created=1), make_node("b", created=2, tainted_at=1),
             make_node("c", created=3, tainted_at=1)]
    plan = tick(nodes, [make_pod(cpu=800)])  # 80% of one node => delta 1
    assert plan.untaint == ("c",) and plan.cloud_increase == 0 and not plan.locked


def test_cloud_increase_is_clamped_by_asg_max_not_max_nodes() -> None:
    nodes = [make_node("n1"), make_node("n2")]
    plan = tick(nodes, [make_pod(f"p{i}") for i in range(10)], asg=make_asg(2, max_size=5),
                max_nodes=3)
    assert plan.delta == 6 and plan.cloud_increase == 3 and plan.asg_desired == 5


def test_scale_up_refused_at_asg_max_is_a_note() -> None:
    plan = tick([make_node("n1"), make_node("n2")], [make_pod(f"p{i}") for i in range(10)],
                asg=make_asg(2, max_size=2))
    assert plan.cloud_increase == 0 and not plan.locked
    assert plan.notes == ("refusing to scaleup up beyond the maximum size of the autoscaling "
                          "group (TargetSize: 2; MaxNodes: 10). Taking no action",)


def test_a_scale_up_at_asg_max_says_so_in_its_reason() -> None:
    """Issue 34 item 6: a group at MaxSize said `scale up by 6` and nothing else."""
    plan = tick([make_node("n1"), make_node("n2")], [make_pod(f"p{i}") for i in range(10)],
                asg=make_asg(2, max_size=2))
    assert plan.delta == 6 and plan.limit == "at MaxSize 2: no scale-up"
    assert plan.reason.endswith("scale up by 6; at MaxSize 2: no scale-up"), plan.reason
    capped = tick([make_node("n1"), make_node("n2")], [make_pod(f"p{i}") for i in range(10)],
                  asg=make_asg(2, max_size=5))
    assert capped.reason.endswith(
        "scale up by 6; untaint 0, ask the cloud for 3; capped by MaxSize 5: scale up by 3 "
        "of 6"), capped.reason


def test_cordoned_and_force_tainted_are_never_untainted() -> None:
    nodes = [make_node("a", created=1), make_node("cordoned", created=9, cordoned=True,
                                                  tainted_at=1),
             make_node("forced", created=8, force=True, tainted_at=1),
             make_node("tainted", created=2, tainted_at=1)]
    plan = tick(nodes, [make_pod(f"p{i}", cpu=1000) for i in range(3)], asg=make_asg(4))
    assert plan.untaint == ("tainted",)


# --- §7 scale down -------------------------------------------------------------------------------

def test_scale_down_taints_oldest_first() -> None:
    nodes = [make_node("mid", created=5), make_node("old", created=1), make_node("new", created=9)]
    plan = tick(nodes, [], min_nodes=1)  # 0% => fast removal of 2
    assert plan.delta == -2 and plan.taint == ("old", "mid")


def test_scale_down_stops_at_min_nodes() -> None:
    nodes = [make_node("a", created=1), make_node("b", created=2), make_node("c", created=3)]
    plan = tick(nodes, [], min_nodes=2, max_nodes=5)
    assert plan.delta == -2 and plan.taint == ("a",)
    assert plan.taint_requested == 1  # §7.1: taint_event += n after the minimums


def test_a_scale_down_held_at_min_nodes_says_nothing_was_tainted() -> None:
    """Issue 34 item 6: `fast removal of 2` with nothing tainted, and no word why."""
    nodes = [make_node("a", created=1), make_node("b", created=2), make_node("c", created=3)]
    plan = tick(nodes, [], min_nodes=3, max_nodes=5)
    assert plan.delta == -2 and plan.taint == () and not plan.changes_anything
    assert plan.reason == ("usage 0.0% is below taint_lower 10%: fast removal of 2; held at "
                           "min_nodes 3: nothing tainted")
    partly = tick(nodes, [], min_nodes=2, max_nodes=5)
    assert partly.reason.endswith("fast removal of 2; held at min_nodes 2: taint 1 of 2")
    by_asg = tick(nodes, [], asg=make_asg(3, min_size=3), min_nodes=1)
    assert by_asg.limit == "held at the ASG's MinSize 3: nothing tainted"


def test_scale_down_stops_at_asg_min_size() -> None:
    nodes = [make_node("a", created=1), make_node("b", created=2), make_node("c", created=3)]
    plan = tick(nodes, [], asg=make_asg(3, min_size=2), min_nodes=1)
    assert plan.taint == ("a",)


def test_tainted_nodes_deleted_after_soft_grace_when_empty() -> None:
    t = int(NOW)
    nodes = [make_node("keep1", created=1), make_node("keep2", created=2),
             make_node("young", created=3, tainted_at=t - 60),
             make_node("empty", created=4, tainted_at=t - 61),
             make_node("busy", created=5, tainted_at=t - 300),
             make_node("busy-old", created=6, tainted_at=t - 601)]
    pods = [make_pod("a", node="busy", cpu=100), make_pod("b", node="busy-old", cpu=100),
            make_pod("c", node="keep1", cpu=1000)]
    plan = tick(nodes, pods, asg=make_asg(6), soft_delete_grace_period="1m",
                hard_delete_grace_period="10m")
    # 50% => delta 0 => reap: empty past soft (61 > 60), busy-old past hard (601 > 600)
    assert plan.delta == 0
    assert plan.delete == ("empty", "busy-old") and plan.asg_desired == 4


def test_no_delete_annotation_protects_a_tainted_node() -> None:
    nodes = [make_node("keep", created=1), make_node("t", created=2, tainted_at=1,
                                                     no_delete=True)]
    plan = tick(nodes, [make_pod(node="keep", cpu=500)], asg=make_asg(2))
    assert plan.delete == ()


def test_unparsable_taint_value_is_skipped() -> None:
    tainted = make_node("t", created=2, tainted_at=1)
    garbled = msgspec.structs.replace(
        tainted, taints=(Taint("atlassian.com/escalator", "yesterday", "NoSchedule"),))
    nodes = [make_node("keep", created=1)]
    pods = [make_pod(node="keep", cpu=500)]
    assert tick([*nodes, tainted], pods, asg=make_asg(2)).delete == ("t",)
    assert tick([*nodes, garbled], pods, asg=make_asg(2)).delete == ()


def test_deletion_refused_when_it_would_breach_asg_min_size() -> None:
    nodes = [make_node("keep", created=1), make_node("t1", created=2, tainted_at=1),
             make_node("t2", created=3, tainted_at=1)]
    plan = tick(nodes, [make_pod(node="keep", cpu=500)], asg=make_asg(3, min_size=2))
    assert plan.delete == () and "terminating nodes will breach minimum node size" in plan.notes
    plan = tick(nodes, [make_pod(node="keep", cpu=500)], asg=make_asg(2, min_size=2))
    assert plan.delete == () and "min sized reached, nodes will not be deleted" in plan.notes


def test_a_scale_down_counts_the_reaps_it_could_not_do() -> None:
    """§7.1 step 1: node_delete_errors{node} per failed reap of a scale-down; the node's name
    when its instance is not in the ASG (NodeNotInNodeGroup), "" when a minimum refused."""
    from kube_elevator.tasks.core.records import AsgInstance, AutoScalingGroup

    nodes = [make_node("a", created=1), make_node("b", created=2),
             make_node("t1", created=3, tainted_at=1)]
    refused = tick(nodes, [], asg=make_asg(3, min_size=3), min_nodes=1)  # 0 %: scale down
    assert refused.delta < 0 and refused.delete == () and refused.delete_errors == ("",)
    stray = AutoScalingGroup("batch-asg", 1, 10, 3, (AsgInstance("i-a", "us-east-1a"),
                                                      AsgInstance("i-b", "us-east-1a")),
                             instances_known=True)
    assert tick(nodes, [], asg=stray, min_nodes=1).delete_errors == ("t1",)
    assert tick(nodes, [], asg=make_asg(3), min_nodes=1).delete_errors == ()  # t1 goes


def test_force_tainted_empty_nodes_go_without_grace_even_with_no_delete() -> None:
    nodes = [make_node("keep", created=1), make_node("forced", created=2, force=True,
                                                     no_delete=True),
             make_node("forced-busy", created=3, force=True)]
    pods = [make_pod(node="keep", cpu=500), make_pod("x", node="forced-busy")]
    plan = tick(nodes, pods, asg=make_asg(3))
    assert plan.delete == ("forced",)


def test_reaping_does_not_happen_when_scaling_up() -> None:
    nodes = [make_node("n1", created=1), make_node("t", created=2, tainted_at=1, force=False)]
    # t is tainted and empty, but delta > 0 untaints it instead
    plan = tick(nodes, [make_pod(f"p{i}", cpu=1000) for i in range(2)])
    assert plan.delete == () and plan.untaint == ("t",)


# --- §5.9, §5.10, §5.11, max_nodes -------------------------------------------------------------

def test_scale_on_starve_adds_a_node_for_a_pod_that_fits_nowhere() -> None:
    nodes = [make_node("n1", cpu=4000), make_node("n2", cpu=4000)]
    # 6600m of 8000m = 82.5%, under a 90% threshold; 1500m free per node, the pod wants 1600m.
    pods = [make_pod("a", node="n1", cpu=2500), make_pod("b", node="n2", cpu=2500),
            make_pod("big", cpu=1600)]
    thresholds = {"scale_up_threshold_percent": 90}
    starving = tick(nodes, pods, scale_on_starve=True, **thresholds)
    assert starving.delta == 1 and starving.cloud_increase == 1
    assert tick(nodes, pods, scale_on_starve=False, **thresholds).delta == 0
    fits = [*pods[:2], make_pod("fits", cpu=1500)]
    assert tick(nodes, fits, scale_on_starve=True, **thresholds).delta == 0


def test_max_node_age_rotates_when_at_minimum() -> None:
    nodes = [make_node("ancient", created=NOW - 3 * 86400)]
    plan = tick(nodes, [make_pod(node="ancient", cpu=500)], max_node_age="24h", min_nodes=1)
    assert plan.delta == 1 and plan.cloud_increase == 1


def test_untainted_above_max_nodes_forces_removal() -> None:
    nodes = [make_node(f"n{i}", created=i) for i in range(5)]
    pods = [make_pod(f"p{i}", node=f"n{i}", cpu=500) for i in range(5)]  # 50%: delta 0
    plan = tick(nodes, pods, min_nodes=1, max_nodes=3)
    assert plan.delta == -2 and plan.taint == ("n0", "n1")


def test_unhealthy_nodes_are_tainted_and_a_sick_group_does_nothing_else() -> None:
    group: dict[str, Any] = {"unhealthy_node_grace_period": "5m",
                             "health_check_newest_nodes_percent": 100,
                             "max_unhealthy_nodes_percent": 10}
    nodes = [make_node("ok", created=NOW - 3600), make_node("sick", created=NOW - 3600,
                                                            ready=False)]
    pods = [make_pod(f"p{i}", cpu=1000) for i in range(5)]
    plan = tick(nodes, pods, **group)
    assert plan.taint == ("sick",) and plan.delta == 0 and plan.cloud_increase == 0
    assert plan.taint_requested == 0  # §7.1: taint_event counts scale-down taints only
    assert not is_group_healthy(nodes, make_group(**group), NOW)


def test_group_health_ignores_nodes_within_grace() -> None:
    group = make_group(unhealthy_node_grace_period="5m", health_check_newest_nodes_percent=50,
                       max_unhealthy_nodes_percent=0)
    nodes = [make_node("new-sick", created=NOW - 60, ready=False),
             make_node("ok", created=NOW - 3600)]
    assert is_group_healthy(nodes, group, NOW)


# --- §5.1, §5.2 selection and classification ----------------------------------------------------

def test_pod_selection_by_node_selector_and_required_in_affinity() -> None:
    group = make_group()
    term = NodeSelectorTerm((MatchExpression("customer", "In", ("x", "batch")),))
    not_in = NodeSelectorTerm((MatchExpression("customer", "NotIn", ("batch",)),))
    assert pod_matches_group(make_pod(), group)
    assert pod_matches_group(make_pod(node_selector={}, required_node_terms=(term,)), group)
    assert not pod_matches_group(make_pod(node_selector={}, required_node_terms=(not_in,)), group)
    assert not pod_matches_group(make_pod(owned_by_daemonset=True), group)
    assert pod_matches_group(make_pod(static=True), group)


def test_default_group_takes_unconstrained_non_static_pods() -> None:
    default = make_group(name="default")
    free = make_pod(node_selector={})
    assert pod_matches_group(free, default)
    assert not pod_matches_group(make_pod(), default)
    assert not pod_matches_group(make_pod(node_selector={}, static=True), default)
    assert not pod_matches_group(make_pod(node_selector={}, has_affinity=True), default)
    groups = [make_group(), default, make_group(name="other", label_value="other")]
    pods = [make_pod("a"), free, make_pod("c", node_selector={"customer": "other"}),
            make_pod("ds", owned_by_daemonset=True, node_selector={})]
    by_group = pods_by_group(pods, groups)
    assert {name: [p.name for p in members] for name, members in by_group.items()} == {
        "batch": ["a"], "default": ["p"], "other": ["c"]}


def test_classification_order_and_dry_mode_tracker() -> None:
    nodes = [make_node("c", cordoned=True, force=True), make_node("f", force=True, tainted_at=1),
             make_node("t", tainted_at=1), make_node("u")]
    classes = classify_nodes(nodes)
    assert [[n.name for n in part] for part in (classes.untainted, classes.tainted,
                                                classes.force_tainted, classes.cordoned)] == [
        ["u"], ["t"], ["f"], ["c"]]
    dry = classify_nodes(nodes, dry_mode=True, dry_mode_tainted=["u"])
    assert [n.name for n in dry.untainted] == ["c", "f", "t"]
    assert [n.name for n in dry.tainted] == ["u"]


# --- §9 dry mode ---------------------------------------------------------------------------------

def test_dry_mode_keeps_taints_in_the_tracker_and_still_takes_the_lock() -> None:
    nodes = [make_node("a", created=1), make_node("b", created=2), make_node("c", created=3)]
    plan = tick(nodes, [], dry_mode=True)
    assert plan.dry_mode and plan.taint == ("a", "b")
    assert plan.next_state.dry_mode_tainted == ("a", "b")
    # next tick: the tracker's nodes count as tainted; load arrives: untaint newest from it
    pods = [make_pod(f"p{i}", cpu=1000) for i in range(3)]
    again = tick(nodes, pods, state=plan.next_state, dry_mode=True, now=NOW + 10)
    assert again.untaint == ("b", "a") and again.next_state.dry_mode_tainted == ()
    assert again.cloud_increase == 2 and again.locked


def test_dry_mode_tracker_forgets_nodes_that_left_the_group() -> None:
    """The tracker is kept in the group's Lease: a node deleted or replaced since it was
    tracked is dropped from it, or the Lease would hold every node the group ever had."""
    nodes = [make_node("a", created=1), make_node("b", created=2), make_node("c", created=3)]
    plan = tick(nodes, [], dry_mode=True)
    assert plan.next_state.dry_mode_tainted == ("a", "b")
    replaced = [nodes[1], nodes[2], make_node("d", created=4)]  # "a" is gone, "d" joined
    again = tick(replaced, [], state=plan.next_state, dry_mode=True, now=NOW + 600)
    assert "a" not in again.next_state.dry_mode_tainted
    assert set(again.next_state.dry_mode_tainted) <= {"b", "c", "d"}


def test_escalator_delete_nodes_refuses_instance_not_in_group() -> None:
    """Escalator pkg/cloudprovider/aws `DeleteNodes`: a node whose instance the ASG does not hold
    is refused (NodeNotInNodeGroup: "node %s, %s belongs in a different node group than %s"),
    so the plan neither lists it for deletion nor counts it off the ASG's desired capacity."""
    from kube_elevator.tasks.core.records import AsgInstance, AutoScalingGroup

    ours = AsgInstance("i-ours", "us-east-1a")
    nodes = [make_node("keep", created=1),
             make_node("ours", created=2, tainted_at=int(NOW) - 700,
                       provider_id=ours.provider_id),
             make_node("stray", created=3, tainted_at=int(NOW) - 700,
                       provider_id="aws:///us-east-1b/i-elsewhere")]
    asg = AutoScalingGroup("batch-asg", 1, 10, 3, (AsgInstance("i-keep", "us-east-1a"), ours),
                           instances_known=True)
    plan = tick(nodes, [make_pod(node="keep", cpu=500)], asg=asg)
    assert plan.delete == ("ours",)
    assert plan.asg_desired == 2  # 3 less the one node that can go
    assert any("stray" in note and "different node group than batch-asg" in note
               for note in plan.notes)
    # Without a description of the ASG (plan without --asg) membership is unknown: both go.
    assert tick(nodes, [make_pod(node="keep", cpu=500)], asg=make_asg(3)).delete == ("ours",
                                                                                     "stray")
