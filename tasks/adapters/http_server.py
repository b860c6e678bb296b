"""An ASGI app served by uvicorn in a daemon thread: the one implementation.

The `elevator load-watcher` and `scheduler-extender` commands serve this way, and so do the
test fakes (`fakes.kube_api`, `fakes.pod_metrics`), which may import flows but not the reverse:
hence it lives here. Importing this module does not load uvicorn (~0.1 s for every `elevator`
command); `start()` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import threading
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from kube_elevator.tasks.core.errors import InputError

if TYPE_CHECKING:
    import uvicorn

DEFAULT_HOST = "127.0.0.1"
# Seconds a client has to send a whole request: ample for a 20 MB body from a live client,
# short enough that stalled clients cannot pile up connections and file descriptors.
DEFAULT_READ_TIMEOUT_SECONDS = 30.0

_REQUEST_TIMEOUT_RESPONSE = (b"HTTP/1.1 408 Request Timeout\r\n"
                             b"content-type: text/plain; charset=utf-8\r\n"
                             b"content-length: 16\r\nconnection: close\r\n\r\n"
                             b"Request Timeout\n")


def base_url(host: str, port: int) -> str:
    """`http://host:port`, with an IPv6 literal in brackets as URLs need it."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port), port 0 picking a free one; OSError if it cannot be.

    proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose proto
    says TCP, and without it every response waits ~40 ms for a delayed ACK (headers and body
    are separate writes). Linux also copies the listener's TCP_NODELAY to accepted sockets.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


