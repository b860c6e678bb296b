"""Provisioning back-off (CA §1.1): instances that never register, and the groups that failed,
kept in the group's Lease."""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from kube_elevator.tasks.core.lease_state import (
    annotation_time,
    format_time,
    name_list,
    read_annotation,
    time_map,
)
from kube_elevator.tasks.core.records import AsgInstance

T = TypeVar("T")


# --- the provisioning back-off --------------------------------------------------------------
# CA §1.1: a node that has not registered within --max-node-provision-time is given up on and
# deleted, and its group backs off: 5 min, doubling to 30 min, forgotten 3 h after the last
# failure (utils/backoff/exponential_backoff.go). A scale-up whose nodes all register clears
# the back-off (clusterstate: "scale-out finished successfully ... reset node group backoff").

INITIAL_BACKOFF_SECONDS = 5 * 60.0
MAX_BACKOFF_SECONDS = 30 * 60.0
BACKOFF_RESET_SECONDS = 3 * 3600.0
MAX_NODE_PROVISION_SECONDS = 15 * 60.0

BACKOFF_SECONDS = "elevator.io/backoff-seconds"
BACKOFF_UNTIL = "elevator.io/backoff-until"
LAST_FAILED_SCALE_UP = "elevator.io/last-failed-scale-up"
UNREGISTERED_INSTANCES = "elevator.io/unregistered-instances"
TIMED_OUT_INSTANCES = "elevator.io/timed-out-instances"
_GONE_STATES = ("Terminating", "Terminated", "Detaching", "Detached")


def _backoff_seconds(raw: str) -> float:
    """The back-off as written ("300"); finite and within the back-off's range."""
    value = float(raw or 0) if raw.isascii() else math.nan
    if not 0 <= value <= MAX_BACKOFF_SECONDS:
        raise ValueError(f"expected seconds from 0 to {MAX_BACKOFF_SECONDS:g}")
    return value


@dataclass(frozen=True)
class ProvisioningState:
    """One group's back-off and its instances still waiting to register as Nodes.

    Serialised into the group's Lease annotations (`to_annotations` / `from_annotations`).
    """

    backoff_seconds: float = 0.0  # 0: no failure remembered
    backoff_until: float = 0.0
    last_failure: float = 0.0
    unregistered_since: tuple[tuple[str, float], ...] = ()  # (instance id, first seen), sorted
    timed_out: tuple[str, ...] = ()  # given up on, being terminated

    def backed_off(self, now: float) -> bool:
        return now < self.backoff_until

    def to_annotations(self) -> dict[str, str]:
        return {
            BACKOFF_SECONDS: f"{self.backoff_seconds:g}",
            BACKOFF_UNTIL: format_time(self.backoff_until) if self.backoff_until else "",
            LAST_FAILED_SCALE_UP: format_time(self.last_failure) if self.last_failure else "",
            UNREGISTERED_INSTANCES: json.dumps(
                {instance: format_time(since) for instance, since in self.unregistered_since},
                sort_keys=True),
            TIMED_OUT_INSTANCES: json.dumps(list(self.timed_out)),
        }

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str]) -> ProvisioningState:
        """Read what `to_annotations` wrote; ValueError names the malformed annotation."""
        return cls(
            backoff_seconds=read_annotation(annotations, BACKOFF_SECONDS, _backoff_seconds),
            backoff_until=read_annotation(annotations, BACKOFF_UNTIL, annotation_time),
            last_failure=read_annotation(annotations, LAST_FAILED_SCALE_UP, annotation_time),
            unregistered_since=read_annotation(annotations, UNREGISTERED_INSTANCES, time_map),
            timed_out=read_annotation(annotations, TIMED_OUT_INSTANCES, name_list),
        )


