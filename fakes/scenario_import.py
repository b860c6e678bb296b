"""A trace scenario from a real cluster's history: kube-state-metrics series in Prometheus.

`elevator scenario from-prometheus` asks, at the window's end, for every pod that existed in
the window: its creation (`kube_pod_created`) and completion (`kube_pod_completion_time`), its
requests summed over its containers (`kube_pod_container_resource_requests`), the node it ran
on (`kube_pod_info`) and that node's labels (`kube_node_labels`), which say its node group;
failed pods (`kube_pod_status_phase`) and pods done before the window are left out. Each pod
becomes a trace row: arrival since the window's start (0 for a pod already running then),
requests, duration (empty: it ran to the end), node group. The ASGs start at each group's node
count at the window's start. The files are checked as `load_scenario` checks them before any
is written, and written whole or not at all.
"""

from __future__ import annotations

import csv
import io
import math
import os
import secrets
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import ValidationError

from fakes.scenario import MAX_PODS, MAX_STEPS, Scenario, TracePod, scenario_problems
from tasks.core.errors import InputError, join_location, shown
from tasks.escalator.config import NodeGroupConfig

PodKey = tuple[str, str]

# A quantity fits an int64 once scaled (apimachinery's Quantity; tasks.core.quantity).
_QUANTITY_LIMIT = 2**63

# The tick is a minute; a step that divides it keeps the ticks a minute apart.
TICK_SECONDS = 60
_STEPS_SECONDS = (10, 12, 15, 20, 30, 60)


class InstantQueries(Protocol):
    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]: ...


class BadAnswer(Exception):
    """A Prometheus answer that is not an instant vector of usable numbers; the message names
    the query and the series."""


@dataclass(frozen=True)
class TraceRow:
    arrival_s: float
    cpu_milli: int
    memory_bytes: int
    duration_s: float | None
    node_group: str


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


def _by_pod(prometheus: InstantQueries, promql: str, at: float,
            request_scale: float | None = None) -> dict[PodKey, float]:
    """Each pod's value. With `request_scale` (1000 for cores to millicores) the values are
    requests: 0 or more, and within an int64 once scaled, as the API server allows."""
    values: dict[PodKey, float] = {}
    for labels, value in _samples(prometheus, promql, at):
        key = (labels.get("namespace", ""), labels.get("pod", ""))
        if not key[1] or math.isnan(value):
            continue
        if request_scale is not None and not 0 <= value * request_scale < _QUANTITY_LIMIT:
            rule = "negative" if value < 0 else "too large"
            raise BadAnswer(f"{promql}: series {_series(labels)}: request {value:g} is {rule} "
                            "(requests are 0 or more and fit an int64)")
        values[key] = value
    return values


def read_trace(prometheus: InstantQueries, start: float, end: float,
               groups: Sequence[NodeGroupConfig]) -> tuple[list[TraceRow], dict[str, int]]:
    """The pods of [start, end] as trace rows, and each group's node count at `start`;
    MetricUnavailable (the adapter's) or BadAnswer when Prometheus gives no usable answer."""
    window = f"{max(1, math.ceil(end - start))}s"
    created = _by_pod(prometheus, f"max_over_time(kube_pod_created[{window}])", end)
    completed = _by_pod(prometheus, "max by (namespace, pod) "
                        f"(max_over_time(kube_pod_completion_time[{window}]))", end)
    failed = _by_pod(prometheus, "max by (namespace, pod) (max_over_time("
                     f'kube_pod_status_phase{{phase="Failed"}}[{window}]))', end)
    requests = {resource: _by_pod(
        prometheus, "sum by (namespace, pod) (max_over_time(kube_pod_container_resource_requests"
        f'{{resource="{resource}"}}[{window}]))', end, request_scale=scale)
        for resource, scale in (("cpu", 1000.0), ("memory", 1.0))}
    nodes_of: dict[PodKey, str] = {}
    for labels, _ in _samples(prometheus, f"max_over_time(kube_pod_info[{window}])", end):
        if labels.get("node"):
            nodes_of[(labels.get("namespace", ""), labels.get("pod", ""))] = labels["node"]
    group_of_node: dict[str, str] = {}
    for labels, _ in _samples(prometheus, f"max_over_time(kube_node_labels[{window}])", end):
        for group in groups:
            if labels.get(f"label_{_label_name(group.label_key)}") == group.label_value:
                group_of_node[labels.get("node", "")] = group.name
    at_start: dict[str, int] = defaultdict(int)
    for labels, _ in _samples(prometheus, "kube_node_labels", start):
        if labels.get("node", "") in group_of_node:
            at_start[group_of_node[labels.get("node", "")]] += 1
    rows = []
    for key, created_at in sorted(created.items(), key=lambda item: (item[1], item[0])):
        group_name = group_of_node.get(nodes_of.get(key, ""))
        finished = completed.get(key)
        if (group_name is None or failed.get(key, 0) >= 1 or created_at > end
                or (finished is not None and finished <= start)):
            continue  # never placed in a group's node, failed, after or before the window
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


def _seconds_text(seconds: float) -> str:
    """Seconds to the millisecond, all digits: `:g` keeps six, so a week's arrivals would move."""
    return f"{seconds:.3f}".rstrip("0").rstrip(".")