@functools.cache
def read_deadline_protocol(read_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, with a deadline for reading each request (headers and body).

    uvicorn only times out idle keep-alive connections: a client that sent
    `Content-Length: 1000` and then stalled held its connection (and a file descriptor)
    forever. As with Go's `http.Server.ReadTimeout`, the whole request must arrive within
    `read_timeout` seconds of the connection or of the request's first byte; otherwise the
    server answers 408 (when part of a request came and no response has started) and closes.
    The app, if it was reading the body, sees the client disconnect.

    h11 is chosen explicitly, even where httptools is installed, so that the behaviour does
    not depend on which optional parser happens to be present.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class ReadDeadlineH11Protocol(H11Protocol):
        _read_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_read_deadline()  # a connection that sends nothing is a stalled request

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._follow_request()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._follow_request()  # a pipelined request may already be partly read

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_read_deadline()
            super().connection_lost(exc)

        def _reading_a_request(self) -> bool:
            """Headers begun but unfinished, or a body still owed."""
            state = self.conn.their_state
            return state is h11.SEND_BODY or (state is h11.IDLE
                                               and bool(self.conn.trailing_data[0]))

        def _follow_request(self) -> None:
            if self.transport.is_closing():
                return
            if self._reading_a_request():
                self._arm_read_deadline()  # no-op while armed: the deadline is per request
            elif self.conn.their_state is not h11.IDLE:
                self._disarm_read_deadline()  # read in full (or the connection is done)
            # IDLE with nothing read: between requests, uvicorn's keep-alive timeout applies.

        def _arm_read_deadline(self) -> None:
            if self._read_deadline is None:
                self._read_deadline = self.loop.call_later(read_timeout, self._read_timed_out)

        def _disarm_read_deadline(self) -> None:
            if self._read_deadline is not None:
                self._read_deadline.cancel()
                self._read_deadline = None

        def _read_timed_out(self) -> None:
            self._read_deadline = None
            if self.transport.is_closing():
                return
            if self._reading_a_request():
                client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
                self.logger.warning("%s: no complete request within %g s: closing the "
                                    "connection", client, read_timeout)
                # 408 only while no response has begun; otherwise it would corrupt that one.
                if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    self.transport.write(_REQUEST_TIMEOUT_RESPONSE)
            self.transport.close()

    return ReadDeadlineH11Protocol


class PromptStoppingServer(Protocol):
    """What `ServiceThread` uses of its server (uvicorn's, see `prompt_stopping_server`)."""

    started: bool
    startup: Callable[..., Awaitable[None]]

    def run(self, sockets: list[socket.socket] | None = None) -> None: ...

    def request_exit(self, force: bool = False) -> None: ...


def prompt_stopping_server(config: uvicorn.Config) -> PromptStoppingServer:
    """A uvicorn server of `config` that stops promptly (`_prompt_stopping_server_type`)."""
    server: PromptStoppingServer = _prompt_stopping_server_type()(config)
    return server


@functools.cache
def _prompt_stopping_server_type() -> type[Any]:
    """uvicorn's Server, stopping as soon as it is asked and its connections have closed.

    uvicorn notices `should_exit` on a 0.1 s tick, then pauses a fixed 0.1 s after asking its
    connections to close: 0.15 s of waiting in every stop, and every `fake_cluster()` block
    ends with one (issue 40: a user's flow on it). Here `request_exit` wakes the loop at once,
    and the shutdown waits for what is open, polling every 5 ms, within the same graceful
    timeout, then as uvicorn: listeners closed, leftover tasks cancelled at the timeout, the
    app's lifespan shutdown unless forced."""
    import uvicorn

    class PromptStoppingUvicorn(uvicorn.Server):
        _wake: asyncio.Event | None = None
        _loop: asyncio.AbstractEventLoop | None = None

        def request_exit(self, force: bool = False) -> None:
            """From any thread: stop gracefully (or `force`), waking the loop now."""
            self.should_exit = True
            self.force_exit = self.force_exit or force
            loop, wake = self._loop, self._wake
            if loop is not None and wake is not None:
                with contextlib.suppress(RuntimeError):  # its loop has closed: it has stopped
                    loop.call_soon_threadsafe(wake.set)

        async def main_loop(self) -> None:
            self._wake = asyncio.Event()
            self._loop = asyncio.get_running_loop()
            counter = 0
            should_exit = await self.on_tick(counter)
            while not should_exit:
                counter = (counter + 1) % 864000
                with contextlib.suppress(TimeoutError):  # uvicorn's tick, unless woken
                    await asyncio.wait_for(self._wake.wait(), 0.1)
                should_exit = await self.on_tick(counter)

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            for server in self.servers:
                server.close()
            for sock in sockets or []:
                sock.close()
            state = self.server_state
            for connection in list(state.connections):
                connection.shutdown()
            try:
                await asyncio.wait_for(self._open_work_done(),
                                       timeout=self.config.timeout_graceful_shutdown)
            except TimeoutError:
                for task in state.tasks:
                    task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
            if not self.force_exit:
                await self.lifespan.shutdown()

        async def _open_work_done(self) -> None:
            state = self.server_state
            while (state.connections or state.tasks) and not self.force_exit:
                await asyncio.sleep(0.005)
            for server in self.servers:
                await server.wait_closed()

    return PromptStoppingUvicorn


class ServiceThread:
    """An ASGI app served by uvicorn in a daemon thread, so the main thread keeps the signals.

    (uvicorn in the main thread re-raises SIGTERM after its shutdown: the exit code would be
    -15, not 0.) Port 0 picks a free port; after `start()`, `port` and `url` tell which.
    When the port cannot be bound, `start()` raises InputError naming `bind_option` (the
    command-line options that chose it), or the OSError itself if `bind_option` is None.
    The keyword arguments are the uvicorn settings where the callers differ, and
    `read_timeout`: seconds a client has to send a whole request (see
    `read_deadline_protocol`).
    """

    def __init__(self, app: Any, host: str = DEFAULT_HOST, port: int = 0, name: str = "service",
                 startup_timeout: float = 120.0, *, lifespan: Literal["auto", "on", "off"] = "on",
                 graceful_shutdown_timeout: int = 5, stop_timeout: float = 15.0,
                 keep_alive_timeout: int = 5, bind_option: str | None = "--host/--port",
                 read_timeout: float = DEFAULT_READ_TIMEOUT_SECONDS) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.name = name
        self.startup_timeout = startup_timeout
        self.lifespan: Literal["auto", "on", "off"] = lifespan
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.stop_timeout = stop_timeout
        self.keep_alive_timeout = keep_alive_timeout
        self.bind_option = bind_option
        self.read_timeout = read_timeout
        self._server: PromptStoppingServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return base_url(self.host, self.port)

    def start(self) -> ServiceThread:
        """Bind, serve, and return once the app's startup has run; InputError (or OSError, see
        `bind_option`) if the port cannot be bound, RuntimeError if the app fails to start."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name} is already running on {self.url}")
        try:
            sock = bind_socket(self.host, self.port)
        except OSError as error:
            if self.bind_option is None:
                raise
            raise InputError([f"{self.bind_option}: cannot listen on {self.host}:{self.port}: "
                              f"{error.strerror or error}"]) from None
        self.port = sock.getsockname()[1]
        import uvicorn

        config = uvicorn.Config(self.app, host=self.host, port=self.port, log_level="warning",
                                access_log=False, lifespan=self.lifespan,
                                interface="asgi3",  # uvicorn takes a bound method for ASGI 2
                                http=read_deadline_protocol(self.read_timeout),
                                timeout_graceful_shutdown=self.graceful_shutdown_timeout,
                                timeout_keep_alive=self.keep_alive_timeout)
        server = prompt_stopping_server(config)
        ready = threading.Event()
        startup = server.startup

        async def signalling_startup(sockets: list[socket.socket] | None = None) -> None:
            try:
                await startup(sockets=sockets)  # binds nothing: the socket is ours
            finally:
                ready.set()  # also when the app's lifespan startup failed

        server.startup = signalling_startup

        def run() -> None:
            try:
                server.run(sockets=[sock])
            finally:
                ready.set()  # startup failed: unblock `start()` so it can report it

        thread = threading.Thread(target=run, name=f"{self.name}-{self.port}", daemon=True)
        thread.start()
        if not ready.wait(self.startup_timeout) or not server.started:
            server.request_exit()
            thread.join(timeout=5)
            sock.close()
            raise RuntimeError(f"{self.name} failed to start on {self.url}")
        self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Graceful shutdown (the app's lifespan ends its background tasks), then join; after
        `stop_timeout` seconds, force the exit. Does nothing when not running."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.request_exit()
        thread.join(timeout=self.stop_timeout)
        if thread.is_alive():
            server.request_exit(force=True)
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> ServiceThread:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def listen_address(text: str, option: str) -> tuple[str, int] | None:
    """`HOST:PORT` (an IPv6 host in brackets) as (host, port); "" is None (do not listen).
    Port 0 picks a free port. Anything else is an InputError naming `option`."""
    if text == "":
        return None
    host, colon, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        host = ""  # an IPv6 address without brackets: its last group would read as the port
    if not colon or not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise InputError([f"{option}: {text!r} must be HOST:PORT (127.0.0.1:8085, 0.0.0.0:8085 "
                          "for every interface, [::1]:8085; port 0 picks a free one; \"\" "
                          "turns it off)"])
    return host, int(port)


# A page: () -> (HTTP status, content type, body).
Page = Callable[[], tuple[int, str, str]]


def pages_app(pages: Mapping[str, Page]) -> Callable[..., Awaitable[None]]:
    """A plain ASGI app answering GET (and HEAD) of each path with what its page says now;
    404 elsewhere, 405 for other methods. For probes and scrapes: no framework needed."""

    async def app(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                  send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return
        page = pages.get(scope["path"])
        if page is None:
            status, content_type, body = 404, "text/plain; charset=utf-8", "not found\n"
        elif scope["method"] not in ("GET", "HEAD"):
            status, content_type, body = 405, "text/plain; charset=utf-8", "use GET\n"
        else:
            status, content_type, body = page()
        data = body.encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", content_type.encode()),
            (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body",
                    "body": b"" if scope["method"] == "HEAD" else data})

    return app
