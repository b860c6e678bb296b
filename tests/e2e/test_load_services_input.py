"""Hostile and out-of-range input to the load-watcher and the scheduler extender, over real
HTTP (audit-inputs items 5, 6, 11 and "HTTP servers"): Prometheus samples and watcher values
outside their range, extreme options, non-quantities, and clients that stall mid-request."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from typer.testing import CliRunner

from kube_elevator.flows.cli.services import ServiceThread
from kube_elevator.tasks.load_aware.extender import Policy, SchedulerExtender, WatcherCollector
from kube_elevator.tasks.load_aware.scoring import Metric, TargetLoadPackingArgs, Window
from kube_elevator.tasks.load_aware.watcher import LoadWatcher
from tests.e2e.test_load_services import (
    NODES,
    TLP_DOCUMENT,
    VECTORS,
    FakePrometheus,
    FakeWatcher,
    avg,
    cli,
    command,
    expected_document,
    new_watcher,
    node_object,
    pod_object,
    serving,
    watcher_document,
)

# Short, so the tests take a fraction of a second; the services' default is 30 s.
READ_TIMEOUT = 0.5
# Far above READ_TIMEOUT: a socket still silent after this long was never going to be closed.
PATIENCE = 10.0


class CountingPrometheus(FakePrometheus):
    """FakePrometheus that lets a test wait until it has answered `count` queries."""

    def __init__(self, vectors: dict[str, list[tuple[str, str]]]) -> None:
        super().__init__(vectors)
        self.answered = threading.Condition()

    async def _query(self, request: Request) -> Response:
        response = await super()._query(request)
        with self.answered:
            self.answered.notify_all()
        return response

    def wait_for_queries(self, count: int, timeout: float = PATIENCE) -> bool:
        with self.answered:
            return self.answered.wait_for(lambda: len(self.queries) >= count, timeout)


# --- item 5: an outlier Prometheus sample, an unexpected error in a cycle ---------------------

OUTLIERS = {**VECTORS, "avg_over_time(instance:node_cpu:ratio)": [
    *VECTORS["avg_over_time(instance:node_cpu:ratio)"],
    ("worker-4", "1e307"),   # × 100 = inf
    ("worker-5", "1.5"),     # 150 %
    ("worker-6", "-0.25"),   # -25 %
]}


def served_watcher_answer(vectors: dict[str, list[tuple[str, str]]]) -> httpx.Response:
    """`GET /watcher` from a load watcher over a Prometheus answering `vectors`, once every
    window has fetched."""
    prometheus = FakePrometheus(vectors)
    with serving(prometheus.app()) as prometheus_url:
        watcher = new_watcher(prometheus_url)
        with serving(watcher.app()) as url:
            assert watcher.wait_for_fetches(3)
            answer = httpx.get(f"{url}/watcher")
    return answer


def test_load_watcher_skips_out_of_range_samples(caplog: pytest.LogCaptureFixture) -> None:
    answer = served_watcher_answer(OUTLIERS)
    # The outliers are skipped as NaN is; every other sample is served as before.
    assert answer.status_code == 200
    assert answer.json() == expected_document("15m", 900)
    assert ("avg_over_time(instance:node_cpu:ratio[15m]): skipping worker-4=1e+307: "
            "times 100, inf is not a finite number") in caplog.text
    assert "skipping worker-5=1.5: times 100, 150.0 is not a percentage (0..100)" in caplog.text
    assert "skipping worker-6=-0.25" in caplog.text


def test_a_saturated_nodes_ratio_just_over_one_is_served_as_is(
        caplog: pytest.LogCaptureFixture) -> None:
    """A real Prometheus answers a saturated node's CPU ratio with 1.0025 (scrape jitter): it
    is served as is (§6.1), not skipped, which left the node a STD without an AVG and made it
    look idle to LoadVariationRiskBalancing."""
    vectors = {**VECTORS, "avg_over_time(instance:node_cpu:ratio)": [
        *VECTORS["avg_over_time(instance:node_cpu:ratio)"], ("worker-7", "1.0025")]}
    answer = served_watcher_answer(vectors)
    metrics = answer.json()["data"]["NodeMetricsMap"]["worker-7"]["metrics"]
    assert [(m["type"], m["operator"], m["value"]) for m in metrics] == [("CPU", "AVG", 100.25)]
    assert "skipping worker-7" not in caplog.text


def test_window_loops_survive_an_unexpected_error(caplog: pytest.LogCaptureFixture) -> None:
    class FlakyProvider:
        """Raises something that is not a ProviderError on each window's first fetch."""

        name = "Flaky"

        def __init__(self) -> None:
            self.failed: set[str] = set()

        async def fetch_all_hosts(self, window: Window) -> dict[str, list[Metric]]:
            if window.duration not in self.failed:
                self.failed.add(window.duration)
                raise RuntimeError("provider bug")
            return {"n1": [Metric(type="CPU", operator="AVG", value=12.5)]}

        async def healthy(self) -> bool:
            return True

    watcher = LoadWatcher(FlakyProvider(), interval_seconds=0.01)
    with serving(watcher.app()) as url:
        assert watcher.wait_for_fetches(6)  # the 3 failed cycles, then 3 that worked
        answer = httpx.get(f"{url}/watcher")
    assert answer.status_code == 200
    assert answer.json()["data"]["NodeMetricsMap"]["n1"]["metrics"][0]["value"] == 12.5
    for window in ("15m", "10m", "5m"):
        assert f"window {window}: the fetch cycle failed; retrying in 0.01 s" in caplog.text
    assert "RuntimeError: provider bug" in caplog.text


