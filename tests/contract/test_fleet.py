"""The one-shot scale-up's EC2 Fleet calls against a real moto server and real boto3.

Escalator's tests of the calls that reach AWS (aws_test.go, node_group_test.go) are ported
here with their numbers, named after upstream's cases; the rest checks what a retry, a lost
answer or a killed tick leaves. Where moto lacks AWS's behaviour `fakes.aws` extends it (the
spot AllocationStrategy default, ClientToken); nothing of ours is mocked. The readiness wait
runs on a stepped clock: no test waits for real time.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kube_elevator.fakes.aws import FakeAws, fail_next_calls
from kube_elevator.fakes.aws_faults import AwsFaultProxy
from kube_elevator.fakes.memory_world import MemoryCloud, MemoryWorld
from kube_elevator.flows.fleet import one_shot_scale_up, tag_node_groups
from kube_elevator.tasks.adapters.cloud import CLIENT_CONFIG, AsgClient
from kube_elevator.tasks.adapters.fleet_request import NO_ASG, NO_SUBNETS, NOT_ALL_STARTED, FleetRequest
from kube_elevator.tasks.adapters.ports import CloudActions
from kube_elevator.tasks.core.errors import CloudError
from kube_elevator.tasks.core.step import run_plain
from tests.builders import SteppingClock, make_group

NOW = 1_800_000_000.0
ZONES = ("us-east-1a", "us-east-1b")


@pytest.fixture(scope="module")
def aws() -> Iterator[FakeAws]:
    with FakeAws() as fake:
        yield fake


@dataclass
class FleetAsg:
    name: str
    template: str


@pytest.fixture
def fleet_asg(aws: FakeAws) -> Callable[..., FleetAsg]:
    """A one-shot group's ASG in two zones' subnets, its launch template under a new id."""
    def make(desired: int = 1, max_size: int = 200, **options: Any) -> FleetAsg:
        run = uuid.uuid4().hex[:8]
        asg = FleetAsg(f"fleet-{run}", f"lt-{run}")
        aws.create_asg(asg.name, 0, max_size, desired, availability_zones=ZONES,
                       launch_template_id=asg.template, **options)
        return asg
    return make


def client(aws: FakeAws, clock: SteppingClock | None = None,
           endpoint_url: str | None = None) -> AsgClient:
    if endpoint_url is None:
        return AsgClient(aws.client("autoscaling", CLIENT_CONFIG), aws.client("ec2", CLIENT_CONFIG),
                         clock=clock or SteppingClock())
    session: Any = aws.session()
    return AsgClient(session.client("autoscaling", endpoint_url=endpoint_url, config=CLIENT_CONFIG),
                     session.client("ec2", endpoint_url=endpoint_url, config=CLIENT_CONFIG),
                     clock=clock or SteppingClock())


def request(asg: FleetAsg, count: int, **options: Any) -> FleetRequest:
    return FleetRequest(asg_name=asg.name, count=count, launch_template_id=asg.template,
                        launch_template_version="1", claim=uuid.uuid4().hex,
                        requested_at=NOW, **options)


def members(aws: FakeAws, asg: FleetAsg) -> list[str]:
    return [instance["InstanceId"] for instance in aws.instances(asg.name)]


def live_outside(aws: FakeAws, asg: FleetAsg) -> list[str]:
    """Instances a fleet launched for the ASG that still run outside it."""
    answer = aws.client("ec2").describe_instances(Filters=[
        {"Name": "tag:elevator.io/fleet-asg", "Values": [asg.name]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    inside = set(members(aws, asg))
    return [i["InstanceId"] for r in answer["Reservations"] for i in r["Instances"]
            if i["InstanceId"] not in inside]


def fleets(aws: FakeAws, asg: FleetAsg) -> int:
    """CreateFleet calls that launched instances for this ASG (distinct fleets)."""
    answer = aws.client("ec2").describe_instances(Filters=[
        {"Name": "tag:elevator.io/fleet-asg", "Values": [asg.name]}])
    return len({tag["Value"] for r in answer["Reservations"] for i in r["Instances"]
                for tag in i.get("Tags", []) if tag["Key"] == "elevator.io/fleet-claim"})


# --- the fleet ------------------------------------------------------------------------------

@pytest.mark.parametrize("lifecycle", ["", "on-demand", "spot"])
def test_an_instant_fleet_launches_the_delta_in_the_asgs_subnets(
        aws: FakeAws, fleet_asg: Callable[..., FleetAsg], lifecycle: str) -> None:
    """CreateFleet type instant (moto answers Escalator's spot input once extended with AWS's
    default AllocationStrategy): `count` instances, tagged for the group and the claim, in a
    subnet of the ASG, of one of the overrides' types."""
    asg = fleet_asg()
    cloud = client(aws)
    wanted = request(asg, 3, lifecycle=lifecycle, instance_type_overrides=("t3.large",))
    launched = cloud.launch_fleet(wanted)
    assert len(launched) == 3
    described = aws.client("ec2").describe_instances(InstanceIds=launched)
    instances = [i for r in described["Reservations"] for i in r["Instances"]]
    assert {i["InstanceType"] for i in instances} == {"t3.large"}
    assert {i["Placement"]["AvailabilityZone"] for i in instances} <= set(ZONES)
    for instance in instances:
        tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
        assert tags["elevator.io/fleet-asg"] == asg.name
        assert tags["elevator.io/fleet-claim"] == wanted.claim
        assert tags["elevator.io/fleet-requested-at"] == "2027-01-15T08:00:00Z"
    assert members(aws, asg) and not set(launched) & set(members(aws, asg))


