"""A trace scenario from a real cluster's history: kube-state-metrics series in Prometheus.

`elevator scenario from-prometheus` asks, at the window's end, for every pod that existed in
the window: its creation (`kube_pod_created`) and completion (`kube_pod_completion_time`), its
requests summed over its containers (`kube_pod_container_resource_requests`), the node it ran
on (`kube_pod_info`) and that node's labels (`kube_node_labels`), which say its node group;
failed pods (`kube_pod_status_phase`) are left out. Each pod becomes a trace row: arrival since
the window's start (0 for a pod already running then), requests, duration (empty: it ran to the
end), node group. The ASGs start at each group's node count at the window's start.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from tasks.escalator.config import NodeGroupConfig

PodKey = tuple[str, str]


class InstantQueries(Protocol):
    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class TraceRow:
    arrival_s: float
    cpu_milli: int
    memory_bytes: int
    duration_s: float | None
    node_group: str


def _by_pod(samples: Sequence[Mapping[str, Any]]) -> dict[PodKey, float]:
    values: dict[PodKey, float] = {}
    for sample in samples:
        labels = sample.get("metric", {})
        key = (str(labels.get("namespace", "")), str(labels.get("pod", "")))
        value = float(sample["value"][1])
        if key[1] and not math.isnan(value):
            values[key] = value
    return values


def read_trace(prometheus: InstantQueries, start: float, end: float,
               groups: Sequence[NodeGroupConfig]) -> tuple[list[TraceRow], dict[str, int]]:
    """The pods of [start, end] as trace rows, and each group's node count at `start`."""
    window = f"{max(1, math.ceil(end - start))}s"
    created = _by_pod(prometheus.query(f"max_over_time(kube_pod_created[{window}])", end))
    completed = _by_pod(prometheus.query(
        f"max by (namespace, pod) (max_over_time(kube_pod_completion_time[{window}]))", end))
    failed = _by_pod(prometheus.query(
        f'max by (namespace, pod) (max_over_time(kube_pod_status_phase{{phase="Failed"}}'
        f"[{window}]))", end))
    requests = {resource: _by_pod(prometheus.query(
        f'sum by (namespace, pod) (max_over_time(kube_pod_container_resource_requests'
        f'{{resource="{resource}"}}[{window}]))', end)) for resource in ("cpu", "memory")}
    nodes_of: dict[PodKey, str] = {}
    for sample in prometheus.query(f"max_over_time(kube_pod_info[{window}])", end):
        labels = sample.get("metric", {})
        if labels.get("node"):
            nodes_of[(labels.get("namespace", ""), labels.get("pod", ""))] = labels["node"]
    group_of_node: dict[str, str] = {}
    node_labels = prometheus.query(f"max_over_time(kube_node_labels[{window}])", end)
    for sample in node_labels:
        labels = sample.get("metric", {})
        for group in groups:
            if labels.get(f"label_{_label_name(group.label_key)}") == group.label_value:
                group_of_node[str(labels.get("node", ""))] = group.name
    at_start: dict[str, int] = defaultdict(int)
    for sample in prometheus.query("kube_node_labels", start):
        node = str(sample.get("metric", {}).get("node", ""))
        if node in group_of_node:
            at_start[group_of_node[node]] += 1
    rows = []
    for key, created_at in sorted(created.items(), key=lambda item: (item[1], item[0])):
        group_name = group_of_node.get(nodes_of.get(key, ""))
        if group_name is None or failed.get(key, 0) >= 1 or created_at > end:
            continue  # never placed in a group's node, failed, or after the window
        finished = completed.get(key)
        began = max(created_at, start)
        rows.append(TraceRow(
            arrival_s=round(began - start, 3),
            cpu_milli=round(requests["cpu"].get(key, 0.0) * 1000),
            memory_bytes=round(requests["memory"].get(key, 0.0)),
            duration_s=None if finished is None or finished > end
            else round(max(0.0, finished - began), 3),
            node_group=group_name))
    return rows, dict(at_start)


def _label_name(key: str) -> str:
    """kube-state-metrics' label name for a node label key (`label_` + sanitised)."""
    return "".join(ch if ch.isalnum() else "_" for ch in key)


def trace_csv(rows: Sequence[TraceRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["arrival_s", "cpu", "memory", "duration_s", "node_group"])
    for row in rows:
        writer.writerow([f"{row.arrival_s:g}", f"{row.cpu_milli}m", str(row.memory_bytes),
                         "" if row.duration_s is None else f"{row.duration_s:g}",
                         row.node_group])
    return out.getvalue()


def write_scenario(directory: Path, nodegroups: Path, groups: Sequence[NodeGroupConfig],
                   rows: Sequence[TraceRow], nodes_at_start: Mapping[str, int],
                   duration_s: float, instance_type: str = "m5.large") -> Path:
    """`scenario.yaml` and `trace.csv` in `directory`, ready for `elevator simulate`/`tune`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "trace.csv").write_text(trace_csv(rows))
    asgs = []
    for group in groups:
        low, high = group.min_nodes, max(group.max_nodes, group.min_nodes + 1)
        desired = min(max(nodes_at_start.get(group.name, low), low), high)
        asgs.append({"name": group.cloud_provider_group_name, "min": low, "max": high,
                     "desired": desired, "instance_type": instance_type,
                     "node_labels": {group.label_key: group.label_value}})
    scenario = {"tick_interval": "1m", "step": "10s", "duration": f"{math.ceil(duration_s)}s",
                "nodegroups": str(nodegroups.resolve()), "asgs": asgs, "trace": "trace.csv"}
    path = directory / "scenario.yaml"
    path.write_text("# From kube-state-metrics (elevator scenario from-prometheus).\n"
                    + yaml.safe_dump(scenario, sort_keys=False))
    return path


__all__ = ["TraceRow", "read_trace", "trace_csv", "write_scenario"]
