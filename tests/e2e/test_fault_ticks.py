"""Live ticks under injected faults (issue 14): after a faulted tick and a clean one, the
invariants hold.

The real `kubernetes` client talks to the fake API, real boto3 to moto through the fault proxy;
the faults are the operator's (`/_faults` rules): status answers, dropped connections, answers
lost after the request was applied, silent servers. Steps retry as the flow's tasks do (the
one retry layer, `tasks.core.retry.is_retryable`, no delay), without a Prefect server per tick.

Invariants, checked after every faulted tick and again after the clean tick that follows:
- the ASG's desired capacity stays within [MinSize, MaxSize];
- the pending pods are asked for once: desired never passes what one clean tick would ask;
- no node with pods is terminated before `hard_delete_grace_period`;
- no scale lock is held without its request in the cloud (after the clean tick);
- the status tells the truth: "acted" means the cloud shows the plan, "failed" is reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import pytest
import yaml

from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.aws_faults import AwsFaultProxy
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.autoscale import live_tick
from kube_elevator.tasks.adapters.cloud import AsgClient, client_config
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.core.lease_state import lease_name
from kube_elevator.tasks.core.retry import RETRIES, is_retryable
from kube_elevator.tasks.core.step import Step
from kube_elevator.tasks.core.timeouts import Timeouts
from kube_elevator.tasks.node_group_file import load_node_groups
from kube_elevator.tasks.steps.node_groups import Adapters, GroupResult
from tests.builders import group_dict
from tests.killed_tick import kill_tick_at

P = ParamSpec("P")
R = TypeVar("R")
T0 = 1_800_000_000.0
MiB = 2**20
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
SHORT = Timeouts(connect_seconds=2, read_seconds=1)


def run_retrying(step: Step[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """The flow's retry policy without a Prefect server: transient errors retried 3 times."""
    for attempt in range(RETRIES + 1):
        try:
            return step.fn(*args, **kwargs)
        except Exception as error:
            if attempt == RETRIES or not is_retryable(error):
                raise
    raise AssertionError("unreachable")


@dataclass
class Group:
    """One node group: an ASG in moto (reached through the fault proxy), its Nodes and pods."""

    aws: FakeAws
    kube: FakeKubeApi
    proxy: AwsFaultProxy
    kubeconfig: Path
    config: Path
    asg: str
    min_size: int
    max_size: int
    name: str = "batch"  # the node group's, whose Lease `lease` reads

    def adapters(self) -> Adapters:
        session: Any = self.aws.session()
        config = client_config(SHORT)
        cloud = AsgClient(session.client("autoscaling", endpoint_url=self.proxy.url,
                                         config=config),
                          session.client("ec2", endpoint_url=self.proxy.url, config=config))
        return Adapters(KubeClient.from_config(self.kubeconfig), cloud)

    def tick(self, now: float) -> GroupResult:
        groups = load_node_groups(self.config).node_groups
        [result] = live_tick(run_retrying, self.adapters(), groups, now)
        return result

    def tick_or_error(self, now: float) -> GroupResult | Exception:
        """A faulted tick: a group's result, or the error that failed the whole tick (its
        collect step), as `elevator run --once` reports it with exit 1."""
        try:
            return self.tick(now)
        except Exception as error:
            assert is_retryable(error), error
            return error

    def desired(self) -> int:
        answer = self.aws.client("autoscaling").describe_auto_scaling_groups(
            AutoScalingGroupNames=[self.asg])
        return int(answer["AutoScalingGroups"][0]["DesiredCapacity"])

    def lease(self) -> dict[str, str]:
        try:
            found = self.kube.get("leases", lease_name(self.name), "kube-system")
        except KeyError:
            return {}
        return dict(found["metadata"].get("annotations") or {})

    def pod(self, name: str, cpu: str, node: str | None = None) -> None:
        spec: dict[str, Any] = {"nodeSelector": {"customer": "batch"}, "containers": [
            {"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu,
                                                                   "memory": "10Mi"}}}]}
        status: dict[str, Any] = {"phase": "Pending"}
        if node is not None:
            spec["nodeName"] = node
            status = {"phase": "Running",
                      "conditions": [{"type": "PodScheduled", "status": "True"}]}
        self.kube.create("pods", {"metadata": {"name": name, "namespace": "jobs"},
                                  "spec": spec, "status": status}, namespace="jobs")

    def nodes(self) -> list[str]:
        return [node["metadata"]["name"] for node in self.kube.list("nodes")]


