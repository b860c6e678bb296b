"""Live ticks of a one-shot group (issue 30): Escalator's scale-up through EC2 Fleet, under faults.

The real `kubernetes` client talks to the fake API, real boto3 to moto through the fault proxy
(moto extended by `fakes.aws` where it lacks AWS's behaviour); steps retry as the flow's tasks
do (`run_retrying`); the fleet's readiness wait runs on a stepped clock, so no test waits.

Invariants, after every tick that reported back (faulted or not):
- the ASG's desired capacity is within [MinSize, MaxSize] and is its number of instances;
- no instance a fleet launched for the group runs outside the ASG;
- the Lease holds no fleet claim, and the failures in a row count what happened;
- the status tells the truth: "acted" attached the whole delta; "failed" says why.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.deadlines import scaled
from kube_elevator.fakes.aws import FakeAws, fail_next_calls
from kube_elevator.fakes.aws_faults import AwsFaultProxy
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.tasks.adapters.cloud import AsgClient, client_config
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.core.lease_state import lease_name
from kube_elevator.tasks.core.timeouts import Timeouts
from kube_elevator.tasks.steps.node_groups import Adapters, GroupResult
from tests.builders import SteppingClock, group_dict
from tests.e2e.test_fault_ticks import Group
from tests.killed_tick import kill_tick_at

T0 = 1_800_000_000.0
MiB = 2**20
ZONES = ("us-east-1a", "us-east-1b")
TRIES = "elevator.io/fleet-terminate-tries"
FLEET_CLAIM = "elevator.io/fleet-claim"
ROOMY = Timeouts(connect_seconds=5, read_seconds=30)
DELTA = 21  # 2 nodes of 1 CPU, 16 CPUs asked: ceil(2 * 800 / 70) - 2, past one attach batch


@dataclass
class FleetGroup(Group):
    """A one-shot node group: its ASG in moto (through the proxy), its Nodes and pods."""

    clock: SteppingClock = field(default_factory=SteppingClock)
    _adapters: Adapters | None = None

    def adapters(self) -> Adapters:
        """One set of clients for the test, so a botocore hook reaches every tick's calls;
        the fleet's readiness wait on the stepped clock. No call here is made to hang, so the
        timeouts are roomy: moto answers slowly on a busy machine."""
        if self._adapters is None:
            session: Any = self.aws.session()
            config = client_config(ROOMY)
            cloud = AsgClient(session.client("autoscaling", endpoint_url=self.proxy.url,
                                             config=config),
                              session.client("ec2", endpoint_url=self.proxy.url, config=config),
                              clock=self.clock)
            self._adapters = Adapters(KubeClient.from_config(self.kubeconfig), cloud)
        return self._adapters

    def group(self) -> dict[str, Any]:
        answer = self.aws.client("autoscaling").describe_auto_scaling_groups(
            AutoScalingGroupNames=[self.asg])
        return dict(answer["AutoScalingGroups"][0])

    def members(self) -> list[str]:
        return [instance["InstanceId"] for instance in self.group()["Instances"]]

    def fleet_instances(self, states: tuple[str, ...] = ("pending", "running")) -> list[str]:
        answer = self.aws.client("ec2").describe_instances(Filters=[
            {"Name": "tag:elevator.io/fleet-asg", "Values": [self.asg]},
            {"Name": "instance-state-name", "Values": list(states)}])
        return [i["InstanceId"] for r in answer["Reservations"] for i in r["Instances"]]

    def outside(self) -> list[str]:
        """Instances a fleet launched for the group that run outside its ASG."""
        inside = set(self.members())
        return [i for i in self.fleet_instances() if i not in inside]


@pytest.fixture
def proxy(fake_aws: FakeAws) -> Iterator[AwsFaultProxy]:
    with AwsFaultProxy(fake_aws.endpoint_url) as running:
        yield running


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELEVATOR_RETRY_DELAY_SECONDS", "0")
    monkeypatch.setenv("ELEVATOR_READ_TIMEOUT_SECONDS", str(ROOMY.read_seconds))


def make_fleet_group(aws: FakeAws, kube: FakeKubeApi, proxy: AwsFaultProxy, kubeconfig: Path,
                     tmp_path: Path, **aws_options: Any) -> FleetGroup:
    """2 full nodes of 1 CPU and 14 pending 1-CPU pods: one clean tick asks a fleet of 21."""
    run = uuid.uuid4().hex[:8]
    asg, template = f"fleet-{run}", f"lt-{run}"
    aws.create_asg(asg, 1, 30, 2, availability_zones=ZONES, launch_template_id=template)
    config = tmp_path / "nodegroups.yaml"
    config.write_text(yaml.safe_dump({"node_groups": [group_dict(
        cloud_provider_group_name=asg, min_nodes=1, max_nodes=30,
        scale_up_cool_down_period="10m",
        aws={"launch_template_id": template, "launch_template_version": "1",
             "fleet_instance_ready_timeout": "5s", **aws_options})]}))
    group = FleetGroup(aws, kube, proxy, kubeconfig, config, asg, 1, 30)
    for index, instance in enumerate(aws.instances(asg)):
        node = f"node-{index}"
        kube.create("nodes", node_for_instance(instance, {"customer": "batch"}, 1000,
                                               4000 * MiB, T0 - 3600 + index * 60, node))
        group.pod(f"busy-{index}", "1", node)
    for index in range(14):
        group.pod(f"waiting-{index}", "1")
    return group


def check_invariants(group: FleetGroup, result: GroupResult) -> None:
    desired = group.desired()
    assert group.min_size <= desired <= group.max_size
    assert desired == len(group.members())
    assert group.outside() == [], "a fleet's instance runs outside the ASG"
    assert FLEET_CLAIM not in group.lease()
    if result.status == "acted" and result.plan.cloud_increase:
        assert len(result.done.attached_instances) == result.plan.cloud_increase
        assert desired == result.done.asg_desired_set
    if result.status == "failed":
        assert result.message


def test_a_scale_up_is_one_fleet_attached_to_the_asg(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, proxy: AwsFaultProxy, kubeconfig: Path,
        tmp_path: Path) -> None:
    """The delta as one instant fleet, its instances attached in two batches (20 and 1); with
    resource_tagging the ASG (addASGTags) and the fleet carry Escalator's tag."""
    group = make_fleet_group(fake_aws, fake_kube, proxy, kubeconfig, tmp_path,
                             resource_tagging=True)
    result = group.tick(T0)
    assert result.status == "acted", result.message
    assert result.plan.cloud_increase == DELTA
    check_invariants(group, result)
    assert len(proxy.attempts("CreateFleet")) == 1
    assert len(proxy.attempts("AttachInstances")) == 2
    assert len(proxy.attempts("SetDesiredCapacity")) == 0
    assert group.desired() == 2 + DELTA
    assert sorted(group.members()[2:]) == sorted(result.done.attached_instances)
    lease = group.lease()
    assert lease["elevator.io/scale-locked"] == "true" and TRIES not in lease
    assert lease["elevator.io/scale-lock-desired"] == f"2,{2 + DELTA}"
    tags = {tag["Key"]: tag["Value"] for tag in group.group()["Tags"]}
    assert tags["k8s.io/atlassian-escalator/enabled"] == "true"
    # The fleet that launched this group's instances (the session's moto holds other tests'
    # fleets too): instant, with Escalator's tag, holding exactly the attached instances.
    ec2 = fake_aws.client("ec2")

    def instances_of(fleet_id: str) -> list[str]:
        listed = ec2.describe_fleet_instances(FleetId=fleet_id)["ActiveInstances"]
        return sorted(instance["InstanceId"] for instance in listed)

    attached = set(result.done.attached_instances)
    [fleet] = [f for f in ec2.describe_fleets()["Fleets"]
               if attached & set(instances_of(f["FleetId"]))]
    assert {"Key": "k8s.io/atlassian-escalator/enabled", "Value": "true"} in fleet["Tags"]
    assert fleet["Type"] == "instant"
    assert instances_of(fleet["FleetId"]) == sorted(attached)
    held = group.tick(T0 + 60)  # the scale lock covers the fleet as it covers SetDesired
    assert held.plan.lock_held_at_check and len(proxy.attempts("CreateFleet")) == 1


