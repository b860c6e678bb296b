"""`elevator watch`: pending pods become Prefect events, so a burst is acted on in seconds.

Escalator only polls. This command keeps a real watch on unscheduled pending pods (list, then
watch from the list's resourceVersion; on a dropped connection it resumes from the last
resourceVersion seen, on 410 Gone it lists again), maps each pod to its node groups, and emits
`elevator.node-group.pods-pending` (`tasks.escalator.pending_bursts` decides when); the
`autoscale` deployment's trigger turns that event into a run. It stops cleanly (exit 0) on SIGTERM or SIGINT.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer

from tasks.adapters.kube_watch import PAGE_SIZE, RETRY_SECONDS, WATCH_TIMEOUT_SECONDS, ListWatch
from tasks.core.api_objects import OBJECT_DECODER
from tasks.core.duration import positive_duration_option
from tasks.core.errors import InputError
from tasks.core.records import PodRecord, pod_record
from tasks.escalator.pending_bursts import (
    DEFAULT_DEBOUNCE_SECONDS,
    DEFAULT_SETTLE_SECONDS,
    PENDING_EVENT,
    UNSCHEDULED_PODS,
    Debouncer,
    PendingPods,
    PendingPodsEvents,
)

log = logging.getLogger(__name__)

IDLE_SECONDS = 0.5  # how often the loop looks at the stop flag when nothing happens


@dataclass(frozen=True)
class Changed:
    """A watch event: ADDED, MODIFIED or DELETED."""

    type: str
    pod: PodRecord


@dataclass(frozen=True)
class Relisted:
    """A full list: the state to start from, after start or after 410 Gone."""

    pods: list[PodRecord]


class PodWatch:
    """List-then-watch of unscheduled pending pods in all namespaces, in a daemon thread.

    `items` receives a `Relisted` after each list and a `Changed` per event; the loop itself is
    the Kubernetes adapter's one (`tasks.adapters.kube_watch.ListWatch`).
    """

    def __init__(self, api_client: Any, timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
                 page_size: int = PAGE_SIZE, retry_seconds: float = RETRY_SECONDS) -> None:
        from kubernetes import client

        self.items: queue.Queue[Changed | Relisted] = queue.Queue()
        self.loop = ListWatch(
            client.CoreV1Api(api_client).list_pod_for_all_namespaces, "pods", self._relisted,
            self._changed, timeout_seconds=timeout_seconds, page_size=page_size,
            retry_seconds=retry_seconds, field_selector=UNSCHEDULED_PODS)

    @property
    def resource_version(self) -> str | None:
        return self.loop.resource_version

    @resource_version.setter
    def resource_version(self, version: str | None) -> None:
        self.loop.resource_version = version

    def start(self) -> PodWatch:
        self.loop.start()
        return self

    def stop(self) -> None:
        self.loop.stop()

    def _relisted(self, items: list[msgspec.Raw], version: str) -> None:
        self.items.put(Relisted([pod for item in items if (pod := _pod(item, "LIST"))]))

    def _changed(self, event_type: str, item: msgspec.Raw) -> None:
        pod = _pod(item, event_type)
        if pod is not None:
            self.items.put(Changed(event_type, pod))


def _pod(item: msgspec.Raw, event_type: str) -> PodRecord | None:
    try:
        return pod_record(OBJECT_DECODER.decode(item))
    except (msgspec.DecodeError, ValueError) as error:
        # Skipped, not retried: resuming would only read the same object again.
        log.warning("skipping a %s pod the watch cannot read: %s", event_type, error)
        return None


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


def emit_to_prefect(event: PendingPods) -> None:
    """The Prefect event the `autoscale` deployment's trigger waits for."""
    from prefect.events import emit_event

    emit_event(event=PENDING_EVENT, resource=event.resource, payload=event.payload)


def watch(
    nodegroups: Annotated[Path, typer.Option(help="Escalator node-group file.")],
    kubeconfig: Annotated[Path | None, typer.Option(
        help="kubeconfig file (default: in-cluster config, else ~/.kube/config).")] = None,
    debounce: Annotated[str, typer.Option(
        help="At most one event per node group per this long (Go duration).")] =
        f"{DEFAULT_DEBOUNCE_SECONDS:g}s",
    settle: Annotated[str, typer.Option(
        help="Send a group's event once no new pending pod has come for this long.")] =
        f"{DEFAULT_SETTLE_SECONDS:g}s",
) -> None:
    """Watch pending pods and emit `elevator.node-group.pods-pending` Prefect events."""
    from prefect.settings import get_current_settings

    from flows.cli.common import console, wait_for_stop_signal
    from tasks.adapters.kube import KubeClient
    from tasks.escalator.config import load_node_groups

    config = load_node_groups(nodegroups)
    debouncer = Debouncer(positive_duration_option(debounce, "--debounce"),
                          positive_duration_option(settle, "--settle"))
    if not get_current_settings().api.url:
        raise InputError(["PREFECT_API_URL is not set: elevator watch sends its events to a "
                          "Prefect server, where the autoscale deployment's trigger waits"])
    try:
        kube = KubeClient.from_config(kubeconfig)
    except Exception as error:  # the client raises ConfigException, OSError, YAML errors
        raise InputError([f"--kubeconfig: {kubeconfig}: {error}"]) from None
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request to Prefect
    stop = wait_for_stop_signal()

    def emit(event: PendingPods) -> None:
        emit_to_prefect(event)
        console.print(f"{event.group}: {event.count} pending pods → {PENDING_EVENT}",
                      highlight=False, soft_wrap=True)
        sys.stdout.flush()

    pods = PodWatch(kube.api).start()
    console.print(f"watching pending pods for {len(config.node_groups)} node groups",
                  highlight=False)
    sys.stdout.flush()
    try:
        run_watch(pods.items, PendingPodsEvents(config.node_groups, debouncer), emit, stop)
    finally:
        pods.stop()
        from prefect.events.worker import EventsWorker

        EventsWorker.drain_all(timeout=10)  # events still queued reach the server
    console.print("watch: stopped", highlight=False)


def register(app: typer.Typer) -> None:
    """Add `watch` to the `elevator` app."""
    from flows.cli.common import reports_input_errors

    app.command("watch")(reports_input_errors(watch))
