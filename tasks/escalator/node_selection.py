"""Which untainted nodes a scale-down taints: Escalator's oldest first, or the least loaded.

`least_loaded` (beyond Escalator, after Trimaran) reads each node's measured CPU utilization from
a load watcher: nodes that do least are emptied first, so they can be removed sooner. A node the
watcher does not know (new, or not yet measured) is tainted last, ties go by age.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from kube_elevator.tasks.core.records import NodeRecord

Selection = Literal["oldest", "least_loaded"]


def nodes_to_taint(untainted: Sequence[NodeRecord], count: int, selection: Selection,
                   cpu_load_percent: Mapping[str, float] | None = None) -> list[NodeRecord]:
    """The `count` nodes to taint, in the order they are chosen."""
    if count <= 0:
        return []
    if selection == "least_loaded" and cpu_load_percent:
        unknown = float("inf")
        ranked = sorted(untainted, key=lambda node: (cpu_load_percent.get(node.name, unknown),
                                                     node.created_unix_seconds, node.name))
    else:
        # Escalator §7.5: oldest first by creationTimestamp (a stable sort keeps listing order).
        ranked = sorted(untainted, key=lambda node: node.created_unix_seconds)
    return ranked[:count]


def cpu_load_from_watcher(document: bytes, source: str) -> dict[str, float]:
    """Node name -> CPU utilization percent (the AVG of the newest window) from watcher JSON."""
    from kube_elevator.tasks.load_aware.scoring import parse_watcher_metrics

    metrics = parse_watcher_metrics(document, source)
    loads: dict[str, float] = {}
    for name, node in (metrics.data.node_metrics_map or {}).items():
        values = [m for m in node.metrics or () if m.type == "CPU"]
        average = next((m.value for m in values if m.operator == "AVG"), None)
        if average is None and values:
            average = values[0].value
        if average is not None:
            loads[name] = average
    return loads