def fleet_requests(group: FleetGroup) -> int:
    """Distinct fleets launched for the group: each carries its tick's claim."""
    answer = group.aws.client("ec2").describe_instances(Filters=[
        {"Name": "tag:elevator.io/fleet-asg", "Values": [group.asg]}])
    return len({tag["Value"] for r in answer["Reservations"] for i in r["Instances"]
                for tag in i.get("Tags", []) if tag["Key"] == "elevator.io/fleet-claim"})


Fault = Callable[[FleetGroup], None]


def proxy_fault(action: str, operation: str, count: int | None = 1, **extra: Any) -> Fault:
    def inject(group: FleetGroup) -> None:
        group.proxy.faults.add(action, operation=operation, count=count, **extra)
    return inject


def attach_fails_after_the_first_batch(group: FleetGroup) -> None:
    fail_next_calls(group.adapters().cloud.autoscaling,  # type: ignore[attr-defined]
                    "AttachInstances",
                    count=10, after=1, code="ValidationError", message="attach refused")


# fault: (status of the faulted tick, attached, terminated, failures in a row, desired at the end)
FAULTS: dict[str, tuple[Fault, str, int, int, int, int]] = {
    "fleet-answer-lost": (proxy_fault("apply_then_drop", "CreateFleet"),
                          "acted", DELTA, 0, 0, 2 + DELTA),
    "fleet-refused": (proxy_fault("status", "CreateFleet", None, status=400,
                                  code="InvalidLaunchTemplateId.NotFound"),
                      "failed", 0, 0, 0, 2 + DELTA),
    "checks-never-pass": (proxy_fault("rewrite", "DescribeInstanceStatus", None,
                                      find="<status>ok</status>",
                                      replace="<status>impaired</status>"),
                          "failed", 0, DELTA, 1, 2 + DELTA),
    "status-poll-fails-twice": (proxy_fault("status", "DescribeInstanceStatus", 2, status=503,
                                            code="Unavailable"),
                                "acted", DELTA, 0, 0, 2 + DELTA),
    "attach-throttled-once": (proxy_fault("status", "AttachInstances", status=400,
                                          code="Throttling"), "acted", DELTA, 0, 0, 2 + DELTA),
    "attach-answer-lost": (proxy_fault("apply_then_drop", "AttachInstances"),
                           "acted", DELTA, 0, 0, 2 + DELTA),
    # The first 20 stay (a lock is kept for them); the 21st is terminated, as upstream does.
    "attach-fails-after-the-first-batch": (attach_fails_after_the_first_batch,
                                           "failed", 20, 1, 1, 2 + 20),
}


