"""A tick's outcome in one line and as tags, for the flow run's state message and the UI's tag
filter (issue 27 §5)."""

from __future__ import annotations

from dataclasses import replace

from kube_elevator.tasks.core.lease_state import GroupState
from kube_elevator.tasks.escalator.decide import plan_group
from kube_elevator.tasks.escalator.plan import ScalePlan
from kube_elevator.tasks.steps.node_groups import ActionsDone, GroupResult
from kube_elevator.tasks.steps.report import changed_nothing, outcome_line, outcome_tags
from tests.builders import make_asg, make_group, make_node, make_pod

T0 = 1_800_000_000.0


def plan(name: str, pods: int, nodes: int = 2) -> ScalePlan:
    """`pods` pods of half a node on `nodes` 1-CPU nodes, in a group called `name`."""
    group = make_group(name=name)
    return plan_group(group, [make_pod(f"p{i}") for i in range(pods)],
                      [make_node(f"{name}-n{i}", created=T0 - 3600) for i in range(nodes)],
                      make_asg(nodes), GroupState(), T0)


def test_an_idle_tick_says_nothing_with_each_groups_usage() -> None:
    results = [GroupResult(plan("shared", 2), "nothing to do"),
               GroupResult(plan("batch", 2), "nothing to do")]
    assert outcome_line(results) == "nothing: shared 50%, batch 50%"
    assert outcome_tags(results) == ["nothing"]
    assert changed_nothing(results)


def test_a_group_that_scaled_up_leads_the_line_and_names_itself_in_the_tags() -> None:
    up = GroupResult(plan("shared", 10), "acted", ActionsDone(asg_desired_set=8))
    idle = GroupResult(plan("batch", 2), "nothing to do")
    assert outcome_line([up, idle]) == (
        "shared ASG +6 (2 -> 8): usage 250.0% is above scale_up_threshold 70%: scale up by 6; "
        "nothing: batch 50%")
    assert outcome_tags([up, idle]) == ["group:shared", "scaled-up"]
    assert not changed_nothing([up, idle])


def test_taints_removals_and_failures_each_have_a_tag() -> None:
    down = plan("batch", 1)
    tainted = GroupResult(down, "acted", ActionsDone(tainted=("batch-n1",)))
    removed = GroupResult(replace(down, name="spot"), "acted", ActionsDone(
        terminated_instances=("i-1",), deleted_nodes=("spot-n0",)))
    failed = GroupResult(replace(down, name="gpu"), "failed", message="ApiException: 500")
    assert outcome_tags([tainted, removed, failed]) == [
        "failed", "group:batch", "group:gpu", "group:spot", "nodes-removed", "tainted"]
    line = outcome_line([tainted, removed, failed])
    assert line.startswith("batch -1: usage 25.0% is below taint_upper 40%")
    assert "gpu failed: ApiException: 500" in line


def test_a_dry_run_says_what_it_would_do_and_is_tagged_so() -> None:
    results = [GroupResult(plan("shared", 10), "dry run")]
    assert outcome_line(results).startswith("shared would ASG +6 (2 -> 8): usage 250.0%")
    assert outcome_tags(results, dry_run=True) == ["dry-run"]
    assert not changed_nothing(results)  # its report is the point: the artifact is written


def test_a_lost_race_and_a_locked_group_are_told_apart() -> None:
    locked = replace(plan("batch", 2), locked=True)
    results = [GroupResult(plan("shared", 10), "lost race"),
               GroupResult(locked, "nothing to do")]
    assert outcome_line(results) == (
        "shared: another tick acted first; nothing: batch 50% (locked)")
    assert outcome_tags(results) == ["nothing"]