def _trace_fields(row: TraceRow) -> dict[str, str]:
    """A row as trace.csv's columns hold it (an empty duration: ran to the end)."""
    return {"arrival_s": _seconds_text(row.arrival_s), "cpu": f"{row.cpu_milli}m",
            "memory": str(row.memory_bytes),
            "duration_s": "" if row.duration_s is None else _seconds_text(row.duration_s),
            "node_group": row.node_group}


def trace_csv(rows: Sequence[TraceRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["arrival_s", "cpu", "memory", "duration_s", "node_group"])
    for row in rows:
        writer.writerow(_trace_fields(row).values())
    return out.getvalue()


def step_seconds(duration_s: float) -> int:
    """The shortest step that divides the tick and keeps the run within MAX_STEPS steps
    (10 s up to about 231 days, 20 s for a year)."""
    for step in _STEPS_SECONDS:
        if duration_s / step <= MAX_STEPS:
            return step
    return TICK_SECONDS  # too long for any step: Scenario's check says so


def scenario_document(nodegroups: Path, groups: Sequence[NodeGroupConfig],
                      nodes_at_start: Mapping[str, int], duration_s: float,
                      instance_type: str = "m5.large") -> dict[str, Any]:
    """scenario.yaml's content: one ASG per group, desired its node count at the start."""
    asgs = []
    for group in groups:
        low, high = group.min_nodes, max(group.max_nodes, group.min_nodes + 1)
        desired = min(max(nodes_at_start.get(group.name, low), low), high)
        asgs.append({"name": group.cloud_provider_group_name, "min": low, "max": high,
                     "desired": desired, "instance_type": instance_type,
                     "node_labels": {group.label_key: group.label_value}})
    return {"tick_interval": f"{TICK_SECONDS}s", "step": f"{step_seconds(duration_s)}s",
            "duration": f"{math.ceil(duration_s)}s", "nodegroups": str(nodegroups.resolve()),
            "asgs": asgs, "trace": "trace.csv"}


def check_scenario(directory: Path, nodegroups: Path, document: Mapping[str, Any],
                   rows: Sequence[TraceRow], groups: Sequence[NodeGroupConfig]) -> None:
    """InputError with every problem `load_scenario` would find in the files, named as it
    would name them, before they are written: a failed run leaves the directory as it was."""
    source, trace = str(directory / "scenario.yaml"), directory / "trace.csv"
    try:
        Scenario.model_validate(document)
    except ValidationError as error:
        raise InputError(scenario_problems(error, source)) from None
    users = Counter(group.cloud_provider_group_name for group in groups)
    shared = [join_location(str(nodegroups), "", f"cloud_provider_group_name {name!r} is used "
                            f"by {count} node groups; a scenario has one ASG per group")
              for name, count in sorted(users.items()) if count > 1]
    if shared:
        raise InputError(shared)
    if len(rows) > MAX_PODS:
        raise InputError([f"{trace}: {len(rows):,} pods; at most {MAX_PODS:,}: shorten the "
                          "window (--start, --end)"])
    names = {group.name for group in groups}
    problems = []
    for line, row in enumerate(rows, start=2):
        fields = {key: text for key, text in _trace_fields(row).items() if text}
        try:
            TracePod.model_validate(fields)
        except ValidationError as error:
            problems += scenario_problems(error, f"{trace}: line {line}")
        if row.node_group not in names:
            problems.append(f"{trace}: line {line}: node_group {row.node_group!r} is not in "
                            "the node-group config")
    if problems:
        raise InputError(problems[:20])


def _write_all(directory: Path, files: Sequence[tuple[str, str]]) -> None:
    """Each (name, text) written to a temporary name in `directory`, then all renamed into
    place in order. On any failure the temporaries and the directories made here go, and the
    files already there stay as they were; the OSError is raised."""
    missing = []  # the directories mkdir makes, deepest first
    folder = directory
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    staged: list[tuple[Path, Path]] = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in files:
            temporary = directory / f".{name}.{secrets.token_hex(6)}.tmp"
            with temporary.open("x", encoding="utf-8", newline="") as handle:
                staged.append((temporary, directory / name))
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())  # whole on disk before the rename shows it
        for temporary, final in staged:
            os.replace(temporary, final)
    except BaseException:
        for temporary, _ in staged:
            temporary.unlink(missing_ok=True)
        for made in missing:
            try:
                made.rmdir()
            except OSError:
                break  # not empty, or not ours to remove
        raise


def write_scenario(directory: Path, nodegroups: Path, groups: Sequence[NodeGroupConfig],
                   rows: Sequence[TraceRow], nodes_at_start: Mapping[str, int],
                   duration_s: float, instance_type: str = "m5.large") -> Path:
    """`scenario.yaml` and `trace.csv` in `directory`, ready for `elevator simulate`/`tune`:
    checked first (InputError), then written whole; an OSError leaves the directory as it was.
    The scenario is renamed into place last, so it never names a trace not yet written."""
    document = scenario_document(nodegroups, groups, nodes_at_start, duration_s, instance_type)
    check_scenario(directory, nodegroups, document, rows, groups)
    _write_all(directory, [
        ("trace.csv", trace_csv(rows)),
        ("scenario.yaml", "# From kube-state-metrics (elevator scenario from-prometheus).\n"
                          + yaml.safe_dump(document, sort_keys=False))])
    return directory / "scenario.yaml"


__all__ = ["BadAnswer", "TraceRow", "check_scenario", "read_trace", "scenario_document",
           "step_seconds", "trace_csv", "write_scenario"]
