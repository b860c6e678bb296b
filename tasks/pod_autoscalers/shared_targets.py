"""Two autoscalers on one workload: each sets its replicas from its own metric, so the last
writer wins every cycle and the count flaps (the Horizontal Pod Autoscaler refuses the same,
AmbiguousSelector; the WPA controller does not check). Said once, naming both, not refused:
the cluster's objects are the user's."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any


def shared_target_warnings(autoscalers: Iterable[Mapping[str, Any]]) -> list[str]:
    """A line for each workload (kind, namespace, name) that more than one autoscaler (any
    kind: WPA, MemoryAutoscaler) targets, naming them all."""
    by_target: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for obj in autoscalers:
        metadata = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        ref = spec.get("scaleTargetRef") if isinstance(spec, Mapping) else None
        if not isinstance(metadata, Mapping) or not isinstance(ref, Mapping):
            continue  # a malformed object is its own cycle's error
        namespace = str(metadata.get("namespace") or "default")
        target = (str(ref.get("kind") or ""), namespace, str(ref.get("name") or ""))
        by_target[target].append(f"{obj.get('kind')} {namespace}/{metadata.get('name')}")
    return [f"{', '.join(names[:-1])} and {names[-1]} {'both' if len(names) == 2 else 'all'} "
            f"target {kind} {namespace}/{name}: they would fight over its replicas; give a "
            "workload one autoscaler"
            for (kind, namespace, name), names in by_target.items() if len(names) > 1]
