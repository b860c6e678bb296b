"""How a `ServiceThread` stops (tasks/adapters/http_server.py `prompt_stopping_server`), over
real HTTP: as uvicorn's own graceful shutdown does, without its fixed waits. A request in flight
is answered first, new connections are refused meanwhile, the app's lifespan shutdown runs, and
a request past the graceful timeout is cancelled rather than holding the stop."""

from __future__ import annotations

import asyncio
import http.client
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from benchmarks.event_latency import wait_until
from kube_elevator.flows.cli.services import ServiceThread

WAIT_SECONDS = 30.0


class SlowApp:
    """One route that says it began, then answers when the test lets it."""

    def __init__(self) -> None:
        self.began = threading.Event()
        self.release = threading.Event()
        self.cancelled = threading.Event()
        self.shut_down = threading.Event()

        @asynccontextmanager
        async def lifespan(_app: Starlette) -> AsyncIterator[None]:
            yield
            self.shut_down.set()

        self.app = Starlette(routes=[Route("/slow", self.slow)], lifespan=lifespan)

    async def slow(self, _request: Request) -> PlainTextResponse:
        self.began.set()
        try:
            while not self.release.is_set():
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return PlainTextResponse("answered")


def get_in_a_thread(port: int) -> tuple[threading.Thread, list[object]]:
    """GET /slow from another thread: its (status, body), or the error it met."""
    outcome: list[object] = []

    def get() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_SECONDS)
        try:
            connection.request("GET", "/slow")
            response = connection.getresponse()
            outcome.append((response.status, response.read().decode()))
        except OSError as error:
            outcome.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=get)
    thread.start()
    return thread, outcome


def stop_in_a_thread(service: ServiceThread) -> threading.Thread:
    thread = threading.Thread(target=service.stop)
    thread.start()
    return thread


def refused(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_SECONDS)
    try:
        connection.connect()
    except ConnectionRefusedError:
        return True
    finally:
        connection.close()
    return False


def test_a_request_in_flight_is_answered_before_the_stop_returns() -> None:
    slow = SlowApp()
    service = ServiceThread(slow.app, name="slow", bind_option=None).start()
    client, outcome = get_in_a_thread(service.port)
    assert slow.began.wait(WAIT_SECONDS)
    stopping = stop_in_a_thread(service)
    # The listener closes first: a new connection is refused while the request is held.
    wait_until(lambda: refused(service.port), WAIT_SECONDS, "the listener to close")
    assert stopping.is_alive() and not slow.shut_down.is_set()
    slow.release.set()
    client.join(WAIT_SECONDS)
    stopping.join(WAIT_SECONDS)
    assert outcome == [(200, "answered")]
    assert not stopping.is_alive() and slow.shut_down.is_set() and not slow.cancelled.is_set()


def test_a_request_past_the_graceful_timeout_is_cancelled_and_the_stop_returns() -> None:
    slow = SlowApp()
    service = ServiceThread(slow.app, name="slow", bind_option=None,
                            graceful_shutdown_timeout=1).start()
    client, outcome = get_in_a_thread(service.port)
    assert slow.began.wait(WAIT_SECONDS)
    stopping = stop_in_a_thread(service)
    assert slow.cancelled.wait(WAIT_SECONDS)
    stopping.join(WAIT_SECONDS)
    client.join(WAIT_SECONDS)
    assert not stopping.is_alive() and slow.shut_down.is_set()
    assert len(outcome) == 1 and outcome[0] != (200, "answered")


@pytest.mark.parametrize("idle_connections", [0, 3])
def test_idle_keep_alive_connections_are_closed_by_the_stop(idle_connections: int) -> None:
    slow = SlowApp()
    slow.release.set()
    service = ServiceThread(slow.app, name="slow", bind_option=None).start()
    connections = [http.client.HTTPConnection("127.0.0.1", service.port, timeout=WAIT_SECONDS)
                   for _ in range(idle_connections)]
    for connection in connections:  # one request each, then the connection is kept open
        connection.request("GET", "/slow")
        assert connection.getresponse().read() == b"answered"
    stopping = stop_in_a_thread(service)
    stopping.join(WAIT_SECONDS)
    assert not stopping.is_alive() and slow.shut_down.is_set()
    for connection in connections:  # the server closed its end: the socket reads EOF
        assert connection.sock is not None
        assert connection.sock.recv(1) == b""
        connection.close()
