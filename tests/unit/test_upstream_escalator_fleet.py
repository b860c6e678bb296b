"""Escalator's tests of its one-shot scale-up (pkg/cloudprovider/aws/aws_test.go and
node_group_test.go, master), ported where they test a pure part: the fleet input, the overrides,
the one-shot decision, the fleet answer, the batches. Ids are `<upstream test>:<case>`.

Upstream asserts only "no error" for its fleet inputs; the port checks the whole input, built
from upstream's fixtures (setupAWSMocks: ASG subnets `subnetID-1,subnetID-2`, launch template
`lt-123456` version `1`, overrides `instance-1`, `instance-2`). The cases that call AWS run
against moto in tests/contract/test_fleet.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.adapters.fleet_request import (
    ATTACH_BATCH_SIZE,
    NO_INSTANCES,
    NO_SUBNETS,
    TERMINATE_BATCH_SIZE,
    FleetRequest,
    all_ready,
    batches,
    create_fleet_input,
    fleet_instance_ids,
    instance_ready,
    template_overrides,
)
from kube_elevator.tasks.core.errors import CloudError
from kube_elevator.tasks.core.lease_state import (
    CLAIM_SETTLE_SECONDS,
    GroupState,
    ScaleLock,
    state_from_annotations,
    state_to_annotations,
)
from kube_elevator.tasks.escalator.config import AwsOptions, NodeGroupConfig

SUBNETS = "subnetID-1,subnetID-2"  # aws_test.go mockASG.VPCZoneIdentifier
TYPES = ("instance-1", "instance-2")  # mockAWSConfig.InstanceTypeOverrides


def mock_request(lifecycle: str = "on-demand", count: int = 2, tagging: bool = False,
                 types: tuple[str, ...] = TYPES) -> FleetRequest:
    """aws_test.go setupAWSMocks' node group, asking for `count` (addCount 2 upstream)."""
    return FleetRequest(asg_name="asg-1", count=count, launch_template_id="lt-123456",
                        launch_template_version="1", lifecycle=lifecycle,
                        instance_type_overrides=types, resource_tagging=tagging,
                        claim="claim-1", requested_at=1_800_000_000.0)


OVERRIDES = [{"SubnetId": "subnetID-1", "InstanceType": "instance-1"},
             {"SubnetId": "subnetID-1", "InstanceType": "instance-2"},
             {"SubnetId": "subnetID-2", "InstanceType": "instance-1"},
             {"SubnetId": "subnetID-2", "InstanceType": "instance-2"}]
OUR_INSTANCE_TAGS = {"ResourceType": "instance", "Tags": [
    {"Key": "elevator.io/fleet-asg", "Value": "asg-1"},
    {"Key": "elevator.io/fleet-claim", "Value": "claim-1"},
    {"Key": "elevator.io/fleet-requested-at", "Value": "2027-01-15T08:00:00Z"}]}


@pytest.mark.parametrize(("lifecycle", "capacity_type", "options_key"), [
    ("", "on-demand", "OnDemandOptions"),
    ("on-demand", "on-demand", "OnDemandOptions"),
    ("spot", "spot", "SpotOptions"),
], ids=["TestCreateFleetInput:empty", "TestCreateFleetInput:on-demand",
        "TestCreateFleetInput:spot"])
def test_create_fleet_input(lifecycle: str, capacity_type: str, options_key: str) -> None:
    assert create_fleet_input(mock_request(lifecycle), SUBNETS) == {
        "Type": "instant",
        "TerminateInstancesWithExpiration": False,
        "TargetCapacitySpecification": {"TotalTargetCapacity": 2,
                                        "DefaultTargetCapacityType": capacity_type},
        "LaunchTemplateConfigs": [{
            "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-123456", "Version": "1"},
            "Overrides": OVERRIDES}],
        options_key: {"MinTargetCapacity": 2, "SingleInstanceType": True},
        "TagSpecifications": [OUR_INSTANCE_TAGS],
        "ClientToken": "claim-1",
    }


def test_create_fleet_input_with_resource_tagging() -> None:
    """TestCreateFleetInput_WithResourceTagging: the fleet carries Escalator's tag."""
    fleet_input = create_fleet_input(mock_request(tagging=True), SUBNETS)
    assert fleet_input["TagSpecifications"] == [
        {"ResourceType": "fleet", "Tags": [{"Key": "k8s.io/atlassian-escalator/enabled",
                                            "Value": "true"}]},
        OUR_INSTANCE_TAGS]


