"""A user's own small drain script: cordon a node, evict its pods, and take its instance out of
its Auto Scaling Group, shrinking the group by one. The harness's example (docs/harness.md)."""

from __future__ import annotations

import boto3
from kubernetes import client


def drain(core: client.CoreV1Api, node_name: str) -> int:
    """Cordon `node_name`, evict every pod on it but DaemonSet pods, terminate its instance
    (the ASG's desired capacity goes down by one). Returns how many pods were evicted."""
    core.patch_node(node_name, {"spec": {"unschedulable": True}})
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node_name}").items
    evicted = 0
    for pod in pods:
        owners = pod.metadata.owner_references or []
        if any(owner.kind == "DaemonSet" for owner in owners):
            continue
        core.create_namespaced_pod_eviction(pod.metadata.name, pod.metadata.namespace, {
            "metadata": {"name": pod.metadata.name, "namespace": pod.metadata.namespace}})
        evicted += 1
    instance_id = core.read_node(node_name).spec.provider_id.rsplit("/", 1)[-1]
    boto3.client("autoscaling").terminate_instance_in_auto_scaling_group(
        InstanceId=instance_id, ShouldDecrementDesiredCapacity=True)
    return evicted
