"""One live tick end to end: the real `kubernetes` client over HTTP against the fake API server,
real boto3 against moto, real Prefect flow runs (issue "Live ticks", acceptance list)."""

from __future__ import annotations

import itertools
import math
import socket
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest
import yaml
from prefect import flow, get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

from benchmarks.deadlines import scaled
from kube_elevator.fakes.aws import FakeAws, fail_next_calls
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.autoscale import autoscale, live_tick
from kube_elevator.flows.run_state import RunFailed, run_here
from kube_elevator.tasks.adapters.cloud import AsgClient
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.core.step import run_as_task
from kube_elevator.tasks.core.timefmt import rfc3339
from kube_elevator.tasks.node_group_file import load_node_groups
from kube_elevator.tasks.steps.node_groups import Adapters
from tests.builders import group_dict

pytestmark = pytest.mark.usefixtures("prefect_server")

T0 = 1_800_000_000.0
MiB = 2**20
_names = itertools.count()


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class Cluster:
    """One test's node group: an ASG in moto whose instances joined the fake API as Nodes."""

    def __init__(self, aws: FakeAws, kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path,
                 nodes: int, min_size: int = 1, max_size: int = 10,
                 cluster_autoscaler: dict[str, Any] | None = None, **group: Any) -> None:
        self.aws, self.kube, self.kubeconfig = aws, kube, kubeconfig
        self.asg = f"asg-{next(_names)}-{tmp_path.name[-12:]}"
        aws.create_asg(self.asg, min_size, max_size, nodes)
        self.config = tmp_path / "nodegroups.yaml"
        self.config.write_text(yaml.safe_dump({"node_groups": [group_dict(
            cloud_provider_group_name=self.asg, **group)],
            **({"cluster_autoscaler": cluster_autoscaler} if cluster_autoscaler else {})}))
        # Nodes join one minute apart, so "oldest" and "newest" are well defined.
        self.node_names = []
        for index, instance in enumerate(aws.instances(self.asg)):
            kube.create("nodes", node_for_instance(instance, {"customer": "batch"}, 1000,
                                                   4000 * MiB, T0 - 3600 + index * 60))
            self.node_names.append(instance["InstanceId"])

    def pod(self, name: str, cpu: str = "500m", memory: str = "100Mi", node: str | None = None,
            owner: str | None = None) -> None:
        spec: dict[str, Any] = {
            "nodeSelector": {"customer": "batch"},
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu,
                                                                    "memory": memory}}}]}
        status = {"phase": "Pending"}
        if node:
            spec["nodeName"] = node
            status = {"phase": "Running",
                      "conditions": [{"type": "PodScheduled", "status": "True"}]}
        metadata: dict[str, Any] = {"name": name, "namespace": "jobs"}
        if owner:  # a ReplicaSet's pod: CA may move it
            metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                            "name": owner, "uid": owner, "controller": True}]
        self.kube.create("pods", {"metadata": metadata, "spec": spec, "status": status},
                         namespace="jobs")

    def taint(self, node: str, at_seconds: float) -> None:
        self.kube.patch("nodes", node, {"spec": {"taints": [
            {"key": "atlassian.com/escalator", "value": str(int(at_seconds)),
             "effect": "NoSchedule"}]}})

    def desired(self) -> int:
        answer = self.aws.client("autoscaling").describe_auto_scaling_groups(
            AutoScalingGroupNames=[self.asg])
        return int(answer["AutoScalingGroups"][0]["DesiredCapacity"])

    def taints(self, node: str) -> list[dict[str, str]]:
        return list(self.kube.get("nodes", node)["spec"].get("taints", []))

    def tick(self, now: float, **options: Any) -> dict[str, Any]:
        (result,) = autoscale(nodegroups=str(self.config), now=at(now),
                              kubeconfig=str(self.kubeconfig), **options)
        return result


