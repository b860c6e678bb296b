"""A trace scenario from a real cluster's history: kube-state-metrics series in Prometheus.

`elevator scenario from-prometheus` asks, at the window's end, for every pod that existed in
the window: its creation (`kube_pod_created`) and completion (`kube_pod_completion_time`), the
node it ran on and its owner's kind (`kube_pod_info`), its containers' and init containers'
requests (`kube_pod_container_resource_requests`, `kube_pod_init_container_resource_requests`,
native sidecars from `kube_pod_init_container_info`) and its overhead (`kube_pod_overhead_*`);
and for the nodes, their labels (`kube_node_labels`), which say their node group and instance
type, and their allocatable (`kube_node_status_allocatable`). Failed pods and pods done before
the window are left out. Each pod becomes a trace row: arrival since the window's start (0 for a
pod already running then), its request as kube-scheduler counts it, duration (empty: it ran to
the end), node group; a DaemonSet's pods (and a node's static pods) are not rows but the
per-node overhead of the groups they ran in (`asgs[].daemonsets`). The ASGs start at each
group's node count at the window's start, with its nodes' instance type
(`scenario_import_nodes`); `scenario_import_files` writes the files.

Series are keyed by namespace, pod and uid, so a pod re-created under its name (a StatefulSet's)
is two pods; a container's series are taken at their largest over the window before they are
summed, as KSM's `node` label moves a pending pod's series to a new one once it is bound.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kube_elevator.fakes.scenario_import_nodes import (
    INSTANCE_TYPE_KEYS,
    NodeSize,
    NodeType,
    ksm_label_name,
    missing_label_keys,
    node_sizes,
    node_type,
)
from kube_elevator.tasks.core.api_objects import RawContainer, RawResources, RawSpec
from kube_elevator.tasks.core.errors import shown
from kube_elevator.tasks.core.records import pod_requests
from kube_elevator.tasks.escalator.config import NodeGroupConfig

PodKey = tuple[str, str, str]  # namespace, pod, uid ("" before KSM labelled series with it)
Requests = tuple[int, int]  # milli-CPU, bytes

# A quantity fits an int64 once scaled (apimachinery's Quantity; tasks.core.quantity).
_QUANTITY_LIMIT = 2**63

_NOT_IN_A_LABEL = re.compile(r"[^a-z0-9-]+")

# Owners whose pods are on every node rather than workload: a DaemonSet's, and a static pod's
# mirror, which the kubelet owns by its Node.
PER_NODE_OWNERS = ("DaemonSet", "Node")


class InstantQueries(Protocol):
    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]: ...


class BadAnswer(Exception):
    """A Prometheus answer that is not an instant vector of usable numbers; the message names
    the query and the series."""


class NodeLabelsMissing(Exception):
    """kube-state-metrics runs (its series are there) but exports none of the node groups'
    label keys: no node is known to be a group's (`missing_labels_problem` says so)."""

    def __init__(self, keys: list[str], label_names_seen: set[str]) -> None:
        self.keys = keys
        self.label_names_seen = label_names_seen
        super().__init__(", ".join(keys))


@dataclass(frozen=True)
class TraceRow:
    arrival_s: float
    cpu_milli: int
    memory_bytes: int
    duration_s: float | None
    node_group: str
    # The pod's controller as kube_pod_info names it (kind, namespace, name), and the shape
    # of the scenario it takes its labels, affinity, ... from (`from-prometheus --shapes`).
    owner: tuple[str, str, str] = ("", "", "")
    shape: str = ""


@dataclass(frozen=True)
class PerNodePod:
    """A pod each node of a group holds (a DaemonSet's, or a static pod): `asgs[].daemonsets`."""

    name: str
    cpu_milli: int
    memory_bytes: int


@dataclass(frozen=True)
class GroupHistory:
    """What one node group's nodes were in the window."""

    nodes_at_start: int
    node_type: NodeType
    per_node_pods: tuple[PerNodePod, ...] = ()
    # Set when no node carried the group's label key in the window, while other groups' keys
    # were there: a group without nodes, or a key kube-state-metrics does not export.
    unlabelled_key: str = ""


@dataclass
class ClusterHistory:
    """The window's workload (trace rows) and each node group's nodes, by group name."""

    rows: list[TraceRow]
    groups: dict[str, GroupHistory] = field(default_factory=dict)


def _series(labels: Mapping[str, Any]) -> str:
    """A sample's labels in PromQL's notation, so an error line names the series."""
    text = "{" + ",".join(f'{key}="{value}"' for key, value in labels.items()) + "}"
    return text if len(text) <= 200 else text[:199] + "…"