def test_load_watcher_command_keeps_fetching_after_an_outlier() -> None:
    """The audit's reproduction: after a 1e307 sample the command fetched nothing more,
    served stale data, and printed a traceback on SIGTERM."""
    prometheus = CountingPrometheus(OUTLIERS)
    with serving(prometheus.app()) as prometheus_url, \
            command("load-watcher", "--prometheus", prometheus_url, "--interval", "1s") as (
                url, process):
        # Two cycles of the 3 windows × 4 queries: the loops outlived the outlier.
        assert prometheus.wait_for_queries(24), prometheus.queries
        answer = httpx.get(f"{url}/watcher")
        assert answer.status_code == 200
        assert set(answer.json()["data"]["NodeMetricsMap"]) == {"worker-1", "worker-2"}
    assert process.returncode == 0
    stderr = process.stderr.read() if process.stderr else ""
    assert "skipping worker-4=1e+307" in stderr
    assert "Traceback" not in stderr and "shutdown failed" not in stderr


# --- item 6: out-of-range watcher values, options and quantities ------------------------------

HOSTILE_DOCUMENT = watcher_document({
    "a": [avg("CPU", 25)],
    "b": [avg("CPU", -1e308)],              # overflowed to -inf in the score: a 500
    "c": [avg("CPU", 150)],                 # not a percentage
    "d": [avg("CPU", 25), avg("Memory", -50)],  # LVRB scored it 9 from the negative memory
})