@pytest.fixture
def cluster_factory(fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path,
                    tmp_path: Path) -> Any:
    def make(nodes: int, **kwargs: Any) -> Cluster:
        return Cluster(fake_aws, fake_kube, kubeconfig, tmp_path, nodes, **kwargs)

    return make


def test_spec_worked_example_scales_two_to_eight_then_holds_the_lock(cluster_factory: Any) -> None:
    cluster = cluster_factory(2)
    for index in range(10):
        cluster.pod(f"job-{index}")
    result = cluster.tick(T0)
    assert (result["cpu_percent"], result["delta"], result["status"]) == (250.0, 6, "acted")
    assert cluster.desired() == 8
    lease = cluster.kube.get("leases", "elevator-batch", "kube-system")
    assert lease["metadata"]["annotations"]["elevator.io/scale-locked"] == "true"
    assert lease["metadata"]["annotations"]["elevator.io/scale-lock-requested-nodes"] == "6"

    writes_before = [r for r in cluster.kube.requests if r.verb not in ("get", "list")]
    again = cluster.tick(T0 + 60)  # inside the 2m cool-down
    assert again["locked"] and again["delta"] == 6 and again["status"] == "nothing to do"
    assert cluster.desired() == 8
    assert [r for r in cluster.kube.requests if r.verb not in ("get", "list")] == writes_before


def test_a_tick_in_which_a_group_failed_ends_failed_and_keeps_every_result(
        cluster_factory: Any) -> None:
    """Escalator goes on to the next group when one fails; the run still tells the truth: it
    ends Failed, naming the group, so the UI and Prefect's automations see a failed tick."""
    cluster = cluster_factory(2)
    for index in range(10):
        cluster.pod(f"job-{index}")
    config = yaml.safe_load(cluster.config.read_text())
    config["node_groups"].append(group_dict(name="ghost", label_value="ghost",
                                            cloud_provider_group_name="no-such-asg"))
    cluster.config.write_text(yaml.safe_dump(config))
    outcome = run_here(lambda: autoscale(nodegroups=str(cluster.config), now=at(T0),
                                         kubeconfig=str(cluster.kubeconfig), return_state=True))
    state = outcome.state
    assert state.is_failed()
    assert state.message is not None
    assert state.message.startswith("1 of 2 node groups failed: ghost: ")
    results = {result["name"]: result for result in outcome.results()}
    assert results["batch"]["status"] == "acted" and cluster.desired() == 8  # it went on
    assert results["ghost"]["status"] == "failed"
    with pytest.raises(RunFailed) as failed:  # called as a function: the error, with them
        autoscale(nodegroups=str(cluster.config), now=at(T0 + 60),
                  kubeconfig=str(cluster.kubeconfig))
    assert [result["status"] for result in failed.value.results] == ["nothing to do", "failed"]


