"""Fault injection for the fakes, reachable over HTTP: the rules and the admin endpoint.

The fake Kubernetes API (`fakes.kube_faults`) and the fault proxy in front of moto
(`fakes.aws_faults`) share this: a list of rules, each "the next `count` requests matching
this fail this way", set over `POST /_faults` (a path no Kubernetes or AWS API has) or from
Python, listed with how often each fired (`GET`), cleared with `DELETE`. Issue 14 lists the
faults an operator meets, and so the actions:

* `status`: answer with an error of that HTTP status (the server's own error body);
* `drop`: close the connection without answering (the request was not applied);
* `apply_then_drop`: serve the request, then close the connection instead of answering: the
  change happened but the client never hears of it (the "lost answer");
* `delay`: wait `delay_seconds`, then serve normally;
* `hang`: accept and never answer, until the client gives up (its read timeout) or the server
  stops; the server's shutdown releases a hung request by dropping it;
* `freeze` (servers that stream, the fake Kubernetes API's watches): every matching response
  streaming when the rule is set (up to `count`) sends nothing more, its connection held open,
  until the client closes it or the server stops: a watch behind a load balancer that forgot
  the flow. Requests made later pass (the rule is spent as it is set). For a freeze of whole
  TCP connections, idle ones included, see `fakes.freezing_proxy`;
* `rewrite`: serve the request, then replace `find` with `replace` in the answer's body (an
  answer the real server gives and the fake does not: EC2 status checks that fail, say).

Dropping needs the connection itself, which ASGI does not expose: uvicorn's h11 protocol passes
its request cycle's bound `receive`, whose cycle holds the asyncio transport.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import re
import threading
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

ADMIN_PATH = "/_faults"
CLIENT_CLOSED_REQUEST = 499  # nginx's status for a request its client abandoned
ACTIONS = ("status", "drop", "apply_then_drop", "delay", "hang", "freeze", "rewrite")
STREAM_ACTIONS = frozenset({"freeze"})  # only for a server whose answers stream
_MATCH_FIELDS = ("method", "path", "path_prefix", "path_regex", "operation")
_FIELDS = frozenset({*_MATCH_FIELDS, "action", "count", "status", "code", "message",
                     "delay_seconds", "find", "replace"})


class FaultSpecError(ValueError):
    """A fault rule that cannot be what its author meant (the admin endpoint answers 400)."""


@dataclass(frozen=True)
class RequestInfo:
    """What a rule can match on: the HTTP method and path, and for AWS the API action.

    Example:
        >>> from kube_elevator.harness import Fault, RequestInfo
        >>> rule = Fault(id=1, action="drop", method="PUT", path_prefix="/apis/coordination.k8s.io")
        >>> rule.matches(RequestInfo("PUT", "/apis/coordination.k8s.io/v1/namespaces/x/leases/y"))
        True
    """

    method: str
    path: str
    operation: str = ""
    service: str = ""  # AWS: the signing scope's service (`autoscaling`, `ec2`)


@dataclass
class Fault:
    """One rule. `count` None means every matching request, for as long as the rule is set.

    Example:
        >>> from kube_elevator.harness import FakeKubeApi
        >>> api = FakeKubeApi()
        >>> rule = api.faults.add("status", status=503, method="GET", path_prefix="/api/v1/nodes")
        >>> rule.action, rule.status, rule.count
        ('status', 503, 1)
    """

    id: int
    action: str
    count: int | None = 1
    method: str = "*"
    path: str | None = None
    path_prefix: str | None = None
    path_regex: str | None = None
    operation: str | None = None
    status: int = 500
    code: str = ""
    message: str = ""
    delay_seconds: float = 0.0
    find: str = ""
    replace: str = ""
    fired: int = 0
    _pattern: re.Pattern[str] | None = field(default=None, repr=False)

    @property
    def remaining(self) -> int | None:
        return None if self.count is None else max(self.count - self.fired, 0)

    def matches(self, request: RequestInfo) -> bool:
        return (
            (self.count is None or self.fired < self.count)
            and self.method in ("*", request.method)
            and (self.path is None or self.path == request.path)
            and (self.path_prefix is None or request.path.startswith(self.path_prefix))
            and (self._pattern is None or self._pattern.search(request.path) is not None)
            and (self.operation is None or self.operation == request.operation)
        )

    def to_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"id": self.id, "action": self.action, "count": self.count,
                                 "fired": self.fired, "remaining": self.remaining}
        for name in _MATCH_FIELDS:
            value = getattr(self, name)
            if value is not None:
                shown[name] = value
        if self.action == "status":
            shown.update(status=self.status, code=self.code, message=self.message)
        if self.action == "delay":
            shown["delay_seconds"] = self.delay_seconds
        if self.action == "rewrite":
            shown.update(find=self.find, replace=self.replace)
        return shown


def _check_spec(spec: Mapping[str, Any], match_fields: frozenset[str],
                streams: bool = False) -> dict[str, Any]:
    """The rule's fields, type-checked: every mistake would otherwise silently never match."""
    unknown = sorted(set(spec) - _FIELDS)
    if unknown:
        raise FaultSpecError(f"unknown fields {unknown}; expected some of {sorted(_FIELDS)}")
    unsupported = sorted((set(spec) & set(_MATCH_FIELDS)) - match_fields)
    if unsupported:
        raise FaultSpecError(f"this server cannot match on {unsupported}; it matches on "
                             f"{sorted(match_fields)}")
    action = spec.get("action")
    actions = [name for name in ACTIONS if streams or name not in STREAM_ACTIONS]
    if action not in actions:
        raise FaultSpecError(f"action: {action!r} is not one of {actions}")
    count = spec.get("count", 1)
    if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                              or count < 1):
        raise FaultSpecError(f"count: {count!r} must be a positive integer, or null for every "
                             "matching request")
    for name in ("method", "path", "path_prefix", "path_regex", "operation", "code", "message",
                 "find", "replace"):
        if name in spec and not isinstance(spec[name], str):
            raise FaultSpecError(f"{name}: {spec[name]!r} must be a string")
    status = spec.get("status", 500)
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise FaultSpecError(f"status: {status!r} must be an HTTP error status (400-599)")
    delay = spec.get("delay_seconds", 0.0)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay <= 3600:
        raise FaultSpecError(f"delay_seconds: {delay!r} must be a number of seconds in 0..3600")
    if action == "delay" and not delay:
        raise FaultSpecError("action delay needs delay_seconds")
    if action == "rewrite" and not spec.get("find"):
        raise FaultSpecError("action rewrite needs find (the text to replace)")
    checked = dict(spec)
    checked["method"] = str(spec.get("method", "*")).upper()
    if "path_regex" in spec:
        try:
            checked["_pattern"] = re.compile(spec["path_regex"])
        except re.error as error:
            raise FaultSpecError(f"path_regex: {error}") from None
    return checked


