"""Faults a test sees through a client that retries, held faults, nested `fake_cluster()`
blocks, and `add_node_group`'s refusals (docs/harness.md, Faults and retries)."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube_elevator.harness import fake_cluster


def _asg_names(cluster: object) -> list[str]:
    autoscaling = cluster.boto3_client("autoscaling")  # type: ignore[attr-defined]
    return sorted(g["AutoScalingGroupName"]
                  for g in autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"])


def test_a_429_reaches_the_code_only_past_the_official_clients_retries() -> None:
    with fake_cluster() as cluster, cluster.api_client() as api_client:
        core = client.CoreV1Api(api_client)
        # urllib3 retries a 429 that carries Retry-After three times (Retry(total=3)): one
        # failure is absorbed, the list succeeds.
        cluster.fail_next("list", "pods", status=429)
        assert core.list_namespaced_pod("default").items == []
        lists = [r for r in cluster.kube.requests if r.verb == "list" and r.resource == "pods"]
        assert [r.status for r in lists] == [429, 200]
        cluster.fail_next("list", "pods", count=4, status=429)
        with pytest.raises(ApiException) as raised:
            core.list_namespaced_pod("default")
        assert raised.value.status == 429


def test_a_held_fault_holds_until_cleared() -> None:
    with fake_cluster() as cluster, cluster.api_client() as api_client:
        core = client.CoreV1Api(api_client)
        cluster.fail_next("get", "nodes", status=500, hold=True)
        for _ in range(3):
            with pytest.raises(ApiException) as raised:
                core.read_node("missing")
            assert raised.value.status == 500
        cluster.clear_faults()
        with pytest.raises(ApiException) as raised:
            core.read_node("missing")
        assert raised.value.status == 404  # the real answer again


def test_a_nested_fake_cluster_restores_the_outer_state() -> None:
    with fake_cluster() as outer:
        outer.add_node_group("outer-group", desired=1)
        outer_instances = outer.aws.instances("outer-group")
        with fake_cluster() as inner:
            assert _asg_names(inner) == []  # a fresh cluster
            inner.add_node_group("inner-group", desired=2)
            assert _asg_names(inner) == ["inner-group"]
        assert _asg_names(outer) == ["outer-group"]
        assert outer.aws.instances("outer-group") == outer_instances
        outer.add_node_group("outer-later", desired=1)  # moto still works for the outer block
        assert _asg_names(outer) == ["outer-group", "outer-later"]
        outer.advance(120)
        assert len(outer.nodes()) == 2


def test_add_node_group_names_the_group_and_the_rule() -> None:
    with fake_cluster() as cluster:
        cluster.add_node_group("workers")
        with pytest.raises(ValueError, match=r"node group 'workers': the name is taken .*"
                                             r"names taken: workers"):
            cluster.add_node_group("workers")
        with pytest.raises(ValueError, match=r"node group 'far': availability zone 'eu-west-1a' "
                                             r"is not in the cluster's region us-east-1; zones "
                                             r"allowed: us-east-1a, "):
            cluster.add_node_group("far", zone="eu-west-1a")
        assert _asg_names(cluster) == ["workers"]