def _samples(prometheus: InstantQueries, promql: str, at: float
             ) -> list[tuple[dict[str, str], float]]:
    """The query's samples as (labels, value); NaN is kept (the callers skip it), an infinity,
    a missing value or one that is no number is a BadAnswer: a workload has no such value."""
    found = []
    for sample in prometheus.query(promql, at):
        labels = sample.get("metric", {}) if isinstance(sample, Mapping) else None
        if not isinstance(labels, Mapping):
            raise BadAnswer(f"{promql}: {shown(sample)} is not a sample (metric and value)")
        series = _series(labels)
        pair = sample.get("value")
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise BadAnswer(f"{promql}: series {series}: no value [time, number]")
        try:
            value = float(pair[1])
        except (TypeError, ValueError):
            raise BadAnswer(f"{promql}: series {series}: value {shown(pair[1])} is not a "
                            "number") from None
        if math.isinf(value):
            raise BadAnswer(f"{promql}: series {series}: value {pair[1]} is not finite")
        found.append(({str(key): str(text) for key, text in labels.items()}, value))
    return found


def _pod_key(labels: Mapping[str, str]) -> PodKey:
    return labels.get("namespace", ""), labels.get("pod", ""), labels.get("uid", "")


def _by_series(prometheus: InstantQueries, promql: str, at: float,
               request_scale: float | None = None
               ) -> list[tuple[PodKey, dict[str, str], float]]:
    """Each pod's samples as (pod, labels, value), NaN and pod-less series skipped. With
    `request_scale` (1000 for cores to millicores) the values are requests: 0 or more, and
    within an int64 once scaled, as the API server allows."""
    found = []
    for labels, value in _samples(prometheus, promql, at):
        key = _pod_key(labels)
        if not key[1] or math.isnan(value):
            continue
        if request_scale is not None and not 0 <= value * request_scale < _QUANTITY_LIMIT:
            rule = "negative" if value < 0 else "too large"
            raise BadAnswer(f"{promql}: series {_series(labels)}: request {value:g} is {rule} "
                            "(requests are 0 or more and fit an int64)")
        found.append((key, labels, value))
    return found


def _by_pod(prometheus: InstantQueries, promql: str, at: float,
            request_scale: float | None = None) -> dict[PodKey, float]:
    """Each pod's value (the query yields one series per pod)."""
    return {key: value for key, _, value in _by_series(prometheus, promql, at, request_scale)}


def _container_requests(prometheus: InstantQueries, metric: str, window: str, at: float
                        ) -> dict[PodKey, dict[str, Requests]]:
    """Each pod's containers' (milli-CPU, bytes) requests from a KSM request metric
    (`resource="cpu"` in cores, `"memory"` in bytes), each at its largest in the window."""
    found: dict[PodKey, dict[str, list[int]]] = defaultdict(dict)
    for index, (resource, scale) in enumerate((("cpu", 1000.0), ("memory", 1.0))):
        promql = (f"max by (namespace, pod, uid, container) (max_over_time("
                  f'{metric}{{resource="{resource}"}}[{window}]))')
        for key, labels, value in _by_series(prometheus, promql, at, request_scale=scale):
            found[key].setdefault(labels.get("container", ""), [0, 0])[index] = \
                round(value * scale)
    return {key: {name: (cpu, memory) for name, (cpu, memory) in containers.items()}
            for key, containers in found.items()}


def _quantities(requests: Requests) -> RawResources:
    cpu, memory = requests
    return RawResources(requests={"cpu": f"{cpu}m", "memory": str(memory)})


def scheduler_request(containers: Mapping[str, Requests], init_containers: Mapping[str, Requests],
                      sidecars: set[str], overhead: Requests = (0, 0)) -> Requests:
    """A pod's request as kube-scheduler counts it (tasks.core.records.pod_requests, after
    k8s.io/component-helpers resource.PodRequests): max(sum of containers and native sidecars,
    each init container with the sidecars started before it) + overhead.

    KSM does not say the init containers' order, so the sidecars are taken to start first (as
    Istio's and most injected sidecars do): exact then, and never less than the pod's request
    otherwise. Pod-level `spec.resources` are not exported by KSM and not counted."""
    ordered = sorted(init_containers, key=lambda name: (name not in sidecars, name))
    spec = RawSpec(
        containers=[RawContainer(resources=_quantities(requests))
                    for requests in containers.values()],
        initContainers=[RawContainer(resources=_quantities(init_containers[name]),
                                     restartPolicy="Always" if name in sidecars else None)
                        for name in ordered],
        overhead=_quantities(overhead).requests if any(overhead) else None)
    cpu, memory, _ = pod_requests(spec)
    return cpu, memory