@pytest.fixture
def proxy(fake_aws: FakeAws) -> Iterator[AwsFaultProxy]:
    with AwsFaultProxy(fake_aws.endpoint_url) as running:
        yield running


_counter = iter(range(10**6))


def make_group(aws: FakeAws, kube: FakeKubeApi, proxy: AwsFaultProxy, kubeconfig: Path,
               tmp_path: Path, nodes: int, min_size: int = 1, max_size: int = 6,
               **options: Any) -> Group:
    asg = f"faulted-{next(_counter)}-{tmp_path.name[-10:]}"
    aws.create_asg(asg, min_size, max_size, nodes)
    for index, instance in enumerate(aws.instances(asg)):
        kube.create("nodes", node_for_instance(instance, {"customer": "batch"}, 1000,
                                               4000 * MiB, T0 - 3600 + index * 60))
    config = tmp_path / "nodegroups.yaml"
    config.write_text(yaml.safe_dump({"node_groups": [group_dict(
        cloud_provider_group_name=asg, min_nodes=min_size, max_nodes=max_size,
        scale_up_cool_down_period="10m", **options)]}))
    return Group(aws, kube, proxy, kubeconfig, config, asg, min_size, max_size)


def scale_up_group(aws: FakeAws, kube: FakeKubeApi, proxy: AwsFaultProxy, kubeconfig: Path,
                   tmp_path: Path) -> Group:
    """2 full nodes of 1 CPU and a pending 1-CPU pod: 150%, one clean tick asks 2 → 5."""
    group = make_group(aws, kube, proxy, kubeconfig, tmp_path, nodes=2)
    for index, node in enumerate(group.nodes()):
        group.pod(f"busy-{index}", "1", node)
    group.pod("waiting", "1")
    return group


CLEAN_TARGET = 5  # ceil(2 * 150 / 70) = 5


def check_invariants(group: Group, result: GroupResult | Exception, *,
                     after_clean: bool) -> None:
    desired = group.desired()
    assert group.min_size <= desired <= group.max_size
    assert desired <= CLEAN_TARGET, "the pending pods were asked for twice"
    if isinstance(result, Exception):
        assert desired == 2, "a tick that failed as a whole changed the ASG"
    elif result.status == "acted" and result.done.asg_desired_set is not None:
        assert desired == result.done.asg_desired_set
    if after_clean:
        annotations = group.lease()
        if annotations.get("elevator.io/scale-locked") == "true":
            _, target = map(int, annotations["elevator.io/scale-lock-desired"].split(","))
            assert desired == target, "a scale lock is held without its request in the cloud"


@pytest.fixture(autouse=True)
def no_retry_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELEVATOR_RETRY_DELAY_SECONDS", "0")
    monkeypatch.setenv("ELEVATOR_READ_TIMEOUT_SECONDS", str(SHORT.read_seconds))
    monkeypatch.setenv("ELEVATOR_CONNECT_TIMEOUT_SECONDS", str(SHORT.connect_seconds))


Fault = Callable[[Group], None]


def kube_fault(action: str, method: str, path: str, count: int | None = 1,
               **extra: Any) -> Fault:
    def inject(group: Group) -> None:
        group.kube.faults.add(action, method=method, path_prefix=path, count=count, **extra)

    return inject


def aws_fault(action: str, operation: str, count: int | None = 1, **extra: Any) -> Fault:
    def inject(group: Group) -> None:
        group.proxy.faults.add(action, operation=operation, count=count, **extra)

    return inject


SCALE_UP_FAULTS: dict[str, Fault] = {
    "lease-create-answer-lost": kube_fault("apply_then_drop", "POST", LEASES),
    "lease-read-500": kube_fault("status", "GET", LEASES, status=500),
    "lease-read-hangs-every-time": kube_fault("hang", "GET", LEASES, count=None),
    "lease-create-dropped": kube_fault("drop", "POST", LEASES),
    "pods-list-500-every-time": kube_fault("status", "GET", "/api/v1/pods", count=None,
                                           status=500),
    "pods-list-dropped": kube_fault("drop", "GET", "/api/v1/pods"),
    "describe-throttled": aws_fault("status", "DescribeAutoScalingGroups", status=400,
                                    code="Throttling"),
    "describe-throttled-every-time": aws_fault("status", "DescribeAutoScalingGroups",
                                               count=None, status=400, code="Throttling"),
    "set-desired-answer-lost": aws_fault("apply_then_drop", "SetDesiredCapacity"),
    "set-desired-answer-always-lost": aws_fault("apply_then_drop", "SetDesiredCapacity",
                                                count=None),
    "set-desired-dropped-every-time": aws_fault("drop", "SetDesiredCapacity", count=None),
    "set-desired-hangs": aws_fault("hang", "SetDesiredCapacity"),
    "set-desired-throttled-every-time": aws_fault("status", "SetDesiredCapacity", count=None,
                                                  status=400, code="Throttling"),
    "set-desired-refused": aws_fault("status", "SetDesiredCapacity", count=None, status=400,
                                     code="ValidationError"),
}


