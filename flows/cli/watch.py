"""`elevator watch`: pending pods become Prefect events, so a burst is acted on in seconds.

Escalator only polls. This command keeps a real watch on unscheduled pending pods (list, then
watch from the list's resourceVersion; on a dropped connection it resumes from the last
resourceVersion seen, on 410 Gone it lists again), maps each pod to its node groups, and emits
`elevator.node-group.pods-pending` (tasks/watch.py decides when); the `autoscale` deployment's
trigger turns that event into a run. It stops cleanly (exit 0) on SIGTERM or SIGINT.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer

from tasks.core.api_objects import LIST_DECODER, OBJECT_DECODER
from tasks.core.duration import positive_duration_option
from tasks.core.errors import InputError
from tasks.core.records import PodRecord, pod_record
from tasks.core.timeouts import timeouts
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

WATCH_TIMEOUT_SECONDS = 300  # the server ends a watch after this; we resume from where it was
PAGE_SIZE = 500
RETRY_SECONDS = 1.0
IDLE_SECONDS = 0.5  # how often the loop looks at the stop flag when nothing happens


class _WatchLine(msgspec.Struct, gc=False):
    type: str
    object: msgspec.Raw = msgspec.Raw()


class _Status(msgspec.Struct, gc=False):
    code: int = 0
    message: str = ""


_LINE_DECODER = msgspec.json.Decoder(_WatchLine)
_STATUS_DECODER = msgspec.json.Decoder(_Status)


@dataclass(frozen=True)
class Changed:
    """A watch event: ADDED, MODIFIED or DELETED."""

    type: str
    pod: PodRecord


@dataclass(frozen=True)
class Relisted:
    """A full list: the state to start from, after start or after 410 Gone."""

    pods: list[PodRecord]


class Expired(Exception):
    """410 Gone: the resourceVersion is older than the server's history; list again."""


def _lines(response: Any) -> Iterator[bytes]:
    """Lines of a chunked watch response, as bytes (no per-line copy of the buffer)."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        *complete, pending = (pending + chunk).split(b"\n")
        for line in complete:
            if line:
                yield line


class PodWatch:
    """List-then-watch of unscheduled pending pods in all namespaces, in a daemon thread.

    `items` receives a `Relisted` after each list and a `Changed` per event.
    """

    def __init__(self, api_client: Any, timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
                 page_size: int = PAGE_SIZE, retry_seconds: float = RETRY_SECONDS) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.timeout_seconds = timeout_seconds
        self.page_size = page_size
        self.retry_seconds = retry_seconds
        self.items: queue.Queue[Changed | Relisted] = queue.Queue()
        self.resource_version: str | None = None  # None: list before watching
        self._stop = threading.Event()
        self._response: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> PodWatch:
        self._thread = threading.Thread(target=self.run, name="pod-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # unblocks the thread's read at once
                response.shutdown() if hasattr(response, "shutdown") else response.close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def run(self) -> None:
        """List when there is no resourceVersion, else watch from it; until stopped."""
        from kubernetes.client.exceptions import ApiException

        while not self._stop.is_set():
            try:
                if self.resource_version is None:
                    self.list()
                self.watch()
            except Expired as expired:
                log.info("watch expired (%s): listing again", expired)
                self.resource_version = None
            except ApiException as error:
                if error.status == 410:
                    self.resource_version = None
                    continue
                self._retry_later(error)
            except Exception as error:  # connection reset, timeout, server restart ...
                self._retry_later(error)

    def _retry_later(self, error: Exception) -> None:
        if not self._stop.is_set():
            log.warning("pod watch failed: %s; resuming from resourceVersion %s",
                        error, self.resource_version)
            self._stop.wait(self.retry_seconds)

    def list(self) -> None:
        """Every unscheduled pending pod, page by page; remembers the list's resourceVersion."""
        pods: list[PodRecord] = []
        token: str | None = None
        version = ""
        while True:
            response: Any = self.core.list_pod_for_all_namespaces(
                field_selector=UNSCHEDULED_PODS, limit=self.page_size, _continue=token,
                _preload_content=False,  # raw bytes, decoded into slim records below
                _request_timeout=timeouts().pair)
            page = LIST_DECODER.decode(response.data)
            pods.extend(pod_record(item) for item in page.items)
            version = version or page.metadata.resourceVersion or ""
            token = page.metadata.continue_
            if not token:
                break
        self.items.put(Relisted(pods))
        self.resource_version = version

    def watch(self) -> None:
        """One watch request, from `resource_version`, until the server ends it."""
        response: Any = self.core.list_pod_for_all_namespaces(
            watch=True, field_selector=UNSCHEDULED_PODS, resource_version=self.resource_version,
            allow_watch_bookmarks=True, timeout_seconds=self.timeout_seconds,
            _preload_content=False, _request_timeout=self._watch_timeout())
        self._response = response
        try:
            if self._stop.is_set():  # stopped while connecting: stop() saw no response
                return
            for line in _lines(response):
                if self._stop.is_set():
                    return
                self._handle(_LINE_DECODER.decode(line))
        finally:
            self._response = None
            response.release_conn()

    def _watch_timeout(self) -> tuple[float, float]:
        """(connect, read) of a watch: the server ends it after `timeout_seconds` (a quiet watch
        may send nothing until then), so a read waits that long plus the read timeout."""
        limits = timeouts()
        return (limits.connect_seconds, self.timeout_seconds + limits.read_seconds)

    def _handle(self, line: _WatchLine) -> None:
        if line.type == "ERROR":
            status = _STATUS_DECODER.decode(line.object)
            if status.code == 410:
                raise Expired(status.message)
            raise RuntimeError(f"watch error {status.code}: {status.message}")
        try:
            raw = OBJECT_DECODER.decode(line.object)
            pod = pod_record(raw) if line.type != "BOOKMARK" else None
        except (msgspec.DecodeError, ValueError) as error:
            # Skipped, not retried: resuming would only read the same object again.
            log.warning("skipping a %s event the watch cannot read: %s", line.type, error)
            return
        self.resource_version = raw.metadata.resourceVersion or self.resource_version
        if pod is not None:
            self.items.put(Changed(line.type, pod))


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
