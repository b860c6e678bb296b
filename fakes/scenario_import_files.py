"""The files of a scenario imported from kube-state-metrics (`fakes.scenario_import`):
`scenario.yaml` and `trace.csv`, checked as `load_scenario` checks them before either is
written, and written whole or not at all."""

from __future__ import annotations

import csv
import io
import math
import os
import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from kube_elevator.fakes.scenario import MAX_PODS, MAX_STEPS, Scenario, TracePod, scenario_problems
from kube_elevator.fakes.scenario_import import ClusterHistory, TraceRow
from kube_elevator.tasks.core.errors import InputError, join_location
from kube_elevator.tasks.core.quantity import bytes_quantity, canonical_quantity
from kube_elevator.tasks.escalator.config import NodeGroupConfig

# The tick is a minute; a step that divides it keeps the ticks a minute apart.
TICK_SECONDS = 60
_STEPS_SECONDS = (10, 12, 15, 20, 30, 60)


def _seconds_text(seconds: float) -> str:
    """Seconds to the millisecond, all digits: `:g` keeps six, so a week's arrivals would move."""
    return f"{seconds:.3f}".rstrip("0").rstrip(".")


def _trace_fields(row: TraceRow, shaped: bool = False) -> dict[str, str]:
    """A row as trace.csv's columns hold it (an empty duration: ran to the end; an empty
    shape: a plain pod); the shape column only in a trace with shapes."""
    fields = {"arrival_s": _seconds_text(row.arrival_s), "cpu": f"{row.cpu_milli}m",
              "memory": str(row.memory_bytes),
              "duration_s": "" if row.duration_s is None else _seconds_text(row.duration_s),
              "node_group": row.node_group}
    if shaped:
        fields["shape"] = row.shape
    return fields


def trace_csv(rows: Sequence[TraceRow]) -> str:
    shaped = any(row.shape for row in rows)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["arrival_s", "cpu", "memory", "duration_s", "node_group",
                     *(["shape"] if shaped else [])])
    for row in rows:
        writer.writerow(_trace_fields(row, shaped).values())
    return out.getvalue()


def step_seconds(duration_s: float) -> int:
    """The shortest step that divides the tick and keeps the run within MAX_STEPS steps
    (10 s up to about 231 days, 20 s for a year)."""
    for step in _STEPS_SECONDS:
        if duration_s / step <= MAX_STEPS:
            return step
    return TICK_SECONDS  # too long for any step: Scenario's check says so


def scenario_document(nodegroups: Path, groups: Sequence[NodeGroupConfig],
                      history: ClusterHistory, duration_s: float,
                      shapes: Mapping[str, Mapping[str, Any]] | None = None,
                      zones: Mapping[str, str] | None = None) -> dict[str, Any]:
    """scenario.yaml's content: one ASG per group, desired its node count at the start, its
    nodes' instance type, and the pods each of its nodes held (`daemonsets`); with `shapes`
    (the trace rows' `shape` column names them), each group's ASG in its `zones` entry."""
    asgs = []
    for group in groups:
        seen = history.groups[group.name]
        low, high = group.min_nodes, max(group.max_nodes, group.min_nodes + 1)
        desired = min(max(seen.nodes_at_start or low, low), high)
        asg: dict[str, Any] = {
            "name": group.cloud_provider_group_name, "min": low, "max": high,
            "desired": desired, "instance_type": seen.node_type.instance_type,
            "node_labels": {group.label_key: group.label_value}}
        if seen.per_node_pods:
            asg["daemonsets"] = [{"name": pod.name,
                                  "cpu": canonical_quantity(f"{pod.cpu_milli}m"),
                                  "memory": bytes_quantity(pod.memory_bytes)}
                                 for pod in seen.per_node_pods]
        if zones and group.name in zones:
            asg["availability_zone"] = zones[group.name]
        asgs.append(asg)
    document: dict[str, Any] = {
        "tick_interval": f"{TICK_SECONDS}s", "step": f"{step_seconds(duration_s)}s",
        "duration": f"{math.ceil(duration_s)}s", "nodegroups": str(nodegroups.resolve()),
        "asgs": asgs, "trace": "trace.csv"}
    if shapes:
        document["shapes"] = {name: dict(shape) for name, shape in shapes.items()}
    return document


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
    shapes = document.get("shapes") or {}
    for line, row in enumerate(rows, start=2):
        fields = {key: text for key, text in _trace_fields(row, bool(row.shape)).items()
                  if text}
        try:
            TracePod.model_validate(fields)
        except ValidationError as error:
            problems += scenario_problems(error, f"{trace}: line {line}")
        if row.node_group not in names:
            problems.append(f"{trace}: line {line}: node_group {row.node_group!r} is not in "
                            "the node-group config")
        if row.shape and row.shape not in shapes:
            problems.append(f"{trace}: line {line}: shape {row.shape!r} is not among the "
                            "scenario's shapes")
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


def nodegroups_from(directory: Path, nodegroups: Path) -> str:
    """The node-group file as a scenario in `directory` names it: relative to the scenario's
    folder (as `load_scenario` resolves it), so the two move together to another machine."""
    return os.path.relpath(nodegroups.resolve(), directory.resolve())


def write_scenario(directory: Path, nodegroups: Path, groups: Sequence[NodeGroupConfig],
                   history: ClusterHistory, duration_s: float,
                   shapes: Mapping[str, Mapping[str, Any]] | None = None,
                   zones: Mapping[str, str] | None = None) -> Path:
    """`scenario.yaml` and `trace.csv` in `directory`, ready for `elevator simulate`/`tune`:
    checked first (InputError), then written whole; an OSError leaves the directory as it was.
    The scenario is renamed into place last, so it never names a trace not yet written."""
    document = scenario_document(nodegroups, groups, history, duration_s, shapes, zones)
    document["nodegroups"] = nodegroups_from(directory, nodegroups)
    check_scenario(directory, nodegroups, document, history.rows, groups)
    _write_all(directory, [
        ("trace.csv", trace_csv(history.rows)),
        ("scenario.yaml", "# From kube-state-metrics (elevator scenario from-prometheus).\n"
                          + yaml.safe_dump(document, sort_keys=False))])
    return directory / "scenario.yaml"


__all__ = ["check_scenario", "scenario_document", "step_seconds", "trace_csv", "write_scenario"]
