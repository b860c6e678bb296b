"""Escalator's one-shot scale-up, decided: the CreateFleet input, the answer read, the batches
of AttachInstances and TerminateInstances, and what counts as ready or orphaned.

Pure functions after `pkg/cloudprovider/aws/aws.go` (createFleetInput, createTemplateOverrides,
setASGDesiredSizeOneShot, attachInstancesToASG, allInstancesReady, terminateOrphanedInstances;
spec/escalator.md §10), shared by the boto3 adapter (`tasks.adapters.fleet`) and the simulator's
in-memory cloud, so both build and read the same requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube_elevator.tasks.core.errors import CloudError
from kube_elevator.tasks.core.lease_state import format_time

LIFECYCLE_ON_DEMAND = "on-demand"
LIFECYCLE_SPOT = "spot"
ATTACH_BATCH_SIZE = 20  # aws.go batchSize: AttachInstances takes at most 20 instances
TERMINATE_BATCH_SIZE = 1000  # aws.go terminateBatchSize: TerminateInstances' limit
MAX_TERMINATE_INSTANCES_TRIES = 3  # aws.go maxTerminateInstancesTries
STATUS_IDS_PER_CALL = 100  # DescribeInstanceStatus takes at most 100 explicit instance ids

# aws.go tagKey/tagValue: on the ASG (addASGTags) and the fleet, with `resource_tagging`.
ESCALATOR_TAG_KEY = "k8s.io/atlassian-escalator/enabled"
ESCALATOR_TAG_VALUE = "true"
# Ours, on every instance a fleet launches (not Escalator's): the group it is for, the claim
# token of the tick that launched it, and when. A retry, or a later tick after a killed one,
# finds the fleet's instances by the claim (the group's Lease keeps it: `flows/fleet.py`); the
# other two say to an operator, and to the IAM policy, whose instances these are.
FLEET_ASG_TAG = "elevator.io/fleet-asg"
FLEET_CLAIM_TAG = "elevator.io/fleet-claim"
FLEET_REQUESTED_AT_TAG = "elevator.io/fleet-requested-at"
# EC2 states of an instance that still runs or could: a fleet's leftover must go.
LIVE_STATES = ("pending", "running", "stopping", "stopped")

# Escalator's messages, verbatim.
NO_ASG = "failed to get an ASG from DescribeAutoscalingGroups response"
NO_SUBNETS = "failed to get any subnetIDs from DescribeAutoscalingGroups response"
NOT_ALL_STARTED = "not all instances could be started"
TOO_MANY_FAILURES = ("reached maximum number of consecutive failures (3) for provisioning "
                     "nodes with CreateFleet")
NO_INSTANCES = "CreateFleet returned no instances and no error"  # ours: upstream goes on


@dataclass(frozen=True)
class FleetRequest:
    """One one-shot scale-up: `count` instances for `asg_name` from the group's `aws:` options.

    `claim` is the tick's Lease claim token: the CreateFleet ClientToken (AWS answers a repeat
    with the first fleet) and a tag on the instances; `requested_at` is the tick's clock.

    Example:
        >>> request = ke.FleetRequest("batch-asg", count=3, launch_template_id="lt-0abc")
        >>> request.count, request.launch_template_version
        (3, '')
    """

    asg_name: str
    count: int
    launch_template_id: str
    launch_template_version: str = ""
    lifecycle: str = ""
    instance_type_overrides: tuple[str, ...] = ()
    resource_tagging: bool = False
    claim: str = ""
    requested_at: float = 0.0

    @property
    def effective_lifecycle(self) -> str:
        """aws.go: an empty lifecycle is on-demand."""
        return self.lifecycle or LIFECYCLE_ON_DEMAND


def template_overrides(vpc_zone_identifier: str,
                       instance_types: Sequence[str]) -> list[dict[str, str]]:
    """createTemplateOverrides: every ASG subnet × every instance type, subnet-major (or one
    override per subnet without instance types). The subnets are the ASG's VPCZoneIdentifier."""
    if not vpc_zone_identifier:
        raise CloudError(NO_SUBNETS, retryable=False)
    subnet_ids = vpc_zone_identifier.split(",")
    if not instance_types:
        return [{"SubnetId": subnet} for subnet in subnet_ids]
    return [{"SubnetId": subnet, "InstanceType": instance_type}
            for subnet in subnet_ids for instance_type in instance_types]


def instance_tags(request: FleetRequest) -> list[dict[str, str]]:
    return [{"Key": FLEET_ASG_TAG, "Value": request.asg_name},
            {"Key": FLEET_CLAIM_TAG, "Value": request.claim},
            {"Key": FLEET_REQUESTED_AT_TAG, "Value": format_time(request.requested_at)}]


