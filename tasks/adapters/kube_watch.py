"""The one list-then-watch loop of the Kubernetes adapter (an informer's reflector, in short).

List (paged), then watch from the list's resourceVersion; on a dropped or ended watch, resume
from the last resourceVersion seen (bookmarks keep it fresh on a quiet cluster, so a resumed
watch does not fall out of the server's history), after a wait when the watch ended at once with
nothing in it; on 410 Gone, list again. Objects reach the
consumer as their raw JSON (`msgspec.Raw`), so each decodes only the fields it reads: slim
records for the pod watch and the cache, dicts for the extender.

A watch can also go quiet without closing: a load balancer that forgot the flow, a frozen
proxy, a half-open TCP connection. The loop knows when it last heard from the server (an event,
a bookmark, a list, or the answer to a watch request); a watchdog thread closes a watch that
brought nothing for `silence_limit_seconds`, and the loop opens a new one from the last
resourceVersion at once (a list only if the server answers 410). A healthy watch is never that
quiet: the server ends each after `watch_timeout_seconds` (two thirds of the limit), so the
server is heard from at least that often, on the quietest cluster, with or without bookmarks.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import urllib3

from kube_elevator.tasks.adapters.kube_connections import drop_idle_connections
from kube_elevator.tasks.adapters.kube_pages import PagedList
from kube_elevator.tasks.core.collector import gc_paused
from kube_elevator.tasks.core.timeouts import WATCH_SILENCE_LIMIT_SECONDS, timeouts, watch_limits

log = logging.getLogger(__name__)

PAGE_SIZE = 500
RETRY_SECONDS = 1.0
SHORT_WATCH_SECONDS = 1.0  # client-go's reflector: a shorter watch with nothing in it is refused
WATCHDOG_CHECK_SECONDS = 1.0  # the longest the watchdog sleeps between two looks


def watch_timeout_seconds(silence_limit_seconds: float) -> int:
    """How long the server keeps each watch open (`timeoutSeconds`): two thirds of the silence
    limit, so a healthy watch is heard from well inside the limit however quiet the cluster.

    The API server ends the watch then, after a bookmark 2 s before the end (cacheWatcher's
    nextBookmarkTime in k8s.io/apiserver/pkg/storage/cacher), and the next watch is answered at
    once. client-go's reflector asks for 5 to 10 minutes and counts on HTTP/2 pings to find a
    dead connection; over HTTP/1.1 only the server's own bytes can tell. The cost is one watch
    request per kind every 30 s, resumed from the API server's watch cache (no list, no etcd
    read).
    """
    return max(1, int(silence_limit_seconds * 2 / 3))


WATCH_TIMEOUT_SECONDS = watch_timeout_seconds(WATCH_SILENCE_LIMIT_SECONDS)  # 30 s


class _ListMetadata(msgspec.Struct, gc=False):
    continue_: str | None = msgspec.field(default=None, name="continue")
    resourceVersion: str | None = None


class _Page(msgspec.Struct, gc=False):
    items: list[msgspec.Raw] = []
    metadata: _ListMetadata = msgspec.field(default_factory=_ListMetadata)


class _ObjectMetadata(msgspec.Struct, gc=False):
    resourceVersion: str | None = None


class _Versioned(msgspec.Struct, gc=False):
    metadata: _ObjectMetadata = msgspec.field(default_factory=_ObjectMetadata)


class _Line(msgspec.Struct, gc=False):
    type: str
    object: msgspec.Raw = msgspec.Raw()


class _Status(msgspec.Struct, gc=False):
    code: int = 0
    message: str = ""


_PAGE = msgspec.json.Decoder(_Page)
_VERSIONED = msgspec.json.Decoder(_Versioned)
_LINE = msgspec.json.Decoder(_Line)
_STATUS = msgspec.json.Decoder(_Status)

# (the list's objects, its resourceVersion): the whole state, after a start or a 410. The objects
# are `msgspec.Raw`, or what `page_decoder` makes of a page's items.
Relist = Callable[[list[Any], str], None]
# a list page's bytes -> (its items, the continue token, the list's resourceVersion)
PageDecoder = Callable[[bytes], tuple[list[Any], str | None, str | None]]


def raw_page(data: bytes) -> tuple[list[Any], str | None, str | None]:
    """A page's items as their raw JSON."""
    page = _PAGE.decode(data)
    return page.items, page.metadata.continue_, page.metadata.resourceVersion
