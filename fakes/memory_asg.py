"""The simulated cloud's Auto Scaling groups and EC2 fleets, as moto keeps them (fast mode).

`MemoryAsg` is one ASG of a `fakes.memory_world.MemoryWorld`. `MemoryCloud` inherits
`MemoryFleet`'s methods, the one-shot scale-up's EC2 Fleet calls; their answers are those of
`tasks.adapters.fleet.FleetCalls` on moto (with `fakes.aws`'s extensions), call for call: an
`instant` fleet starts its instances at once, running, in the first override's subnet (moto's
lowest price, with no prices, is the first), tagged as asked; a repeat of a claim finds its
instances; AttachInstances adds them to the ASG and raises its desired capacity to the
instance count, refusing past MaxSize as moto does (ResourceContention); TerminateInstances
marks them terminated. No status check ever fails here and no time passes in a tick, so the
readiness wait answers at once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kube_elevator.tasks.adapters.fleet_request import (
    ATTACH_BATCH_SIZE,
    ESCALATOR_TAG_KEY,
    ESCALATOR_TAG_VALUE,
    FLEET_CLAIM_TAG,
    LIVE_STATES,
    NO_ASG,
    FleetRequest,
    batches,
    create_fleet_input,
    fleet_instance_ids,
    unique,
)
from kube_elevator.tasks.core.errors import CloudError
from kube_elevator.tasks.core.records import AsgInstance, AutoScalingGroup
from kube_elevator.tasks.escalator.config import NodeGroupConfig


def fleet_template_id(groups: Iterable[NodeGroupConfig], asg_name: str) -> str:
    """The launch template a one-shot node group of this ASG launches its fleets from ("" if
    none): the simulated cloud gives the ASG that template (both simulation modes)."""
    return next((group.aws.launch_template_id for group in groups
                 if group.cloud_provider_group_name == asg_name and group.aws.one_shot), "")


def subnet_of(zone: str) -> str:
    """The simulated default subnet of a zone."""
    return f"subnet-{zone}"


@dataclass
class MemoryAsg:
    """An Auto Scaling Group as moto keeps it: instances in launch order."""

    name: str
    min_size: int
    max_size: int
    desired: int
    instance_type: str
    zones: tuple[str, ...]
    tags: dict[str, str] = field(default_factory=dict)
    instances: list[AsgInstance] = field(default_factory=list)
    # Set for a one-shot group's ASG (`create_asg`): the template its fleets launch from, and
    # the subnets (VPCZoneIdentifier) they launch into, one per zone.
    launch_template_id: str = ""
    subnets: tuple[str, ...] = ()

    def record(self) -> AutoScalingGroup:
        return AutoScalingGroup(self.name, self.min_size, self.max_size, self.desired,
                                tuple(self.instances), instances_known=True,
                                tags=tuple(self.tags.items()))


@dataclass
class FleetInstance:
    instance_id: str
    zone: str
    tags: dict[str, str] = field(default_factory=dict)
    state: str = "running"


class FleetWorld(Protocol):
    """What the fleet calls use of a `MemoryWorld`."""

    lock: threading.RLock
    asgs: dict[str, MemoryAsg]
    fleet_instances: dict[str, FleetInstance]
    terminated_instances: set[str]
    cloud_version: int

    def next_instance_id(self) -> str: ...


class MemoryFleet:
    """`tasks.adapters.ports.CloudActions`' fleet calls on a `MemoryWorld`."""

    world: FleetWorld

    def launch_fleet(self, request: FleetRequest) -> list[str]:
        with self.world.lock:
            already = self._claimed(request.claim)
            if already:
                return already
            asg = self._asg(request.asg_name)
            fleet_input = create_fleet_input(request, ",".join(asg.subnets))
            if request.launch_template_id != asg.launch_template_id:
                raise CloudError(
                    "failed CreateFleet call: An error occurred (InvalidLaunchTemplateId."
                    f"NotFound): The specified launch template, with template ID "
                    f"{request.launch_template_id}, does not exist.", retryable=False)
            subnet = fleet_input["LaunchTemplateConfigs"][0]["Overrides"][0]["SubnetId"]
            zone = next(zone for zone in asg.zones if subnet_of(zone) == subnet)
            tags = {tag["Key"]: tag["Value"] for spec in fleet_input["TagSpecifications"]
                    if spec["ResourceType"] == "instance" for tag in spec["Tags"]}
            ids = []
            for _ in range(request.count):
                instance = FleetInstance(self.world.next_instance_id(), zone, dict(tags))
                self.world.fleet_instances[instance.instance_id] = instance
                ids.append(instance.instance_id)
            return fleet_instance_ids({"Instances": [{"InstanceIds": ids}]})

    def wait_until_ready(self, instance_ids: Sequence[str], timeout_seconds: float) -> bool:
        with self.world.lock:
            fleet = self.world.fleet_instances
            return all(instance_id in fleet and fleet[instance_id].state == "running"
                       for instance_id in instance_ids)

    def attach_instances(self, asg_name: str, instance_ids: Sequence[str]) -> list[str]:
        with self.world.lock:
            asg = self._asg(asg_name)
            members = {instance.instance_id for instance in asg.instances}
            for batch in batches([i for i in unique(instance_ids) if i not in members],
                                 ATTACH_BATCH_SIZE):
                if len(asg.instances) + len(batch) > asg.max_size:
                    raise CloudError(
                        "failed AttachInstances call: An error occurred (ResourceContention) "
                        "when calling the AttachInstances operation: You already have a "
                        "pending update to an Auto Scaling resource (for example, a group, "
                        "instance, or load balancer).", retryable=True)
                for instance_id in batch:
                    instance = self.world.fleet_instances[instance_id]
                    asg.instances.append(AsgInstance(instance_id, instance.zone))
                asg.desired = len(asg.instances)
                self.world.cloud_version += 1
            return unique(instance_ids)

    def terminate_unattached(self, asg_name: str, claim: str, instance_ids: Sequence[str]
                             ) -> tuple[list[str], list[str]]:
        with self.world.lock:
            candidates = unique([*instance_ids, *self._claimed(claim)])
            members = {instance.instance_id for instance in self._asg(asg_name).instances}
            doomed = [i for i in candidates if i not in members]
            self.terminate_fleet_instances(doomed)
            return [i for i in candidates if i in members], doomed

    def terminate_fleet_instances(self, instance_ids: Sequence[str]) -> list[str]:
        """TerminateInstances of fleet instances outside any ASG (the only ones sent)."""
        with self.world.lock:
            for instance_id in unique(instance_ids):
                instance = self.world.fleet_instances.get(instance_id)
                if instance is not None:
                    instance.state = "terminated"
                    self.world.terminated_instances.add(instance_id)
            return unique(instance_ids)

    def tag_node_group(self, asg_name: str) -> None:
        with self.world.lock:
            self._asg(asg_name).tags[ESCALATOR_TAG_KEY] = ESCALATOR_TAG_VALUE
            self.world.cloud_version += 1

    def _asg(self, name: str) -> MemoryAsg:
        asg = self.world.asgs.get(name)
        if asg is None:
            raise CloudError(NO_ASG, retryable=False)
        return asg

    def _claimed(self, claim: str) -> list[str]:
        return [instance.instance_id for instance in self.world.fleet_instances.values()
                if claim and instance.tags.get(FLEET_CLAIM_TAG) == claim
                and instance.state in LIVE_STATES]


__all__ = ["FleetInstance", "MemoryAsg", "MemoryFleet", "fleet_template_id", "subnet_of"]
