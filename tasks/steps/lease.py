"""The one Lease writer of a tick: each group's state goes to its Lease in one write."""

from __future__ import annotations

from kube_elevator.tasks.adapters.ports import KubeActions
from kube_elevator.tasks.core.acting import may_act
from kube_elevator.tasks.core.errors import LeaseConflict
from kube_elevator.tasks.core.lease_state import GroupState, lease_name
from kube_elevator.tasks.core.step import step
from kube_elevator.tasks.core.step_inputs import expect, expect_number


@step
def write_lock(kube: KubeActions, namespace: str, group_name: str, state: GroupState,
               now: float) -> GroupState:
    """Write the state if nobody wrote since we read it (else LeaseConflict: we lost the race).

    A retry after a write that was applied but whose answer was lost gets 409 too, although no
    other tick ran: the Lease then holds exactly our claim token, and the tick goes on.

    A process that no longer leads (`tasks.core.acting`) claims nothing: LeaseConflict too.
    """
    expect("write_lock", "namespace", namespace, str, "the Leases' namespace (a str)")
    expect("write_lock", "group_name", group_name, str, "the node group's name (a str)")
    expect("write_lock", "state", state, GroupState, "a GroupState (a ScalePlan's next_state)")
    expect_number("write_lock", "now", now, "a Unix time in seconds (a float)")
    name = lease_name(group_name)
    if not may_act():
        raise LeaseConflict(f"Lease {namespace}/{name} not claimed: this process no longer "
                            "leads (leader election)")
    try:
        return kube.write_state(namespace, name, state, now)
    except LeaseConflict:
        current = kube.read_state(namespace, name)
        if state.claim and current.claim == state.claim:
            return current
        raise
