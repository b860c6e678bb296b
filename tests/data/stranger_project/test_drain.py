"""The user's tests: only the harness's fixtures (no conftest.py), as docs/harness.md shows."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from drain import drain
from kubernetes import client, config

from kube_elevator.harness import FakeCluster, fake_cluster


def pod(name: str, cpu: str = "500m") -> dict[str, object]:
    return {"metadata": {"name": name}, "spec": {
        "nodeSelector": {"pool": "workers"},
        "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}}


def test_drain_evicts_the_pods_and_the_node_leaves(fake_cluster: FakeCluster) -> None:
    fake_cluster.add_node_group("workers", max_size=3, desired=2, labels={"pool": "workers"})
    config.load_kube_config()  # KUBECONFIG points at the fake while the fixture lives
    core = client.CoreV1Api()
    for index in range(3):
        core.create_namespaced_pod("default", pod(f"web-{index}"))
    fake_cluster.step()  # the scheduler binds the pending pods
    bound = {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod("default").items}
    assert all(bound.values()), bound
    victim = bound["web-0"]

    evicted = drain(core, victim)

    assert evicted == sum(node == victim for node in bound.values())
    fake_cluster.advance(10)  # moto terminated the instance: its Node goes
    assert [n.metadata.name for n in core.list_node().items] == \
        [name for name in ("workers-001", "workers-002") if name != victim]
    group = boto3.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=["workers"])["AutoScalingGroups"][0]
    assert group["DesiredCapacity"] == 1


def test_a_new_instance_joins_after_its_boot_delay(fake_cluster: FakeCluster) -> None:
    fake_cluster.add_node_group("workers", max_size=3, desired=1, labels={"pool": "workers"},
                                boot_delay_seconds=90)
    core = client.CoreV1Api(fake_cluster.api_client())
    core.create_namespaced_pod("default", pod("big", cpu="1500m"))
    core.create_namespaced_pod("default", pod("bigger", cpu="1500m"))
    fake_cluster.step()
    pending = [p.metadata.name for p in core.list_namespaced_pod("default").items
               if not p.spec.node_name]
    assert len(pending) == 1
    boto3.client("autoscaling").set_desired_capacity(AutoScalingGroupName="workers",
                                                     DesiredCapacity=2)
    fake_cluster.advance(89)
    assert len(fake_cluster.nodes()) == 1
    fake_cluster.advance(1)
    assert len(fake_cluster.nodes()) == 2
    assert core.read_namespaced_pod(pending[0], "default").status.phase == "Running"


def test_the_drain_fails_loudly_on_a_5xx(fake_cluster: FakeCluster) -> None:
    fake_cluster.add_node_group("workers", desired=1, labels={"pool": "workers"})
    fake_cluster.fail_next("list", "pods", status=503)
    core = client.CoreV1Api(fake_cluster.api_client())
    with pytest.raises(client.ApiException) as raised:
        drain(core, "workers-001")
    assert raised.value.status == 503


def test_the_plain_fixtures(kubeconfig: Path, api_client: client.ApiClient) -> None:
    client.CoreV1Api(api_client).create_node({"metadata": {"name": "by-hand"}})
    other = config.new_client_from_config(str(kubeconfig))
    assert [n.metadata.name for n in client.CoreV1Api(other).list_node().items] == ["by-hand"]


@fake_cluster()
def test_the_decorator_outside_the_fixtures() -> None:
    from kube_elevator.harness import current

    current().add_node_group("workers", desired=2)
    config.load_kube_config()
    assert len(client.CoreV1Api().list_node().items) == 2
