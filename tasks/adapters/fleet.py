"""The EC2 Fleet calls of Escalator's one-shot scale-up (spec §10), on boto3; `AsgClient` has them.

Each method is one retry-safe unit of `flows/fleet.py`'s sequence, deciding from what AWS says
now: a launch first looks for the instances its claim already launched (a retry after a lost
answer) and sends the claim as ClientToken besides; an attach skips instances already in the
ASG; a termination spares them. The requests themselves are `tasks.adapters.fleet_request`'s.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from kube_elevator.tasks.adapters.fleet_request import (
    ATTACH_BATCH_SIZE,
    ESCALATOR_TAG_KEY,
    ESCALATOR_TAG_VALUE,
    FLEET_CLAIM_TAG,
    LIVE_STATES,
    NO_ASG,
    STATUS_IDS_PER_CALL,
    TERMINATE_BATCH_SIZE,
    FleetRequest,
    all_ready,
    batches,
    create_fleet_input,
    fleet_instance_ids,
    unique,
)
from kube_elevator.tasks.core.errors import CloudError
from kube_elevator.tasks.core.retry import cloud_call_may_pass

if TYPE_CHECKING:
    from mypy_boto3_autoscaling import AutoScalingClient
    from mypy_boto3_ec2 import EC2Client

READY_POLL_SECONDS = 1.0  # attachInstancesToASG's ticker


class WaitClock(Protocol):
    """The clock the readiness wait runs on: the real one live, a stepped one in tests.

    Example:
        ```python
        cloud = ke.AsgClient(autoscaling, ec2, clock=my_clock)   # my_clock: a ke.WaitClock
        ```
    """

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class RealClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def _error(context: str, exc: ClientError | BotoCoreError) -> CloudError:
    return CloudError(f"{context}: {exc}", retryable=cloud_call_may_pass(exc))


class FleetCalls:
    """Escalator's fleet path on an autoscaling and an ec2 client (`AsgClient` inherits it).

    Example:
        ```python
        cloud = ke.AsgClient(boto3.client("autoscaling"), boto3.client("ec2"))
        assert isinstance(cloud, ke.FleetCalls)       # the one-shot scale-up path (EC2 Fleet)
        ```
    """

    autoscaling: AutoScalingClient
    ec2: EC2Client
    clock: WaitClock

    def launch_fleet(self, request: FleetRequest) -> list[str]:
        """setASGDesiredSizeOneShot up to the attach: the instances of an instant fleet for
        `request.count`, overrides from the ASG's subnets (read fresh, as createTemplateOverrides
        does). A retry of the same request finds the instances its claim launched instead."""
        already = self._claimed(request.claim)
        if already:
            return already
        fleet_input = create_fleet_input(
            request, str(self._raw_group(request.asg_name).get("VPCZoneIdentifier") or ""))
        try:
            answer = self.ec2.create_fleet(**fleet_input)
        except (ClientError, BotoCoreError) as exc:
            raise _error("failed CreateFleet call", exc) from exc
        return fleet_instance_ids(answer)

    def wait_until_ready(self, instance_ids: Sequence[str], timeout_seconds: float) -> bool:
        """attachInstancesToASG's wait: poll every second until every instance is ready
        (`fleet_request.instance_ready`), at most `timeout_seconds`; False when it ran out.
        A failed poll counts as not ready yet, as Escalator's does."""
        deadline = self.clock.monotonic() + timeout_seconds
        while True:
            if self._all_ready(instance_ids):
                return True
            remaining = deadline - self.clock.monotonic()
            if remaining <= 0:
                return False
            self.clock.sleep(min(READY_POLL_SECONDS, remaining))

    def attach_instances(self, asg_name: str, instance_ids: Sequence[str]) -> list[str]:
        """AttachInstances in batches of 20, skipping those already in the ASG (a retry after
        a lost answer or a failed batch attaches each instance once); returns them all."""
        members = self._members(asg_name)
        for batch in batches([i for i in unique(instance_ids) if i not in members],
                             ATTACH_BATCH_SIZE):
            try:
                self.autoscaling.attach_instances(AutoScalingGroupName=asg_name,
                                                  InstanceIds=batch)
            except (ClientError, BotoCoreError) as exc:
                raise _error("failed AttachInstances call", exc) from exc
        return unique(instance_ids)

    def terminate_unattached(self, asg_name: str, claim: str, instance_ids: Sequence[str]
                             ) -> tuple[list[str], list[str]]:
        """After a failed one-shot scale-up: terminate its instances not in the ASG (those of
        `instance_ids`, and any its claim launched whose answer was lost); (attached,
        terminated). Retry-safe: terminating a terminated instance is no error."""
        candidates = unique([*instance_ids, *self._claimed(claim)])
        members = self._members(asg_name)
        doomed = [i for i in candidates if i not in members]
        self.terminate_fleet_instances(doomed)
        return [i for i in candidates if i in members], doomed

    def terminate_fleet_instances(self, instance_ids: Sequence[str]) -> list[str]:
        """terminateOrphanedInstances: TerminateInstances in batches of 1,000. (Upstream's loop
        re-sends earlier batches with each later one; each id is sent once here.)"""
        for batch in batches(unique(instance_ids), TERMINATE_BATCH_SIZE):
            try:
                self.ec2.terminate_instances(InstanceIds=batch)
            except (ClientError, BotoCoreError) as exc:
                raise _error("failed to terminate instances", exc) from exc
        return unique(instance_ids)

    def tag_node_group(self, asg_name: str) -> None:
        """addASGTags: `k8s.io/atlassian-escalator/enabled=true`, propagated at launch."""
        try:
            self.autoscaling.create_or_update_tags(Tags=[{
                "ResourceId": asg_name, "ResourceType": "auto-scaling-group",
                "Key": ESCALATOR_TAG_KEY, "Value": ESCALATOR_TAG_VALUE,
                "PropagateAtLaunch": True}])
        except (ClientError, BotoCoreError) as exc:
            raise _error(f"failed to create auto scaling tag for ASG {asg_name}", exc) from exc

    # --- reads ------------------------------------------------------------------------------

    def _raw_group(self, name: str, missing_ok: bool = False) -> Mapping[str, Any]:
        try:
            answer = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
        except (ClientError, BotoCoreError) as exc:
            raise _error("failed to describe auto scaling groups", exc) from exc
        groups = answer.get("AutoScalingGroups") or []
        if not groups:
            if missing_ok:
                return {}
            raise CloudError(NO_ASG, retryable=False)
        return groups[0]

    def _members(self, asg_name: str, missing_ok: bool = False) -> frozenset[str]:
        group = self._raw_group(asg_name, missing_ok)
        return frozenset(str(i["InstanceId"]) for i in group.get("Instances") or [])

    def _instances(self, filters: list[Any]) -> list[Mapping[str, Any]]:
        found: list[Mapping[str, Any]] = []
        try:
            for page in self.ec2.get_paginator("describe_instances").paginate(Filters=filters):
                for reservation in page.get("Reservations", []):
                    found.extend(reservation.get("Instances", []))
        except (ClientError, BotoCoreError) as exc:
            raise _error("failed to describe instances", exc) from exc
        return found

    def _claimed(self, claim: str) -> list[str]:
        """The live instances a fleet launched under this claim token."""
        if not claim:
            return []
        return [str(instance["InstanceId"]) for instance in self._instances([
            {"Name": f"tag:{FLEET_CLAIM_TAG}", "Values": [claim]},
            {"Name": "instance-state-name", "Values": list(LIVE_STATES)}])]

    def _all_ready(self, instance_ids: Sequence[str]) -> bool:
        statuses: list[Mapping[str, Any]] = []
        paginator = self.ec2.get_paginator("describe_instance_status")
        try:
            for chunk in batches(unique(instance_ids), STATUS_IDS_PER_CALL):
                for page in paginator.paginate(InstanceIds=chunk, IncludeAllInstances=True):
                    statuses.extend(page.get("InstanceStatuses", []))
        except (ClientError, BotoCoreError):
            return False
        return all_ready(instance_ids, statuses)


__all__ = ["READY_POLL_SECONDS", "FleetCalls", "RealClock", "WaitClock"]