def _pod_requests(prometheus: InstantQueries, window: str, at: float) -> dict[PodKey, Requests]:
    """Every pod's request as kube-scheduler counts it (`scheduler_request`)."""
    containers = _container_requests(prometheus, "kube_pod_container_resource_requests",
                                     window, at)
    init_containers = _container_requests(
        prometheus, "kube_pod_init_container_resource_requests", window, at)
    sidecars: dict[PodKey, set[str]] = defaultdict(set)
    for key, labels, _ in _by_series(
            prometheus, "max by (namespace, pod, uid, container) (max_over_time("
            f'kube_pod_init_container_info{{restart_policy="Always"}}[{window}]))', at):
        sidecars[key].add(labels.get("container", ""))
    overhead = {resource: _by_pod(
        prometheus, f"max by (namespace, pod, uid) (max_over_time({metric}[{window}]))", at,
        request_scale=scale) for resource, metric, scale in (
        ("cpu", "kube_pod_overhead_cpu_cores", 1000.0),
        ("memory", "kube_pod_overhead_memory_bytes", 1.0))}
    return {key: scheduler_request(
        containers.get(key, {}), init_containers.get(key, {}), sidecars.get(key, set()),
        (round(overhead["cpu"].get(key, 0.0) * 1000), round(overhead["memory"].get(key, 0.0))))
        for key in containers.keys() | init_containers.keys() | overhead["cpu"].keys()
        | overhead["memory"].keys()}


@dataclass
class _Nodes:
    """The nodes of the window: each one's group, instance-type label and allocatable."""

    group_of_node: dict[str, str]
    instance_type_of_node: dict[str, str]
    sizes: dict[str, NodeSize]
    at_start: dict[str, int]
    missing_keys: list[str]


def _read_nodes(prometheus: InstantQueries, start: float, end: float, window: str,
                groups: Sequence[NodeGroupConfig], pods_seen: bool) -> _Nodes:
    """The nodes' groups, from their labels; NodeLabelsMissing when kube-state-metrics ran (a
    pod or a node of it is in the window) but exported none of the groups' label keys. A key
    missing beside others is not an error: the group may have had no node."""
    labels_of = _samples(prometheus, f"max_over_time(kube_node_labels[{window}])", end)
    sizes = node_sizes(_samples(prometheus, "max_over_time(kube_node_status_allocatable"
                                f'{{resource=~"cpu|memory|nvidia_com_gpu"}}[{window}])', end))
    names_seen = {name for labels, _ in labels_of for name in labels}
    keys = [group.label_key for group in groups]
    missing = missing_label_keys(names_seen, keys)
    if missing and len(missing) == len(set(keys)) and (labels_of or sizes or pods_seen):
        raise NodeLabelsMissing(missing, names_seen)
    group_of_node: dict[str, str] = {}
    instance_type_of_node: dict[str, str] = {}
    for labels, _ in labels_of:
        node = labels.get("node", "")
        for group in groups:
            if labels.get(ksm_label_name(group.label_key)) == group.label_value:
                group_of_node[node] = group.name
        named = [labels[name] for name in map(ksm_label_name, INSTANCE_TYPE_KEYS)
                 if labels.get(name)]
        if named:
            instance_type_of_node[node] = named[0]
    at_start: dict[str, int] = defaultdict(int)
    for labels, _ in _samples(prometheus, "kube_node_labels", start):
        if labels.get("node", "") in group_of_node:
            at_start[group_of_node[labels.get("node", "")]] += 1
    return _Nodes(group_of_node, instance_type_of_node, sizes, dict(at_start), missing)


def _per_node_name(labels: Mapping[str, str], node: str) -> str:
    """A per-node pod's name in the scenario: its DaemonSet's; a static pod's name without the
    `-<node>` the kubelet appends to a mirror pod's."""
    if labels.get("created_by_kind") == "DaemonSet" and labels.get("created_by_name"):
        return labels["created_by_name"]
    return labels.get("pod", "").removesuffix(f"-{node}") or labels.get("pod", "")


def _dns_label(text: str) -> str:
    """A name as a scenario's DaemonSet takes it (an RFC 1123 label, at most 63 characters):
    an object name may hold dots, a label not."""
    label = _NOT_IN_A_LABEL.sub("-", text.lower())[:63].strip("-")
    return label or "daemonset"


