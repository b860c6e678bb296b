"""An ASGI app served by uvicorn in a daemon thread: the one implementation.

The `elevator load-watcher` and `scheduler-extender` commands serve this way, and so do the
test fakes (`fakes.kube_api`, `fakes.pod_metrics`), which may import flows but not the reverse:
hence it lives here. Importing this module does not load uvicorn (~0.1 s for every `elevator`
command); `start()` does.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from tasks.core.errors import InputError

if TYPE_CHECKING:
    import uvicorn

DEFAULT_HOST = "127.0.0.1"


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


class ServiceThread:
    """An ASGI app served by uvicorn in a daemon thread, so the main thread keeps the signals.

    (uvicorn in the main thread re-raises SIGTERM after its shutdown: the exit code would be
    -15, not 0.) Port 0 picks a free port; after `start()`, `port` and `url` tell which.
    When the port cannot be bound, `start()` raises InputError naming `bind_option` (the
    command-line options that chose it), or the OSError itself if `bind_option` is None.
    The keyword arguments are the uvicorn settings where the callers differ.
    """

    def __init__(self, app: Any, host: str = DEFAULT_HOST, port: int = 0, name: str = "service",
                 startup_timeout: float = 120.0, *, lifespan: Literal["auto", "on", "off"] = "on",
                 graceful_shutdown_timeout: int = 5, stop_timeout: float = 15.0,
                 keep_alive_timeout: int = 5, bind_option: str | None = "--host/--port") -> None:
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
        self._server: uvicorn.Server | None = None
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
                                timeout_graceful_shutdown=self.graceful_shutdown_timeout,
                                timeout_keep_alive=self.keep_alive_timeout)
        server = uvicorn.Server(config)
        ready = threading.Event()
        startup = server.startup

        async def signalling_startup(sockets: list[socket.socket] | None = None) -> None:
            try:
                await startup(sockets=sockets)  # binds nothing: the socket is ours
            finally:
                ready.set()  # also when the app's lifespan startup failed

        server.startup = signalling_startup  # type: ignore[method-assign]

        def run() -> None:
            try:
                server.run(sockets=[sock])
            finally:
                ready.set()  # startup failed: unblock `start()` so it can report it

        thread = threading.Thread(target=run, name=f"{self.name}-{self.port}", daemon=True)
        thread.start()
        if not ready.wait(self.startup_timeout) or not server.started:
            server.should_exit = True
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
        server.should_exit = True
        thread.join(timeout=self.stop_timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> ServiceThread:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
