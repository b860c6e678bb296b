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
from typing import Any

from tasks.core.records import PodRecord
from tasks.escalator.pending_bursts import PendingPods, PendingPodsEvents

log = logging.getLogger(__name__)

IDLE_SECONDS = 0.5  # how often the loops look at the stop flag when nothing happens


class TickLoop:
    """Runs `tick` every `interval` seconds, and as soon as possible after `request()`."""

    def __init__(self, tick: Callable[[str], None], interval: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.tick = tick
        self.interval = interval
        self.clock = clock
        self._requested = threading.Event()
        self._why = "schedule"
        self.ticks = 0

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
            if not requested and self.clock() < next_at:
                continue
            why = self._why if requested else "schedule"
            self._requested.clear()
            self._why = "schedule"
            try:
                self.tick(why)
            except Exception as error:  # reported; the next tick tries again
                log.error("tick failed: %s: %s", type(error).__name__, error)
            self.ticks += 1
            next_at = self.clock() + self.interval


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
              clock: Callable[[], float] = time.monotonic) -> None:
    """Feed watch items to `events` and emit what falls due, until `stop` is set."""
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


def run_cached_ticks(api_client: Any, kubeconfig: str | None, events: PendingPodsEvents,
                     tick: Callable[[str], None], period: float, stop: threading.Event,
                     say: Callable[[str], None], start_seconds: float) -> None:
    """Keep a watch cache of the cluster and tick from it, until `stop` is set.

    The cache is installed for the process, so every `autoscale` flow run started here reads it;
    its pod changes feed the pending-pod bursts, and a burst asks `tick` for a tick at once.
    `tick` runs every `period` seconds too (`elevator watch`: a tick; `elevator serve`: a look
    for due runs of the deployment).
    """
    from flows.prefect_compat import one_client_for_runs
    from tasks.adapters.kube_cache import ClusterCache, install_process_cache
    from tasks.core.collector import collect_less_often

    collect_less_often()  # this process holds the cluster: see tasks/core/collector.py

    cache = ClusterCache(api_client)
    changes: queue.Queue[Changed | Relisted] = queue.Queue()
    cache.on_pod = lambda event_type, pod: changes.put(Changed(event_type, pod))
    cache.on_pods_listed = lambda pods: changes.put(Relisted(pods))
    install_process_cache(cache, kubeconfig)
    loop = TickLoop(tick, period)

    def on_burst(event: PendingPods) -> None:
        say(f"{event.group}: {event.count} pending pods → tick")
        loop.request(f"{event.group}: {event.count} pending pods")

    cache.start()
    try:
        if not cache.wait_synced(start_seconds, stop=stop):
            if stop.is_set():
                return
            say("the cache is still listing; ticks list for themselves")
        counts = cache.counts()
        say(f"watching the cluster ({counts['pods']} pods, {counts['nodes']} nodes) for "
            f"{len(events.pending.groups)} node groups")
        bursts = threading.Thread(target=run_watch, args=(changes, events, on_burst, stop),
                                  name="pending-bursts", daemon=True)
        bursts.start()
        with one_client_for_runs():
            loop.run(stop)
        bursts.join(timeout=5)
    finally:
        cache.stop()
        install_process_cache(None)
