"""The ASG adapter against a real moto server and real boto3 (nothing of ours is mocked)."""

from __future__ import annotations

import socket
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from kube_elevator.fakes.aws import FakeAws, fail_next_calls
from kube_elevator.tasks.adapters.cloud import (
    CLIENT_CONFIG,
    EMPTY_PROVIDER_ID,
    MIN_SIZE_REACHED,
    WOULD_BREACH_MIN_SIZE,
    AsgClient,
    instance_id_from_provider_id,
)
from kube_elevator.tasks.core.errors import CloudError
from kube_elevator.tasks.core.records import AutoScalingGroup, NodeRecord
from kube_elevator.tasks.core.retry import is_retryable

SET_DESIRED = "SetDesiredCapacity"
TERMINATE = "TerminateInstanceInAutoScalingGroup"
DESCRIBE = "DescribeAutoScalingGroups"


@pytest.fixture(scope="module")
def aws() -> Iterator[FakeAws]:
    with FakeAws() as fake:
        yield fake


@pytest.fixture
def name() -> Callable[[str], str]:
    """Unique ASG names: moto's state is shared by every test in the process."""
    run = uuid.uuid4().hex[:8]
    return lambda label: f"{label}-{run}"


@pytest.fixture
def cloud(aws: FakeAws) -> AsgClient:
    """A fresh adapter per test, so event hooks on its clients do not leak between tests."""
    return AsgClient(aws.client("autoscaling", CLIENT_CONFIG), aws.client("ec2", CLIENT_CONFIG))


def count_calls(client: Any, operation: str) -> list[dict[str, Any]]:
    """Parameters of every `operation` call the client makes from now on."""
    calls: list[dict[str, Any]] = []
    service = client.meta.service_model.service_id.hyphenize()

    def record(params: dict[str, Any], **kwargs: Any) -> None:
        calls.append(dict(params))

    client.meta.events.register(f"before-parameter-build.{service}.{operation}", record)
    return calls


def node(provider_id: str, name: str = "") -> NodeRecord:
    return NodeRecord(
        name=name or f"node-{provider_id.rsplit('/', 1)[-1]}",
        labels={},
        created_unix_seconds=0.0,
        cpu_allocatable_milli=2000,
        memory_allocatable_bytes=8 * 2**30,
        provider_id=provider_id,
    )


def nodes_of(cloud: AsgClient, asg: str) -> list[NodeRecord]:
    """One node per ASG instance, with the providerID a kubelet on AWS would report."""
    return [node(instance.provider_id) for instance in cloud.group(asg).instances]


# --- providerID --------------------------------------------------------------------------


def test_instance_id_is_the_fifth_slash_separated_field() -> None:
    assert instance_id_from_provider_id("aws:///us-east-1a/i-0123456789abcdef0") == (
        "i-0123456789abcdef0"
    )
    assert instance_id_from_provider_id("aws:///us-east-1a/i-1/extra") == "i-1"


def test_empty_provider_id_is_escalators_error() -> None:
    with pytest.raises(CloudError) as raised:
        instance_id_from_provider_id("")
    assert str(raised.value) == EMPTY_PROVIDER_ID
    assert raised.value.retryable is False


@pytest.mark.parametrize("provider_id", ["aws:///i-1", "i-1", "aws://us-east-1a/i-1"])
def test_malformed_provider_id_is_escalators_error(provider_id: str) -> None:
    with pytest.raises(CloudError) as raised:
        instance_id_from_provider_id(provider_id)
    assert str(raised.value) == f"malformed providerID {provider_id}: expected at least 4 slashes"
    assert raised.value.retryable is False


# --- describe ----------------------------------------------------------------------------


def test_describe_reads_groups_and_leaves_out_unknown_names(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("a"), 1, 5, 2, availability_zones=("us-east-1a", "us-east-1b"))
    aws.create_asg(name("b"), 0, 3, 0)

    groups = cloud.describe([name("a"), name("missing"), name("b")])

    assert list(groups) == [name("a"), name("b")]
    a = groups[name("a")]
    assert (a.min_size, a.max_size, a.desired_capacity) == (1, 5, 2)
    expected = {
        f"aws:///{i['AvailabilityZone']}/{i['InstanceId']}" for i in aws.instances(name("a"))
    }
    assert a.provider_ids() == expected and len(expected) == 2
    assert groups[name("b")] == AutoScalingGroup(name("b"), 0, 3, 0, (), instances_known=True)


