"""`elevator scenario from-prometheus --shapes`: the trace's pods take their owner's shape from
a kubectl snapshot (`fakes.scenario_import_kubectl`): its labels, affinity, spreading, host
ports, priority, tolerations and volume zone, named in the trace's `shape` column and held in
the scenario's `shapes`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kube_elevator.fakes.scenario_import import TraceRow
from kube_elevator.fakes.scenario_import_kubectl import (
    Owner,
    Snapshot,
    deployment_of_replicaset,
    group_zones,
    owner_of,
    read_shapes,
)
from kube_elevator.tasks.escalator.config import NodeGroupConfig

# A wave's keys a trace row's shape carries: the row has its own arrival, requests and group.
SHAPE_KEYS = ("tolerations", "priority", "labels", "affinity", "topology_spread_constraints",
              "ports", "volume_zone")


@dataclass
class TraceShapes:
    """`from-prometheus --shapes`: the rows with their owner's shape, the shapes, each
    group's zone from the snapshot's nodes, and what did not match."""

    rows: list[TraceRow]
    shapes: dict[str, dict[str, Any]]
    zones: dict[str, str]
    notes: list[str]


def owner_of_row(row: TraceRow) -> Owner:
    """A trace row's owner as `owner_of` names a pod's: kube_pod_info names the ReplicaSet,
    whose Deployment its name says (`deployment_of_replicaset`)."""
    kind, namespace, name = row.owner
    if kind == "ReplicaSet" and deployment_of_replicaset(name) != name:
        return Owner("Deployment", namespace, deployment_of_replicaset(name))
    return Owner("" if kind in ("", "<none>") else kind, namespace, name)


def trace_shapes(snapshot: Snapshot, groups: Sequence[NodeGroupConfig],
                 rows: Sequence[TraceRow]) -> TraceShapes:
    """Each trace row of an owner the snapshot has gets that owner's shape (its wave's keys
    but arrival, count, requests and selector); rows of other owners stay plain pods."""
    zones = group_zones(snapshot, groups)
    found = read_shapes(snapshot, groups, set(zones.values()))
    by_name = {wave["name"]: wave for wave in found.waves}
    # the snapshot's own word on whose a ReplicaSet is, before its name's
    controllers: dict[tuple[str, str, str], Owner] = {}
    for _, obj, _ in snapshot.pods:
        metadata = obj.get("metadata") or {}
        for reference in metadata.get("ownerReferences") or ():
            if reference.get("controller"):
                controllers[(str(reference.get("kind", "")), str(metadata.get("namespace", "")),
                             str(reference.get("name", "")))] = owner_of(obj)
    used: dict[str, dict[str, Any]] = {}
    shaped: list[TraceRow] = []
    unmatched: set[Owner] = set()
    for row in rows:
        owner = controllers.get(row.owner) or owner_of_row(row)
        name = found.wave_of_owner.get(owner)
        if name is None:
            unmatched.add(owner)
            shaped.append(row)
            continue
        used.setdefault(name, {key: by_name[name][key] for key in SHAPE_KEYS
                               if key in by_name[name]})
        shaped.append(dataclasses.replace(row, shape=name))
    notes = [note for note in found.notes if note.split(":")[0] in
             {str(owner) for owner, name in found.wave_of_owner.items() if name in used}]
    if unmatched:
        shown = ", ".join(sorted(map(str, unmatched))[:5])
        more = f" and {len(unmatched) - 5} more" if len(unmatched) > 5 else ""
        notes.append(f"{len(unmatched)} owner(s) of the trace's pods are not in the snapshot "
                     f"({shown}{more}): their pods are plain pods")
    return TraceShapes(shaped, used, zones, notes)


__all__ = ["SHAPE_KEYS", "TraceShapes", "owner_of_row", "trace_shapes"]