@pytest.mark.parametrize(("policy", "scores"), [
    (Policy.TARGET_LOAD_PACKING, [8, 0, 0, 0]),
    (Policy.LOAD_VARIATION_RISK_BALANCING, [9, 0, 0, 0]),
])
def test_extender_treats_out_of_range_watcher_values_as_no_data(
        policy: Policy, scores: list[int], caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeWatcher(HOSTILE_DOCUMENT)
    nodes = {"items": [node_object(name, "4") for name in "abcd"]}
    with serving(fake.app()) as watcher_url:
        extender = SchedulerExtender(WatcherCollector(watcher_url), policy,
                                     TargetLoadPackingArgs(target_utilization_percent=50))
        with serving(extender.app()) as url:
            answer = httpx.post(f"{url}/prioritize",
                                json={"Pod": pod_object("web", {"cpu": "200m"}),
                                      "Nodes": nodes})
    assert answer.status_code == 200, answer.text
    # a is scored from its metrics; b, c and d as nodes without metrics (the minimum).
    assert answer.json() == [{"Host": host, "Score": score}
                             for host, score in zip("abcd", scores, strict=True)]
    source = f"{watcher_url}/watcher"
    assert (f"{source}: data.NodeMetricsMap.b.metrics[0].value: -1e+308 is not a percentage "
            "(0..100): ignoring the metrics of node b") in caplog.text
    assert "data.NodeMetricsMap.c.metrics[0].value: 150.0 is not a percentage" in caplog.text
    assert "data.NodeMetricsMap.d.metrics[1].value: -50.0 is not a percentage" in caplog.text


@pytest.mark.parametrize("quantity", [True, False, None, [1], {"value": 1}])
def test_extender_refuses_a_quantity_that_is_not_a_string_or_number(quantity: Any) -> None:
    extender = SchedulerExtender(WatcherCollector("http://127.0.0.1:1"))
    pod = pod_object("web")
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": quantity}}
    with serving(extender.app()) as url:
        answer = httpx.post(f"{url}/prioritize", json={"Pod": pod, "Nodes": NODES})
    assert answer.status_code == 400
    assert answer.text.splitlines() == [
        "/prioritize body: Pod.spec.containers[0].resources.requests.cpu: a quantity must be "
        f"a string or a number, got {quantity!r}"]


@pytest.mark.parametrize("levels", [101, 1_000])
def test_extender_refuses_a_body_nested_too_deep(levels: int) -> None:
    """/filter echoes `Nodes` back whole: 1,000 levels, which orjson reads, made json.dumps
    raise RecursionError (a 500 and a traceback); refused at the edge, as files are."""
    extender = SchedulerExtender(WatcherCollector("http://127.0.0.1:1"))
    node = {**NODES["items"][0], "extra": "deep"}
    body = json.dumps({"Pod": pod_object("web"), "Nodes": {"items": [node]}})
    with serving(extender.app()) as url:
        answer = httpx.post(f"{url}/filter", content=body.replace(
            '"deep"', "[" * levels + "]" * levels))
    assert answer.status_code == 400, answer.text
    assert answer.text.splitlines() == ["/filter body: nested deeper than 100 levels"]


@pytest.mark.parametrize(("args", "problem"), [
    (["load-watcher", "--prometheus", "http://p:9090", "--interval", "1e-9"],
     "error: --interval: 1e-09 is too short: at least 1 s"),
    (["load-watcher", "--prometheus", "http://p:9090", "--interval", "0.5"],
     "error: --interval: 0.5 is too short: at least 1 s"),
    (["load-watcher", "--prometheus", "http://p:9090", "--interval", "500ms"],
     "error: --interval: 0.5 is too short: at least 1 s"),
    (["load-watcher", "--prometheus", "http://p:9090", "--interval", "5 minutes"],
     'error: --interval: "5 minutes": not a duration; use a number and a unit, e.g. 30s, 5m, '
     "1h30m (or plain seconds)"),
    (["scheduler-extender", "--watcher-url", "http://w:2020", "--policy", "target-load-packing",
      "--default-requests-multiplier", "1e308"],
     "error: --default-requests-multiplier: 1e308 must be above 0 and at most 1000"),
    (["scheduler-extender", "--watcher-url", "http://w:2020", "--policy", "target-load-packing",
      "--default-requests-multiplier", "-1"],
     "error: --default-requests-multiplier: -1 must be above 0 and at most 1000"),
    (["scheduler-extender", "--watcher-url", "http://w:2020", "--policy", "target-load-packing",
      "--default-requests-multiplier", "0"],
     "error: --default-requests-multiplier: 0 must be above 0 and at most 1000"),
])
def test_out_of_range_options_exit_2(args: list[str], problem: str) -> None:
    # On a busy port: an option taken by mistake ends in the bind error, not in serving forever.
    with ServiceThread(Starlette(), name="busy") as busy:
        result = CliRunner().invoke(cli(), [*args, "--port", str(busy.port)])
    assert result.exit_code == 2, result.output
    assert problem in result.stderr
    assert "cannot listen" not in result.stderr
    assert isinstance(result.exception, SystemExit)


def test_target_utilization_above_100_warns_and_scores_with_40() -> None:
    fake = FakeWatcher(TLP_DOCUMENT)
    with serving(fake.app()) as watcher_url, \
            command("scheduler-extender", "--watcher-url", watcher_url, "--policy",
                    "target-load-packing", "--target-utilization", "1000") as (url, process):
        answer = httpx.post(f"{url}/prioritize",
                            json={"Pod": pod_object("web", {"cpu": "200m"}), "Nodes": NODES})
    # T = 40: U = 32.5 → 89 → 9; 57.5 → 28 → 3; 82.5 → 12 → 1; no metrics → 0.
    # (With T = 1000 every node with metrics scored above 100, clamped to 10.)
    assert [entry["Score"] for entry in answer.json()] == [9, 3, 1, 0]
    assert process.returncode == 0
    stderr = process.stderr.read() if process.stderr else ""
    assert "warning: --target-utilization 1000 is above 100 %: using 40" in stderr


# --- "HTTP servers": a read timeout for headers and bodies ------------------------------------


def extender_app() -> Starlette:
    return SchedulerExtender(WatcherCollector("http://127.0.0.1:1")).app()


def watcher_app() -> Starlette:
    return LoadWatcher(StubProvider(), interval_seconds=3600).app()


class StubProvider:
    name = "Stub"

    async def fetch_all_hosts(self, window: Window) -> dict[str, list[Metric]]:
        return {}

    async def healthy(self) -> bool:
        return True


def port_of(url: str) -> int:
    port = httpx.URL(url).port
    assert port is not None
    return port


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes; socket.timeout if it never does."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def read_response(sock: socket.socket) -> bytes:
    """One whole response with a Content-Length (headers and body come in separate writes)."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    match = re.search(rb"(?i)content-length: (\d+)", head)
    assert match, head
    length = int(match.group(1))
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


STALLED = {
    "body": b"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{\"Pod\": ",
    "huge body": b"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n{}",
    "headers": b"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Le",
}
TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\n"


@pytest.mark.parametrize("stall", list(STALLED))
@pytest.mark.parametrize(("app", "request_line", "health"), [
    (extender_app, (b"POST", b"/prioritize"), "/healthz"),
    (watcher_app, (b"GET", b"/watcher"), "/watcher/health"),
], ids=["scheduler-extender", "load-watcher"])
def test_a_stalled_request_is_closed_within_the_read_timeout(
        app: Any, request_line: tuple[bytes, bytes], health: str, stall: str,
        capfd: pytest.CaptureFixture[str]) -> None:
    method, path = request_line
    with serving(app(), read_timeout=READ_TIMEOUT) as url, \
            socket.create_connection(("127.0.0.1", port_of(url)), timeout=PATIENCE) as sock:
        sock.sendall(STALLED[stall].replace(b"{method}", method).replace(b"{path}", path))
        started = time.monotonic()
        received = read_until_closed(sock)  # socket.timeout here: the server held it open
        elapsed = time.monotonic() - started
        # Under uvicorn's 5 s keep-alive timeout, which closes some of these (not all) anyway.
        assert READ_TIMEOUT * 0.9 <= elapsed < READ_TIMEOUT * 4
        if stall == "headers" or method == b"POST":
            # Nothing answered yet (the extender waits for the body): 408, then closed.
            assert received.startswith(TIMED_OUT), received
        else:
            # GET /watcher does not read the body: answered at once, then closed.
            assert received.startswith(b"HTTP/1.1 "), received
        # Other clients are served as before.
        assert httpx.get(url + health, timeout=PATIENCE).status_code == 200
    logged = capfd.readouterr().err
    assert "no complete request within 0.5 s: closing the connection" in logged
    assert "Exception in ASGI application" not in logged  # the extender saw a disconnect


def test_a_silent_connection_is_closed() -> None:
    with serving(extender_app(), read_timeout=READ_TIMEOUT) as url, \
            socket.create_connection(("127.0.0.1", port_of(url)), timeout=PATIENCE) as sock:
        assert read_until_closed(sock) == b""  # nothing was asked: closed without an answer


def test_slow_answers_and_idle_keep_alive_are_not_cut_by_the_read_timeout() -> None:
    """The deadline covers reading a request, not the app's work nor the wait between two
    requests (the fake Kubernetes API's watches answer for minutes)."""
    release = threading.Event()

    async def slow(request: Request) -> Response:
        await asyncio.to_thread(release.wait, PATIENCE)
        return PlainTextResponse("done")

    app = Starlette(routes=[Route("/slow", slow, methods=["POST"])])
    request = b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    with serving(app, read_timeout=READ_TIMEOUT) as url, \
            socket.create_connection(("127.0.0.1", port_of(url))) as sock:
        sock.sendall(request)
        sock.settimeout(READ_TIMEOUT * 3)
        with pytest.raises(TimeoutError):  # no 408, no close while the app works
            sock.recv(65536)
        release.set()
        sock.settimeout(PATIENCE)
        assert read_response(sock).startswith(b"HTTP/1.1 200 OK\r\n")
        sock.settimeout(READ_TIMEOUT * 3)  # keep-alive (5 s) is longer: still open after this
        with pytest.raises(TimeoutError):
            sock.recv(65536)
        sock.settimeout(PATIENCE)
        sock.sendall(request)
        assert read_response(sock).startswith(b"HTTP/1.1 200 OK\r\n")