@pytest.mark.parametrize("fault", list(SCALE_UP_FAULTS), ids=list(SCALE_UP_FAULTS))
def test_scale_up_under_a_fault_then_a_clean_tick(
        fault: str, fake_aws: FakeAws, fake_kube: FakeKubeApi, proxy: AwsFaultProxy,
        kubeconfig: Path, tmp_path: Path) -> None:
    group = scale_up_group(fake_aws, fake_kube, proxy, kubeconfig, tmp_path)
    SCALE_UP_FAULTS[fault](group)
    faulted = group.tick_or_error(T0)
    assert isinstance(faulted, Exception) or faulted.status in ("acted", "failed"), faulted
    check_invariants(group, faulted, after_clean=False)
    group.kube.faults.clear()
    group.proxy.faults.clear()
    clean = group.tick(T0 + 60)
    check_invariants(group, clean, after_clean=True)
    # Whatever the fault, the pending pod is asked for by the end: once, never twice.
    assert group.desired() == CLEAN_TARGET, (faulted, clean)


def test_own_lease_write_whose_answer_was_lost_is_not_a_lost_race(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, proxy: AwsFaultProxy, kubeconfig: Path,
        tmp_path: Path) -> None:
    """Issue 14 item 1: the Lease update applied, its answer lost; the retry's 409 is our own
    write (the Lease holds our claim token), so the tick acts instead of reporting a race."""
    group = make_group(fake_aws, fake_kube, proxy, kubeconfig, tmp_path, nodes=2)
    group.pod("busy", "1", group.nodes()[0])  # 50%: nothing to do but record node capacity
    group.tick(T0 - 60)
    assert "elevator.io/node-capacity" in group.lease()  # the Lease exists: next is a PUT
    rule = group.kube.faults.add("apply_then_drop", method="PUT", path_prefix=LEASES)
    group.pod("waiting-1", "1")
    group.pod("waiting-2", "1")  # 150%: a scale-up, claimed with a PUT whose answer is lost
    result = group.tick(T0)
    assert rule.fired == 1
    assert result.status == "acted", result
    assert group.lease()["elevator.io/scale-locked"] == "true"
    assert group.desired() == result.done.asg_desired_set == CLEAN_TARGET


def test_unknown_cloud_answer_keeps_the_lock_and_the_next_tick_does_not_raise_again(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, proxy: AwsFaultProxy, kubeconfig: Path,
        tmp_path: Path) -> None:
    """Issue 14 item 2: SetDesiredCapacity applied, its answer lost, then every Describe
    throttled: the group fails, but the lock stays (the cloud's answer is unknown), and the next
    tick sees the ASG at the claimed target instead of raising it again."""
    group = scale_up_group(fake_aws, fake_kube, proxy, kubeconfig, tmp_path)
    proxy.faults.add("apply_then_drop", operation="SetDesiredCapacity")
    # After the lost answer, every Describe of the retries is throttled.
    retries: list[Any] = []

    def throttle_describes_from_now_on(**_: Any) -> None:
        if not retries:
            retries.append(proxy.faults.add("status", operation="DescribeAutoScalingGroups",
                                            count=None, status=400, code="Throttling"))

    adapters = group.adapters()
    adapters.cloud.autoscaling.meta.events.register(
        "before-send.auto-scaling.SetDesiredCapacity", throttle_describes_from_now_on)
    groups = load_node_groups(group.config).node_groups
    [faulted] = live_tick(run_retrying, adapters, groups, T0)
    assert faulted.status == "failed" and retries and retries[0].fired == RETRIES
    assert group.desired() == CLEAN_TARGET  # applied once
    lease = group.lease()
    assert lease["elevator.io/scale-locked"] == "true"
    assert lease["elevator.io/scale-lock-desired"] == f"2,{CLEAN_TARGET}"
    proxy.faults.clear()
    clean = group.tick(T0 + 60)
    assert clean.plan.lock_held_at_check and clean.plan.cloud_increase == 0
    assert group.desired() == CLEAN_TARGET


