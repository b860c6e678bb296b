"""A scale lock that records its claim (issue: lost answers, killed ticks).

The tick writes the Lease before it calls the cloud. If the tick dies in between, or the cloud
never applies the request, the lock would hold for a whole cool-down with pods pending; the
claim records the desired capacity it raises from and to, so the next tick can tell.
"""

from __future__ import annotations

from kube_elevator.tasks.core.lease_state import (
    CLAIM_SETTLE_SECONDS,
    GroupState,
    ScaleLock,
    state_from_annotations,
    state_to_annotations,
)
from tests.builders import make_asg, make_node, make_pod
from tests.unit.test_decide import NOW, tick


def _full_group() -> tuple[list, list]:
    nodes = [make_node("n1", created=1), make_node("n2", created=2)]
    return nodes, [make_pod(f"p{i}", cpu=1000) for i in range(3)]  # 150%


def test_scale_up_claim_records_the_desired_capacity_it_raises() -> None:
    nodes, pods = _full_group()
    plan = tick(nodes, pods, asg=make_asg(2), scale_up_cool_down_period="10m")
    lock = plan.next_state.lock
    assert plan.cloud_increase == 3  # ceil(2 * 150 / 70) - 2
    assert (lock.desired_before, lock.desired_target) == (2, 5)


def test_dry_mode_lock_records_no_claim() -> None:
    """Escalator §9: in dry mode the lock is taken but the cloud never asked: nothing to check."""
    nodes, pods = _full_group()
    plan = tick(nodes, pods, asg=make_asg(2), dry_mode=True)
    assert plan.next_state.lock.is_locked
    assert plan.next_state.lock.desired_target == 0


def test_lock_whose_increase_never_reached_the_asg_is_released() -> None:
    """kill -9 between the Lease claim and SetDesiredCapacity: the ASG still shows `before`."""
    nodes, pods = _full_group()
    claimed = GroupState(lock=ScaleLock(True, 3, NOW - 60, desired_before=2, desired_target=5))
    plan = tick(nodes, pods, state=claimed, asg=make_asg(2), scale_up_cool_down_period="10m")
    assert not plan.lock_held_at_check
    assert plan.cloud_increase == 3 and plan.asg_desired == 5
    assert any("never reached the ASG" in note for note in plan.notes)


def test_lock_whose_increase_reached_the_asg_holds() -> None:
    """The answer was lost but the request applied: the ASG shows the target; no second raise."""
    nodes, pods = _full_group()
    claimed = GroupState(lock=ScaleLock(True, 3, NOW - 60, desired_before=2, desired_target=5))
    plan = tick(nodes, pods, state=claimed, asg=make_asg(5), scale_up_cool_down_period="10m")
    assert plan.lock_held_at_check and plan.cloud_increase == 0
    assert not plan.changes_anything


def test_fresh_claim_is_left_to_settle() -> None:
    """A tick reading between another tick's claim and its SetDesiredCapacity does not undo it."""
    nodes, pods = _full_group()
    claimed = GroupState(lock=ScaleLock(True, 3, NOW - CLAIM_SETTLE_SECONDS + 1,
                                        desired_before=2, desired_target=5))
    plan = tick(nodes, pods, state=claimed, asg=make_asg(2), scale_up_cool_down_period="10m")
    assert plan.lock_held_at_check and plan.cloud_increase == 0


def test_claim_round_trips_through_the_lease_annotations() -> None:
    state = GroupState(lock=ScaleLock(True, 3, NOW, desired_before=2, desired_target=5),
                       claim="abc")
    assert state_from_annotations(state_to_annotations(state)) == state
    assert state_from_annotations({}) == GroupState()
