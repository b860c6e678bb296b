"""Which node groups have pods waiting, from a pod watch, and when to say so.

Pure and clock-free: `elevator watch` (flows/cli/watch.py) feeds it the watch's pods with their
time, and emits the `PendingPods` events it hands back. A burst of 1,000 pods must cause one
run of the `autoscale` deployment, not 1,000, and that run should see the whole burst: a tick
that sees its first pods only would raise the ASG a little and then hold the scale lock for the
cool-down while the rest wait. So a group's first newly pending pod opens a window, the pods
that follow join it, and one event goes out when the window closes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kube_elevator.tasks.core.records import PodRecord
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.filter_nodes import pod_matches_group, pods_by_group

PENDING_EVENT = "elevator.node-group.pods-pending"
RESOURCE_PREFIX = "elevator.node-group."
# Field selector of the watch: what a scheduler would call unscheduled (kube-scheduler's own).
UNSCHEDULED_PODS = "spec.nodeName=,status.phase=Pending"
DEFAULT_DEBOUNCE_SECONDS = 5.0
DEFAULT_SETTLE_SECONDS = 1.0

PodKey = tuple[str, str]  # (namespace, name)


def group_resource_id(group: str) -> str:
    """`elevator.node-group.<name>`: the resource a group's events are about."""
    return RESOURCE_PREFIX + group


def is_pending_unscheduled(pod: PodRecord) -> bool:
    """Pending and placed on no node: waiting for capacity (or for the scheduler)."""
    return pod.phase == "Pending" and not pod.node_name and not pod.scheduled


@dataclass(frozen=True)
class PendingPods:
    """One event: `group` has `count` pending pods."""

    group: str
    count: int

    @property
    def resource(self) -> dict[str, str]:
        return {"prefect.resource.id": group_resource_id(self.group),
                "prefect.resource.name": self.group}

    @property
    def payload(self) -> dict[str, int]:
        return {"pending_pods": self.count}


class PendingByGroup:
    """The pending, unscheduled pods of every group, kept current from watch events."""

    def __init__(self, groups: Sequence[NodeGroupConfig]) -> None:
        self.groups = tuple(groups)
        self._groups_of: dict[PodKey, tuple[str, ...]] = {}
        self._counts: dict[str, int] = {group.name: 0 for group in self.groups}

    def count(self, group: str) -> int:
        return self._counts[group]

    def _remove(self, key: PodKey) -> tuple[str, ...]:
        before = self._groups_of.pop(key, ())
        for group in before:
            self._counts[group] -= 1
        return before

    def _add(self, key: PodKey, groups: tuple[str, ...]) -> None:
        if groups:
            self._groups_of[key] = groups
            for group in groups:
                self._counts[group] += 1

    def apply(self, event_type: str, pod: PodRecord) -> tuple[str, ...]:
        """One ADDED/MODIFIED/DELETED pod; returns the groups it newly waits in."""
        key = (pod.namespace, pod.name)
        before = self._remove(key)
        if event_type == "DELETED" or not is_pending_unscheduled(pod):
            return ()
        groups = tuple(group.name for group in self.groups if pod_matches_group(pod, group))
        self._add(key, groups)
        return tuple(group for group in groups if group not in before)

    def replace(self, pods: Iterable[PodRecord]) -> tuple[str, ...]:
        """A (re)list: the whole state at once; returns the groups that gained a pod."""
        previous = self._groups_of
        self._groups_of = {}
        self._counts = dict.fromkeys(self._counts, 0)
        pending = [pod for pod in pods if is_pending_unscheduled(pod)]
        groups_of: dict[PodKey, list[str]] = {}
        for group, members in pods_by_group(pending, self.groups).items():
            for pod in members:
                groups_of.setdefault((pod.namespace, pod.name), []).append(group)
        gained: dict[str, None] = {}
        for key, groups in groups_of.items():
            self._add(key, tuple(groups))
            for group in groups:
                if group not in previous.get(key, ()):
                    gained[group] = None
        return tuple(gained)


@dataclass
class _Window:
    opened: float
    last: float


class Debouncer:
    """At most one event per group per `debounce` seconds, sent once its burst settles.

    A group's window opens with its first newly pending pod and closes `settle` seconds after
    the last pod that joined it, or `debounce` seconds after it opened, whichever comes first;
    never sooner than `debounce` after the group's previous event.
    """

    def __init__(self, debounce: float = DEFAULT_DEBOUNCE_SECONDS,
                 settle: float = DEFAULT_SETTLE_SECONDS) -> None:
        if debounce <= 0 or settle <= 0:
            raise ValueError("debounce and settle must be positive")
        self.debounce = debounce
        self.settle = min(settle, debounce)
        self._open: dict[str, _Window] = {}
        self._last_sent: dict[str, float] = {}

    def note(self, group: str, now: float) -> None:
        """A pod newly waits in `group` at `now`."""
        window = self._open.get(group)
        if window is None:
            self._open[group] = _Window(now, now)
        else:
            window.last = now

    def _closes(self, group: str, window: _Window) -> float:
        closes = min(window.opened + self.debounce, window.last + self.settle)
        sent = self._last_sent.get(group)
        return closes if sent is None else max(closes, sent + self.debounce)

    def next_due(self) -> float | None:
        """When the next window closes (None: none open)."""
        return min((self._closes(group, window) for group, window in self._open.items()),
                   default=None)

    def due(self, now: float) -> list[str]:
        """The groups whose window has closed by `now`, in order of opening; they are sent."""
        closed = [group for group, window in self._open.items()
                  if self._closes(group, window) <= now]
        for group in closed:
            del self._open[group]
            self._last_sent[group] = now
        return closed


class PendingPodsEvents:
    """Watch events in, debounced `PendingPods` events out."""

    def __init__(self, groups: Sequence[NodeGroupConfig], debouncer: Debouncer) -> None:
        self.pending = PendingByGroup(groups)
        self.debouncer = debouncer

    def observe(self, event_type: str, pod: PodRecord, now: float) -> None:
        for group in self.pending.apply(event_type, pod):
            self.debouncer.note(group, now)

    def relisted(self, pods: Iterable[PodRecord], now: float) -> None:
        for group in self.pending.replace(pods):
            self.debouncer.note(group, now)

    def next_due(self) -> float | None:
        return self.debouncer.next_due()

    def due(self, now: float) -> list[PendingPods]:
        """Events to send now; a group whose pods were all placed meanwhile sends none."""
        events = (PendingPods(group, self.pending.count(group))
                  for group in self.debouncer.due(now))
        return [event for event in events if event.count > 0]
