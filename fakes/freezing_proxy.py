"""A TCP proxy that can freeze the connections open through it: the silent watch, made on request.

A load balancer that forgot an idle flow, a frozen proxy, a half-open TCP connection: the stream
stays open and no more bytes arrive, in either direction. A clean disconnect is another fault
(the client sees it at once); this one the client can only notice by the silence.
`FreezingProxy` forwards bytes both ways between 127.0.0.1:<port> and an upstream server until
`freeze()`: from then on every connection open at that moment delivers nothing more (the bytes
that come are held, never forwarded; the sockets stay open, neither end hears a close), while
connections opened later pass as before. Point a kubeconfig at `url` and the client's watches
go through it:

    with FakeKubeApi() as kube, FreezingProxy(kube.url) as proxy:
        kube.write_kubeconfig(path, server=proxy.url)
        ...
        proxy.freeze()  # every connection open now goes silent

Plain threads, two a connection: a test opens a handful.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from types import TracebackType
from urllib.parse import urlsplit

from kube_elevator.tasks.adapters.http_server import base_url

CHUNK_BYTES = 65536
ACCEPT_POLL_SECONDS = 0.2  # how soon the accepting thread sees `stop()`
CONNECT_TIMEOUT_SECONDS = 5.0


class _Connection:
    """One client connection and its upstream twin, and whether they are frozen."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        # Held while a chunk is forwarded, so that once `freeze()` has taken it nothing more
        # goes through.
        self.lock = threading.Lock()
        self.frozen = False
        self.held_bytes = 0
        self.pumps_left = 2

    def close(self) -> None:
        for side in (self.client, self.upstream):
            with contextlib.suppress(OSError):  # shutdown wakes a pump blocked in recv
                side.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                side.close()


class FreezingProxy:
    """Forwards 127.0.0.1:`port` (0: a free one) to the server at `upstream`, a URL
    (`http://127.0.0.1:8443`): plain TCP, so TLS passes through untouched.

    Example:
        ```python
        with FakeKubeApi() as api, FreezingProxy(api.url) as proxy:
            ...                                       # a client on proxy.url
            proxy.freeze()                            # its connections now hang, as a dead peer's
        ```
    """

    def __init__(self, upstream: str, host: str = "127.0.0.1", port: int = 0) -> None:
        address = urlsplit(upstream)
        if not address.hostname or not address.port:
            raise ValueError(f"{upstream!r}: the upstream needs a host and a port")
        self.upstream = (address.hostname, address.port)
        self.host = host
        self.port = port
        self.accepted = 0  # connections accepted so far
        self.frozen_connections = 0  # connections frozen so far
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._open: set[_Connection] = set()
        self._frozen: list[_Connection] = []
        self._listener: socket.socket | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return base_url(self.host, self.port)

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> FreezingProxy:
        listener = socket.create_server((self.host, self.port))
        listener.settimeout(ACCEPT_POLL_SECONDS)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._stopping.clear()
        self._spawn(self._accept, "freezing-proxy-accept")
        return self

    def stop(self) -> None:
        """Close every connection, the frozen ones too, and the listening socket."""
        self._stopping.set()
        with self._lock:
            connections = [*self._open, *self._frozen]
            self._open.clear()
            self._frozen.clear()
        for connection in connections:
            connection.close()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
            self._listener = None
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads = []

    def __enter__(self) -> FreezingProxy:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # --- the fault ----------------------------------------------------------------------------

    def freeze(self) -> int:
        """Every connection open now delivers nothing more, in either direction, and is never
        closed by the proxy until `stop()`; returns how many were frozen. New connections pass."""
        with self._lock:
            connections = list(self._open)
            self._open.clear()
            self._frozen.extend(connections)
            self.frozen_connections += len(connections)
            self._changed.notify_all()
        for connection in connections:
            with connection.lock:  # a chunk on its way finishes; none follows
                connection.frozen = True
        return len(connections)

    @property
    def held_bytes(self) -> int:
        """Bytes that reached the proxy on frozen connections and were never delivered."""
        with self._lock:
            return sum(connection.held_bytes for connection in self._frozen)

    def wait_for_connections(self, count: int, timeout: float = 10.0) -> bool:
        """Block until at least `count` connections are open through the proxy."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._open) >= count, timeout)

    # --- forwarding ---------------------------------------------------------------------------

    def _spawn(self, target: Callable[..., None], name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads = [known for known in self._threads if known.is_alive()]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        listener = self._listener
        while listener is not None and not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed by stop()
                return
            try:
                upstream = socket.create_connection(self.upstream, CONNECT_TIMEOUT_SECONDS)
            except OSError:
                client.close()  # as a proxy whose backend refuses: the client sees a reset
                continue
            for side in (client, upstream):
                side.settimeout(None)
                side.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = _Connection(client, upstream)
            with self._lock:
                if self._stopping.is_set():
                    connection.close()
                    return
                self.accepted += 1
                self._open.add(connection)
                self._changed.notify_all()
            self._spawn(self._pump, "freezing-proxy-up", connection, client, upstream)
            self._spawn(self._pump, "freezing-proxy-down", connection, upstream, client)

    def _pump(self, connection: _Connection, source: socket.socket,
              target: socket.socket) -> None:
        """Copy `source` to `target` until either closes; once frozen, hold what comes and stop
        reading (the sender's TCP window fills, as behind a dead middlebox)."""
        while True:
            try:
                data = source.recv(CHUNK_BYTES)
            except OSError:
                data = b""
            with connection.lock:
                if connection.frozen:
                    connection.held_bytes += len(data)
                    return  # the sockets stay open until stop()
                if not data:
                    with contextlib.suppress(OSError):  # pass the close on: a half-close
                        target.shutdown(socket.SHUT_WR)
                    break
                try:
                    target.sendall(data)
                except OSError:
                    break
        self._pump_ended(connection)

    def _pump_ended(self, connection: _Connection) -> None:
        with self._lock:
            connection.pumps_left -= 1
            done = connection.pumps_left == 0 or self._stopping.is_set()
            if done:
                self._open.discard(connection)
                self._changed.notify_all()
        if done:
            connection.close()


__all__ = ["FreezingProxy"]