@pytest.mark.parametrize("fault", list(FAULTS), ids=list(FAULTS))
def test_a_fleet_under_a_fault_then_a_clean_tick(
        fault: str, fake_aws: FakeAws, fake_kube: FakeKubeApi, proxy: AwsFaultProxy,
        kubeconfig: Path, tmp_path: Path) -> None:
    inject, status, attached, terminated, tries, desired = FAULTS[fault]
    group = make_fleet_group(fake_aws, fake_kube, proxy, kubeconfig, tmp_path)
    inject(group)
    faulted = group.tick(T0)
    assert faulted.status == status, faulted.message
    assert len(faulted.done.attached_instances) == attached
    assert len(faulted.done.fleet_terminated_instances) == terminated
    check_invariants(group, faulted)
    assert int(group.lease().get(TRIES, "0")) == tries
    assert fleet_requests(group) <= 1, "the delta was asked for twice"
    proxy.faults.clear()
    clean = group.tick(T0 + 60)
    check_invariants(group, clean)
    assert group.desired() == desired, (faulted, clean)
    if status == "failed" and not attached:  # no lock after a failed increase: asked again
        assert clean.status == "acted" and TRIES not in group.lease()


def test_three_failures_in_a_row_stop_the_groups_fleets_until_reset(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, proxy: AwsFaultProxy, kubeconfig: Path,
        tmp_path: Path) -> None:
    """maxTerminateInstancesTries: Escalator exits at the third provision-then-terminate in a
    row. Here the group's ticks fail from then on without a fleet (the others would go on),
    until the count is removed from its Lease."""
    group = make_fleet_group(fake_aws, fake_kube, proxy, kubeconfig, tmp_path)
    FAULTS["checks-never-pass"][0](group)
    for attempt in (1, 2, 3):
        result = group.tick(T0 + 60 * attempt)
        assert result.status == "failed" and group.lease()[TRIES] == str(attempt)
        check_invariants(group, result)
    assert "reached maximum number of consecutive failures (3)" in result.message
    fleets = len(proxy.attempts("CreateFleet"))
    stopped = group.tick(T0 + 240)
    assert stopped.status == "failed" and TRIES in stopped.message
    assert len(proxy.attempts("CreateFleet")) == fleets, "a fleet after the third failure"
    proxy.faults.clear()
    group.kube.patch("leases", lease_name(group.name),
                     {"metadata": {"annotations": {TRIES: None}}}, "kube-system")
    reset = group.tick(T0 + 300)
    assert reset.status == "acted" and group.desired() == 2 + DELTA
    check_invariants(group, reset)