def test_a_retried_launch_finds_its_fleet_instead_of_launching_another(
        aws: FakeAws, fleet_asg: Callable[..., FleetAsg]) -> None:
    asg = fleet_asg()
    cloud = client(aws)
    wanted = request(asg, 2)
    first = cloud.launch_fleet(wanted)
    assert sorted(cloud.launch_fleet(wanted)) == sorted(first)
    assert fleets(aws, asg) == 1


def test_a_fleet_whose_answer_was_lost_is_found_by_the_retry(
        aws: FakeAws, fleet_asg: Callable[..., FleetAsg]) -> None:
    """The fleet answer lost (applied, then the connection closed): the retry's lookup by the
    claim finds the instances; no second fleet."""
    asg = fleet_asg()
    with AwsFaultProxy(aws.endpoint_url) as proxy:
        cloud = client(aws, endpoint_url=proxy.url)
        proxy.faults.add("apply_then_drop", operation="CreateFleet")
        wanted = request(asg, 4)
        with pytest.raises(CloudError) as lost:
            cloud.launch_fleet(wanted)
        assert lost.value.retryable
        launched = cloud.launch_fleet(wanted)
        assert len(launched) == 4 and len(proxy.attempts("CreateFleet")) == 1
    assert fleets(aws, asg) == 1


def test_a_repeated_client_token_gets_the_first_fleet(
        aws: FakeAws, fleet_asg: Callable[..., FleetAsg]) -> None:
    """AWS's idempotency for CreateFleet, which `fakes.aws` adds to moto: what a retry relies
    on when DescribeInstances does not show the instances yet (eventual consistency)."""
    from kube_elevator.tasks.adapters.fleet_request import create_fleet_input

    asg = fleet_asg()
    ec2 = aws.client("ec2")
    subnets = ",".join(aws.default_subnets(ZONES))
    fleet_input = create_fleet_input(request(asg, 2), subnets)
    first, again = ec2.create_fleet(**fleet_input), ec2.create_fleet(**fleet_input)
    assert again["FleetId"] == first["FleetId"]
    assert again["Instances"] == first["Instances"]
    assert fleets(aws, asg) == 1


def test_create_template_overrides_failed_call(
        aws: FakeAws, fleet_asg: Callable[..., FleetAsg]) -> None:
    """TestCreateTemplateOverrides_FailedCall: DescribeAutoScalingGroups' error is returned."""
    asg = fleet_asg()
    cloud = client(aws)
    fail_next_calls(cloud.autoscaling, "DescribeAutoScalingGroups", code="AccessDenied",
                    message="call failed")
    with pytest.raises(CloudError, match="call failed"):
        cloud.launch_fleet(request(asg, 1))
    assert fleets(aws, asg) == 0


def test_create_template_overrides_no_asg(aws: FakeAws) -> None:
    """TestCreateTemplateOverrides_NoASG."""
    with pytest.raises(CloudError) as raised:
        client(aws).launch_fleet(request(FleetAsg("no-such-asg", "lt-0"), 1))
    assert raised.value.message == NO_ASG