class FaultInjector:
    """The rules of one server, and the code that makes a matching request fail.

    `describe` says what a request is (method, path, AWS action); `error_response` builds the
    server's own error answer for a `status` rule; `observe` sees every request and the rule
    it met (None: served untouched). Thread-safe: tests add rules from their
    thread while the server's event loop takes them.

    Example:
        >>> from kube_elevator.harness import FakeKubeApi
        >>> api = FakeKubeApi()
        >>> rule = api.faults.add("drop", count=None, method="PUT", path_prefix="/apis/coordination")
        >>> [fault.action for fault in api.faults.list()]
        ['drop']
        >>> len(api.faults.clear())
        1
    """

    def __init__(self, match_fields: frozenset[str],
                 describe: Callable[[Request], Awaitable[RequestInfo]],
                 error_response: Callable[[Fault, RequestInfo], Response],
                 observe: Callable[[RequestInfo, Fault | None], None] | None = None, *,
                 streams: bool = False) -> None:
        self.match_fields = match_fields
        self.streams = streams  # its answers may stream (watches): `freeze` applies
        self._open_streams: set[_OpenStream] = set()
        self._observe = observe
        self._describe = describe
        self._error_response = error_response
        self._lock = threading.Lock()
        self._fired = threading.Condition(self._lock)
        self._faults: builtins.list[Fault] = []
        self._next_id = 1
        self._released = False
        self._waiting: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self.client_disconnects = 0  # requests whose client left before they were read whole

    # --- the Python API ---------------------------------------------------------------------

    def add(self, action: str, *, count: int | None = 1, **match: Any) -> Fault:
        """Add one rule, e.g. `add("drop", method="PUT", path_prefix="/apis/coordination")`."""
        return self.add_spec({"action": action, "count": count, **match})

    def add_spec(self, spec: Mapping[str, Any]) -> Fault:
        """Add one rule from its JSON form (as `POST /_faults` takes it)."""
        if not isinstance(spec, Mapping):
            raise FaultSpecError(f"a fault is a JSON object, not {type(spec).__name__}")
        checked = _check_spec(spec, self.match_fields, self.streams)
        with self._lock:
            fault = Fault(id=self._next_id, **checked)
            self._next_id += 1
            self._faults.append(fault)
            if fault.action == "freeze":  # acts now, on what streams now
                for stream in self._open_streams:
                    if not stream.frozen and fault.matches(stream.info):
                        stream.frozen = True
                        fault.fired += 1
                self._fired.notify_all()
        return fault

    def clear(self) -> builtins.list[Fault]:
        """Forget every rule; returns them (with how often each fired)."""
        with self._lock:
            gone, self._faults = self._faults, []
        return gone

    def list(self) -> builtins.list[Fault]:
        with self._lock:
            return list(self._faults)

    def take(self, request: RequestInfo) -> Fault | None:
        """The first rule matching `request`, counted as fired; None when none matches."""
        with self._lock:
            for fault in self._faults:
                if fault.action not in STREAM_ACTIONS and fault.matches(request):
                    fault.fired += 1
                    self._fired.notify_all()
                    return fault
        return None

    def wait_fired(self, fault: Fault, times: int = 1, timeout: float = 30.0) -> bool:
        """Block until `fault` met `times` requests (a test waiting for a tick to reach a
        call); False after `timeout` seconds."""
        with self._fired:
            return self._fired.wait_for(lambda: fault.fired >= times, timeout)

    def release(self) -> None:
        """The server is stopping: every hung or delayed request drops now, later ones at once."""
        with self._lock:
            self._released = True
            waiting = list(self._waiting)
        for loop, event in waiting:
            with contextlib.suppress(RuntimeError):  # that loop is already closed
                loop.call_soon_threadsafe(event.set)

    def rearm(self) -> None:
        """The server (re)starts: hangs hang again."""
        with self._lock:
            self._released = False

    # --- the server side --------------------------------------------------------------------

    def endpoint(self, serve: Callable[[Request], Awaitable[Response]]
                 ) -> Callable[[Request], Awaitable[Response]]:
        """`serve` behind the rules, plus the admin endpoint at ADMIN_PATH."""

        async def faulted(request: Request) -> Response:
            try:
                if request.url.path == ADMIN_PATH:
                    return await self.admin(request)
                return await self.handle(request, serve)
            except ClientDisconnect:
                # The client went away before its request was read whole (a process killed
                # mid-call): there is nobody to answer, and no error of the server's to log (a
                # real server drops it; nginx records 499, "client closed request").
                with self._lock:
                    self.client_disconnects += 1
                return Response(status_code=CLIENT_CLOSED_REQUEST)

        return faulted

    async def handle(self, request: Request,
                     serve: Callable[[Request], Awaitable[Response]]) -> Response:
        info = await self._describe(request)
        fault = self.take(info)
        if self._observe is not None:
            self._observe(info, fault)
        if fault is None:
            response = await serve(request)
            if self.streams and isinstance(response, StreamingResponse):
                response.body_iterator = self._freezable(info, response.body_iterator)
            return response
        if fault.action == "status":
            return self._error_response(fault, info)
        if fault.action == "delay":
            await self._wait_released(fault.delay_seconds)
            return await serve(request)
        if fault.action == "rewrite":
            return _rewritten(await serve(request), fault)
        if fault.action == "apply_then_drop":
            response = await serve(request)
            await drop_connection(request)
            return response  # not sent: the connection is gone
        await request.body()  # the client has sent everything: it now waits for an answer
        if fault.action == "hang":
            await self._hang(request)
        await drop_connection(request)
        return Response(status_code=204)  # not sent either

    async def _freezable(self, info: RequestInfo, chunks: AsyncIterable[Any]
                         ) -> AsyncIterator[Any]:
        """The response's chunks, until a `freeze` rule takes this stream: then the chunk in
        hand and all after it are held, and the connection stays open until the client closes
        it (Starlette then cancels this) or the server stops."""
        stream = _OpenStream(info)
        with self._lock:
            self._open_streams.add(stream)
        try:
            async for chunk in chunks:
                if stream.frozen:
                    await self._wait_released(None)
                    return
                yield chunk
        finally:
            with self._lock:
                self._open_streams.discard(stream)
            close = getattr(chunks, "aclose", None)
            if close is not None:  # the server's own stream ends (a watch unregisters)
                await close()

    async def _wait_released(self, seconds: float | None) -> None:
        """Sleep `seconds` (None: forever) or until `release()`, whichever comes first."""
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            if self._released:
                return
            self._waiting.add(entry)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), seconds)
        finally:
            with self._lock:
                self._waiting.discard(entry)

    async def _hang(self, request: Request) -> None:
        """Until the client closes its end (its read timeout fired) or the server stops."""
        gone = asyncio.ensure_future(_client_gone(request))
        released = asyncio.ensure_future(self._wait_released(None))
        try:
            await asyncio.wait({gone, released}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (gone, released):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def admin(self, request: Request) -> Response:
        """`POST` a rule (or a list of rules), `GET` the rules, `DELETE` them all."""
        if request.method == "GET":
            return _json({"faults": [fault.to_json() for fault in self.list()]})
        if request.method == "DELETE":
            return _json({"faults": [fault.to_json() for fault in self.clear()]})
        if request.method != "POST":
            return _json({"error": f"{request.method} {ADMIN_PATH}: use GET, POST or DELETE"},
                         405)
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError as error:
            return _json({"error": f"the body is not JSON: {error}"}, 400)
        specs = body if isinstance(body, list) else [body]
        try:
            for spec in specs:  # all or nothing: check every rule before adding any
                if not isinstance(spec, Mapping):
                    raise FaultSpecError(f"a fault is a JSON object, not {spec!r}")
                _check_spec(spec, self.match_fields, self.streams)
            added = [self.add_spec(spec) for spec in specs]
        except FaultSpecError as error:
            return _json({"error": str(error)}, 400)
        return _json({"faults": [fault.to_json() for fault in added]}, 201)


def _rewritten(response: Response, fault: Fault) -> Response:
    """The answer with `fault.find` replaced in its body (a streamed answer passes as is)."""
    body = getattr(response, "body", None)
    if not isinstance(body, bytes):
        return response
    headers = {key: value for key, value in response.headers.items()
               if key.lower() != "content-length"}
    return Response(body.replace(fault.find.encode(), fault.replace.encode()),
                    status_code=response.status_code, headers=headers)


@dataclass(eq=False)
class _OpenStream:
    """A response streaming now, and whether a `freeze` rule took it."""

    info: RequestInfo
    frozen: bool = False


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _transport(request: Request) -> asyncio.Transport:
    cycle = getattr(request.receive, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if not isinstance(transport, asyncio.Transport):
        raise RuntimeError("dropping a connection needs uvicorn's h11 protocol")
    return transport


async def _client_gone(request: Request) -> None:
    """Return once the connection is closed (uvicorn's receive then says http.disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def drop_connection(request: Request) -> None:
    """Close the connection without a byte of answer, and wait until uvicorn knows it is
    closed, so the response the handler then returns is never written."""
    _transport(request).close()
    await _client_gone(request)
