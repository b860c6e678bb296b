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
    """Claim the tick for a group: write `state` to its Lease `elevator-<group_name>` if
    nobody wrote since it was read, else raise `LeaseConflict` (another tick won the race:
    act on nothing for this group; the next tick decides again).

    `state` is the plan's `next_state` with the `resource_version` of the state `read_locks`
    returned and a fresh `claim` token; the written state comes back. A retry after a write
    that was applied but whose answer was lost gets 409 too, although no other tick ran: the
    Lease then holds exactly this claim token, and the tick goes on. A replica that lost its
    leader election (`elevator serve`) claims nothing: `LeaseConflict` too.

    Example:
        ```python
        claimed = replace(plan.next_state, resource_version=state.resource_version,
                          claim=uuid.uuid4().hex)
        try:
            ke.write_lock(adapters.kube, adapters.lease_namespace, group.name, claimed, now)
        except ke.LeaseConflict:
            ...  # another tick acted: nothing for this group now
        ```
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