def test_the_first_unlocked_tick_after_a_scale_out_observes_each_new_nodes_registration_lag(
        cluster_factory: Any, fake_aws: FakeAws) -> None:
    """Escalator's `node_group_node_registration_lag`: once the lock of a scale-out is released,
    each node registered since gets the seconds from its instance's EC2 LaunchTime to its
    creation. On the clock moto launches instances by, the wall clock."""
    from kube_elevator.tasks.escalator.metrics import METRICS

    cluster = cluster_factory(2)
    old_nodes = set(cluster.node_names)
    scaled_out_at = float(int(time.time()))
    for name in old_nodes:  # registered an hour before the scale-out, on the same clock
        node = cluster.kube.get("nodes", name)
        cluster.kube.delete("nodes", name)
        node["metadata"] = {**node["metadata"], "creationTimestamp": rfc3339(scaled_out_at - 3600)}
        node["metadata"].pop("resourceVersion", None)
        node["metadata"].pop("uid", None)
        cluster.kube.create("nodes", node)
    for index in range(10):
        cluster.pod(f"job-{index}")
    assert cluster.tick(scaled_out_at)["delta"] == 6 and cluster.desired() == 8
    before = METRICS.observed("node_group_node_registration_lag", node_group="batch")
    new_ids = [instance["InstanceId"] for instance in fake_aws.instances(cluster.asg)
               if instance["InstanceId"] not in old_nodes]
    described = fake_aws.client("ec2").describe_instances(InstanceIds=new_ids)
    launched = {instance["InstanceId"]: instance["LaunchTime"].timestamp()
                for reservation in described["Reservations"]
                for instance in reservation["Instances"]}
    expected = []
    for offset, instance_id in enumerate(new_ids):  # each registers about 91 + offset s after
        created = float(int(launched[instance_id]) + 91 + offset)
        expected.append(created - launched[instance_id])
        cluster.kube.create("nodes", node_for_instance(
            {"InstanceId": instance_id}, {"customer": "batch"}, 1000, 4000 * MiB, created))
    assert cluster.tick(scaled_out_at + 60)["locked"]  # inside the cool-down: not yet
    assert METRICS.observed("node_group_node_registration_lag", node_group="batch") == before
    unlocked = cluster.tick(scaled_out_at + 300)
    assert not unlocked["locked"]
    observed = METRICS.observed("node_group_node_registration_lag", node_group="batch")
    assert sorted(observed[len(before):]) == pytest.approx(sorted(expected))
    assert sorted(math.ceil(lag) for lag in observed[len(before):]) == list(range(91, 97))
    cluster.tick(scaled_out_at + 360)  # observed once, on the tick that released the lock
    assert len(METRICS.observed("node_group_node_registration_lag", node_group="batch")) == \
        len(observed)


def test_rising_load_untaints_newest_first_then_raises_asg_by_the_rest(
        cluster_factory: Any) -> None:
    cluster = cluster_factory(4)
    oldest, *tainted = cluster.node_names
    for node in tainted:
        cluster.taint(node, T0 - 30)
    for index in range(4):
        cluster.pod(f"job-{index}", cpu="1")
    result = cluster.tick(T0)
    # 4000m on one 1000m node: 400% => ceil(1 * 330 / 70) = 5: untaint 3, the cloud adds 2
    assert result["delta"] == 5
    assert result["done"]["untainted"] == list(reversed(tainted))
    assert all(cluster.taints(node) == [] for node in tainted)
    assert cluster.taints(oldest) == []
    assert cluster.desired() == 6


def test_the_runs_state_message_says_what_was_asked_not_the_decided_delta(
        cluster_factory: Any) -> None:
    """Issue 42: a delta of +5 split into 3 untaints and 2 from the ASG is told as such in the
    flow run's state message (the UI's one line), not as `+5`."""
    cluster = cluster_factory(4)
    for node in cluster.node_names[1:]:
        cluster.taint(node, T0 - 30)
    for index in range(4):
        cluster.pod(f"job-{index}", cpu="1")
    outcome = run_here(lambda: autoscale(nodegroups=str(cluster.config), now=at(T0),
                                         kubeconfig=str(cluster.kubeconfig), return_state=True))
    assert outcome.state.is_completed() and cluster.desired() == 6
    assert outcome.state.message is not None
    assert outcome.state.message.startswith("batch untaint 3, ASG +2 (4 -> 6): usage 400.0%"), \
        outcome.state.message