def forget_stale_backoff(state: ProvisioningState, now: float,
                         reset_seconds: float = BACKOFF_RESET_SECONDS) -> ProvisioningState:
    """CA RemoveStaleBackoffData: a failure older than the reset timeout is forgotten."""
    if state.last_failure and state.last_failure + reset_seconds < now:
        return replace(state, backoff_seconds=0.0, backoff_until=0.0, last_failure=0.0)
    return state


def record_failure(state: ProvisioningState, now: float,
                   initial_seconds: float = INITIAL_BACKOFF_SECONDS,
                   max_seconds: float = MAX_BACKOFF_SECONDS,
                   reset_seconds: float = BACKOFF_RESET_SECONDS) -> ProvisioningState:
    """CA Backoff(): 5 min the first time; doubled (to 30 min at most) when the group failed
    again after its back-off ended; unchanged if it fails again while still backed off."""
    state = forget_stale_backoff(state, now, reset_seconds)
    duration = initial_seconds
    if state.last_failure:
        duration = state.backoff_seconds
        if state.backoff_until < now:
            duration = min(2 * state.backoff_seconds, max_seconds)
    return replace(state, backoff_seconds=duration, backoff_until=now + duration,
                   last_failure=now)


def record_success(state: ProvisioningState) -> ProvisioningState:
    """CA RemoveBackoff: every node of the scale-up registered."""
    return replace(state, backoff_seconds=0.0, backoff_until=0.0, last_failure=0.0)


@dataclass(frozen=True)
class ProvisioningCheck:
    """One tick's look at a group's instances: who to terminate and the new state."""

    state: ProvisioningState
    to_terminate: tuple[str, ...] = ()  # instance ids, for terminate-with-decrement
    failed: bool = False  # an instance timed out this tick: the group backed off
    succeeded: bool = False  # the last waiting instances registered: back-off cleared


def check_provisioning(state: ProvisioningState, instances: Iterable[AsgInstance],
                       registered_provider_ids: Collection[str], now: float,
                       max_provision_seconds: float = MAX_NODE_PROVISION_SECONDS,
                       initial_seconds: float = INITIAL_BACKOFF_SECONDS,
                       max_seconds: float = MAX_BACKOFF_SECONDS,
                       reset_seconds: float = BACKOFF_RESET_SECONDS) -> ProvisioningCheck:
    """Track instances without a Node; give up on those past the provision time (CA §1.1).

    An instance counts from the first tick that saw it unregistered. A given-up instance stays
    in `to_terminate` while the ASG lists it unregistered (terminating is idempotent, so a
    failed termination is retried next tick), but backs the group off only once.
    """
    state = forget_stale_backoff(state, now, reset_seconds)
    live = [instance for instance in instances
            if not instance.lifecycle_state.startswith(_GONE_STATES)]
    previously = dict(state.unregistered_since)
    waiting: dict[str, float] = {}
    for instance in live:
        if instance.provider_id not in registered_provider_ids:
            waiting[instance.instance_id] = previously.get(instance.instance_id, now)
    # CA: unregistered since + max provision time is before now.
    timed_out = tuple(sorted(instance for instance, since in waiting.items()
                             if now - since > max_provision_seconds))
    new_state = replace(state, unregistered_since=tuple(sorted(waiting.items())),
                        timed_out=timed_out)
    failed = bool(set(timed_out) - set(state.timed_out))
    if failed:
        new_state = record_failure(new_state, now, initial_seconds, max_seconds, reset_seconds)
    # Success: instances were waiting, none is now, and no failure since the oldest of them.
    oldest = min(previously.values(), default=None)
    succeeded = (not failed and oldest is not None and not waiting
                 and not (state.last_failure and state.last_failure >= oldest))
    if succeeded:
        new_state = record_success(new_state)
    return ProvisioningCheck(new_state, timed_out, failed, succeeded)


__all__ = [
    "ProvisioningCheck",
    "ProvisioningState",
    "check_provisioning",
    "forget_stale_backoff",
    "record_failure",
    "record_success",
]
