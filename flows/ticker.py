"""Ticks in the watching process: the `autoscale` flow on a schedule and on pending-pod bursts.

The process keeps a watch cache of the cluster (`tasks.adapters.kube_cache`), so a tick reads
memory instead of listing every pod, and a burst of pending pods reaches the tick without a
round trip through a Prefect event, an automation and a new process. Every tick is still a
flow run, with its task runs recorded (PREFECT_API_URL's server, or the ephemeral one).

A burst is debounced as `elevator watch` debounces its events (`tasks.escalator.pending_bursts`):
a group's first newly pending pod opens a window that closes `settle` seconds after the last
pod joined it; ticks requested while one runs make one more tick, not one each.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kube_elevator.tasks.core.health import LoopHealth
from kube_elevator.tasks.core.records import PodRecord
from kube_elevator.tasks.core.words import counted
from kube_elevator.tasks.escalator.pending_bursts import PendingPods, PendingPodsEvents

if TYPE_CHECKING:
    from kube_elevator.tasks.adapters.kube_cache import ClusterCache

log = logging.getLogger(__name__)

IDLE_SECONDS = 0.5  # how often the loops look at the stop flag when nothing happens


class TickLoop:
    """Runs `tick` every `interval` seconds, and as soon as possible after `request()`.

    The one owner of "should this process tick now": under leader election (`may_act`, the
    elector's answer by its own clock) it ticks only while it leads, asking before every tick,
    and ticks at once when it starts leading; a follower drops the ticks asked of it (the
    leader's cache saw the same pods). It records what the health check reads (`health`):
    when a tick finished and when one succeeded (`tick` returns True when its flow runs ended
    Completed, False when not, None when it ran none; a tick that raises failed), and whether
    it runs the ticks at all. A look that ran nothing (`tick` returned None: `serve` found no
    run due) is no tick: the liveness clock (`--max-inactivity`) and the tick metrics move only
    when a tick finished, so a process whose schedule stopped bringing runs fails its health
    check rather than passing on its empty looks. `ready` says whether the process is ready
    (its cache synced).

    `warm_up` runs once, the first time the loop finds it follows: a follower's first tick,
    when it takes over, would otherwise pay for a process's first flow run (seconds: the flow
    engine, the clients, the cloud's service models), after the lease duration it already waited.
    """

    def __init__(self, tick: Callable[[str], bool | None], interval: float,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time,
                 may_act: Callable[[], bool] | None = None,
                 warm_up: Callable[[], None] | None = None) -> None:
        self.tick = tick
        self.interval = interval
        self.warm_up = warm_up
        self.clock = clock
        self.wall_clock = wall_clock
        self.may_act = may_act
        self.health = LoopHealth(clock(), monitoring=may_act is None)
        # Not ready before the loop knows its role (`looked`), whatever else it waits for.
        self.ready: Callable[[], bool] = lambda: self.looked
        self._requested = threading.Event()
        self._why = "schedule"
        self.ticks = 0
        self.acting = may_act is None
        # Whether the loop knows its role: it asked the election once (or has none). Until then
        # a process is not ready: its health reads as a follower's, though it may lead.
        self.looked = may_act is None

    def request(self, why: str) -> None:
        self._why = why
        self._requested.set()

    def run(self, stop: threading.Event) -> None:
        next_at = self.clock()  # the first tick as soon as the cache has synced
        while not stop.is_set():
            wait = max(0.0, next_at - self.clock())
            requested = self._requested.wait(min(wait, IDLE_SECONDS))
            if stop.is_set():
                return
            if self.may_act is not None:
                leads, won = self._leads()
                self.looked = True
                if not leads:
                    self._requested.clear()  # a follower does not tick
                    self._warm()
                    continue
                if won:  # a new leader ticks at once: the pods it followed may be waiting
                    requested, self._why = True, "leading"
            if not requested and self.clock() < next_at:
                continue
            why = self._why if requested else "schedule"
            self._requested.clear()
            self._why = "schedule"
            outcome: bool | None = False
            try:
                outcome = self.tick(why)
            except Exception as error:  # reported; the next tick tries again
                log.error("tick failed: %s: %s", type(error).__name__, error)
            next_at = self.clock() + self.interval
            if outcome is None:  # nothing ran: no tick finished
                continue
            self.health.finished(self.clock(), self.wall_clock(), outcome)
            self.ticks += 1

    def _warm(self) -> None:
        warm_up, self.warm_up = self.warm_up, None
        if warm_up is not None:
            try:
                warm_up()
            except Exception as error:  # the takeover tick pays for it instead
                log.warning("warming up failed: %s: %s", type(error).__name__, error)

    def _leads(self) -> tuple[bool, bool]:
        """(leads now, just won): asks the election; on a change, starts or stops the health
        check's limits, as the Cluster Autoscaler starts monitoring once it wins."""
        assert self.may_act is not None
        acting = self.may_act()
        won = acting and not self.acting
        if acting != self.acting:
            self.acting = acting
            if acting:
                self.health.start_monitoring(self.clock())
            else:
                self.health.stop_monitoring()
        return acting, won


@dataclass(frozen=True)
class Changed:
    """A watch event: ADDED, MODIFIED or DELETED."""

    type: str
    pod: PodRecord


@dataclass(frozen=True)
class Relisted:
    """A full list: the state to start from, after start or after 410 Gone."""

    pods: list[PodRecord]


def feed(events: PendingPodsEvents, item: Changed | Relisted, now: float) -> None:
    if isinstance(item, Relisted):
        events.relisted(item.pods, now)
    else:
        events.observe(item.type, item.pod, now)


def run_watch(items: queue.Queue[Changed | Relisted], events: PendingPodsEvents,
              emit: Callable[[PendingPods], None], stop: threading.Event,
              clock: Callable[[], float] = time.monotonic,
              heartbeat: Callable[[], None] = lambda: None) -> None:
    """Feed watch items to `events` and emit what falls due, until `stop` is set; `heartbeat`
    after every pass (at least every IDLE_SECONDS: the loop's liveness)."""
    while not stop.is_set():
        due_at = events.next_due()
        wait = IDLE_SECONDS if due_at is None else min(IDLE_SECONDS, max(0.0, due_at - clock()))
        try:
            item = items.get(timeout=wait)
        except queue.Empty:
            pass
        else:
            feed(events, item, clock())
            with contextlib.suppress(queue.Empty):
                while True:  # a burst: take what is queued before looking at the clock again
                    feed(events, items.get_nowait(), clock())
        for event in events.due(clock()):
            emit(event)
        heartbeat()


def run_ticks(loop: TickLoop, stop: threading.Event) -> None:
    """`loop.run(stop)`, with its election's answer asked before every claim of a tick too
    (`tasks.core.acting`)."""
    from kube_elevator.tasks.core.acting import install_acting_guard

    install_acting_guard(loop.may_act)
    try:
        loop.run(stop)
    finally:
        install_acting_guard(None)


@dataclass
class CacheFeed:
    """A started watch cache, installed for the process, and the pod changes it has seen."""

    cache: ClusterCache
    changes: queue.Queue[Changed | Relisted]


def start_cache(api_client: Any, kubeconfig: str | None) -> CacheFeed:
    """Start listing and watching the cluster now, installed as the process's cache: a command
    that has more to do before it ticks (`serve` starting or finding its Prefect server,
    registering its deployments, ending abandoned runs) lists meanwhile, and its first tick
    does not wait for the list after all that (issue 40: the first tick after a restart)."""
    from kube_elevator.tasks.adapters.kube_cache import ClusterCache, install_process_cache
    from kube_elevator.tasks.core.collector import collect_less_often

    collect_less_often()  # this process holds the cluster: see tasks/core/collector.py

    cache = ClusterCache(api_client)
    changes: queue.Queue[Changed | Relisted] = queue.Queue()
    cache.on_pod = lambda event_type, pod: changes.put(Changed(event_type, pod))
    cache.on_pods_listed = lambda pods: changes.put(Relisted(pods))
    install_process_cache(cache, kubeconfig)
    cache.start()
    return CacheFeed(cache, changes)


def run_cached_ticks(api_client: Any, kubeconfig: str | None, events: PendingPodsEvents,
                     loop: TickLoop, stop: threading.Event, say: Callable[[str], None],
                     start_seconds: float, feed: CacheFeed | None = None) -> None:
    """Keep a watch cache of the cluster and run `loop` from it, until `stop` is set.

    The cache is installed for the process, so every `autoscale` flow run started here reads it;
    its pod changes feed the pending-pod bursts, and a burst asks the loop for a tick at once.
    The loop ticks every `loop.interval` seconds too (`elevator watch`: a tick; `elevator
    serve`: a look for due runs of the deployment). A follower keeps the cache warm all the
    same: when it takes over, its first tick reads memory. The loop is ready once the cache
    has listed every kind. `feed`: a cache `start_cache` started earlier (else one now).
    """
    from kube_elevator.flows.prefect_compat import one_client_for_runs
    from kube_elevator.tasks.adapters.kube_cache import install_process_cache

    if feed is None:
        feed = start_cache(api_client, kubeconfig)
    cache, changes = feed.cache, feed.changes
    # Ready once listed, and once the loop knows whether it leads (a cache started before the
    # loop is synced before the loop has asked: that is no follower's readiness yet).
    loop.ready = lambda: cache.synced and loop.looked

    def on_burst(event: PendingPods) -> None:
        if loop.acting:  # a follower's line would read as if it ticked
            say(f"{event.group}: {event.count} pending pods → tick")
        loop.request(f"{event.group}: {event.count} pending pods")

    try:
        if not cache.wait_synced(start_seconds, stop=stop):
            if stop.is_set():
                return
            say("the cache is still listing; ticks list for themselves")
        counts = cache.counts()
        say(f"watching the cluster ({counted(counts['pods'], 'pod')}, "
            f"{counted(counts['nodes'], 'node')}) for "
            f"{counted(len(events.pending.groups), 'node group')}")
        bursts = threading.Thread(target=run_watch, args=(changes, events, on_burst, stop),
                                  name="pending-bursts", daemon=True)
        bursts.start()
        with one_client_for_runs():
            run_ticks(loop, stop)
        bursts.join(timeout=5)
    finally:
        loop.ready = lambda: False
        cache.stop()
        install_process_cache(None)