def test_falling_load_taints_oldest_then_removes_after_grace_periods(
        cluster_factory: Any) -> None:
    cluster = cluster_factory(4, min_nodes=1, soft_delete_grace_period="1m",
                              hard_delete_grace_period="10m")
    first, second, third, fourth = cluster.node_names
    result = cluster.tick(T0)  # no pods: 0% => fast removal of 2, oldest first
    assert result["done"]["tainted"] == [first, second]
    assert cluster.taints(first) == [{"key": "atlassian.com/escalator",
                                      "value": str(int(T0)), "effect": "NoSchedule"}]
    cluster.pod("busy", cpu="1", node=second)  # 1000m of 2000m untainted: 50% => delta 0

    assert cluster.tick(T0 + 30)["done"]["deleted_nodes"] == []  # within the soft grace
    result = cluster.tick(T0 + 61)
    assert result["done"]["deleted_nodes"] == [first]  # empty, past the soft grace
    assert cluster.desired() == 3
    assert first not in {n["metadata"]["name"] for n in cluster.kube.list("nodes")}
    assert cluster.tick(T0 + 599)["done"]["deleted_nodes"] == []  # busy: waits for hard grace
    assert cluster.tick(T0 + 601)["done"]["deleted_nodes"] == [second]
    assert cluster.desired() == 2
    assert {n["metadata"]["name"] for n in cluster.kube.list("nodes")} == {third, fourth}


