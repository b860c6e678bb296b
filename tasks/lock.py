"""The scale lock and the rest of a node group's state, kept in one Lease per group.

Escalator holds this in process memory; we keep it in the cluster so a restarted or second
worker sees the same state (DESIGN §2). One `coordination.k8s.io/v1` Lease per group, named
`elevator-<group>`, holds it in annotations:

| annotation                              | meaning                                             |
|-----------------------------------------|-----------------------------------------------------|
| `elevator.io/scale-lock-time`           | RFC 3339 time of the last cloud increase ("" = none) |
| `elevator.io/scale-lock-requested-nodes`| nodes asked of the cloud then (Escalator's delta while locked) |
| `elevator.io/scale-locked`              | "true" while the cool-down runs                      |
| `elevator.io/dry-mode-tainted-nodes`    | JSON list: dry mode's taint tracker                  |
| `elevator.io/node-capacity`             | JSON {"cpu_milli", "memory_bytes"}: for scale-from-zero |
| `elevator.io/last-tick`                 | RFC 3339 time of the tick that wrote the Lease       |

With `cluster_autoscaler.enabled`, the scale-up from unschedulable pods also keeps the group's
provisioning back-off and unregistered instances here (`tasks.expanders.ProvisioningState`'s
`elevator.io/backoff-*`, `unregistered-instances`, `timed-out-instances`), and its
scale-down the nodes it found unneeded (`elevator.io/unneeded-since`: JSON {node: RFC 3339}),
both carried through untouched by the Escalator tick.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from tasks.retry import step
from tasks.utilization import Resources

if TYPE_CHECKING:
    from tasks.kube import KubeClient

LEASE_PREFIX = "elevator-"
DEFAULT_LEASE_NAMESPACE = "kube-system"
HOLDER_IDENTITY = "kube-elevator"

LOCK_TIME = "elevator.io/scale-lock-time"
LOCK_REQUESTED = "elevator.io/scale-lock-requested-nodes"
LOCKED = "elevator.io/scale-locked"
DRY_MODE_TAINTED = "elevator.io/dry-mode-tainted-nodes"
NODE_CAPACITY = "elevator.io/node-capacity"
LAST_TICK = "elevator.io/last-tick"
UNNEEDED_SINCE = "elevator.io/unneeded-since"
# ProvisioningState's annotations (tasks/expanders.py), kept verbatim in GroupState.provisioning.
PROVISIONING_KEYS = frozenset({
    "elevator.io/backoff-seconds", "elevator.io/backoff-until",
    "elevator.io/last-failed-scale-up", "elevator.io/unregistered-instances",
    "elevator.io/timed-out-instances",
})

T = TypeVar("T")


def lease_name(group_name: str) -> str:
    return f"{LEASE_PREFIX}{group_name}"


@dataclass(frozen=True)
class ScaleLock:
    """Escalator §5.7: a pure cool-down of `scale_up_cool_down_period` from the cloud request."""

    is_locked: bool = False
    requested_nodes: int = 0
    lock_time_unix_seconds: float = 0.0

    def held(self, now: float, cool_down_seconds: float) -> bool:
        return self.is_locked and now - self.lock_time_unix_seconds < cool_down_seconds

    def lock(self, requested_nodes: int, now: float) -> ScaleLock:
        return ScaleLock(True, requested_nodes, now)

    def unlock(self) -> ScaleLock:
        # Keep the lock time: it is history worth showing, and `held` reads is_locked first.
        return ScaleLock(False, 0, self.lock_time_unix_seconds)

    def unlocks_at(self, cool_down_seconds: float) -> float:
        return self.lock_time_unix_seconds + cool_down_seconds


@dataclass(frozen=True)
class GroupState:
    """Everything a tick carries over to the next for one node group."""

    lock: ScaleLock = field(default_factory=ScaleLock)
    dry_mode_tainted: tuple[str, ...] = ()
    node_capacity: Resources | None = None
    resource_version: str = ""
    # The CA scale-up's ProvisioningState annotations, verbatim (empty unless it ever ran).
    provisioning: tuple[tuple[str, str], ...] = ()
    # CA scale-down: (node, unix seconds it was first found unneeded), sorted (tasks.scale_down).
    unneeded_since: tuple[tuple[str, float], ...] = ()


def format_time(unix_seconds: float) -> str:
    return datetime.fromtimestamp(unix_seconds, UTC).isoformat().replace("+00:00", "Z")


def state_to_annotations(state: GroupState) -> dict[str, str]:
    capacity = state.node_capacity
    return {
        LOCKED: "true" if state.lock.is_locked else "false",
        LOCK_TIME: (format_time(state.lock.lock_time_unix_seconds)
                    if state.lock.lock_time_unix_seconds else ""),
        LOCK_REQUESTED: str(state.lock.requested_nodes),
        DRY_MODE_TAINTED: json.dumps(list(state.dry_mode_tainted)),
        NODE_CAPACITY: (json.dumps({"cpu_milli": capacity.cpu_milli,
                                    "memory_bytes": capacity.memory_bytes})
                        if capacity is not None else ""),
        **dict(state.provisioning),
        **({UNNEEDED_SINCE: json.dumps({node: format_time(since)
                                        for node, since in state.unneeded_since},
                                       sort_keys=True)} if state.unneeded_since else {}),
    }


def read_annotation(annotations: Mapping[str, str], key: str, parse: Callable[[str], T]) -> T:
    """One annotation through `parse`; a ValueError names the annotation and its value."""
    raw = annotations.get(key, "")
    try:
        return parse(raw)
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise ValueError(f"annotation {key}: cannot read {raw!r} ({error})") from None


def annotation_time(raw: str) -> float:
    """RFC 3339 to Unix seconds; "" is 0 (never)."""
    return datetime.fromisoformat(raw).timestamp() if raw else 0.0


def name_list(raw: str) -> tuple[str, ...]:
    """A JSON list of names (nodes, instance ids); "" is empty."""
    names = json.loads(raw) if raw else []
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ValueError("expected a JSON list of names")
    return tuple(names)


def time_map(raw: str) -> tuple[tuple[str, float], ...]:
    """A JSON object of name to RFC 3339 time, as sorted (name, Unix seconds) pairs."""
    value = json.loads(raw) if raw else {}
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object of name to time")
    return tuple(sorted((str(name), annotation_time(str(since))) for name, since in value.items()))


def _capacity(raw: str) -> Resources | None:
    if not raw:
        return None
    value = json.loads(raw)
    return Resources(int(value["cpu_milli"]), int(value["memory_bytes"]))


def state_from_annotations(annotations: Mapping[str, str], resource_version: str = "") -> GroupState:
    """Read a Lease's annotations; ValueError names the annotation that is malformed."""
    return GroupState(
        lock=ScaleLock(
            is_locked=annotations.get(LOCKED, "false") == "true",
            requested_nodes=read_annotation(annotations, LOCK_REQUESTED, lambda raw: int(raw or 0)),
            lock_time_unix_seconds=read_annotation(annotations, LOCK_TIME, annotation_time),
        ),
        dry_mode_tainted=read_annotation(annotations, DRY_MODE_TAINTED, name_list),
        node_capacity=read_annotation(annotations, NODE_CAPACITY, _capacity),
        resource_version=resource_version,
        provisioning=tuple(sorted((key, value) for key, value in annotations.items()
                                  if key in PROVISIONING_KEYS)),
        unneeded_since=read_annotation(annotations, UNNEEDED_SINCE, time_map),
    )


# --- the Lease steps of a live tick ---------------------------------------------------------


@step
def read_lock(kube: KubeClient, namespace: str, group_name: str) -> GroupState:
    """The group's state as its Lease holds it (a fresh state before the first write)."""
    return kube.read_state(namespace, lease_name(group_name))


@step
def write_lock(kube: KubeClient, namespace: str, group_name: str, state: GroupState,
               now: float) -> GroupState:
    """Write the state if nobody wrote since we read it (else LeaseConflict: we lost the race)."""
    return kube.write_state(namespace, lease_name(group_name), state, now)