# (ADDED | MODIFIED | DELETED, the object)
Event = Callable[[str, msgspec.Raw], None]


class Expired(Exception):
    """410 Gone: the resourceVersion is older than the server's history; list again."""


def response_lines(response: Any) -> Iterator[bytes]:
    """Lines of a chunked watch response, as bytes (no per-line copy of the buffer)."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        *complete, pending = (pending + chunk).split(b"\n")
        for line in complete:
            if line:
                yield line


class ListWatch:
    """List-then-watch of one resource in a daemon thread, until `stop()`.

    `list_call` is the client's list method (e.g. `CoreV1Api.list_pod_for_all_namespaces`);
    `query` its selectors. `on_relist` gets every object after each list, `on_event` each
    change; `on_bookmark` (if given) each resourceVersion a bookmark brings. `page_decoder`
    turns each list page into what `on_relist` wants as it arrives (the cache folds a page of
    pods straight into records, so no page's raw objects outlive it). `clock` times each watch,
    to tell one the server ended at once, and the silences.

    `silence_limit_seconds` (default: `tasks.core.timeouts.watch_limits`) bounds how long a
    watch may bring nothing before it is replaced; `timeout_seconds` (at most two thirds of it,
    `watch_timeout_seconds`) is how long the server keeps each watch open.
    """

    def __init__(self, list_call: Callable[..., Any], name: str, on_relist: Relist,
                 on_event: Event, *, timeout_seconds: int | None = None,
                 page_size: int = PAGE_SIZE, retry_seconds: float = RETRY_SECONDS,
                 on_bookmark: Callable[[str], None] | None = None,
                 page_decoder: PageDecoder = raw_page,
                 silence_limit_seconds: float | None = None,
                 clock: Callable[[], float] = time.monotonic, **query: str) -> None:
        self.list_call = list_call
        self.name = name
        self.on_relist = on_relist
        self.on_event = on_event
        self.on_bookmark = on_bookmark
        self.silence_limit_seconds = (watch_limits().silence_limit_seconds
                                      if silence_limit_seconds is None else silence_limit_seconds)
        longest = watch_timeout_seconds(self.silence_limit_seconds)
        self.timeout_seconds = longest if timeout_seconds is None else min(timeout_seconds,
                                                                           longest)
        self.page_size = page_size
        self.retry_seconds = retry_seconds
        self.query = query
        self.page_decoder = page_decoder
        self.clock = clock
        self.resource_version: str | None = None  # None: list before watching
        self.relists = 0
        self.short_watches = 0
        self.silences = 0  # watches closed for saying nothing past the limit
        self.watches = 0  # watch requests the server answered
        self._lines = 0  # events and bookmarks the watches brought
        self._stop = threading.Event()
        self._response: Any = None
        self._thread: threading.Thread | None = None
        self._watchdog: threading.Thread | None = None
        # When the server was last heard from (`clock()`), and how often: a list, the answer to
        # a watch request, an event or a bookmark. None until the first list.
        self.heard_at: float | None = None
        self._heard_count = 0
        self._heard = threading.Condition()
        self._watching: Any = None  # the open watch response, while one streams
        self._closed_by_us: Any = None  # the response the watchdog or `reconnect` closed

    def start(self) -> ListWatch:
        self._thread = threading.Thread(target=self.run, name=f"watch-{self.name}", daemon=True)
        self._thread.start()
        self._watchdog = threading.Thread(target=self._watch_the_silence,
                                          name=f"watchdog-{self.name}", daemon=True)
        self._watchdog.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            _close_now(response)  # unblocks the thread's read at once
        for thread in (self._thread, self._watchdog):
            if thread is not None:
                thread.join(timeout=5)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # --- liveness -----------------------------------------------------------------------------

    def silent_seconds(self, now: float | None = None) -> float | None:
        """Seconds since the server was last heard from on this loop (None: not yet listed)."""
        heard_at = self.heard_at
        if heard_at is None:
            return None
        return max(0.0, (self.clock() if now is None else now) - heard_at)

    def check_silence(self) -> bool:
        """Close the open watch if it brought nothing for `silence_limit_seconds`: the loop then
        resumes from the last resourceVersion on a new connection. True if it closed one.

        Line-level, not byte-level: a stream that trickles bytes which never make a whole
        event is as silent as one that sends none. The watchdog thread calls this; a test can,
        with its own clock.
        """
        response = self._watching
        silent = self.silent_seconds()
        if (response is None or silent is None or silent < self.silence_limit_seconds
                or self._stop.is_set() or self._closed_by_us is response):
            return False
        self._close_watch(response)
        self._went_silent(silent)
        return True

    def _went_silent(self, silent_seconds: float) -> None:
        self.silences += 1
        log.warning("%s watch: nothing from the server for %.0f s (limit %g s): a new watch "
                    "from resourceVersion %s", self.name, silent_seconds,
                    self.silence_limit_seconds, self.resource_version)
        # The idle connections to this server went the same way: the next request of any
        # client would hold on one for its read timeout (tasks/adapters/kube_connections.py).
        drop_idle_connections(getattr(getattr(self.list_call, "__self__", None), "api_client",
                                      None))

    def reconnect(self) -> int:
        """Replace the open watch with a new one from the last resourceVersion (a tick that
        found this kind stale); returns the count `wait_heard` waits past."""
        heard = self._heard_count
        response = self._watching
        if response is not None:
            self._close_watch(response)
        return heard

    def wait_heard(self, past: int, timeout_seconds: float) -> bool:
        """Block until the server is heard from after `past` (a count from `reconnect`);
        False after `timeout_seconds` or once stopped."""
        with self._heard:
            return self._heard.wait_for(
                lambda: self._heard_count > past or self._stop.is_set(),
                timeout_seconds) and not self._stop.is_set()

    def _close_watch(self, response: Any) -> None:
        self._closed_by_us = response
        _close_now(response)

    def _note_heard(self) -> None:
        with self._heard:
            self.heard_at = self.clock()
            self._heard_count += 1
            self._heard.notify_all()

    def _watch_the_silence(self) -> None:
        period = min(WATCHDOG_CHECK_SECONDS, self.silence_limit_seconds / 10)
        while not self._stop.wait(period):
            self.check_silence()

    # --- the loop -----------------------------------------------------------------------------

    def run(self) -> None:
        """List when there is no resourceVersion, else watch from it; until stopped."""
        from kubernetes.client.exceptions import ApiException

        while not self._stop.is_set():
            try:
                if self.resource_version is None:
                    self.relist()
                    if self.resource_version is None:  # stopped mid-list
                        continue
                started, lines = self.clock(), self._lines
                closed_by_us = self.watch()
                if (self.clock() - started < SHORT_WATCH_SECONDS and self._lines == lines
                        and not closed_by_us and not self._stop.is_set()):
                    # client-go's reflector: a watch that ended at once with nothing in it is
                    # a server or proxy refusing to watch; asking again at once would ask in a
                    # tight loop, so it waits as after a failure.
                    self.short_watches += 1
                    self._retry_later(RuntimeError("the watch ended at once, with nothing in it"))
            except Expired as expired:
                log.info("%s watch expired (%s): listing again", self.name, expired)
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
            log.warning("%s watch failed: %s; resuming from resourceVersion %s",
                        self.name, error, self.resource_version)
            self._stop.wait(self.retry_seconds)

    def relist(self) -> None:
        """Every object, page by page; remembers the list's resourceVersion.

        A stop between pages abandons the list: a part of it is not the cluster's state, and
        a list of 150,000 pods read to its end would outlast `stop()`'s wait for the thread
        (a daemon thread still running when the interpreter ends aborts the process).
        """
        with gc_paused():
            self._relist()

    def _relist(self) -> None:
        items: list[Any] = []
        version = ""

        def decode(data: bytes) -> tuple[str | None, tuple[list[Any], str | None]]:
            page_items, token, page_version = self.page_decoder(data)
            return token, (page_items, page_version)

        pages = PagedList(self.list_call, decode, page_size=self.page_size,
                          stopped=self._stop.is_set, **self.query)
        self._response = pages  # stop() ends a wait for a page at once
        try:
            for page_items, page_version in pages:
                items.extend(page_items)
                version = version or page_version or ""
        finally:
            self._response = None
        if not pages.complete:  # stopped mid-list
            return
        self.relists += 1
        self.on_relist(items, version)
        self.resource_version = version
        self._note_heard()

    def watch(self) -> bool:
        """One watch request, from `resource_version`, until the server ends it, or until it
        is closed for silence or a refresh: then True, for the loop to resume at once."""
        try:
            response: Any = self.list_call(
                watch=True, resource_version=self.resource_version, allow_watch_bookmarks=True,
                timeout_seconds=self.timeout_seconds, _preload_content=False,
                _request_timeout=self._watch_timeout(), **self.query)
        except urllib3.exceptions.ReadTimeoutError:  # not answered within the limit
            self._went_silent(self.silence_limit_seconds)
            return True
        self._response = response
        ended = False
        try:
            if self._stop.is_set():  # stopped while connecting: stop() saw no response
                return False
            # Answered: the path to the server works now, and it resumes from our version
            # (or its first line is a 410). What it has to replay follows on this stream.
            self.watches += 1
            self._note_heard()
            self._watching = response
            for line in response_lines(response):
                if self._stop.is_set():
                    return False
                self._handle(_LINE.decode(line))
            ended = self._closed_by_us is not response
        except urllib3.exceptions.ReadTimeoutError:
            # No byte for the limit: the socket's timeout came before the watchdog's look.
            if self._closed_by_us is not response:
                self._closed_by_us = response
                self._went_silent(self.silence_limit_seconds)
        except Exception:
            if self._closed_by_us is not response:
                raise
            # Closed for silence (or by a tick's refresh) while reading: not a failure.
        finally:
            self._watching = None
            self._response = None
            if not ended:
                # Left mid-stream (stopped, closed for silence, 410, a failure): the rest of the
                # stream would be read as the answer to the next request on this connection,
                # so it is closed rather than handed back to the client's pool.
                response.close()
            response.release_conn()
        return self._closed_by_us is response

    def _watch_timeout(self) -> tuple[float, float]:
        """(connect, read) of a watch. A read (the answer to the request, then each wait for
        bytes) waits no longer than the silence limit: the watchdog cannot close a request
        whose answer has not come, so the socket's own timeout does, and either counts as a
        silence."""
        limits = timeouts()
        return (limits.connect_seconds, max(1.0, self.silence_limit_seconds))

    def _handle(self, line: _Line) -> None:
        self._lines += 1
        self._note_heard()
        if line.type == "ERROR":
            status = _STATUS.decode(line.object)
            if status.code == 410:
                raise Expired(status.message)
            raise RuntimeError(f"watch error {status.code}: {status.message}")
        try:
            version = _VERSIONED.decode(line.object).metadata.resourceVersion
        except (msgspec.DecodeError, ValueError) as error:
            # Skipped, not retried: resuming would only read the same object again.
            log.warning("%s: skipping a %s event the watch cannot read: %s", self.name,
                        line.type, error)
            return
        if line.type != "BOOKMARK":
            self.on_event(line.type, line.object)
        self.resource_version = version or self.resource_version
        if line.type == "BOOKMARK" and version and self.on_bookmark is not None:
            self.on_bookmark(version)


def _close_now(response: Any) -> None:
    """Close a response from another thread: `shutdown` wakes a read blocked on its socket,
    which `close` does not."""
    with contextlib.suppress(Exception):
        response.shutdown() if hasattr(response, "shutdown") else response.close()


__all__ = ["WATCH_TIMEOUT_SECONDS", "Expired", "ListWatch", "response_lines",
           "watch_timeout_seconds"]