def test_describe_pages_and_splits_names(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    names = [name(f"paged{i}") for i in range(7)]
    for asg in names:
        aws.create_asg(asg, 0, 2, 0)
    small = AsgClient(cloud.autoscaling, cloud.ec2, names_per_call=3, page_size=2)
    calls = count_calls(cloud.autoscaling, DESCRIBE)

    groups = small.describe([*names, name("missing"), names[0]])

    assert list(groups) == names
    # 8 distinct names in requests of 3, 3, 2 names; pages of 2 groups: 2 + 2 + 1 calls.
    assert [len(call["AutoScalingGroupNames"]) for call in calls] == [3, 3, 3, 3, 2]
    assert {call["MaxRecords"] for call in calls} == {2}


def test_describe_sends_at_most_fifty_names_per_request(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    names = [name(f"many{i}") for i in range(55)]
    for asg in names:
        aws.create_asg(asg, 0, 1, 0)
    calls = count_calls(cloud.autoscaling, DESCRIBE)

    assert list(cloud.describe(names)) == names
    assert [len(call["AutoScalingGroupNames"]) for call in calls] == [50, 5]


def test_describe_throttled_is_a_retryable_cloud_error(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("t"), 0, 1, 0)
    fail_next_calls(cloud.autoscaling, DESCRIBE)
    with pytest.raises(CloudError) as raised:
        cloud.describe([name("t")])
    assert raised.value.retryable is True
    assert "Throttling" in str(raised.value)
    assert list(cloud.describe([name("t")])) == [name("t")]


def test_unknown_group_is_not_retryable(cloud: AsgClient, name: Callable[[str], str]) -> None:
    with pytest.raises(CloudError) as raised:
        cloud.group(name("nowhere"))
    assert raised.value.retryable is False


# --- set desired capacity ----------------------------------------------------------------


def test_set_desired_clamps_to_max_size(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("up"), 1, 4, 2)
    calls = count_calls(cloud.autoscaling, SET_DESIRED)

    assert cloud.set_desired_capacity(cloud.group(name("up")), 10) == 4

    assert cloud.group(name("up")).desired_capacity == 4
    assert calls == [
        {"AutoScalingGroupName": name("up"), "DesiredCapacity": 4, "HonorCooldown": False}
    ]


def test_set_desired_clamps_to_min_size(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("down"), 0, 4, 0)
    aws.client("autoscaling").update_auto_scaling_group(AutoScalingGroupName=name("down"),
                                                        MinSize=2)
    assert cloud.set_desired_capacity(cloud.group(name("down")), 1) == 2
    assert cloud.group(name("down")).desired_capacity == 2


def test_an_increase_never_lowers_the_group(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    """A late retry of an increase that a later tick's increase overtook (its retries outlived
    the claim's settle time) must not set the group back to the older, smaller target."""
    aws.create_asg(name("ahead"), 0, 10, 3)
    stale = cloud.group(name("ahead"))
    aws.client("autoscaling").set_desired_capacity(AutoScalingGroupName=name("ahead"),
                                                   DesiredCapacity=6)
    calls = count_calls(cloud.autoscaling, SET_DESIRED)
    assert cloud.set_desired_capacity(stale, 5) == 6
    assert calls == [] and cloud.group(name("ahead")).desired_capacity == 6


def test_launch_times_are_ec2s_for_the_instances_it_knows(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    """The registration lag's other end: EC2's LaunchTime by the node's providerID; an unknown
    instance or a providerID that names none is left out, not an error."""
    aws.create_asg(name("launched"), 0, 3, 2)
    members = [node.provider_id for node in nodes_of(cloud, name("launched"))]
    described = aws.client("ec2").describe_instances(
        InstanceIds=[provider_id.rsplit("/", 1)[1] for provider_id in members])
    expected = {f"aws:///{instance['Placement']['AvailabilityZone']}/{instance['InstanceId']}":
                instance["LaunchTime"].timestamp()
                for reservation in described["Reservations"]
                for instance in reservation["Instances"]}
    asked = [*members, "aws:///us-east-1a/i-0123456789abcdef0", "gce://project/zone/vm", ""]
    assert cloud.launch_times(asked) == expected and len(expected) == 2
    assert cloud.launch_times([]) == {}


def test_set_desired_clamps_against_a_fresh_description(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("stale"), 0, 4, 1)
    stale = cloud.group(name("stale"))
    aws.client("autoscaling").update_auto_scaling_group(
        AutoScalingGroupName=name("stale"), MaxSize=2
    )
    assert cloud.set_desired_capacity(stale, 4) == 2


def test_set_desired_is_idempotent(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("same"), 0, 5, 1)
    group = cloud.group(name("same"))
    calls = count_calls(cloud.autoscaling, SET_DESIRED)

    assert cloud.set_desired_capacity(group, 3) == 3
    assert cloud.set_desired_capacity(group, 3) == 3  # stale record, fresh describe says 3

    assert len(calls) == 1
    assert cloud.group(name("same")).desired_capacity == 3
    assert len(aws.instances(name("same"))) == 3


def test_set_desired_throttled_once_then_succeeds(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("throttled"), 0, 5, 1)
    group = cloud.group(name("throttled"))
    fail_next_calls(cloud.autoscaling, SET_DESIRED)

    with pytest.raises(CloudError) as raised:
        cloud.set_desired_capacity(group, 2)
    assert raised.value.retryable is True
    assert is_retryable(raised.value)
    assert cloud.group(name("throttled")).desired_capacity == 1

    assert cloud.set_desired_capacity(group, 2) == 2
    assert cloud.group(name("throttled")).desired_capacity == 2


# --- terminate ---------------------------------------------------------------------------


def test_terminate_decrements_desired_capacity(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("t"), 1, 5, 3)
    victim = nodes_of(cloud, name("t"))[0]
    calls = count_calls(cloud.autoscaling, TERMINATE)

    terminated = cloud.terminate_instances(name("t"), [victim])

    instance_id = instance_id_from_provider_id(victim.provider_id)
    assert terminated == [instance_id]
    assert calls == [{"InstanceId": instance_id, "ShouldDecrementDesiredCapacity": True}]
    group = cloud.group(name("t"))
    assert group.desired_capacity == 2
    assert victim.provider_id not in group.provider_ids()
    assert aws.instance_state(instance_id) == "terminated"


def test_terminate_refuses_when_min_size_reached(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("min"), 2, 5, 2)
    calls = count_calls(cloud.autoscaling, TERMINATE)

    with pytest.raises(CloudError) as raised:
        cloud.terminate_instances(name("min"), nodes_of(cloud, name("min"))[:1])

    assert str(raised.value) == MIN_SIZE_REACHED == "min sized reached, nodes will not be deleted"
    assert raised.value.retryable is False
    assert calls == []
    assert cloud.group(name("min")).desired_capacity == 2


def test_terminate_refuses_a_batch_that_would_breach_min_size(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("breach"), 2, 5, 3)
    calls = count_calls(cloud.autoscaling, TERMINATE)

    with pytest.raises(CloudError) as raised:
        cloud.terminate_instances(name("breach"), nodes_of(cloud, name("breach"))[:2])

    assert str(raised.value) == WOULD_BREACH_MIN_SIZE
    assert str(raised.value) == "terminating nodes will breach minimum node size"
    assert raised.value.retryable is False
    assert calls == []
    assert len(aws.instances(name("breach"))) == 3


def test_terminate_stops_at_a_node_of_another_group(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("mine"), 0, 5, 3)
    aws.create_asg(name("theirs"), 0, 5, 1)
    mine = nodes_of(cloud, name("mine"))
    theirs = nodes_of(cloud, name("theirs"))[0]

    with pytest.raises(CloudError) as raised:
        cloud.terminate_instances(name("mine"), [mine[0], theirs, mine[1]])

    assert str(raised.value) == (
        f"node {theirs.name}, {theirs.provider_id} belongs in a different node group "
        f"than {name('mine')}"
    )
    assert raised.value.retryable is False
    # Like Escalator, nodes before the stranger stay terminated; nodes after it are untouched.
    assert cloud.group(name("mine")).provider_ids() == {mine[1].provider_id, mine[2].provider_id}
    assert cloud.group(name("mine")).desired_capacity == 2
    assert cloud.group(name("theirs")).desired_capacity == 1


@pytest.mark.parametrize(
    ("provider_id", "message"),
    [
        ("", EMPTY_PROVIDER_ID),
        ("aws:///i-1", "malformed providerID aws:///i-1: expected at least 4 slashes"),
    ],
)
def test_terminate_reports_unparsable_provider_ids(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str], provider_id: str, message: str
) -> None:
    asg = name("parse")
    aws.create_asg(asg, 0, 5, 2)
    with pytest.raises(CloudError) as raised:
        cloud.terminate_instances(asg, [node(provider_id, name="bad")])
    assert str(raised.value) == message
    assert raised.value.retryable is False
    assert cloud.group(asg).desired_capacity == 2


def test_retry_after_a_partial_batch_finishes_it_without_decrementing_twice(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    # desired 4, MinSize 2: a batch of 2 is exactly allowed.
    aws.create_asg(name("retry"), 2, 5, 4)
    batch = nodes_of(cloud, name("retry"))[:2]
    ids = [instance_id_from_provider_id(n.provider_id) for n in batch]
    fail_next_calls(cloud.autoscaling, TERMINATE, after=1)

    with pytest.raises(CloudError) as raised:
        cloud.terminate_instances(name("retry"), batch)
    assert raised.value.retryable is True
    assert str(raised.value).startswith("failed to terminate instance. err: ")
    assert cloud.group(name("retry")).desired_capacity == 3

    # The retry sees batch[0] gone from the ASG: it is done, not "another group", and it does
    # not count against MinSize again (3 - 2 < 2 would refuse the batch).
    calls = count_calls(cloud.autoscaling, TERMINATE)
    assert cloud.terminate_instances(name("retry"), batch) == ids
    assert [call["InstanceId"] for call in calls] == [ids[1]]
    group = cloud.group(name("retry"))
    assert group.desired_capacity == 2
    assert not group.provider_ids() & {n.provider_id for n in batch}

    # A third run of the same batch sends nothing and refuses nothing.
    assert cloud.terminate_instances(name("retry"), batch) == ids
    assert len(calls) == 1
    assert cloud.group(name("retry")).desired_capacity == 2


def test_instance_the_asg_lists_as_terminating_counts_as_done(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    # Real AWS keeps listing a terminated instance as Terminating* for a while (moto drops it at
    # once): rewrite moto's answer the way AWS would show a retry an instance it already took.
    aws.create_asg(name("terminating"), 2, 5, 3)
    batch = nodes_of(cloud, name("terminating"))[:2]
    ids = [instance_id_from_provider_id(n.provider_id) for n in batch]

    def show_terminating(parsed: dict[str, Any], **kwargs: Any) -> None:
        for group in parsed.get("AutoScalingGroups", []):
            for instance in group.get("Instances", []):
                if instance["InstanceId"] == ids[0]:
                    instance["LifecycleState"] = "Terminating:Wait"

    cloud.autoscaling.meta.events.register(
        "after-call.auto-scaling.DescribeAutoScalingGroups", show_terminating
    )
    calls = count_calls(cloud.autoscaling, TERMINATE)

    # Counting both against MinSize (3 - 2 < 2) would refuse; only one is still to terminate.
    assert cloud.terminate_instances(name("terminating"), batch) == ids
    assert [call["InstanceId"] for call in calls] == [ids[1]]


def test_instance_not_found_on_terminate_counts_as_done(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("gone"), 0, 5, 2)
    victim = nodes_of(cloud, name("gone"))[0]
    instance_id = instance_id_from_provider_id(victim.provider_id)
    # What AWS answers when the instance left the ASG between our describe and the call.
    fail_next_calls(
        cloud.autoscaling,
        TERMINATE,
        code="ValidationError",
        message=f"Instance Id not found - No managed instance found for instance ID: {instance_id}",
    )
    assert cloud.terminate_instances(name("gone"), [victim]) == [instance_id]


def test_terminate_validation_error_is_not_retryable(
    aws: FakeAws, cloud: AsgClient, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("invalid"), 0, 5, 2)
    fail_next_calls(cloud.autoscaling, TERMINATE, code="ValidationError", message="bad request")
    with pytest.raises(CloudError) as raised:
        cloud.terminate_instances(name("invalid"), nodes_of(cloud, name("invalid"))[:1])
    assert raised.value.retryable is False


# --- errors and environment --------------------------------------------------------------


def client_error(code: str, status: int) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": code},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "DescribeAutoScalingGroups")


@pytest.mark.parametrize(
    ("exc", "retryable"),
    [
        (client_error("Throttling", 400), True),
        (client_error("RequestLimitExceeded", 503), True),
        (client_error("ServiceUnavailable", 503), True),
        (client_error("InternalFailure", 500), True),
        (client_error("SomethingNew", 502), True),
        (client_error("ValidationError", 400), False),
        (client_error("AccessDenied", 403), False),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), True),
        (ReadTimeoutError(endpoint_url="http://127.0.0.1:1"), True),
        (CloudError("refused", retryable=False), False),
        (ValueError("ours"), False),
    ],
)
def test_is_retryable(exc: BaseException, retryable: bool) -> None:
    assert is_retryable(exc) is retryable


def test_unreachable_endpoint_is_retryable(aws: FakeAws) -> None:
    session = aws.session()
    with socket.socket() as probe:  # a port that was free a moment ago: connection refused
        probe.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{probe.getsockname()[1]}"
    cloud = AsgClient(
        session.client("autoscaling", endpoint_url=nowhere, config=CLIENT_CONFIG),
        session.client("ec2", endpoint_url=nowhere, config=CLIENT_CONFIG),
    )
    with pytest.raises(CloudError) as raised:
        cloud.describe(["any"])
    assert raised.value.retryable is True


def test_from_environment_uses_the_default_chain(
    aws: FakeAws, name: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in aws.env().items():
        monkeypatch.setenv(key, value)
    aws.create_asg(name("env"), 0, 2, 1)
    cloud = AsgClient.from_environment()
    assert cloud.autoscaling.meta.region_name == aws.region
    assert cloud.group(name("env")).desired_capacity == 1


def test_each_call_reads_the_environment_afresh_on_one_parse_of_the_service_models(
    aws: FakeAws, name: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tick's clients are new (the region, endpoint and credentials as the environment says
    now) while AWS's service models, EC2's several MB of JSON, are parsed once a process."""
    for key, value in aws.env().items():
        monkeypatch.setenv(key, value)
    aws.create_asg(name("fresh"), 0, 2, 1)
    first = AsgClient.from_environment()
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws.endpoint_url + "/")
    second = AsgClient.from_environment()
    assert first.ec2 is not second.ec2
    assert (first.autoscaling.meta.region_name, second.autoscaling.meta.region_name) == (
        aws.region, "eu-west-1")
    assert second.ec2.meta.endpoint_url == aws.endpoint_url + "/"
    for service in ("autoscaling", "ec2"):
        models = [getattr(cloud, service).meta.service_model for cloud in (first, second)]
        parsed_once = models[0]._service_description is models[1]._service_description
        assert parsed_once, f"each tick's clients parsed {service}'s model again"
    assert first.group(name("fresh")).desired_capacity == 1


def test_the_fakes_sessions_share_the_service_models_and_keep_hooks_of_their_own(
        aws: FakeAws) -> None:
    """Each of the fake's sessions is new (hooks registered on one reach no other) while EC2's
    model is parsed once; the shared loader's search path does not grow a session at a time."""
    from kube_elevator.tasks.adapters.cloud import service_models_loader

    first, second = aws.session(), aws.session()
    assert first.events is not second.events
    clients = [session.client("ec2", endpoint_url=aws.endpoint_url)
               for session in (first, second)]
    parsed_once = clients[0].meta.service_model._service_description is \
        clients[1].meta.service_model._service_description
    assert parsed_once, "each session parsed EC2's model again"
    paths = service_models_loader().search_paths
    assert len(paths) == len(set(paths)), paths


def test_credentials_block_without_prefect_aws_says_what_to_do(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the `blocks` extra (the import fails as where it is not installed), a block
    named by a parameter says what to install, for the credentials and for the cluster."""
    from kube_elevator.tasks.adapters.blocks import cluster_config_from_block
    from kube_elevator.tasks.core.errors import InputError

    monkeypatch.setitem(sys.modules, "prefect_aws", None)
    monkeypatch.setitem(sys.modules, "prefect_kubernetes.credentials", None)
    with pytest.raises(CloudError) as raised:
        AsgClient.from_environment(region="us-east-1", aws_credentials_block="prod")
    assert "prefect-aws" in str(raised.value)
    assert raised.value.retryable is False
    with pytest.raises(InputError, match=r"cluster_block: needs prefect-kubernetes.*\[blocks\]"):
        cluster_config_from_block("prod")


# --- the fake's error injection ----------------------------------------------------------


def test_fail_next_calls_fails_the_next_call_then_lets_calls_through(
    aws: FakeAws, name: Callable[[str], str]
) -> None:
    aws.create_asg(name("inject"), 0, 1, 0)
    client = aws.client("autoscaling")
    injected = fail_next_calls(client, DESCRIBE, count=2, code="Throttling", http_status=400)

    for _ in range(2):
        with pytest.raises(ClientError) as raised:
            client.describe_auto_scaling_groups(AutoScalingGroupNames=[name("inject")])
        assert raised.value.response["Error"]["Code"] == "Throttling"
        assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    answer = client.describe_auto_scaling_groups(AutoScalingGroupNames=[name("inject")])

    assert [g["AutoScalingGroupName"] for g in answer["AutoScalingGroups"]] == [name("inject")]
    assert (injected.injected, injected.remaining) == (2, 0)
    # Other operations and other clients were never affected.
    aws.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["x"])


def test_fail_next_calls_after_lets_calls_through_first(aws: FakeAws) -> None:
    client = aws.client("autoscaling")
    injected = fail_next_calls(client, DESCRIBE, after=1, code="InternalFailure", http_status=500)
    client.describe_auto_scaling_groups()
    with pytest.raises(ClientError) as raised:
        client.describe_auto_scaling_groups()
    assert is_retryable(raised.value)
    client.describe_auto_scaling_groups()
    assert (injected.passed, injected.injected) == (1, 1)


def test_fail_next_calls_on_a_boto3_session_reaches_clients_created_later(aws: FakeAws) -> None:
    session = aws.session()
    injected = fail_next_calls(session, "DescribeInstances", code="RequestLimitExceeded")
    ec2 = session.client("ec2", endpoint_url=aws.endpoint_url)
    with pytest.raises(ClientError) as raised:
        ec2.describe_instances()
    assert raised.value.response["Error"]["Code"] == "RequestLimitExceeded"
    ec2.describe_instances()
    assert injected.injected == 1


def test_fail_next_calls_on_a_botocore_session(aws: FakeAws) -> None:
    session = botocore.session.get_session()
    fail_next_calls(session, "DescribeAutoScalingGroups", service="auto-scaling")
    client: Any = session.create_client(
        "autoscaling",
        region_name=aws.region,
        endpoint_url=aws.endpoint_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    with pytest.raises(ClientError):
        client.describe_auto_scaling_groups()
    client.describe_auto_scaling_groups()


def test_removed_injection_stops_failing(aws: FakeAws) -> None:
    client = aws.client("autoscaling")
    fail_next_calls(client, DESCRIBE, count=5).remove()
    client.describe_auto_scaling_groups()


def test_reset_forgets_everything() -> None:
    with FakeAws(region="eu-west-1") as fake:
        fake.create_asg("reset-me", 0, 1, 1, availability_zones=("eu-west-1a",))
        assert len(fake.instances("reset-me")) == 1
        fake.reset()
        assert fake.instances("reset-me") == []
    with pytest.raises(RuntimeError):
        _ = fake.endpoint_url


def test_env_points_a_plain_boto3_client_at_the_fake(
    aws: FakeAws, name: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in aws.env().items():
        monkeypatch.setenv(key, value)
    aws.create_asg(name("plain"), 0, 1, 0)
    answer = boto3.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[name("plain")]
    )
    assert len(answer["AutoScalingGroups"]) == 1
