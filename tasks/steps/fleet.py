"""The one-shot scale-up's steps (spec §10's fleet path): each one cloud call, safe to retry.

`flows/fleet.py` chains them: launch the fleet, wait for its instances, attach them, or
terminate those left outside the ASG (by a failure, or by a killed tick).
Why a retry cannot act twice is in each adapter method's docstring (`tasks.adapters.fleet`).
"""

from __future__ import annotations

from collections.abc import Sequence

from kube_elevator.tasks.adapters.fleet_request import FleetRequest
from kube_elevator.tasks.adapters.ports import CloudActions
from kube_elevator.tasks.core.step import step
from kube_elevator.tasks.escalator.config import NodeGroupConfig


def fleet_request(group: NodeGroupConfig, count: int, claim: str, now: float) -> FleetRequest:
    """The group's `aws:` options as one fleet of `count`, under the tick's claim token."""
    options = group.aws
    return FleetRequest(
        asg_name=group.cloud_provider_group_name, count=count,
        launch_template_id=options.launch_template_id,
        launch_template_version=options.launch_template_version,
        lifecycle=options.lifecycle,
        instance_type_overrides=tuple(options.instance_type_overrides),
        resource_tagging=options.resource_tagging, claim=claim, requested_at=now)


@step
def launch_fleet(cloud: CloudActions, request: FleetRequest) -> list[str]:
    """CreateFleet (instant) for the delta; a retry finds the fleet its claim launched."""
    return cloud.launch_fleet(request)


@step
def wait_for_instances(cloud: CloudActions, instance_ids: Sequence[str],
                       timeout_seconds: float) -> bool:
    """Until the instances run and no status check failed, at most `fleet_instance_ready_timeout`."""
    return cloud.wait_until_ready(instance_ids, timeout_seconds)


@step
def attach_to_asg(cloud: CloudActions, asg_name: str, instance_ids: Sequence[str]) -> list[str]:
    """AttachInstances in batches of 20; instances already attached are skipped."""
    return cloud.attach_instances(asg_name, instance_ids)


@step
def terminate_unattached(cloud: CloudActions, asg_name: str, claim: str,
                         instance_ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """After a failure: terminate the fleet's instances not in the ASG; (attached, terminated)."""
    return cloud.terminate_unattached(asg_name, claim, instance_ids)


@step
def tag_node_group(cloud: CloudActions, asg_name: str) -> None:
    """Escalator's addASGTags, for a group with `resource_tagging` whose ASG lacks the tag."""
    cloud.tag_node_group(asg_name)