def per_node_pods(found: Mapping[str, dict[tuple[str, str], Requests]]
                   ) -> dict[str, tuple[PerNodePod, ...]]:
    """Each group's per-node pods by name; a name used in two namespaces gets its namespace
    (`name-namespace`), and a name still taken a number, so each stays one entry."""
    grouped = {}
    for group, pods in found.items():
        names = Counter(name for _, name in pods)
        taken: set[str] = set()
        entries = []
        for (namespace, name), (cpu, memory) in sorted(pods.items()):
            label = _dns_label(name if names[name] == 1 else f"{name}-{namespace}")
            unique, number = label, 1
            while unique in taken:
                number += 1
                unique = f"{label[:60].rstrip('-')}-{number}"
            taken.add(unique)
            entries.append(PerNodePod(unique, cpu, memory))
        grouped[group] = tuple(sorted(entries, key=lambda pod: pod.name))
    return grouped


def read_history(prometheus: InstantQueries, start: float, end: float,
                 groups: Sequence[NodeGroupConfig], instance_type: str = "m5.large"
                 ) -> ClusterHistory:
    """The pods of [start, end] as trace rows and per-node pods, and each group's nodes;
    MetricUnavailable (the adapter's) or BadAnswer when Prometheus gives no usable answer,
    NodeLabelsMissing when kube-state-metrics exports none of a group's label key."""
    window = f"{max(1, math.ceil(end - start))}s"
    created = _by_pod(prometheus, f"max_over_time(kube_pod_created[{window}])", end)
    completed = _by_pod(prometheus, "max by (namespace, pod, uid) "
                        f"(max_over_time(kube_pod_completion_time[{window}]))", end)
    failed = _by_pod(prometheus, "max by (namespace, pod, uid) (max_over_time("
                     f'kube_pod_status_phase{{phase="Failed"}}[{window}]))', end)
    requests = _pod_requests(prometheus, window, end)
    info: dict[PodKey, dict[str, str]] = {}
    for key, labels, _ in _by_series(prometheus, f"max_over_time(kube_pod_info[{window}])",
                                     end):
        if labels.get("node") or key not in info:  # a pending pod's series has no node
            info[key] = labels
    nodes = _read_nodes(prometheus, start, end, window, groups, bool(info or created))
    rows = []
    per_node: dict[str, dict[tuple[str, str], Requests]] = defaultdict(dict)
    for key, created_at in sorted(created.items(), key=lambda item: (item[1], item[0])):
        labels = info.get(key, {})
        group_name = nodes.group_of_node.get(labels.get("node", ""))
        finished = completed.get(key)
        if (group_name is None or failed.get(key, 0) >= 1 or created_at > end
                or (finished is not None and finished <= start)):
            continue  # never placed in a group's node, failed, after or before the window
        cpu, memory = requests.get(key, (0, 0))
        if labels.get("created_by_kind") in PER_NODE_OWNERS:
            pods = per_node[group_name]
            name = (key[0], _per_node_name(labels, labels["node"]))
            was = pods.get(name, (0, 0))
            pods[name] = (max(was[0], cpu), max(was[1], memory))  # a node holds the largest
            continue
        began = max(created_at, start)
        rows.append(TraceRow(
            arrival_s=round(began - start, 3), cpu_milli=cpu, memory_bytes=memory,
            duration_s=None if finished is None or finished > end
            else round(max(0.0, finished - began), 3),
            node_group=group_name,
            owner=(labels.get("created_by_kind", ""), key[0], labels.get("created_by_name", ""))))
    overhead = per_node_pods(per_node)
    history = ClusterHistory(rows)
    for group in groups:
        members = [node for node, name in nodes.group_of_node.items() if name == group.name]
        on_each = overhead.get(group.name, ())
        held = NodeSize(sum(pod.cpu_milli for pod in on_each),
                        sum(pod.memory_bytes for pod in on_each))
        history.groups[group.name] = GroupHistory(
            nodes_at_start=nodes.at_start.get(group.name, 0),
            node_type=node_type([nodes.instance_type_of_node[node] for node in members
                                 if node in nodes.instance_type_of_node],
                                [nodes.sizes[node] for node in members if node in nodes.sizes],
                                instance_type, held),
            per_node_pods=on_each,
            unlabelled_key=group.label_key if group.label_key in nodes.missing_keys else "")
    return history


__all__ = ["BadAnswer", "ClusterHistory", "GroupHistory", "NodeLabelsMissing", "PerNodePod",
           "TraceRow", "per_node_pods", "read_history", "scheduler_request"]
