"""The one list-then-watch loop of the Kubernetes adapter (an informer's reflector, in short).

List (paged), then watch from the list's resourceVersion; on a dropped or ended watch, resume
from the last resourceVersion seen (bookmarks keep it fresh on a quiet cluster, so a resumed
watch does not fall out of the server's history), after a wait when the watch ended at once with
nothing in it; on 410 Gone, list again. Objects reach the
consumer as their raw JSON (`msgspec.Raw`), so each decodes only the fields it reads: slim
records for the pod watch and the cache, dicts for the extender.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from tasks.adapters.kube_pages import PagedList
from tasks.core.collector import gc_paused
from tasks.core.timeouts import timeouts

log = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS = 300  # the server ends a watch after this; we resume from where it was
PAGE_SIZE = 500
RETRY_SECONDS = 1.0
SHORT_WATCH_SECONDS = 1.0  # client-go's reflector: a shorter watch with nothing in it is refused


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
    to tell one the server ended at once.
    """

    def __init__(self, list_call: Callable[..., Any], name: str, on_relist: Relist,
                 on_event: Event, *, timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
                 page_size: int = PAGE_SIZE, retry_seconds: float = RETRY_SECONDS,
                 on_bookmark: Callable[[str], None] | None = None,
                 page_decoder: PageDecoder = raw_page,
                 clock: Callable[[], float] = time.monotonic, **query: str) -> None:
        self.list_call = list_call
        self.name = name
        self.on_relist = on_relist
        self.on_event = on_event
        self.on_bookmark = on_bookmark
        self.timeout_seconds = timeout_seconds
        self.page_size = page_size
        self.retry_seconds = retry_seconds
        self.query = query
        self.page_decoder = page_decoder
        self.clock = clock
        self.resource_version: str | None = None  # None: list before watching
        self.relists = 0
        self.short_watches = 0
        self._lines = 0  # events and bookmarks the watches brought
        self._stop = threading.Event()
        self._response: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> ListWatch:
        self._thread = threading.Thread(target=self.run, name=f"watch-{self.name}", daemon=True)
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

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

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
                self.watch()
                if (self.clock() - started < SHORT_WATCH_SECONDS and self._lines == lines
                        and not self._stop.is_set()):
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

    def watch(self) -> None:
        """One watch request, from `resource_version`, until the server ends it."""
        response: Any = self.list_call(
            watch=True, resource_version=self.resource_version, allow_watch_bookmarks=True,
            timeout_seconds=self.timeout_seconds, _preload_content=False,
            _request_timeout=self._watch_timeout(), **self.query)
        self._response = response
        ended = False
        try:
            if self._stop.is_set():  # stopped while connecting: stop() saw no response
                return
            for line in response_lines(response):
                if self._stop.is_set():
                    return
                self._handle(_LINE.decode(line))
            ended = True
        finally:
            self._response = None
            if not ended:
                # Left mid-stream (stopped, 410, a failure): the rest of the stream would be
                # read as the answer to the next request on this connection, so it is closed
                # rather than handed back to the client's pool.
                response.close()
            response.release_conn()

    def _watch_timeout(self) -> tuple[float, float]:
        """(connect, read) of a watch: the server ends it after `timeout_seconds` (a quiet watch
        may send nothing until then), so a read waits that long plus the read timeout."""
        limits = timeouts()
        return (limits.connect_seconds, self.timeout_seconds + limits.read_seconds)

    def _handle(self, line: _Line) -> None:
        self._lines += 1
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


__all__ = ["Expired", "ListWatch", "response_lines"]
