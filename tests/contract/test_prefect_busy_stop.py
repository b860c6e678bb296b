"""serve's stop on a Prefect server that answers busy (503, its SQLite database locked by
another writer): the pause of its schedules and the cancel of a run in flight are sent again at
once, rather than after Prefect's 2, 4, 8 s backoff, until they land. A real Prefect server (the
session's), behind a proxy that answers the first such calls 503 as the server does, then
passes them on."""

from __future__ import annotations

import http.client
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import pytest

from kube_elevator.flows.cli.serve_runs import cancel_runs, pause_schedules
from kube_elevator.tasks.adapters.prefect_busy import BUSY_RETRY_SECONDS

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class BusyProxy:
    """Passes every request on to `upstream` (host:port), except the first `busy_answers` of
    those `refused` (method, path), which it answers as a Prefect server whose SQLite database
    is locked; `answers`: each of those requests' answer, in order."""

    def __init__(self, upstream: str, busy_answers: int,
                 refused: Callable[[str, str], bool]) -> None:
        self.busy_left = busy_answers
        self.answers: list[int] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                watched = refused(self.command, self.path)
                if watched and proxy.busy_left > 0:
                    proxy.busy_left -= 1
                    proxy.answers.append(503)
                    self.answer(503, json.dumps(
                        {"exception_message": "Service Unavailable"}).encode(), {})
                    return
                connection = http.client.HTTPConnection(upstream, timeout=30)
                headers = {key: value for key, value in self.headers.items()
                           if key.lower() not in HOP_BY_HOP}
                connection.request(self.command, self.path, body=body or None, headers=headers)
                response = connection.getresponse()
                if watched:
                    proxy.answers.append(response.status)
                self.answer(response.status, response.read(), dict(response.getheaders()))
                connection.close()

            def answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in HOP_BY_HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = relay

            def log_message(self, *_: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def deployment_id(prefect_server: None) -> UUID:
    """A deployment with its schedules on (not paused), on the session's server."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("busy-server")
        return client.create_deployment(flow_id=flow_id, name="busy-server", paused=False)


@contextmanager
def busy_proxy(refused: Callable[[str, str], bool]) -> Iterator[BusyProxy]:
    """A `BusyProxy` in front of the session's server, PREFECT_API_URL pointing at it."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    api_url = str(PREFECT_API_URL.value())
    parts = urlsplit(api_url)
    proxy = BusyProxy(parts.netloc, busy_answers=3, refused=refused)
    try:
        with temporary_settings({PREFECT_API_URL: proxy.url(parts.path)}):
            yield proxy
    finally:
        proxy.close()


def paused(deployment_id: UUID) -> bool:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return bool(client.read_deployment(deployment_id).paused)


def test_a_pause_the_server_answers_busy_is_sent_again_at_once_until_it_lands(
        deployment_id: UUID) -> None:
    assert not paused(deployment_id)
    sleeps: list[float] = []
    with busy_proxy(lambda method, path: method == "PATCH" and "/deployments/" in path) as proxy:
        pause_schedules([deployment_id], sleep=sleeps.append)
    assert paused(deployment_id)
    assert proxy.answers == [503, 503, 503, 204]  # No Content: paused
    # Each busy answer cost one short pause, this module's, and Prefect's client added none of
    # its own (its retries would have sent more PATCHes than pauses taken here).
    assert sleeps == [BUSY_RETRY_SECONDS] * 3


def test_a_cancel_the_server_answers_busy_is_sent_again_at_once_until_it_lands(
        deployment_id: UUID) -> None:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        run_id = client.create_flow_run_from_deployment(deployment_id).id
    sleeps: list[float] = []
    with busy_proxy(lambda method, path: method == "POST" and path.endswith("/set_state")) as proxy:
        cancelled = cancel_runs([run_id], "serve stopped", sleep=sleeps.append)
    assert cancelled == [run_id]
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(run_id).state
    assert state is not None and state.is_cancelled() and state.message == "serve stopped"
    assert proxy.answers[:3] == [503, 503, 503] and len(proxy.answers) == 4
    assert 200 <= proxy.answers[3] < 300
    assert sleeps == [BUSY_RETRY_SECONDS] * 3


def test_a_cancels_read_of_the_run_the_server_answers_busy_is_sent_again_at_once(
        deployment_id: UUID) -> None:
    """The cancel first reads the run (one that ended meanwhile keeps its state): a busy answer
    to that read costs the same short pause, not Prefect's backoff, and the cancel goes on."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        run_id = client.create_flow_run_from_deployment(deployment_id).id
    sleeps: list[float] = []
    with busy_proxy(lambda method, path: method == "GET"
                    and path.endswith(f"/flow_runs/{run_id}")) as proxy:
        cancelled = cancel_runs([run_id], "serve stopped", sleep=sleeps.append)
    assert cancelled == [run_id]
    assert proxy.answers == [503, 503, 503, 200]
    assert sleeps == [BUSY_RETRY_SECONDS] * 3
