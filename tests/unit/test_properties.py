"""Safety properties of every plan, over random clusters (hypothesis)."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from kube_elevator.tasks.core.lease_state import GroupState, ScaleLock
from kube_elevator.tasks.core.records import AutoScalingGroup, NodeRecord
from kube_elevator.tasks.escalator.decide import plan_group, taint_time
from kube_elevator.tasks.escalator.plan import ScalePlan
from kube_elevator.tasks.steps.node_groups import ActionsDone, Adapters, taint_and_remove, untaint_or_increase
from tests.builders import make_group, make_node, make_pod

NOW = 1_800_000_000


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    node_count = draw(st.integers(0, 12))
    nodes: list[NodeRecord] = []
    for index in range(node_count):
        kind = draw(st.sampled_from(["untainted", "untainted", "tainted", "force", "cordoned"]))
        tainted_age = draw(st.integers(0, 3000))
        nodes.append(make_node(
            f"n{index}", created=draw(st.integers(0, 10**6)),
            cpu=draw(st.sampled_from([1000, 2000, 4000])),
            tainted_at=NOW - tainted_age if kind in ("tainted", "cordoned") else None,
            force=kind == "force", cordoned=kind == "cordoned",
            no_delete=draw(st.booleans()) and draw(st.booleans())))
    pods = [
        make_pod(f"p{index}", cpu=draw(st.integers(0, 3000)),
                 memory=draw(st.integers(0, 2**32)),
                 node=draw(st.sampled_from(["", *[n.name for n in nodes]])))
        for index in range(draw(st.integers(0, 30)))
    ]
    min_nodes = draw(st.integers(0, 5))
    max_nodes = draw(st.integers(min_nodes + 1, 15))
    lower = draw(st.integers(1, 30))
    upper = draw(st.integers(lower + 1, 60))
    group = make_group(
        min_nodes=min_nodes, max_nodes=max_nodes,
        taint_lower_capacity_threshold_percent=lower,
        taint_upper_capacity_threshold_percent=upper,
        scale_up_threshold_percent=draw(st.integers(upper + 1, 150)),
        slow_node_removal_rate=draw(st.integers(0, 3)),
        fast_node_removal_rate=draw(st.integers(3, 6)),
        scale_on_starve=draw(st.booleans()),
        max_node_age=draw(st.sampled_from(["", "24h"])),
        dry_mode=draw(st.booleans()) and draw(st.booleans()),
    )
    asg_min = draw(st.integers(0, 4))
    asg_max = draw(st.integers(asg_min, 20))
    asg = AutoScalingGroup("batch-asg", asg_min, asg_max, draw(st.integers(asg_min, asg_max)))
    lock = ScaleLock(draw(st.booleans()), draw(st.integers(0, 5)),
                     NOW - draw(st.integers(0, 600)))
    # Dry mode's taint tracker (Escalator §9): the nodes an earlier dry tick "tainted".
    tracker = tuple(draw(st.lists(st.sampled_from([n.name for n in nodes]), unique=True))
                    ) if nodes and group.dry_mode else ()
    return {"group": group, "nodes": nodes, "pods": pods, "asg": asg,
            "state": GroupState(lock=lock, dry_mode_tainted=tracker), "now": float(NOW)}


def plan_for(cluster: dict[str, Any]) -> ScalePlan:
    return plan_group(cluster["group"], cluster["pods"], cluster["nodes"], cluster["asg"],
                  cluster["state"], cluster["now"])


def untainted_names(cluster: dict[str, Any]) -> set[str]:
    if cluster["group"].dry_mode:
        # Escalator §9: dry mode classifies by its tracker only; cordons and taints are ignored.
        tracked = set(cluster["state"].dry_mode_tainted)
        return {n.name for n in cluster["nodes"] if n.name not in tracked}
    return {n.name for n in cluster["nodes"] if not n.taints and not n.unschedulable}


@settings(max_examples=400, deadline=None)
@given(clusters())
def test_never_takes_untainted_nodes_below_min_nodes(cluster: dict[str, Any]) -> None:
    plan = plan_for(cluster)
    before = untainted_names(cluster)
    after = (before - set(plan.taint)) | set(plan.untaint)
    if len(before) >= cluster["group"].min_nodes:
        assert len(after) >= cluster["group"].min_nodes
    else:
        assert len(after) >= len(before)


@settings(max_examples=400, deadline=None)
@given(clusters())
def test_never_sets_asg_desired_above_max_size(cluster: dict[str, Any]) -> None:
    plan = plan_for(cluster)
    asg = cluster["asg"]
    assert plan.asg_desired <= asg.max_size
    assert plan.asg_desired >= min(asg.min_size, asg.desired_capacity)
    # Escalator's IncreaseSize sets TargetSize() + delta, TargetSize() read before the tick's
    # terminations (escalator aws.go): an increase undoes their decrements.
    if plan.cloud_increase:
        assert plan.asg_desired == asg.desired_capacity + plan.cloud_increase
    else:
        assert plan.asg_desired == asg.desired_capacity - len(plan.delete)


@settings(max_examples=400, deadline=None)
@given(clusters())
def test_never_untaints_force_tainted_or_cordoned_nodes(cluster: dict[str, Any]) -> None:
    plan = plan_for(cluster)
    protected = {n.name for n in cluster["nodes"]
                 if n.unschedulable or n.has_taint("atlassian.com/escalator-force")}
    if not plan.dry_mode:
        assert not protected & set(plan.untaint)


@settings(max_examples=400, deadline=None)
@given(clusters())
def test_never_deletes_a_node_tainted_less_than_soft_grace_ago(cluster: dict[str, Any]) -> None:
    plan = plan_for(cluster)
    soft = cluster["group"].soft_delete_grace_seconds
    by_name = {n.name: n for n in cluster["nodes"]}
    for name in plan.delete:
        node = by_name[name]
        if node.has_taint("atlassian.com/escalator-force"):
            continue  # Escalator §7.4: empty force-tainted nodes go without grace
        tainted_at = taint_time(node)
        assert tainted_at is not None and cluster["now"] - tainted_at > soft
        assert not node.no_delete and not node.unschedulable


@settings(max_examples=400, deadline=None)
@given(clusters().filter(lambda cluster: cluster["group"].dry_mode))
def test_dry_mode_keeps_its_tracker_in_step_with_the_plan(cluster: dict[str, Any]) -> None:
    plan = plan_for(cluster)
    tracked = set(cluster["state"].dry_mode_tainted)
    assert set(plan.untaint) <= tracked and not set(plan.taint) & tracked
    assert set(plan.next_state.dry_mode_tainted) == (tracked - set(plan.untaint)) | set(plan.taint)


class Tripwire:
    """Adapters that fail the test on any call: dry mode must not reach the cluster or cloud."""

    lease_namespace = "kube-system"

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"dry mode called {name}")


@settings(max_examples=200, deadline=None)
@given(clusters().filter(lambda cluster: cluster["group"].dry_mode))
def test_dry_mode_acts_on_nothing(cluster: dict[str, Any]) -> None:
    plan = plan_for(cluster)
    adapters = Adapters(cast(Any, Tripwire()), cast(Any, Tripwire()))
    assert taint_and_remove.fn(adapters, plan, cluster["asg"], cluster["nodes"],
                               cluster["now"]) == ActionsDone()
    assert untaint_or_increase.fn(adapters, plan, cluster["asg"]) == ActionsDone()