def test_a_live_tick_at_another_time_is_refused_and_a_dry_one_is_not(
        cluster_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started by hand with `now` two hours ago, a live tick would taint nodes with that time,
    and the next real tick would delete them before their grace periods: only a dry run (or a
    fake cluster's simulated clock) may take `now`."""
    from kube_elevator.tasks.core.errors import InputError

    monkeypatch.delenv("ELEVATOR_SIMULATED_CLOCK")
    cluster = cluster_factory(4, min_nodes=1)  # no pods: a live tick would taint two nodes
    past = datetime.now(UTC).timestamp() - 7200
    with pytest.raises(InputError, match="now: a tick at another time than now must be a dry"):
        cluster.tick(past)
    assert all(cluster.taints(node) == [] for node in cluster.node_names)
    assert cluster.tick(past, dry_run=True)["delta"] == -2
    assert all(cluster.taints(node) == [] for node in cluster.node_names)


def test_an_unreachable_pushgateway_does_not_fail_a_tick_that_acted(
        cluster_factory: Any) -> None:
    cluster = cluster_factory(2)
    for index in range(10):
        cluster.pod(f"job-{index}")
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    result = cluster.tick(T0, pushgateway=f"http://user:secret@127.0.0.1:{port}")
    assert result["status"] == "acted" and cluster.desired() == 8


def test_dry_run_changes_nothing_and_reports_the_plan(cluster_factory: Any) -> None:
    cluster = cluster_factory(2)
    for index in range(10):
        cluster.pod(f"job-{index}")
    writes_before = len([r for r in cluster.kube.requests if r.verb not in ("get", "list")])
    result = cluster.tick(T0, dry_run=True)
    assert result["status"] == "dry run"
    assert result["actions"]["asg_desired"] == 8 and result["done"]["asg_desired_set"] is None
    assert cluster.desired() == 2
    assert len([r for r in cluster.kube.requests if r.verb not in ("get", "list")]) == \
        writes_before


def test_two_ticks_at_once_scale_up_once(cluster_factory: Any) -> None:
    cluster = cluster_factory(2)
    for index in range(10):
        cluster.pod(f"job-{index}")
    # Hold the first Lease write back, so both ticks read the Lease before either writes.
    cluster.kube.delay_next("create", "leases", seconds=1.0)
    results: list[dict[str, Any]] = []
    threads = [threading.Thread(target=lambda: results.append(cluster.tick(T0)))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Exactly one acts; the other lost the Lease race, or (if it read late) saw the lock held.
    statuses = sorted(result["status"] for result in results)
    assert statuses in (["acted", "lost race"], ["acted", "nothing to do"])
    assert cluster.desired() == 8


@flow(name="autoscale-with-faults")
def tick_with_adapters(config: str, adapters: Adapters, now: float) -> list[dict[str, Any]]:
    """The same tick as `autoscale`, on adapters the test has wired faults into."""
    groups = load_node_groups(config).node_groups
    return [result.to_json() for result in live_tick(run_as_task, adapters, groups, now)]


def test_faults_are_retried_and_the_asg_is_raised_once(cluster_factory: Any,
                                                       fake_aws: FakeAws) -> None:
    cluster = cluster_factory(2)
    for index in range(10):
        cluster.pod(f"job-{index}")
    autoscaling, ec2 = fake_aws.client("autoscaling"), fake_aws.client("ec2")
    cloud = AsgClient(autoscaling, ec2)
    # Kubernetes: the first two pod lists fail with 500.
    cluster.kube.fail_next("list", "pods", count=2, status=500)
    # AWS: the first describe is throttled; the first SetDesiredCapacity reaches AWS but its
    # answer is lost (a read timeout), so the retry must not raise the ASG again.
    fail_next_calls(autoscaling, "DescribeAutoScalingGroups", count=1)
    sent = []

    def lose_first_answer(**_: Any) -> None:
        sent.append(1)
        if len(sent) == 1:
            raise botocore.exceptions.ReadTimeoutError(endpoint_url=fake_aws.endpoint_url)

    autoscaling.meta.events.register("after-call.auto-scaling.SetDesiredCapacity",
                                     lose_first_answer)
    adapters = Adapters(KubeClient.from_config(cluster.kubeconfig), cloud)
    (result,) = tick_with_adapters(str(cluster.config), adapters, T0)
    assert result["status"] == "acted" and result["done"]["asg_desired_set"] == 8
    assert cluster.desired() == 8
    assert len(sent) == 1  # the retry found desired already at 8 and sent nothing
    failed_lists = [r for r in cluster.kube.requests if r.verb == "list"
                    and r.resource == "pods" and r.status == 500]
    assert len(failed_lists) == 2


def test_conflict_on_taint_rereads_the_node_and_still_taints(cluster_factory: Any) -> None:
    cluster = cluster_factory(3)
    cluster.kube.fail_next("patch", "nodes", count=1, status=409)
    result = cluster.tick(T0)  # 0% => fast removal of 2
    assert result["done"]["tainted"] == cluster.node_names[:2]
    assert all(cluster.taints(node) for node in cluster.node_names[:2])
    patches = [r for r in cluster.kube.requests if r.verb == "patch" and r.resource == "nodes"]
    assert [r.status for r in patches] == [409, 200, 200]


def test_with_cluster_autoscaler_ideas_every_step_that_leaves_the_process_is_a_task_run(
        cluster_factory: Any) -> None:
    cluster = cluster_factory(3, scale_up_threshold_percent=80,
                              cluster_autoscaler={"enabled": True})
    busy, other, empty = cluster.node_names
    cluster.pod("web-0", cpu="700m", node=busy, owner="web")
    cluster.pod("web-1", cpu="700m", node=other, owner="web")
    outcome = run_here(lambda: autoscale(nodegroups=str(cluster.config), now=at(T0),
                                         kubeconfig=str(cluster.kubeconfig), return_state=True))
    state = outcome.state
    (first,) = outcome.results()
    # 47%: Escalator holds, and CA starts counting the empty node's unneeded time.
    assert first["delta"] == 0 and first["done"]["tainted"] == []
    lease = cluster.kube.get("leases", "elevator-batch", "kube-system")
    assert empty in lease["metadata"]["annotations"]["elevator.io/unneeded-since"]
    steps = {"collect-pods", "collect-nodes", "collect-pdbs", "read-locks",
             "write-lock", "read-group-states", "plan-unneeded-scale-down"}
    # The server records task runs from their events, after the flow run returns: poll it.
    deadline = time.monotonic() + scaled(60)
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[state.state_details.flow_run_id])))
            names = {run.name.rsplit("-", 1)[0] for run in runs}
            completed = all(run.state is not None and run.state.is_completed() for run in runs)
            if (steps <= names and completed) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert steps <= names
    assert completed, [(run.name, run.state and run.state.type) for run in runs]

    due = cluster.tick(T0 + 600)
    assert due["done"]["tainted"] == [empty]
    assert any(f"{empty} unneeded for 600s" in note for note in due["notes"])