def create_fleet_input(request: FleetRequest, vpc_zone_identifier: str) -> dict[str, Any]:
    """createFleetInput, as boto3's `create_fleet` keywords: an `instant` fleet of `count`, the
    lifecycle as the default capacity type, all or nothing (MinTargetCapacity = count) of one
    instance type, the fleet tagged with `resource_tagging`. Ours on top: the ClientToken and
    the instances' tags (`instance_tags`)."""
    lifecycle = request.effective_lifecycle
    options = {"MinTargetCapacity": request.count, "SingleInstanceType": True}
    tag_specifications: list[dict[str, Any]] = [
        {"ResourceType": "instance", "Tags": instance_tags(request)}]
    if request.resource_tagging:
        tag_specifications.insert(0, {"ResourceType": "fleet", "Tags": [
            {"Key": ESCALATOR_TAG_KEY, "Value": ESCALATOR_TAG_VALUE}]})
    return {
        "Type": "instant",
        "TerminateInstancesWithExpiration": False,
        "TargetCapacitySpecification": {"TotalTargetCapacity": request.count,
                                        "DefaultTargetCapacityType": lifecycle},
        "LaunchTemplateConfigs": [{
            "LaunchTemplateSpecification": {
                "LaunchTemplateId": request.launch_template_id,
                "Version": request.launch_template_version},
            "Overrides": template_overrides(vpc_zone_identifier,
                                            request.instance_type_overrides)}],
        ("OnDemandOptions" if lifecycle == LIFECYCLE_ON_DEMAND else "SpotOptions"): options,
        "TagSpecifications": tag_specifications,
        **({"ClientToken": request.claim} if request.claim else {}),
    }


def fleet_instance_ids(answer: Mapping[str, Any]) -> list[str]:
    """setASGDesiredSizeOneShot on CreateFleet's answer: its instances, taken whole even when it
    also carries errors (MinTargetCapacity is the whole request: any instance means all came);
    no instance and an error is the first error's message."""
    instances = answer.get("Instances") or []
    errors = answer.get("Errors") or []
    if not instances and errors:
        raise CloudError(str(errors[0].get("ErrorMessage", "")), retryable=False)
    ids = [instance_id for instance in instances
           for instance_id in instance.get("InstanceIds") or []]
    if not ids:
        raise CloudError(NO_INSTANCES, retryable=False)
    return ids


def batches(ids: Sequence[str], size: int) -> list[list[str]]:
    """attachInstancesToASG's loop (while more than `size` remain, the first `size`; then the
    rest) and terminateOrphanedInstances' (consecutive slices): the same chunks, in order."""
    return [list(ids[start:start + size]) for start in range(0, len(ids), size)]


def _status(value: Mapping[str, Any] | None) -> str:
    return str((value or {}).get("Status", ""))


def instance_ready(status: Mapping[str, Any]) -> bool:
    """allInstancesReady, for one DescribeInstanceStatus entry: the instance is `running`, and
    neither its instance nor its system check has failed (`impaired`).

    Escalator waits for `running` only. A check still `initializing` does not hold the attach
    back: EC2's checks take minutes to pass, longer than the default 1m timeout, and
    AttachInstances needs a running instance only; a failed check does.
    """
    return (str((status.get("InstanceState") or {}).get("Name", "")) == "running"
            and _status(status.get("InstanceStatus")) != "impaired"
            and _status(status.get("SystemStatus")) != "impaired")


def all_ready(instance_ids: Iterable[str], statuses: Iterable[Mapping[str, Any]]) -> bool:
    """Every instance has a status and it is ready (one not listed yet is not ready)."""
    ready = {str(status.get("InstanceId", "")) for status in statuses if instance_ready(status)}
    return all(instance_id in ready for instance_id in instance_ids)


def unique(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ids))


__all__ = [
    "ATTACH_BATCH_SIZE", "ESCALATOR_TAG_KEY", "ESCALATOR_TAG_VALUE", "FLEET_ASG_TAG",
    "FLEET_CLAIM_TAG", "FLEET_REQUESTED_AT_TAG", "LIVE_STATES", "MAX_TERMINATE_INSTANCES_TRIES",
    "NOT_ALL_STARTED", "TERMINATE_BATCH_SIZE", "TOO_MANY_FAILURES", "FleetRequest", "all_ready",
    "batches", "create_fleet_input", "fleet_instance_ids", "instance_ready",
    "template_overrides", "unique",
]
