"""The simulated cluster: Nodes that join for ASG instances, on a clock the caller controls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fakes.aws import FakeAws
from fakes.kube_api import FakeKubeApi
from fakes.snapshots import rfc3339


def node_for_instance(instance: Mapping[str, Any], labels: Mapping[str, str], cpu_milli: int,
                      memory_bytes: int, created: float) -> dict[str, Any]:
    """The Node a kubelet registers for an ASG instance (providerID as the AWS cloud provider)."""
    instance_id = instance["InstanceId"]
    zone = instance.get("AvailabilityZone", "us-east-1a")
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": instance_id, "creationTimestamp": rfc3339(created),
                     "labels": {**labels, "kubernetes.io/hostname": instance_id,
                                "topology.kubernetes.io/zone": zone}},
        "spec": {"providerID": f"aws:///{zone}/{instance_id}"},
        "status": {
            "allocatable": {"cpu": f"{cpu_milli}m", "memory": str(memory_bytes), "pods": "110"},
            "capacity": {"cpu": f"{cpu_milli}m", "memory": str(memory_bytes), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def join_instances(kube: FakeKubeApi, aws: FakeAws, asg_name: str, labels: Mapping[str, str],
                   cpu_milli: int, memory_bytes: int, created: float) -> list[str]:
    """Register a Node for every in-service instance of the ASG that has none yet."""
    existing = {node["metadata"]["name"] for node in kube.list("nodes")}
    joined = []
    for instance in aws.instances(asg_name):
        if instance["InstanceId"] in existing or instance.get("LifecycleState") != "InService":
            continue
        kube.create("nodes", node_for_instance(instance, labels, cpu_milli, memory_bytes,
                                               created))
        joined.append(instance["InstanceId"])
    return joined
