"""Escalator's one-shot scale-up (spec §10, aws.go setASGDesiredSizeOneShot), as a tick runs it.

A group with `aws.launch_template_id` gets its increase as one `instant` EC2 Fleet instead of
SetDesiredCapacity: launch, wait for the instances (at most `fleet_instance_ready_timeout`),
attach them to the ASG in batches of 20; on a timeout or a failed attach, terminate those not
attached and report the group's tick failed. The tick claims the group's Lease before, as for
SetDesiredCapacity, and the fleet carries the claim: its ClientToken, and a tag on each
instance (`tasks.adapters.fleet_request`), which is how a retry finds its fleet.

Where Escalator keeps state in its process, the group's Lease keeps it: the fleet's claim
until its tick reports back (`GroupState.fleet_claim`), and the failures in a row
(terminateInstancesTries). At the third, Escalator exits; a tick instead stops using the fleet
for that group (its scale-ups fail, saying why) until an operator removes the count, and the
other groups go on.

A tick killed between its fleet and its attach (or whose clean-up failed) leaves the fleet's
claim in the Lease and its instances outside the ASG. Once the group's settle time has passed
since the claim (`NodeGroupConfig.claim_settle_seconds`: longer than a live tick takes from
its fleet to its attach), a later tick finds them by the claim tag, terminates those not in
the ASG, and clears the claim (`sweep_earlier_fleet`); the same settle time releases the claimed
lock (`ScaleLock.never_reached_cloud`), so that tick may then scale up afresh.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from logging import getLogger as get_logger

from kube_elevator.tasks.adapters.fleet_request import (
    ESCALATOR_TAG_KEY,
    MAX_TERMINATE_INSTANCES_TRIES,
    NOT_ALL_STARTED,
    TOO_MANY_FAILURES,
    FleetRequest,
)
from kube_elevator.tasks.adapters.ports import CloudActions
from kube_elevator.tasks.core.errors import CloudError
from kube_elevator.tasks.core.lease_state import FLEET_TERMINATE_TRIES, GroupState, ScaleLock, lease_name
from kube_elevator.tasks.core.records import AutoScalingGroup
from kube_elevator.tasks.core.step import Runner
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.plan import ScalePlan
from kube_elevator.tasks.steps.fleet import (
    attach_to_asg,
    fleet_request,
    launch_fleet,
    tag_node_group,
    terminate_unattached,
    wait_for_instances,
)
from kube_elevator.tasks.steps.lease import write_lock
from kube_elevator.tasks.steps.node_groups import ActionsDone, Adapters

logger = get_logger(__name__)


@dataclass(frozen=True)
class FleetOutcome:
    """What one one-shot scale-up did: `error` is "" when every instance was attached."""

    launched: tuple[str, ...] = ()
    attached: tuple[str, ...] = ()
    terminated: tuple[str, ...] = ()
    error: str = ""
    # False when the failure's clean-up failed too: the cloud's state is unknown (a later
    # tick's sweep terminates what was left).
    cleaned_up: bool = True


def one_shot_scale_up(run: Runner, cloud: CloudActions, request: FleetRequest,
                      ready_timeout_seconds: float) -> FleetOutcome:
    """setASGDesiredSizeOneShot and attachInstancesToASG: fleet, wait, attach; on a timeout or
    a failed call, terminate the instances not attached (terminateOrphanedInstances)."""
    launched: list[str] = []
    try:
        launched = run(launch_fleet, cloud, request)
        if not run(wait_for_instances, cloud, launched, ready_timeout_seconds):
            raise CloudError(NOT_ALL_STARTED, retryable=False)
        attached: list[str] = run(attach_to_asg, cloud, request.asg_name, launched)
        return FleetOutcome(tuple(launched), tuple(attached))
    except Exception as error:
        failure = str(error)
    try:
        attached, terminated = run(terminate_unattached, cloud, request.asg_name,
                                   request.claim, launched)
    except Exception as cleanup_error:
        logger.warning("%s: the fleet's instances not attached could not be terminated (a "
                       "later tick will): %s", request.asg_name, cleanup_error)
        return FleetOutcome(tuple(launched), error=failure, cleaned_up=False)
    if terminated:
        logger.info("%s: terminated %d instance(s) that could not be attached to the ASG",
                    request.asg_name, len(terminated))
    return FleetOutcome(tuple(launched), tuple(attached), tuple(terminated), failure)


def stopped_message(group: NodeGroupConfig) -> str:
    return (f"{TOO_MANY_FAILURES}: no fleet is launched for this group until "
            f"{FLEET_TERMINATE_TRIES} is removed from Lease {lease_name(group.name)}")


def stopped_by_failures(group: NodeGroupConfig, plan: ScalePlan, state: GroupState) -> bool:
    """maxTerminateInstancesTries: Escalator exits at the third failure in a row; this group's
    one-shot scale-ups stop instead (the count lives in its Lease)."""
    return (group.aws.one_shot and plan.cloud_increase > 0 and not plan.dry_mode
            and state.fleet_terminate_tries >= MAX_TERMINATE_INSTANCES_TRIES)


def scale_up_in_one_shot(run: Runner, actuator: Adapters, group: NodeGroupConfig,
                         plan: ScalePlan, claimed: GroupState, lock_before: ScaleLock,
                         now: float, done: ActionsDone) -> tuple[ActionsDone, str]:
    """The group's increase as one fleet, after the tick's claim (`claimed`, as written; the
    lock was `lock_before` until then); its actions and "" on success, else the failure's
    message. The Lease is written again to clear the fleet's claim (the tick reports back),
    with the failures in a row, and the lock as it turned out."""
    request = fleet_request(group, plan.cloud_increase, claimed.claim, now)
    outcome = one_shot_scale_up(run, actuator.cloud, request,
                                group.aws.fleet_instance_ready_seconds)
    done = replace(done, attached_instances=outcome.attached,
                   fleet_terminated_instances=done.fleet_terminated_instances
                   + outcome.terminated,
                   # AttachInstances adds to the desired the tick's terminations left
                   # (plan.asg_desired is that plus the whole increase: ScalePlan).
                   asg_desired_set=plan.asg_desired - plan.cloud_increase + len(outcome.attached)
                   if outcome.attached else None)
    tries = claimed.fleet_terminate_tries
    if not outcome.error:  # reported back: the claim is done with, the failures reset
        _write(run, actuator, group, replace(claimed, fleet_claim="", fleet_terminate_tries=0),
               now)
        return done, ""
    if not outcome.cleaned_up:  # unknown: the claim stays for a later tick's sweep
        return done, outcome.error
    if outcome.terminated:
        tries += 1
    # Escalator takes no lock after a failed increase; the part attached keeps one for itself.
    lock = claimed.lock
    lock = replace(lock, requested_nodes=len(outcome.attached),
                   desired_target=lock.desired_before + len(outcome.attached)) \
        if outcome.attached else lock_before
    _write(run, actuator, group, replace(claimed, lock=lock, fleet_claim="",
                                         fleet_terminate_tries=tries), now)
    message = outcome.error
    if tries >= MAX_TERMINATE_INSTANCES_TRIES:
        message += f"; {stopped_message(group)}"
    return done, message


def _write(run: Runner, actuator: Adapters, group: NodeGroupConfig, state: GroupState,
           now: float) -> None:
    """A Lease write after the fleet; if it fails the claim stands (its settle time ends it)."""
    try:
        run(write_lock, actuator.kube, actuator.lease_namespace, group.name,
            replace(state, claim=uuid.uuid4().hex), now)
    except Exception as error:
        logger.warning("%s: Lease not updated after the fleet: %s", group.name, error)


def earlier_fleet_in_flight(group: NodeGroupConfig, state: GroupState, now: float) -> bool:
    """A fleet an earlier tick claimed and has not reported back, within its settle time: its
    tick may still attach it (cool-downs shorter than the settle time let a tick see this)."""
    return bool(state.fleet_claim) and (
        now - state.lock.lock_time_unix_seconds < group.claim_settle_seconds)


def earlier_fleet_message(state: GroupState, in_flight: bool) -> str:
    if in_flight:
        return (f"an earlier tick's fleet (claim {state.fleet_claim}) may still be attaching: "
                "no new fleet within its settle time")
    return (f"the instances of an earlier tick's fleet (claim {state.fleet_claim}) could not "
            "be checked: no new fleet until they are")


def sweep_earlier_fleet(run: Runner, actuator: Adapters, group: NodeGroupConfig,
                        plan: ScalePlan, state: GroupState, now: float
                        ) -> tuple[ScalePlan, tuple[str, ...]]:
    """An earlier tick's fleet past its settle time: terminate its instances outside the ASG
    and clear its claim with this tick's Lease write (`plan.next_state`); the instances
    terminated. A failure is logged and the claim kept (no new fleet may replace it: the
    tick checks `plan.next_state.fleet_claim`); the next tick tries again."""
    if not state.fleet_claim or earlier_fleet_in_flight(group, state, now):
        return plan, ()
    try:
        _, terminated = run(terminate_unattached, actuator.cloud,
                            group.cloud_provider_group_name, state.fleet_claim, [])
    except Exception as error:
        logger.warning("%s: the instances of an earlier tick's fleet (claim %s) could not be "
                       "checked: %s", group.name, state.fleet_claim, error)
        return plan, ()
    if terminated:
        logger.warning("%s: terminated %d instance(s) an earlier tick's fleet left outside the "
                       "ASG: %s", group.name, len(terminated), terminated)
    return replace(plan, next_state=replace(plan.next_state, fleet_claim="")), tuple(terminated)


def tag_node_groups(run: Runner, cloud: CloudActions, groups: Sequence[NodeGroupConfig],
                    asgs: Mapping[str, AutoScalingGroup]) -> None:
    """addASGTags: each group with `resource_tagging` whose ASG lacks the tag gets it; errors
    are only logged, as Escalator's are."""
    for group in groups:
        asg = asgs.get(group.cloud_provider_group_name)
        if group.aws.resource_tagging and asg is not None and not asg.has_tag_key(
                ESCALATOR_TAG_KEY):
            try:
                run(tag_node_group, cloud, asg.name)
            except Exception as error:
                logger.error("failed to create auto scaling tag for ASG %s: %s", asg.name, error)


__all__ = ["FleetOutcome", "earlier_fleet_in_flight", "earlier_fleet_message", "one_shot_scale_up",
           "scale_up_in_one_shot", "stopped_by_failures", "stopped_message",
           "sweep_earlier_fleet", "tag_node_groups"]