def test_refused_increase_releases_the_lock(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, proxy: AwsFaultProxy, kubeconfig: Path,
        tmp_path: Path) -> None:
    """Escalator takes the lock only after the cloud accepted: a definite no releases it."""
    group = scale_up_group(fake_aws, fake_kube, proxy, kubeconfig, tmp_path)
    proxy.faults.add("status", operation="SetDesiredCapacity", count=None, status=400,
                     code="ValidationError")
    assert group.tick(T0).status == "failed"
    assert group.lease()["elevator.io/scale-locked"] == "false"


def test_tick_killed_between_claim_and_cloud_is_completed_by_the_next(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, proxy: AwsFaultProxy, kubeconfig: Path,
        tmp_path: Path) -> None:
    """Issue 14 item 3: `kill -9` after the Lease claim, before SetDesiredCapacity. The claim
    records the increase; the next tick sees the ASG without it, releases the lock, and asks."""
    group = scale_up_group(fake_aws, fake_kube, proxy, kubeconfig, tmp_path)
    # The tick's process hangs on its first cloud write, and is killed there.
    hang = proxy.faults.add("hang", operation="SetDesiredCapacity", count=None)
    kill_tick_at(proxy.faults, hang, tmp_path, kubeconfig, group.config, proxy.url, T0)
    lease = group.lease()
    assert lease["elevator.io/scale-locked"] == "true"
    assert group.desired() == 2  # the claim never reached the cloud
    proxy.faults.clear()
    # Within the settle time the claim is left alone (its tick may still be about to ask).
    held = group.tick(T0 + 10)
    assert held.plan.lock_held_at_check and group.desired() == 2
    completed = group.tick(T0 + 60)
    assert completed.status == "acted"
    assert any("never reached the ASG" in note for note in completed.plan.notes)
    assert group.desired() == CLEAN_TARGET
    after = group.tick(T0 + 120)
    assert after.plan.lock_held_at_check and group.desired() == CLEAN_TARGET


SCALE_DOWN_FAULTS: dict[str, Fault] = {
    "terminate-answer-lost": aws_fault("apply_then_drop", "TerminateInstanceInAutoScalingGroup"),
    "terminate-throttled-every-time": aws_fault(
        "status", "TerminateInstanceInAutoScalingGroup", count=None, status=400,
        code="Throttling"),
    "node-delete-answer-lost": kube_fault("apply_then_drop", "DELETE", "/api/v1/nodes/"),
    "node-patch-answer-lost": kube_fault("apply_then_drop", "PATCH", "/api/v1/nodes/"),
    "node-patch-409": kube_fault("status", "PATCH", "/api/v1/nodes/", status=409),
}


@pytest.mark.parametrize("fault", list(SCALE_DOWN_FAULTS), ids=list(SCALE_DOWN_FAULTS))
def test_scale_down_under_a_fault_then_a_clean_tick(
        fault: str, fake_aws: FakeAws, fake_kube: FakeKubeApi, proxy: AwsFaultProxy,
        kubeconfig: Path, tmp_path: Path) -> None:
    """4 nodes, one busy pod: taints go on, tainted nodes are removed after their grace; the
    busy node is never terminated before the hard grace period (10m) while it holds the pod."""
    group = make_group(fake_aws, fake_kube, proxy, kubeconfig, tmp_path, nodes=4, min_size=1)
    nodes = group.nodes()
    group.pod("busy", "100m", nodes[0])  # the oldest node: tainted first, holds a pod
    initial = group.desired()
    for offset in (0, 120, 240, 360):  # faults on every tick, then clean ones
        SCALE_DOWN_FAULTS[fault](group)
        result = group.tick_or_error(T0 + offset)
        assert isinstance(result, Exception) or result.status in (
            "acted", "failed", "nothing to do"), result
        assert group.min_size <= group.desired() <= initial
        assert nodes[0] in group.nodes(), "a node with a pod went before its hard grace"
        # Terminating decrements desired exactly once per instance, even with a lost answer.
        assert group.desired() == len(group.aws.instances(group.asg))
    group.kube.faults.clear()
    group.proxy.faults.clear()
    for offset in (480, 600):
        group.tick(T0 + offset)
    assert nodes[0] in group.nodes()
    assert group.desired() == len(group.aws.instances(group.asg))