def test_a_tick_killed_between_fleet_and_attach_is_cleaned_up_by_a_later_one(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, proxy: AwsFaultProxy, kubeconfig: Path,
        tmp_path: Path) -> None:
    """`kill -9` after CreateFleet, before AttachInstances: the fleet's instances run outside
    the ASG, its claim in the Lease. Within the settle time (the claim's 30 s and the 5 s ready
    timeout) a later tick leaves them be; past it, the tick terminates them by their claim tag,
    releases the claimed lock and scales up afresh: nothing left outside, asked once."""
    group = make_fleet_group(fake_aws, fake_kube, proxy, kubeconfig, tmp_path)
    hang = proxy.faults.add("hang", operation="AttachInstances", count=None)
    kill_tick_at(proxy.faults, hang, tmp_path, kubeconfig, group.config, proxy.url, T0)
    proxy.faults.clear()
    left = group.outside()
    assert len(left) == DELTA and group.desired() == 2
    lease = group.lease()
    assert lease[FLEET_CLAIM] and lease["elevator.io/scale-locked"] == "true"
    within = group.tick(T0 + 10)
    assert within.plan.lock_held_at_check and sorted(group.outside()) == sorted(left)
    # Past the settle time, but the instances cannot be read: no new fleet may replace the
    # claim (its instances would be lost track of); the group's tick fails, saying so.
    unreadable = proxy.faults.add("status", operation="DescribeInstances", count=None,
                                  status=503, code="Unavailable")
    blind = group.tick(T0 + 60)
    assert blind.status == "failed" and "could not be checked" in blind.message
    assert unreadable.fired and len(proxy.attempts("CreateFleet")) == 1
    assert group.lease()[FLEET_CLAIM] == lease[FLEET_CLAIM]
    proxy.faults.clear()
    later = group.tick(T0 + 120)
    assert later.status == "acted", later.message
    assert sorted(later.done.fleet_terminated_instances) == sorted(left)
    assert any("never reached the ASG" in note for note in later.plan.notes)
    check_invariants(group, later)
    assert group.desired() == 2 + DELTA
    assert not set(left) & set(group.members())


EXAMPLE = """\
node_groups:
  - name: "shared"
    label_key: "customer"
    label_value: "shared"
    cloud_provider_group_name: "shared-nodes"
    min_nodes: 1
    max_nodes: 30
    dry_mode: false
    scale_on_starve: false
    taint_upper_capacity_threshold_percent: 40
    taint_lower_capacity_threshold_percent: 10
    slow_node_removal_rate: 2
    fast_node_removal_rate: 5
    scale_up_threshold_percent: 70
    scale_up_cool_down_period: 2m
    scale_up_cool_down_timeout: 10m
    soft_delete_grace_period: 1m
    hard_delete_grace_period: 10m
    taint_effect: NoExecute
    max_node_age: 24h
    aws:
      fleet_instance_ready_timeout: 1m
      launch_template_id: lt-1a2b3c4d
      launch_template_version: "1"
      lifecycle: on-demand
      instance_type_overrides: ["t2.large", "t3.large"]
      resource_tagging: false
"""  # Escalator's docs/configuration/nodegroup.md, verbatim


