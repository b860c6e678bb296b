"""Small builders for records and configs, so each test states only what matters to it."""

from __future__ import annotations

from typing import Any

from tasks.core.api_objects import Taint
from tasks.core.records import AutoScalingGroup, NodeRecord, PodRecord
from tasks.escalator.config import NodeGroupConfig, parse_node_groups

MiB = 2**20
LABEL = ("customer", "batch")

GROUP_DEFAULTS: dict[str, Any] = {
    "name": "batch",
    "label_key": "customer",
    "label_value": "batch",
    "cloud_provider_group_name": "batch-asg",
    "min_nodes": 1,
    "max_nodes": 10,
    "taint_upper_capacity_threshold_percent": 40,
    "taint_lower_capacity_threshold_percent": 10,
    "scale_up_threshold_percent": 70,
    "slow_node_removal_rate": 1,
    "fast_node_removal_rate": 2,
    "soft_delete_grace_period": "1m",
    "hard_delete_grace_period": "10m",
    "scale_up_cool_down_period": "2m",
}


def group_dict(**overrides: Any) -> dict[str, Any]:
    return {**GROUP_DEFAULTS, **overrides}


def make_group(**overrides: Any) -> NodeGroupConfig:
    return parse_node_groups({"node_groups": [group_dict(**overrides)]},
                             "test.yaml").node_groups[0]


def make_pod(name: str = "p", cpu: int = 500, memory: int = 100 * MiB, node: str = "",
             phase: str | None = None, **fields: Any) -> PodRecord:
    return PodRecord(
        name=name, namespace="default", node_name=node,
        phase=phase or ("Running" if node else "Pending"),
        cpu_request_milli=cpu, memory_request_bytes=memory,
        node_selector=fields.pop("node_selector", {LABEL[0]: LABEL[1]}),
        scheduled=fields.pop("scheduled", bool(node)), **fields)


def make_node(name: str, created: float = 0.0, cpu: int = 1000, memory: int = 4000 * MiB,
              tainted_at: int | None = None, force: bool = False, cordoned: bool = False,
              **fields: Any) -> NodeRecord:
    taints = []
    if tainted_at is not None:
        taints.append(Taint("atlassian.com/escalator", str(tainted_at), "NoSchedule"))
    if force:
        taints.append(Taint("atlassian.com/escalator-force", "", "NoSchedule"))
    return NodeRecord(
        name=name, labels=fields.pop("labels", {LABEL[0]: LABEL[1]}),
        created_unix_seconds=created, cpu_allocatable_milli=cpu,
        memory_allocatable_bytes=memory, unschedulable=cordoned, taints=tuple(taints),
        provider_id=fields.pop("provider_id", f"aws:///us-east-1a/i-{name}"), **fields)


def make_asg(desired: int, min_size: int = 1, max_size: int = 10) -> AutoScalingGroup:
    return AutoScalingGroup("batch-asg", min_size, max_size, desired)