def test_create_template_overrides_success() -> None:
    """TestCreateTemplateOverrides_Success: subnets × instance types, subnet-major."""
    assert template_overrides(SUBNETS, TYPES) == OVERRIDES


def test_create_template_overrides_no_instance_type_overrides_success() -> None:
    """TestCreateTemplateOverrides_NoInstanceTypeOverrides_Success: one override a subnet,
    the instance type left to the launch template."""
    assert template_overrides(SUBNETS, ()) == [{"SubnetId": "subnetID-1"},
                                               {"SubnetId": "subnetID-2"}]


def test_create_template_overrides_no_subnet_ids() -> None:
    """TestCreateTemplateOverrides_NoSubnetIDs: an ASG without VPCZoneIdentifier."""
    with pytest.raises(CloudError) as raised:
        template_overrides("", TYPES)
    assert raised.value.message == NO_SUBNETS == (
        "failed to get any subnetIDs from DescribeAutoscalingGroups response")
    assert not raised.value.retryable


@pytest.mark.parametrize(("launch_template_id", "one_shot"), [
    ("lt-123456", True), ("", False)],
    ids=["canScaleInOneShot:launch template", "canScaleInOneShot:none"])
def test_can_scale_in_one_shot(launch_template_id: str, one_shot: bool) -> None:
    """node_group.go canScaleInOneShot: a launch template id means the fleet path."""
    assert AwsOptions(launch_template_id=launch_template_id).one_shot is one_shot


INSTANCE = [{"InstanceIds": ["instanceID"]}]
ERROR = [{"ErrorCode": "error code", "ErrorMessage": "error message"}]


@pytest.mark.parametrize(("answer", "want"), [
    ({"FleetId": "fleet-1234", "Instances": INSTANCE}, ["instanceID"]),
    ({"FleetId": "fleet-1234", "Instances": INSTANCE, "Errors": ERROR}, ["instanceID"]),
    ({"FleetId": "fleet-1234", "Instances": [], "Errors": ERROR}, "error message"),
    ({"FleetId": "fleet-1234", "Instances": [{"InstanceIds": ["instanceID"] * 21}]},
     ["instanceID"] * 21),
], ids=["TestNodeGroup_IncreaseSize_CreateFleet:normal increase",
        "TestNodeGroup_IncreaseSize_CreateFleet:normal increase with error",
        "TestNodeGroup_IncreaseSize_CreateFleet:no instances error",
        "TestNodeGroup_IncreaseSize_CreateFleet:multiple AttachInstances batches"])
def test_node_group_increase_size_create_fleet(answer: dict[str, Any],
                                               want: list[str] | str) -> None:
    """The fleet answer, as setASGDesiredSizeOneShot reads it: instances are taken whole even
    beside errors; no instance and an error fail with the first error's message."""
    if isinstance(want, str):
        with pytest.raises(CloudError) as raised:
            fleet_instance_ids(answer)
        assert raised.value.message == want
    else:
        assert fleet_instance_ids(answer) == want


def test_an_answer_with_neither_instances_nor_errors_fails() -> None:
    """Upstream would go on with no instance (and ask the status of every instance of the
    account); here that is an error of its own."""
    with pytest.raises(CloudError, match=NO_INSTANCES):
        fleet_instance_ids({"FleetId": "fleet-1", "Instances": [], "Errors": []})


@pytest.mark.parametrize(("count", "sizes"), [
    (19, [19]), (20, [20]), (21, [20, 1]), (70, [20, 20, 20, 10]), (123, [20] * 6 + [3]),
], ids=["batchSize-1", "batchSize", "batchSize+1", "batchSize+terminateSize", "123"])
def test_attach_instances_to_asg_batches(count: int, sizes: list[int]) -> None:
    """attachInstancesToASG: while more than 20 remain the first 20, then the rest, in order."""
    ids = [f"i-{n}" for n in range(count)]
    sent = batches(ids, ATTACH_BATCH_SIZE)
    assert [len(batch) for batch in sent] == sizes
    assert [i for batch in sent for i in batch] == ids


def test_terminate_orphaned_instances_batches() -> None:
    """terminateOrphanedInstances: batches of 1,000, each instance sent once (upstream's loop
    keeps appending, re-sending earlier batches with later ones)."""
    ids = [f"i-{n}" for n in range(2_345)]
    assert [len(batch) for batch in batches(ids, TERMINATE_BATCH_SIZE)] == [1000, 1000, 345]


