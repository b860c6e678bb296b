"""The harness (issue 36 item 1): `kube_elevator.harness.fake_cluster()` and the pytest plugin's
fixtures, driven with the official client and boto3 as a user's code drives them. (The plugin
in a stranger's venv: tests/e2e/test_harness_stranger.py.)"""

from __future__ import annotations

import asyncio
import os
import uuid

import boto3
import kubernetes.config
import pytest
import urllib3
from kubernetes import client

from kube_elevator.harness import FakeCluster, ManualClock, current, fake_cluster
from tests.builders import api_pod


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"  # our suite's fake_aws is one moto per session


def test_fake_cluster_points_kubeconfig_and_aws_at_itself_and_restores_them_after() -> None:
    before = (os.environ.get("KUBECONFIG"), os.environ.get("AWS_ENDPOINT_URL"),
              kubernetes.config.KUBE_CONFIG_DEFAULT_LOCATION)
    with fake_cluster(start_time=1_800_000_000) as cluster:
        assert os.environ["KUBECONFIG"] == str(cluster.kubeconfig)
        assert "AWS_ENDPOINT_URL" not in os.environ  # in-process moto: boto3's default reaches it
        cluster.add_node_group("workers", desired=2, labels={"pool": "workers"})
        kubernetes.config.load_kube_config()  # the default location is the fake's meanwhile
        nodes = client.CoreV1Api().list_node(label_selector="pool=workers").items
        assert [node.metadata.name for node in nodes] == ["workers-001", "workers-002"]
        assert nodes[0].metadata.creation_timestamp.timestamp() == 1_800_000_000
        groups = boto3.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"]
        assert [(g["AutoScalingGroupName"], g["DesiredCapacity"], g["LaunchTemplate"]
                 ["LaunchTemplateName"]) for g in groups] == [("workers", 2, "lt-workers")]
        assert current() is cluster
    assert (os.environ.get("KUBECONFIG"), os.environ.get("AWS_ENDPOINT_URL"),
            kubernetes.config.KUBE_CONFIG_DEFAULT_LOCATION) == before
    with pytest.raises(RuntimeError, match="no fake_cluster"):
        current()
    with pytest.raises(RuntimeError, match="not started"):
        cluster.nodes()


def test_the_decorator_gives_each_call_a_fresh_cluster_sync_and_async() -> None:
    seen: list[int] = []

    @fake_cluster()
    def count_nodes_after_adding(desired: int) -> int:
        current().add_node_group("workers", desired=desired)  # the same name: a new moto
        return len(current().nodes())

    @fake_cluster()
    async def count_nodes_async() -> int:
        await asyncio.sleep(0)  # the cluster lives across the awaits
        return len(current().nodes())

    seen += [count_nodes_after_adding(1), count_nodes_after_adding(3)]
    seen.append(asyncio.run(count_nodes_async()))
    assert seen == [1, 3, 0]


def test_an_asg_grows_its_instances_join_after_the_boot_delay_and_pending_pods_are_bound(
        fake_cluster: FakeCluster, fake_clock: ManualClock) -> None:
    """The plugin's fixture (here on our session's moto server, as conftest.py overrides
    `fake_aws`): the scheduler model binds pods the test created; a terminated instance's
    Node leaves and its bare pods go with it, as PodGC deletes them."""
    name = unique("workers")
    fake_cluster.add_node_group(name, max_size=4, desired=1, labels={"pool": name},
                                boot_delay_seconds=60)
    core = client.CoreV1Api(fake_cluster.api_client())
    for index in range(2):
        core.create_namespaced_pod("default", api_pod(
            f"big-{index}", cpu="1500m", phase=None, owner_kind=None,
            node_selector={"pool": name}))
    fake_cluster.step()
    pods = {p.metadata.name: p for p in core.list_namespaced_pod("default").items}
    assert pods["big-0"].spec.node_name == f"{name}-001"
    assert pods["big-0"].status.phase == "Running"
    assert pods["big-1"].spec.node_name is None
    (condition,) = pods["big-1"].status.conditions
    assert (condition.type, condition.status, condition.reason) == \
        ("PodScheduled", "False", "Unschedulable")

    autoscaling = fake_cluster.boto3_client("autoscaling")
    autoscaling.set_desired_capacity(AutoScalingGroupName=name, DesiredCapacity=2)
    start = fake_clock.now()
    fake_cluster.advance(59)
    assert len(core.list_node(label_selector=f"pool={name}").items) == 1
    assert fake_cluster.advance(1) == start + 60
    assert core.read_namespaced_pod("big-1", "default").spec.node_name == f"{name}-002"

    (instance, _) = sorted(fake_cluster.aws.instances(name), key=lambda i: i["InstanceId"])
    node_of = {n.spec.provider_id.rsplit("/", 1)[-1]: n.metadata.name
               for n in core.list_node(label_selector=f"pool={name}").items}
    autoscaling.terminate_instance_in_auto_scaling_group(
        InstanceId=instance["InstanceId"], ShouldDecrementDesiredCapacity=True)
    fake_cluster.advance(1)
    gone = node_of[instance["InstanceId"]]
    assert gone not in {n.metadata.name for n in core.list_node().items}
    assert all(p.spec.node_name != gone for p in core.list_namespaced_pod("default").items)
    assert len(core.list_namespaced_pod("default").items) == 1  # no controller re-created it