def test_create_template_overrides_no_subnet_ids(aws: FakeAws) -> None:
    """TestCreateTemplateOverrides_NoSubnetIDs: an ASG placed by zones, without subnets."""
    name = f"zoned-{uuid.uuid4().hex[:8]}"
    aws.create_asg(name, 0, 5, 0)
    with pytest.raises(CloudError) as raised:
        client(aws).launch_fleet(request(FleetAsg(name, "lt-0"), 1))
    assert raised.value.message == NO_SUBNETS


# --- readiness, attach, terminate: attachInstancesToASG -------------------------------------

def test_instances_already_running_are_ready_without_waiting(
        aws: FakeAws, fleet_asg: Callable[..., FleetAsg]) -> None:
    clock = SteppingClock()
    cloud = client(aws, clock)
    launched = cloud.launch_fleet(request(fleet_asg(), 3))
    assert cloud.wait_until_ready(launched, 60.0) and clock.sleeps == []


def test_stopped_instances_time_out_after_polling_every_second(
        aws: FakeAws, fleet_asg: Callable[..., FleetAsg]) -> None:
    clock = SteppingClock()
    cloud = client(aws, clock)
    launched = cloud.launch_fleet(request(fleet_asg(), 2))
    aws.client("ec2").stop_instances(InstanceIds=launched[:1])
    assert not cloud.wait_until_ready(launched, 2.5)
    assert clock.sleeps == [1.0, 1.0, 0.5]


def test_failed_status_checks_are_not_ready(aws: FakeAws,
                                            fleet_asg: Callable[..., FleetAsg]) -> None:
    """Instances that never pass their checks: the proxy rewrites moto's `ok` (moto reports
    every running instance as passing)."""
    asg = fleet_asg()
    with AwsFaultProxy(aws.endpoint_url) as proxy:
        clock = SteppingClock()
        cloud = client(aws, clock, proxy.url)
        launched = cloud.launch_fleet(request(asg, 2))
        rule = proxy.faults.add("rewrite", operation="DescribeInstanceStatus", count=None,
                                find="<status>ok</status>", replace="<status>impaired</status>")
        assert not cloud.wait_until_ready(launched, 3.0)
        assert rule.fired == 4  # at 0, 1, 2 and 3 seconds
        proxy.faults.clear()
        assert cloud.wait_until_ready(launched, 3.0)


def scale_up(aws: FakeAws, asg: FleetAsg, count: int, attach_calls_that_pass: int | None = None,
             stopped: bool = False) -> tuple[Any, AsgClient]:
    """attachInstancesToASG's cases: a fleet of `count`, AttachInstances failing after
    `attach_calls_that_pass` calls (the mock's numMaxCalls), or never ready (2 s timeout, the
    mock's tickerTimeout)."""
    cloud = client(aws)
    wanted = request(asg, count)
    if stopped:
        launched = cloud.launch_fleet(wanted)
        aws.client("ec2").stop_instances(InstanceIds=launched)
    if attach_calls_that_pass is not None:
        fail_next_calls(cloud.autoscaling, "AttachInstances", count=100, code="ValidationError",
                        message="failed the AttachInstances call", after=attach_calls_that_pass)
    return one_shot_scale_up(run_plain, cloud, wanted, 2.0), cloud


@pytest.mark.parametrize(("count", "passing", "stopped", "attached", "terminated"), [
    (123, None, True, 0, 123),
    (70, 0, False, 0, 70),
    (70, 1, False, 20, 50),
    (19, 0, False, 0, 19),
    (19, 1, False, 19, 0),
], ids=["TestAttachInstancesToASG_WithInstanceReadyTimeout_ExpectFailure",
        "TestAttachInstancesToASG_NoSuccessfulBatches_ExpectFailure",
        "TestAttachInstancesToASG_OneSuccessfulBatch_ExpectFailure",
        "TestAttachInstancesToASG_NoBatches_ExpectFailure",
        "TestAttachInstancesToASG_ExpectSuccess"])