def test_escalators_example_file_validates_and_scales_up_in_one_shot(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, proxy: AwsFaultProxy, kubeconfig: Path,
        tmp_path: Path) -> None:
    """Issue 30's acceptance: `elevator validate` takes Escalator's example file, and a live
    tick with it launches one fleet and attaches its instances to the ASG; a faulted tick
    before (every attach refused) leaves nothing running outside the ASG."""
    config = tmp_path / "nodegroups_config.yaml"
    config.write_text(EXAMPLE)
    validated = subprocess.run([sys.executable, "-m", "kube_elevator.flows.cli", "validate", str(config)],
                               capture_output=True, text=True, timeout=scaled(120), check=False)
    assert validated.returncode == 0, validated.stderr
    assert "scale-up: EC2 Fleet of lt-1a2b3c4d version 1 (on-demand; t2.large, t3.large)" \
        in validated.stdout
    fake_aws.create_asg("shared-nodes", 1, 30, 2, availability_zones=ZONES,
                        launch_template_id="lt-1a2b3c4d")
    group = FleetGroup(fake_aws, fake_kube, proxy, kubeconfig, config, "shared-nodes", 1, 30,
                       name="shared")
    for index, instance in enumerate(fake_aws.instances("shared-nodes")):
        fake_kube.create("nodes", node_for_instance(instance, {"customer": "shared"}, 2000,
                                                    8000 * MiB, T0 - 3600, f"shared-{index}"))
    for index in range(3):
        fake_kube.create("pods", {"metadata": {"name": f"job-{index}", "namespace": "jobs"},
                                  "spec": {"nodeSelector": {"customer": "shared"},
                                           "containers": [{"name": "c", "image": "i",
                                                           "resources": {"requests": {
                                                               "cpu": "1500m"}}}]}},
                         namespace="jobs")
    proxy.faults.add("status", operation="AttachInstances", count=None, status=400,
                     code="ValidationError")
    faulted = group.tick(T0)
    assert faulted.status == "failed" and faulted.done.fleet_terminated_instances
    check_invariants(group, faulted)
    assert group.desired() == 2
    proxy.faults.clear()
    fleets = len(proxy.attempts("CreateFleet"))
    clean = group.tick(T0 + 60)
    assert clean.status == "acted", clean.message
    assert len(proxy.attempts("CreateFleet")) == fleets + 1
    check_invariants(group, clean)
    launched = clean.done.attached_instances
    assert launched and set(launched) <= set(group.members())
    types = {i["InstanceType"] for r in fake_aws.client("ec2").describe_instances(
        InstanceIds=list(launched))["Reservations"] for i in r["Instances"]}
    assert len(types) == 1 and types <= {"t2.large", "t3.large"}  # SingleInstanceType


@pytest.mark.usefixtures("prefect_server")
def test_in_a_flow_run_each_fleet_call_is_a_task_run(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, proxy: AwsFaultProxy, kubeconfig: Path,
        tmp_path: Path) -> None:
    """The `autoscale` flow (its own clients, from the environment, on moto): the fleet's
    steps show as task runs of the tick, like every other step."""
    from datetime import UTC, datetime

    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from kube_elevator.flows.autoscale import autoscale

    group = make_fleet_group(fake_aws, fake_kube, proxy, kubeconfig, tmp_path)
    state = autoscale(nodegroups=str(group.config), now=datetime.fromtimestamp(T0, UTC),
                      kubeconfig=str(kubeconfig), return_state=True)
    (result,) = state.result()
    assert result["status"] == "acted" and len(result["done"]["attached_instances"]) == DELTA
    assert group.desired() == 2 + DELTA and group.outside() == []
    steps = {"write-lock", "launch-fleet", "wait-for-instances", "attach-to-asg"}
    deadline = time.monotonic() + scaled(60)  # the server records task runs after the flow run
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[state.state_details.flow_run_id])))
            names = {run.name.rsplit("-", 1)[0] for run in runs}
            if steps <= names or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert steps <= names, names
