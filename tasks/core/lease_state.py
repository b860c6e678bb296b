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
| `elevator.io/scale-lock-desired`        | "before,target": the ASG desired capacity claimed |
| `elevator.io/claim`                     | a token of the tick that wrote the Lease last         |
| `elevator.io/fleet-claim`               | the claim token of a fleet not yet reported back     |
| `elevator.io/fleet-terminate-tries`     | fleets in a row that ended terminating instances (absent: 0) |
| `elevator.io/last-tick`                 | RFC 3339 time of the tick that wrote the Lease       |

A tick claims the Lease before it acts, so the Lease can say what a tick meant to do although
the tick never did it (killed, or the cloud's answer lost): the next tick compares the claimed
desired capacity with the ASG's (`ScaleLock.never_reached_cloud`), and a write whose answer was
lost is recognised by its claim token when the retry gets 409 (`write_lock`). A one-shot
scale-up tags its fleet's instances with the claim token too, keeps it as the fleet's claim
until its tick reports back (a later tick terminates what a killed one left outside the ASG),
and counts its failures in a row as Escalator's terminateInstancesTries (`flows/fleet.py`).

With `cluster_autoscaler.enabled`, the scale-up from unschedulable pods also keeps the group's
provisioning back-off and unregistered instances here (`tasks.cluster_autoscaler.backoff.ProvisioningState`'s
`elevator.io/backoff-*`, `unregistered-instances`, `timed-out-instances`), and its
scale-down the nodes it found unneeded (`elevator.io/unneeded-since`: JSON {node: RFC 3339}),
both carried through untouched by the Escalator tick.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from kube_elevator.tasks.core.errors import shown
from kube_elevator.tasks.core.records import Resources

LEASE_PREFIX = "elevator-"
DEFAULT_LEASE_NAMESPACE = "kube-system"
HOLDER_IDENTITY = "kube-elevator"

LOCK_TIME = "elevator.io/scale-lock-time"
LOCK_REQUESTED = "elevator.io/scale-lock-requested-nodes"
LOCKED = "elevator.io/scale-locked"
LOCK_DESIRED = "elevator.io/scale-lock-desired"
CLAIM = "elevator.io/claim"
DRY_MODE_TAINTED = "elevator.io/dry-mode-tainted-nodes"
NODE_CAPACITY = "elevator.io/node-capacity"
LAST_TICK = "elevator.io/last-tick"
FLEET_CLAIM = "elevator.io/fleet-claim"
FLEET_TERMINATE_TRIES = "elevator.io/fleet-terminate-tries"
UNNEEDED_SINCE = "elevator.io/unneeded-since"
# ProvisioningState's annotations (tasks/cluster_autoscaler/backoff.py), kept verbatim in
# GroupState.provisioning.
PROVISIONING_KEYS = frozenset({
    "elevator.io/backoff-seconds", "elevator.io/backoff-until",
    "elevator.io/last-failed-scale-up", "elevator.io/unregistered-instances",
    "elevator.io/timed-out-instances",
})

T = TypeVar("T")


def lease_name(group_name: str) -> str:
    return f"{LEASE_PREFIX}{group_name}"


# How long a claim may take to reach the cloud before the next tick calls it lost: the claim is
# written just before SetDesiredCapacity, and a tick reading in between must not undo it.
CLAIM_SETTLE_SECONDS = 30.0


@dataclass(frozen=True)
class ScaleLock:
    """Escalator §5.7: a pure cool-down of `scale_up_cool_down_period` from the cloud request.

    `desired_before` and `desired_target` record the increase the lock was taken for (0 and 0
    when unknown, or in dry mode, where the cloud is never asked).

    Example:
        >>> lock = ke.ScaleLock().lock(requested_nodes=3, now=1000.0)
        >>> lock.held(now=1100.0, cool_down_seconds=600), lock.unlocks_at(600)
        (True, 1600.0)
    """

    is_locked: bool = False
    requested_nodes: int = 0
    lock_time_unix_seconds: float = 0.0
    desired_before: int = 0
    desired_target: int = 0

    def held(self, now: float, cool_down_seconds: float) -> bool:
        return self.is_locked and now - self.lock_time_unix_seconds < cool_down_seconds

    def lock(self, requested_nodes: int, now: float, desired_before: int = 0,
             desired_target: int = 0) -> ScaleLock:
        return ScaleLock(True, requested_nodes, now, desired_before, desired_target)

    def unlock(self) -> ScaleLock:
        # Keep the lock time: it is history worth showing, and `held` reads is_locked first.
        return ScaleLock(False, 0, self.lock_time_unix_seconds)

    def never_reached_cloud(self, asg_desired: int, now: float,
                            settle_seconds: float = CLAIM_SETTLE_SECONDS) -> bool:
        """A lock whose increase the ASG does not show, a settle time after the claim: the
        claiming tick died before SetDesiredCapacity, or the cloud never applied it. A one-shot
        group settles longer: its tick may wait for its fleet's instances before attaching."""
        return (self.is_locked and self.desired_target > self.desired_before
                and asg_desired <= self.desired_before
                and now - self.lock_time_unix_seconds >= settle_seconds)

    def unlocks_at(self, cool_down_seconds: float) -> float:
        return self.lock_time_unix_seconds + cool_down_seconds


@dataclass(frozen=True)
class GroupState:
    """Everything a tick carries over to the next for one node group.

    Example:
        >>> state = ke.GroupState(lock=ke.ScaleLock().lock(3, now=1795262400.0))
        >>> state.lock.held(now=1795262460.0, cool_down_seconds=600)
        True
    """

    lock: ScaleLock = field(default_factory=ScaleLock)
    dry_mode_tainted: tuple[str, ...] = ()
    node_capacity: Resources | None = None
    resource_version: str = ""
    # The CA scale-up's ProvisioningState annotations, verbatim (empty unless it ever ran).
    provisioning: tuple[tuple[str, str], ...] = ()
    # CA scale-down: (node, unix seconds it was first found unneeded), sorted
    # (tasks.cluster_autoscaler.unneeded).
    unneeded_since: tuple[tuple[str, float], ...] = ()
    claim: str = ""  # the token of the tick that wrote the Lease (see `write_lock`)
    # A one-shot scale-up (flows/fleet.py): the claim its fleet's instances are tagged with,
    # from the claim until its tick reports back ("" then), and the failures in a row.
    fleet_claim: str = ""
    fleet_terminate_tries: int = 0


def format_time(unix_seconds: float) -> str:
    return datetime.fromtimestamp(unix_seconds, UTC).isoformat().replace("+00:00", "Z")


def state_to_annotations(state: GroupState) -> dict[str, str]:
    capacity = state.node_capacity
    return {
        LOCKED: "true" if state.lock.is_locked else "false",
        LOCK_TIME: (format_time(state.lock.lock_time_unix_seconds)
                    if state.lock.lock_time_unix_seconds else ""),
        LOCK_REQUESTED: str(state.lock.requested_nodes),
        LOCK_DESIRED: (f"{state.lock.desired_before},{state.lock.desired_target}"
                       if state.lock.desired_target else ""),
        **({CLAIM: state.claim} if state.claim else {}),
        DRY_MODE_TAINTED: json.dumps(list(state.dry_mode_tainted)),
        NODE_CAPACITY: (json.dumps({"cpu_milli": capacity.cpu_milli,
                                    "memory_bytes": capacity.memory_bytes})
                        if capacity is not None else ""),
        **dict(state.provisioning),
        **({UNNEEDED_SINCE: json.dumps({node: format_time(since)
                                        for node, since in state.unneeded_since},
                                       sort_keys=True)} if state.unneeded_since else {}),
        **({FLEET_CLAIM: state.fleet_claim} if state.fleet_claim else {}),
        **({FLEET_TERMINATE_TRIES: str(state.fleet_terminate_tries)}
           if state.fleet_terminate_tries else {}),
    }


def read_annotation(annotations: Mapping[str, str], key: str, parse: Callable[[str], T]) -> T:
    """One annotation through `parse`; a ValueError names the annotation and its value."""
    raw = annotations.get(key, "")
    try:
        return parse(raw)
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise ValueError(f"annotation {key}: cannot read {shown(raw)} ({error})") from None
    except RecursionError:  # json.loads of a value nested past Python's recursion limit
        raise ValueError(f"annotation {key}: cannot read {shown(raw)} (nested too deeply)") \
            from None


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


_MAX_COUNT = 2**31 - 1  # node counts and capacities: an ASG's sizes are int32s
_MAX_AMOUNT = 2**63 - 1  # milli-CPU and bytes: a Quantity's int64


def _count(raw: str) -> int:
    """A non-negative whole number in ASCII digits ("" is 0), as the tick writes it."""
    if not raw:
        return 0
    if not raw.isascii() or not raw.isdigit() or int(raw) > _MAX_COUNT:
        raise ValueError(f"expected a whole number from 0 to {_MAX_COUNT}")
    return int(raw)


def _amount(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _MAX_AMOUNT:
        raise ValueError("expected a whole number from 0 to 2^63-1")
    return value


def _capacity(raw: str) -> Resources | None:
    if not raw:
        return None
    value = json.loads(raw)
    return Resources(_amount(value["cpu_milli"]), _amount(value["memory_bytes"]))


def _desired_pair(raw: str) -> tuple[int, int]:
    """"before,target" as two non-negative ints; "" is (0, 0)."""
    if not raw:
        return 0, 0
    before, target = raw.split(",")
    return _count(before), _count(target)


def state_from_annotations(annotations: Mapping[str, str], resource_version: str = "") -> GroupState:
    """Read a Lease's annotations; ValueError names the annotation that is malformed."""
    desired = read_annotation(annotations, LOCK_DESIRED, _desired_pair)
    return GroupState(
        lock=ScaleLock(
            is_locked=annotations.get(LOCKED, "false") == "true",
            requested_nodes=read_annotation(annotations, LOCK_REQUESTED, _count),
            lock_time_unix_seconds=read_annotation(annotations, LOCK_TIME, annotation_time),
            desired_before=desired[0], desired_target=desired[1],
        ),
        dry_mode_tainted=read_annotation(annotations, DRY_MODE_TAINTED, name_list),
        node_capacity=read_annotation(annotations, NODE_CAPACITY, _capacity),
        resource_version=resource_version,
        provisioning=tuple(sorted((key, value) for key, value in annotations.items()
                                  if key in PROVISIONING_KEYS)),
        unneeded_since=read_annotation(annotations, UNNEEDED_SINCE, time_map),
        claim=annotations.get(CLAIM, ""),
        fleet_claim=annotations.get(FLEET_CLAIM, ""),
        fleet_terminate_tries=read_annotation(annotations, FLEET_TERMINATE_TRIES, _count),
    )


# --- the Lease step of a live tick ---------------------------------------------------------