def test_attach_instances_to_asg(aws: FakeAws, fleet_asg: Callable[..., FleetAsg], count: int,
                                 passing: int | None, stopped: bool, attached: int,
                                 terminated: int) -> None:
    """Upstream counts the instances its terminate function is given; here they are terminated
    in moto, and the rest are in the ASG."""
    asg = fleet_asg(desired=1)
    outcome, _ = scale_up(aws, asg, count, passing, stopped)
    assert (len(outcome.attached), len(outcome.terminated)) == (attached, terminated)
    assert bool(outcome.error) is bool(terminated)
    if stopped:
        assert outcome.error == NOT_ALL_STARTED
    elif terminated:
        assert "failed the AttachInstances call" in outcome.error
    assert len(members(aws, asg)) == 1 + attached
    states = {aws.instance_state(i) for i in outcome.terminated}
    assert states <= {"shutting-down", "terminated"}
    assert live_outside(aws, asg) == []


def test_a_retried_attach_attaches_each_instance_once(
        aws: FakeAws, fleet_asg: Callable[..., FleetAsg]) -> None:
    """An attach whose second batch failed, retried: the first batch is skipped (moto would
    list an instance attached twice, and count it twice in the desired capacity)."""
    asg = fleet_asg(desired=1)
    cloud = client(aws)
    launched = cloud.launch_fleet(request(asg, 25))
    fail_next_calls(cloud.autoscaling, "AttachInstances", after=1, code="Throttling")
    with pytest.raises(CloudError) as throttled:
        cloud.attach_instances(asg.name, launched)
    assert throttled.value.retryable and len(members(aws, asg)) == 21
    assert sorted(cloud.attach_instances(asg.name, launched)) == sorted(launched)
    assert sorted(members(aws, asg)[1:]) == sorted(launched)
    group = aws.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[asg.name])["AutoScalingGroups"][0]
    assert group["DesiredCapacity"] == 26


def test_terminate_instances_success(aws: FakeAws, fleet_asg: Callable[..., FleetAsg]) -> None:
    """TestTerminateInstances_Success, and a repeat (a retry) is no error."""
    cloud = client(aws)
    [instance] = cloud.launch_fleet(request(fleet_asg(), 1))
    assert cloud.terminate_fleet_instances([instance]) == [instance]
    assert cloud.terminate_fleet_instances([instance]) == [instance]
    assert aws.instance_state(instance) in ("shutting-down", "terminated")


def test_terminate_instances_with_error_response(
        aws: FakeAws, fleet_asg: Callable[..., FleetAsg]) -> None:
    """TestTerminateInstances_WithErrorResponse: upstream logs it; a tick logs it too and
    leaves the instances to a later tick's sweep (the outcome says the clean-up failed)."""
    asg = fleet_asg()
    cloud = client(aws)
    fail_next_calls(cloud.autoscaling, "AttachInstances", code="ValidationError")
    fail_next_calls(cloud.ec2, "TerminateInstances", code="UnauthorizedOperation",
                    message="unauthorized")
    outcome = one_shot_scale_up(run_plain, cloud, request(asg, 2), 2.0)
    assert outcome.error and not outcome.cleaned_up and outcome.terminated == ()
    assert len(live_outside(aws, asg)) == 2


def test_the_clean_up_terminates_a_lost_fleet_by_its_claim(
        aws: FakeAws, fleet_asg: Callable[..., FleetAsg]) -> None:
    """A launch whose answer never came (and no retry: `run_plain`) still has instances: the
    clean-up finds them by the claim tag."""
    asg = fleet_asg()
    with AwsFaultProxy(aws.endpoint_url) as proxy:
        cloud = client(aws, endpoint_url=proxy.url)
        proxy.faults.add("apply_then_drop", operation="CreateFleet")
        outcome = one_shot_scale_up(run_plain, cloud, request(asg, 3), 2.0)
    assert outcome.launched == () and len(outcome.terminated) == 3
    assert live_outside(aws, asg) == []


# --- addASGTags -------------------------------------------------------------------------------

@pytest.mark.parametrize(("tagging", "tags", "created"), [
    (False, {}, False), (True, {}, True),
    (True, {"k8s.io/atlassian-escalator/enabled": "false"}, False),
], ids=["TestAddASGTags_ResourceTaggingFalse", "TestAddASGTags_ResourceTaggingTrue",
        "TestAddASGTags_ASGAlreadyTagged"])