def status(instance_id: str, state: str = "running", instance_check: str = "ok",
           system_check: str = "ok") -> dict[str, Any]:
    return {"InstanceId": instance_id, "InstanceState": {"Name": state},
            "InstanceStatus": {"Status": instance_check}, "SystemStatus": {"Status": system_check}}


@pytest.mark.parametrize(("entry", "ready"), [
    (status("i-1"), True),
    (status("i-1", instance_check="initializing", system_check="initializing"), True),
    (status("i-1", "pending", "not-applicable", "not-applicable"), False),
    (status("i-1", instance_check="impaired"), False),
    (status("i-1", system_check="impaired"), False),
    (status("i-1", "stopped", "not-applicable", "not-applicable"), False),
], ids=["running ok", "running, checks initializing", "pending", "instance check failed",
        "system check failed", "stopped"])
def test_instance_ready(entry: dict[str, Any], ready: bool) -> None:
    """allInstancesReady (running), and no failed status check besides."""
    assert instance_ready(entry) is ready


def test_all_ready_needs_every_instance_listed() -> None:
    assert all_ready(["i-1", "i-2"], [status("i-1"), status("i-2")])
    assert not all_ready(["i-1", "i-2"], [status("i-1")])  # not listed yet
    assert all_ready([], [])


def test_a_fleet_groups_settle_time_is_the_claims_and_the_ready_timeouts() -> None:
    group = NodeGroupConfig(aws=AwsOptions(launch_template_id="lt-1"))
    assert group.claim_settle_seconds == CLAIM_SETTLE_SECONDS + 60
    assert NodeGroupConfig().claim_settle_seconds == CLAIM_SETTLE_SECONDS


@pytest.mark.parametrize(("timeout", "seconds"), [
    ("1m", 60.0), ("", 60.0), ("2s", 2.0), ("soon", 0.0), ("-5s", 0.0)])
def test_fleet_instance_ready_timeout(timeout: str, seconds: float) -> None:
    """Spec §3.1: default 1m when empty; unparsable is 0."""
    assert AwsOptions(fleet_instance_ready_timeout=timeout).fleet_instance_ready_seconds == \
        seconds


# --- what the Lease keeps of a one-shot group (not upstream's: Escalator keeps it in memory) ---

def test_a_fleets_claim_and_failures_round_trip_through_the_lease() -> None:
    """Absent when unset, so the Leases of groups without a fleet are written as before."""
    state = GroupState(fleet_claim="c0ffee", fleet_terminate_tries=2)
    annotations = state_to_annotations(state)
    assert annotations["elevator.io/fleet-claim"] == "c0ffee"
    assert annotations["elevator.io/fleet-terminate-tries"] == "2"
    assert state_from_annotations(annotations) == state
    plain = state_to_annotations(GroupState())
    assert not {"elevator.io/fleet-claim", "elevator.io/fleet-terminate-tries"} & set(plain)
    with pytest.raises(ValueError, match="fleet-terminate-tries"):
        state_from_annotations({"elevator.io/fleet-terminate-tries": "three"})


@pytest.mark.parametrize(("one_shot", "age", "released"), [
    (False, 30, True), (True, 30, False), (True, 89, False), (True, 90, True)],
    ids=["SetDesiredCapacity: 30 s", "fleet: 30 s", "fleet: 89 s", "fleet: 90 s"])
def test_a_fleets_claim_settles_after_the_ready_timeout_too(one_shot: bool, age: float,
                                                            released: bool) -> None:
    """A claimed increase the ASG does not show is released after 30 s; a fleet's tick may
    first wait for its instances (1m by default), so its claim settles 90 s after."""
    from tests.builders import make_asg, make_node, make_pod
    from tests.unit.test_decide import NOW as DECIDE_NOW
    from tests.unit.test_decide import tick

    nodes = [make_node("n1", created=1), make_node("n2", created=2)]
    pods = [make_pod(f"p{i}", cpu=1000) for i in range(3)]
    claimed = GroupState(lock=ScaleLock(True, 3, DECIDE_NOW - age, desired_before=2,
                                        desired_target=5))
    options = {"aws": {"launch_template_id": "lt-1"}} if one_shot else {}
    plan = tick(nodes, pods, state=claimed, asg=make_asg(2), scale_up_cool_down_period="10m",
                **options)
    assert plan.lock_held_at_check is not released
