"""Synthetic cluster snapshots with realistic object JSON, for examples and benchmarks.

A pod here is about 1.3 KB of JSON, like a real one: labels, owner references, two containers
with requests and limits, tolerations, and status conditions.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from kube_elevator.tasks.core.timefmt import rfc3339


@dataclass(frozen=True)
class SyntheticGroup:
    name: str
    label_key: str
    label_value: str
    asg_name: str
    nodes: int
    pods: int
    node_cpu_milli: int = 4000
    node_memory_bytes: int = 16 * 2**30
    pod_cpu_milli: int = 250
    pod_memory_bytes: int = 512 * 2**20
    tainted_nodes: int = 0


def node_json(name: str, labels: dict[str, str], created: float, cpu_milli: int,
              memory_bytes: int, provider_id: str, taints: Sequence[dict[str, str]] = (),
              unschedulable: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"providerID": provider_id}
    if taints:
        spec["taints"] = list(taints)
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": rfc3339(created),
            "labels": {**labels, "kubernetes.io/hostname": name,
                       "kubernetes.io/os": "linux"},
        },
        "spec": spec,
        "status": {
            "allocatable": {"cpu": f"{cpu_milli}m", "memory": f"{memory_bytes // 1024}Ki",
                            "pods": "110"},
            "capacity": {"cpu": f"{cpu_milli}m", "memory": f"{memory_bytes // 1024}Ki",
                         "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def pod_json(name: str, namespace: str, node_selector: dict[str, str], node_name: str | None,
             cpu_milli: int, memory_bytes: int, created: float, rng: random.Random,
             phase: str | None = None) -> dict[str, Any]:
    """A pod shaped like what the API server returns for a ReplicaSet's pod."""
    app_name = name.rsplit("-", 2)[0]
    template_hash = f"{rng.getrandbits(32):08x}"
    stamp = rfc3339(created)
    scheduled = node_name is not None
    phase = phase or ("Running" if scheduled else "Pending")
    conditions = [{"type": "PodScheduled", "status": "True" if scheduled else "False",
                   "lastTransitionTime": stamp}]
    if not scheduled:
        conditions[0]["reason"] = "Unschedulable"
    else:
        conditions += [{"type": kind, "status": "True", "lastTransitionTime": stamp}
                       for kind in ("ContainersReady", "Ready")]
    sidecar_cpu = max(cpu_milli // 10, 10)
    spec: dict[str, Any] = {
        "containers": [
            {"name": "app", "image": f"registry.example.com/{app_name}:1.4.2",
             "ports": [{"containerPort": 8080}],
             "resources": {"requests": {"cpu": f"{cpu_milli - sidecar_cpu}m",
                                        "memory": f"{memory_bytes // 2**20 - 32}Mi"},
                           "limits": {"memory": f"{memory_bytes // 2**20}Mi"}}},
            {"name": "log-shipper", "image": "registry.example.com/log-shipper:2.0",
             "resources": {"requests": {"cpu": f"{sidecar_cpu}m", "memory": "32Mi"}}},
        ],
        "nodeSelector": node_selector,
        "restartPolicy": "Always",
        "serviceAccountName": "default",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
        ],
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"{rng.getrandbits(64):016x}-{rng.getrandbits(32):08x}",
            "resourceVersion": str(rng.randint(1000, 10**8)),
            "creationTimestamp": stamp,
            "labels": {"app": app_name, "pod-template-hash": template_hash, "team": namespace},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": f"{app_name}-{template_hash}",
                                 "uid": f"{rng.getrandbits(64):016x}",
                                 "controller": True}],
        },
        "spec": spec,
        "status": {"phase": phase, "conditions": conditions,
                   **({"startTime": stamp} if scheduled else {})},
    }


def synthetic_items(groups: Sequence[SyntheticGroup], now: float, seed: int = 7,
                    pending_fraction: float = 0.02) -> Iterator[dict[str, Any]]:
    """Nodes, then pods spread over each group's nodes (a few left pending)."""
    rng = random.Random(seed)
    for group in groups:
        for index in range(group.nodes):
            name = f"{group.name}-node-{index:05d}"
            tainted = index < group.tainted_nodes
            taints = [{"key": "atlassian.com/escalator", "value": str(int(now) - 600),
                       "effect": "NoSchedule"}] if tainted else []
            yield node_json(name, {group.label_key: group.label_value},
                            now - 86400 + index * 60, group.node_cpu_milli,
                            group.node_memory_bytes,
                            f"aws:///us-east-1a/i-{group.name[:4]}{index:013x}", taints)
    for group in groups:
        for index in range(group.pods):
            node = (None if rng.random() < pending_fraction or group.nodes == 0
                    else f"{group.name}-node-{rng.randrange(group.nodes):05d}")
            yield pod_json(f"{group.name}-app{index % 50}-{index:06d}-x{index % 7}",
                           f"team-{index % 20}", {group.label_key: group.label_value}, node,
                           group.pod_cpu_milli, group.pod_memory_bytes,
                           now - rng.randint(60, 86400), rng)


def write_list(path: str, items: Iterator[dict[str, Any]]) -> int:
    """Write a `kind: List` JSON file item by item (no whole document in memory); returns bytes."""
    written = 0
    with open(path, "wb") as out:
        head = b'{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":['
        out.write(head)
        written += len(head)
        for index, item in enumerate(items):
            chunk = (b"," if index else b"") + orjson.dumps(item)
            out.write(chunk)
            written += len(chunk)
        out.write(b"]}")
        written += 2
    return written


def asg_description(groups: Sequence[SyntheticGroup], min_size: int = 1,
                    max_size: int = 10_000) -> dict[str, Any]:
    """The `describe-auto-scaling-groups` answer matching `synthetic_items`' nodes."""
    return {"AutoScalingGroups": [
        {"AutoScalingGroupName": group.asg_name, "MinSize": min_size, "MaxSize": max_size,
         "DesiredCapacity": group.nodes,
         "Instances": [{"InstanceId": f"i-{group.name[:4]}{index:013x}",
                        "AvailabilityZone": "us-east-1a", "LifecycleState": "InService"}
                       for index in range(group.nodes)]}
        for group in groups]}