@pytest.mark.fake_cluster(start_time=1_700_000_000)
def test_a_bound_pod_is_running_and_ready_as_the_kubelet_would_report_it(
        fake_cluster: FakeCluster) -> None:
    """Bound pods (and DaemonSet pods) say Ready, their containers ready and their start time,
    as `kubectl get pods` and a WatermarkPodAutoscaler's readiness rule read them (they showed
    0/1 and counted as unready)."""
    name = unique("workers")
    fake_cluster.add_node_group(name, desired=1, labels={"pool": name},
                                daemonsets=[{"name": "kube-proxy", "cpu": "100m",
                                             "memory": "64Mi"}])
    core = client.CoreV1Api(fake_cluster.api_client())
    core.create_namespaced_pod("default", api_pod("web", cpu="500m", phase=None,
                                                  owner_kind=None, node_selector={"pool": name}))
    fake_cluster.step()
    daemon = [p for p in core.list_namespaced_pod("kube-system").items
              if p.spec.node_name == f"{name}-001"]
    for pod in [core.read_namespaced_pod("web", "default"), *daemon]:
        assert pod.status.phase == "Running"
        assert {c.type: c.status for c in pod.status.conditions} == {
            "PodScheduled": "True", "Initialized": "True", "ContainersReady": "True",
            "Ready": "True"}
        assert pod.status.start_time.timestamp() == 1_700_000_000
        assert [s.ready for s in pod.status.container_statuses] == \
            [True] * len(pod.spec.containers)
    assert daemon


@pytest.mark.fake_cluster(start_time=1_700_000_000, scheduler_profile="most-allocated")
def test_the_marker_sets_the_clock_and_the_profile(fake_cluster: FakeCluster,
                                                   fake_clock: ManualClock) -> None:
    assert fake_clock.now() == 1_700_000_000
    assert fake_clock.datetime().year == 2023
    assert fake_cluster.world.scheduler.profile.name == "most-allocated"
    with pytest.raises(ValueError, match="forward only"):
        fake_clock.advance(-1)


def test_the_fault_tools_reach_a_users_client(fake_cluster: FakeCluster) -> None:
    core = client.CoreV1Api(fake_cluster.api_client())
    core.create_node({"metadata": {"name": "n1"}})
    fake_cluster.fail_next("patch", "nodes", status=409)  # a conflict, once
    with pytest.raises(client.ApiException) as raised:
        core.patch_node("n1", {"spec": {"unschedulable": True}})
    assert raised.value.status == 409
    core.patch_node("n1", {"spec": {"unschedulable": True}})  # the next one passes
    fake_cluster.kube_faults.add("status", status=503, method="GET", path="/api/v1/nodes")
    with pytest.raises(client.ApiException, match="503"):
        core.list_node()

    with fake_cluster.freezing_proxy() as (proxy, kubeconfig):
        configuration = client.Configuration()
        kubernetes.config.load_kube_config(str(kubeconfig), client_configuration=configuration)
        configuration.retries = False  # urllib3 would retry a timed-out GET on a new connection
        first = client.ApiClient(configuration)
        assert len(client.CoreV1Api(first).list_node().items) == 1  # through the proxy
        assert proxy.wait_for_connections(1)
        assert proxy.freeze() == 1  # its kept-alive connection: silent from now on
        with pytest.raises(urllib3.exceptions.ReadTimeoutError):
            client.CoreV1Api(first).list_node(_request_timeout=(2, 1))
        assert proxy.held_bytes > 0  # the request reached the proxy and stayed there
        second = kubernetes.config.new_client_from_config(str(kubeconfig))
        assert len(client.CoreV1Api(second).list_node().items) == 1  # new connections pass

    asg = unique("faulty")
    fake_cluster.add_node_group(asg, desired=0)
    autoscaling = fake_cluster.boto3_client("autoscaling")
    fake_cluster.fail_next_aws_calls(autoscaling, "SetDesiredCapacity", code="Throttling")
    with pytest.raises(autoscaling.exceptions.ClientError, match="Throttling"):
        autoscaling.set_desired_capacity(AutoScalingGroupName=asg, DesiredCapacity=1)