def test_add_asg_tags(aws: FakeAws, fleet_asg: Callable[..., FleetAsg], tagging: bool,
                      tags: dict[str, str], created: bool) -> None:
    asg = fleet_asg(tags=tags)
    cloud = client(aws)
    group = make_group(cloud_provider_group_name=asg.name, aws={"resource_tagging": tagging})
    tag_node_groups(run_plain, cloud, [group], cloud.describe([asg.name]))
    described = cloud.describe([asg.name])[asg.name]
    want = "true" if created else tags.get("k8s.io/atlassian-escalator/enabled")
    assert dict(described.tags).get("k8s.io/atlassian-escalator/enabled") == want
    if created:
        raw = aws.client("autoscaling").describe_tags(Filters=[
            {"Name": "auto-scaling-group", "Values": [asg.name]}])["Tags"]
        assert [t["PropagateAtLaunch"] for t in raw] == [True]


def test_add_asg_tags_with_error_response(aws: FakeAws,
                                          fleet_asg: Callable[..., FleetAsg]) -> None:
    """TestAddASGTags_WithErrorResponse: only logged."""
    asg = fleet_asg()
    cloud = client(aws)
    fail_next_calls(cloud.autoscaling, "CreateOrUpdateTags", code="AccessDenied",
                    message="unauthorized")
    group = make_group(cloud_provider_group_name=asg.name, aws={"resource_tagging": True})
    tag_node_groups(run_plain, cloud, [group], cloud.describe([asg.name]))
    assert cloud.describe([asg.name])[asg.name].tags == ()


# --- the in-memory cloud answers as moto does ------------------------------------------------------

def _fleet_calls(cloud: CloudActions, asg: str, template: str) -> list[object]:
    answers: list[object] = []
    wanted = FleetRequest(asg, 22, template, "1", claim="c-1", requested_at=NOW)
    launched = cloud.launch_fleet(wanted)
    answers += [len(launched), sorted(cloud.launch_fleet(wanted)) == sorted(launched)]
    answers.append(cloud.wait_until_ready(launched, 0.0))
    answers.append(len(cloud.attach_instances(asg, launched[:21])))
    group = cloud.describe([asg])[asg]
    answers += [group.desired_capacity, len(group.instances)]
    # The claim finds the fleet's instances besides those named; a retry terminates nothing new.
    attached, terminated = cloud.terminate_unattached(asg, "c-1", launched[:3])
    answers += [len(attached), terminated == [launched[21]]]
    attached, terminated = cloud.terminate_unattached(asg, "c-1", launched)
    answers += [len(attached), terminated == [launched[21]]]
    answers.append(cloud.wait_until_ready(launched, 0.0))
    more = cloud.launch_fleet(FleetRequest(asg, 3, template, "1", claim="c-2"))
    try:
        cloud.attach_instances(asg, more)
    except CloudError as error:
        answers.append((error.retryable, "ResourceContention" in error.message))
    for broken in (FleetRequest("no-such-asg", 1, template), FleetRequest(asg, 1, "lt-other")):
        try:
            cloud.launch_fleet(broken)
        except CloudError as error:
            answers.append(error.message.split(":")[0])
    cloud.tag_node_group(asg)
    answers.append(dict(cloud.describe([asg])[asg].tags))
    return answers


def test_the_memory_cloud_answers_fleet_calls_as_moto(aws: FakeAws) -> None:
    """AsgClient on moto and MemoryCloud, call for call: the simulator's two modes agree."""
    name, template = f"parity-{uuid.uuid4().hex[:8]}", f"lt-{uuid.uuid4().hex[:8]}"
    aws.create_asg(name, 0, 24, 2, availability_zones=ZONES, launch_template_id=template)
    world = MemoryWorld()
    world.create_asg(name, 0, 24, 2, availability_zones=ZONES, launch_template_id=template)
    expected = [22, True, True, 21, 23, 23, 21, True, 21, True, False,
                (True, True), "failed to get an ASG from DescribeAutoscalingGroups response",
                "failed CreateFleet call", {"k8s.io/atlassian-escalator/enabled": "true"}]
    assert _fleet_calls(MemoryCloud(world), name, template) == expected
    assert _fleet_calls(client(aws), name, template) == expected
