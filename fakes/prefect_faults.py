"""A proxy in front of a Prefect server that loses the answer to chosen requests.

The fault `apply_then_drop` of `fakes.faults`, for Prefect's API: the request reaches the
server and is applied, then the connection is closed instead of answering, as a network that
drops a response does. Prefect's client sends the request again (it retries a connection closed
without an answer), so the server sees it twice: a state transition it had already applied
comes back REJECTed with the server's own copy of the state (Prefect's
`PreventDuplicateTransitions`), which holds no result when results are not persisted.

A TCP proxy rather than an ASGI one: every other request, and the events websocket, pass through
byte for byte. HTTP/1.1 without pipelining (Prefect's client), so each request's answer is the
next response on its connection.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Callable
from types import TracebackType
from urllib.parse import urlsplit

__all__ = ["LostAnswerProxy", "flow_run_completed"]

_CHUNK = 65536
_FINAL_STATE = re.compile(rb'"type"\s*:\s*"COMPLETED"')

# (method, path, body) -> lose this request's answer?
Matcher = Callable[[str, str, bytes], bool]


def flow_run_completed(method: str, path: str, body: bytes) -> bool:
    """A flow run's proposed Completed state (`POST /api/flow_runs/<id>/set_state`)."""
    return (method == "POST" and "/flow_runs/" in path and path.endswith("/set_state")
            and _FINAL_STATE.search(body) is not None)


class _Closed(Exception):
    """The peer closed the connection."""


class _Reader:
    """Buffered reads of HTTP/1.1 messages from one socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _more(self) -> None:
        data = self.sock.recv(_CHUNK)
        if not data:
            raise _Closed
        self.buffer += data

    def take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._more()
        taken, self.buffer = self.buffer[:size], self.buffer[size:]
        return taken

    def line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            self._more()
        end = self.buffer.index(b"\r\n") + 2
        return self.take(end)

    def head(self) -> bytes:
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        return self.take(self.buffer.index(b"\r\n\r\n") + 4)

    def message(self, bodyless: bool = False) -> tuple[bytes, bytes]:
        """One message: its head and its body (Content-Length or chunked, as sent)."""
        head = self.head()
        headers = _headers(head)
        if bodyless:
            return head, b""
        if "chunked" in headers.get("transfer-encoding", ""):
            body = b""
            while True:
                size_line = self.line()
                size = int(size_line.split(b";")[0], 16)
                body += size_line + self.take(size + 2)
                if size == 0:
                    return head, body
        return head, self.take(int(headers.get("content-length", "0")))


def _headers(head: bytes) -> dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return {name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines if ":" in line)}


class LostAnswerProxy:
    """Forwards `127.0.0.1:<port>` to the Prefect server at `upstream` (its API URL), losing
    the answer to the first `count` requests `lose` picks. `lost` counts the answers lost."""

    def __init__(self, upstream: str, lose: Matcher = flow_run_completed,
                 count: int = 1) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.path = parts.path.rstrip("/")
        self.lose = lose
        self.count = count
        self.lost = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._closing = False
        self._thread = threading.Thread(target=self._accept, name="lost-answer-proxy",
                                        daemon=True)

    @property
    def api_url(self) -> str:
        """The API URL to give the client (PREFECT_API_URL)."""
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}{self.path}"

    def start(self) -> LostAnswerProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LostAnswerProxy:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True,
                             name="lost-answer-proxy-connection").start()

    def _take_one(self, method: str, path: str, body: bytes) -> bool:
        with self._lock:
            if self.lost < self.count and self.lose(method, path, body):
                self.lost += 1
                return True
            return False

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.upstream)
        try:
            from_client, from_server = _Reader(client), _Reader(upstream)
            while True:
                head, body = from_client.message()
                method, path = head.split(b" ", 2)[:2]
                upstream.sendall(head + body)
                answer_head, answer = from_server.message(bodyless=method == b"HEAD")
                if answer_head.split(b" ", 2)[1] == b"101":  # the events websocket
                    client.sendall(answer_head + from_server.buffer)
                    self._pipe(client, upstream, from_client.buffer)
                    return
                if self._take_one(method.decode(), path.decode(), body):
                    return  # applied upstream; the client never hears of it
                client.sendall(answer_head + answer)
        except (_Closed, OSError, ValueError, IndexError):
            return
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.close()

    @staticmethod
    def _pipe(client: socket.socket, upstream: socket.socket, pending: bytes) -> None:
        """Bytes both ways until either side closes (an upgraded connection)."""
        def pump(source: socket.socket, target: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while data := source.recv(_CHUNK):
                    target.sendall(data)
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        if pending:
            upstream.sendall(pending)
        back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
        back.start()
        pump(client, upstream)
        back.join(timeout=5)
