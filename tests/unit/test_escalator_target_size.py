"""Which ASG size a tick's guards and its increase read (issue 43): Escalator's TargetSize(),
the desired capacity as RunOnce's Refresh described it, unchanged by the tick's own
terminations (escalator pkg/cloudprovider/aws/aws.go TargetSize, IncreaseSize, DeleteNodes;
pkg/controller/scale_down.go scaleDownTaint)."""

from __future__ import annotations

from dataclasses import replace

from kube_elevator.tasks.cluster_autoscaler.drain import drain_plan
from kube_elevator.tasks.cluster_autoscaler.unneeded import RemovalSimulation
from kube_elevator.tasks.core.lease_state import GroupState
from kube_elevator.tasks.escalator.decide import plan_group
from tests.builders import make_asg, make_group, make_node, make_pod

NOW = 1_800_000_000.0


def test_the_taint_floor_reads_the_size_before_the_reap() -> None:
    """Escalator: node-0 reaped (2 → 1), then `untainted nodes close to minimum (0). Adjusting
    taint amount to (1)`, and the ASG guard 2 - 1 >= MinSize 1 lets node-1 be tainted."""
    group = make_group(min_nodes=0, max_nodes=8, fast_node_removal_rate=3,
                       hard_delete_grace_period="1h")
    nodes = [make_node("node-0", created=0, tainted_at=int(NOW - 9000)),
             make_node("node-1", created=1)]
    plan = plan_group(group, [], nodes, make_asg(2, min_size=1, max_size=8), GroupState(), NOW)
    assert (plan.delete, plan.taint, plan.asg_desired) == (("node-0",), ("node-1",), 1)


def test_the_asg_minimum_still_holds_the_taint_at_the_size_read() -> None:
    """scaleDownTaint's guard: TargetSize() 2 - 3 < MinSize 1 lets 2 - 1 = 1 be tainted."""
    group = make_group(min_nodes=0, max_nodes=8, fast_node_removal_rate=3)
    nodes = [make_node(f"node-{i}", created=i) for i in range(3)]
    plan = plan_group(group, [], nodes, make_asg(2, min_size=1, max_size=8), GroupState(), NOW)
    assert plan.taint == ("node-0",) and plan.limit == "held at the ASG's MinSize 1: taint 1 of 3"


def test_a_one_shot_increase_adds_to_what_the_terminations_left() -> None:
    """setASGDesiredSizeOneShot attaches the fleet's instances: AttachInstances adds them to
    the live desired capacity, which the force-deleted node lowered (3 → 2, + 1)."""
    nodes = [make_node(f"n{i}", created=0, cpu=2000) for i in range(2)] + [
        make_node("n2", created=0, cpu=2000, force=True)]
    for template, desired in (("", 4), ("lt-1", 3)):
        group = make_group(min_nodes=2, max_nodes=10, max_node_age="30m",
                           aws={"launch_template_id": template})
        plan = plan_group(group, [], nodes, make_asg(3), GroupState(), NOW)
        assert plan.delete == ("n2",) and plan.cloud_increase == 1
        assert plan.asg_desired == desired


def test_a_node_kept_to_drain_does_not_add_back_to_an_absolute_increase() -> None:
    """With `scale_down.drain`, a force-tainted node that still holds a movable pod is kept,
    not terminated: its decrement comes back, unless the tick's increase set an absolute size
    (Escalator's IncreaseSize: TargetSize() + delta, whatever the terminations did)."""
    group = make_group(min_nodes=2, max_nodes=10, max_node_age="30m")
    nodes = [make_node(f"n{i}", created=0, cpu=2000) for i in range(2)] + [
        make_node("n2", created=0, cpu=2000, force=True)]
    other = make_pod("other", cpu=100, node="n2", node_selector={"team": "web"})
    plan = plan_group(group, [], nodes, make_asg(3), GroupState(), 1_800_000_000.0)
    assert plan.delete == ("n2",) and plan.cloud_increase == 1 and plan.asg_desired == 4
    simulation = RemovalSimulation(nodes, {"n2": [other]}, (), 1_800_000_000.0)
    kept = drain_plan(plan, group, nodes, simulation, 1_800_000_000.0).plan
    assert kept.delete == () and kept.asg_desired == 4
    no_increase = replace(plan, cloud_increase=0, asg_desired=2)
    assert drain_plan(no_increase, group, nodes, simulation, 1_800_000_000.0).plan.asg_desired == 3
