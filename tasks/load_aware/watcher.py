"""A load-watcher: node CPU and memory from Prometheus, served as paypal/load-watcher does.

Real Trimaran plugins (`watcherAddress`) and our scheduler extender can share it, since it
answers the same `GET /watcher` JSON (spec/trimaran.md §6). Each window (15m, 10m, 5m) is
fetched at start and then every minute; the last 5 results per window are kept, and the latest
are persisted to a state file so a restarted watcher answers at once.

Unlike load-watcher, a `/watcher` with nothing to serve says why in a JSON body
(`{"error": ...}`), and a Prometheus without the CPU recording rule is a failed fetch that names
the rule; every fetch cycle is recorded for the health check (`tasks.core.health`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import tempfile
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import httpx
import orjson
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from kube_elevator.tasks.core.documents import load_json_document, read_bytes
from kube_elevator.tasks.core.errors import InputError, join_location
from kube_elevator.tasks.core.health import LoopHealth
from kube_elevator.tasks.core.timeouts import timeouts
from kube_elevator.tasks.load_aware.scoring import (
    AVERAGE,
    CPU,
    MEMORY,
    STD,
    Data,
    Metric,
    NodeMetrics,
    WatcherMetrics,
    Window,
    percent_problem,
    validation_problems,
)

log = logging.getLogger(__name__)

# §6: windows, newest-first fallback order for GET /watcher, ring size, fetch period.
WINDOW_SECONDS = {"15m": 15 * 60, "10m": 10 * 60, "5m": 5 * 60}
WINDOWS = tuple(WINDOW_SECONDS)
CACHE_SIZE = 5
FETCH_INTERVAL_SECONDS = 60.0
QUERY_TIMEOUT_SECONDS = 10.0
DEFAULT_PORT = 2020

# The PromQL is load-watcher's Prometheus provider's, restricted to CPU and memory:
# paypal/load-watcher pkg/watcher/internal/metricsprovider/prometheus.go (commit 500faea),
# `FetchAllHostsMetrics` loops methods {avg_over_time, stddev_over_time} over its series and
# `buildPromQuery(allHosts, ...)` formats `fmt.Sprintf("%s(%s[%s])", method, metric, rollup)`,
# e.g. `avg_over_time(instance:node_cpu:ratio[15m])`; results are keyed by the `instance`
# label and multiplied by 100. The two series are kube-prometheus recording rules.
PROMETHEUS_SOURCE = "Prometheus"
PROM_CPU_SERIES = "instance:node_cpu:ratio"
PROM_MEMORY_SERIES = "instance:node_memory_utilisation:ratio"
PROM_SERIES = ((PROM_CPU_SERIES, CPU), (PROM_MEMORY_SERIES, MEMORY))
PROM_METHODS = (("avg_over_time", AVERAGE), ("stddev_over_time", STD))
HOST_LABEL = "instance"
# What an empty answer for the CPU series means, and where the rules come from.
RECORDING_RULES_NEEDED = (
    f"Prometheus has no series {PROM_CPU_SERIES}: the load watcher needs kube-prometheus's "
    f"recording rules {PROM_CPU_SERIES} and {PROM_MEMORY_SERIES} (node-exporter's "
    "node-rules, kube-prometheus's nodeExporter rules), with the instance label set to the "
    "node name")


def prom_query(method: str, series: str, window: str) -> str:
    """`avg_over_time(instance:node_cpu:ratio[15m])`: one query for every host."""
    return f"{method}({series}[{window}])"


class ProviderError(Exception):
    """A fetch failed; load-watcher discards the whole cycle (§6)."""


# --- Prometheus HTTP API answers, validated at the edge ------------------------------------


class _PromModel(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Sample(_PromModel):
    metric: dict[str, str] = {}
    value: tuple[float, str]


class _PromData(_PromModel):
    resultType: str
    result: Any = None


_VECTOR = TypeAdapter(list[_Sample])


class _PromAnswer(_PromModel):
    status: str
    data: _PromData | None = None
    errorType: str = ""
    error: str = ""


class PrometheusProvider:
    """Node utilisation (percent) from `/api/v1/query`, keyed by the `instance` label."""

    name = PROMETHEUS_SOURCE

    def __init__(self, base_url: str, *, timeout_seconds: float = QUERY_TIMEOUT_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self.clock = clock

    def _timeout(self) -> httpx.Timeout:
        """The query's own limit on every read, and the shared connect timeout within it."""
        connect = min(timeouts().connect_seconds, self.timeout_seconds)
        return httpx.Timeout(self.timeout_seconds, connect=connect)

    async def _query(self, client: httpx.AsyncClient, promql: str
                     ) -> list[tuple[str, float]] | None:
        """The samples of an instant vector; None when the answer is another type."""
        url = f"{self.base_url}/api/v1/query"
        try:
            response = await client.get(url, params={"query": promql,
                                                     "time": f"{self.clock():.3f}"})
        except httpx.TransportError as error:
            raise ProviderError(f"{url} {promql}: Prometheus is unreachable: "
                                f"{type(error).__name__}: {error}") from None
        except httpx.HTTPError as error:
            raise ProviderError(f"{url} {promql}: {error}") from None
        try:
            answer = _PromAnswer.model_validate_json(response.content)
        except ValidationError as error:
            raise ProviderError("; ".join(validation_problems(error, f"{url} {promql}"))) from None
        if response.status_code != 200 or answer.status != "success" or answer.data is None:
            raise ProviderError(f"{url} {promql}: HTTP {response.status_code} "
                                f"{answer.errorType} {answer.error}".rstrip())
        if answer.data.resultType != "vector":
            # Upstream logs this and yields no metrics, without failing the cycle.
            log.error("%s: the Prometheus result should not be type %s", promql,
                      answer.data.resultType)
            return None
        try:
            vector = _VECTOR.validate_python(answer.data.result)
        except ValidationError as error:
            problems = validation_problems(error, f"{url} {promql}", "data.result")
            raise ProviderError("; ".join(problems)) from None
        samples = []
        for sample in vector:
            try:
                value = float(sample.value[1])
            except ValueError:
                raise ProviderError(f"{url} {promql}: sample value {sample.value[1]!r} "
                                    "is not a number") from None
            if not math.isfinite(value):
                # Go would emit NaN into the JSON, which no client can decode: skip it.
                log.warning("%s: skipping %s=%s", promql, sample.metric.get(HOST_LABEL), value)
                continue
            samples.append((sample.metric.get(HOST_LABEL, ""), value))
        return samples

    async def fetch_all_hosts(self, window: Window) -> dict[str, list[Metric]]:
        """`FetchAllHostsMetrics`: AVG then STD of each series; any failed query fails all."""
        hosts: dict[str, list[Metric]] = {}
        async with httpx.AsyncClient(timeout=self._timeout()) as client:
            for method, operator in PROM_METHODS:
                for series, metric_type in PROM_SERIES:
                    promql = prom_query(method, series, window.duration)
                    samples = await self._query(client, promql)
                    if samples == [] and operator == AVERAGE and series == PROM_CPU_SERIES:
                        # Every node would score 0 without a word (trimaran.md §6.1, §9.1).
                        raise ProviderError(f"{promql}: {RECORDING_RULES_NEEDED}")
                    for host, value in samples or ():
                        percent = value * 100
                        problem = percent_problem(percent)
                        if problem is not None:
                            # A ratio far outside 0..1 is Prometheus's bad answer, skipped as
                            # NaN is: 1e307 × 100 is inf, which Metric refuses (audit item 5).
                            # 1.0025, a saturated node, is served as is (§6.1).
                            log.warning("%s: skipping %s=%s: times 100, %s", promql, host,
                                        value, problem)
                            continue
                        hosts.setdefault(host, []).append(Metric(
                            name=series, type=metric_type, operator=operator,
                            rollup=window.duration, value=percent))  # as is (§6.1)
        return hosts

    async def healthy(self) -> bool:
        """`Health()`: HEAD on Prometheus's health endpoint answers 200.

        Upstream sends HEAD to the default address's root whatever is configured. A real
        Prometheus answers HEAD / with 405 (it routes / for GET only), so we ask the configured
        address's `/-/healthy`, which answers HEAD.
        """
        try:
            async with httpx.AsyncClient(timeout=self._timeout(),
                                         follow_redirects=True) as client:
                response = await client.head(self.base_url + "/-/healthy")
        except httpx.HTTPError as error:
            log.warning("health check failed with: %s", error)
            return False
        return response.status_code == 200


class MetricsProvider(Protocol):
    """What LoadWatcher needs from a provider: Prometheus here, anything else in tests."""

    @property
    def name(self) -> str: ...

    async def fetch_all_hosts(self, window: Window) -> dict[str, list[Metric]]:
        """Every host's metrics for `window`; ProviderError fails the whole cycle."""
        ...

    async def healthy(self) -> bool: ...


_STATE = TypeAdapter(dict[str, WatcherMetrics])


class LoadWatcher:
    """The per-window caches, the fetch loops, the state file and the HTTP answers."""

    def __init__(self, provider: MetricsProvider,
                 state_file: Path | None = None, *,
                 clock: Callable[[], float] = time.time,
                 interval_seconds: float = FETCH_INTERVAL_SECONDS,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.provider = provider
        self.state_file = state_file
        self.clock = clock
        self.interval_seconds = interval_seconds
        self.sleep = sleep
        self._lock = threading.Lock()
        self._cache: dict[str, deque[WatcherMetrics]] = {
            window: deque(maxlen=CACHE_SIZE) for window in WINDOWS}
        self._attempts = threading.Condition()
        self.fetch_attempts = 0
        # For the health check: every fetch cycle, and whether it brought metrics.
        self.monotonic = monotonic
        self.health = LoopHealth(monotonic())
        self.last_error: str | None = None  # why the last fetch failed; None once one worked

    # -- the cache --

    def latest(self, duration: str = "15m") -> WatcherMetrics | None:
        """`GetLatestWatcherMetrics`: 15m falls back to 10m, 10m to 5m (§6)."""
        order = WINDOWS[WINDOWS.index(duration):]
        with self._lock:
            for window in order:
                if self._cache[window]:
                    return self._cache[window][-1]
        return None

    def results(self, duration: str) -> list[WatcherMetrics]:
        """The ring of up to 5 results for one window, oldest first."""
        with self._lock:
            return list(self._cache[duration])

    def _append(self, duration: str, document: WatcherMetrics) -> None:
        with self._lock:
            self._cache[duration].append(document)

    # -- fetching --

    def current_window(self, duration: str) -> Window:
        now = int(self.clock())
        return Window(duration=duration, start=now - WINDOW_SECONDS[duration], end=now)

    async def fetch_once(self, duration: str) -> WatcherMetrics | None:
        """One cycle for one window; on any error the cache keeps its older entries."""
        document = None
        try:
            window = self.current_window(duration)
            try:
                hosts = await self.provider.fetch_all_hosts(window)
            except ProviderError as error:
                log.error("received error while fetching metrics: %s", error)
                self.last_error = str(error)
                return None
            document = WatcherMetrics(
                timestamp=int(self.clock()), window=window, source=self.provider.name,
                data=Data(NodeMetricsMap={host: NodeMetrics(metrics=metrics)
                                          for host, metrics in hosts.items()}))
            self._append(duration, document)
            self.last_error = None
            self.save_state()
            return document
        finally:
            self.health.finished(self.monotonic(), self.clock(), document is not None)
            # Counted however the cycle ended, so a waiter learns of a cycle that raised too.
            with self._attempts:
                self.fetch_attempts += 1
                self._attempts.notify_all()

    def wait_for_fetches(self, count: int, timeout: float = 10.0) -> bool:
        """Block (another thread) until `count` fetch cycles ended; False on timeout."""
        with self._attempts:
            return self._attempts.wait_for(lambda: self.fetch_attempts >= count, timeout)

    async def _watch_window(self, duration: str) -> None:
        """Fetch, wait, forever. An unexpected error is logged and the next cycle still runs:
        a loop that ended would leave /watcher serving stale data with health 200 (audit 5)."""
        while True:
            try:
                await self.fetch_once(duration)
            except Exception:
                log.exception("window %s: the fetch cycle failed; retrying in %g s", duration,
                              self.interval_seconds)
            await self.sleep(self.interval_seconds)

    async def run(self) -> None:
        """The three window loops (fetch, then wait a minute), until cancelled."""
        await asyncio.gather(*(self._watch_window(window) for window in WINDOWS))

    # -- the state file --

    def load_state(self) -> None:
        """Seed each window's cache with the persisted latest result (missing file: nothing)."""
        if self.state_file is None or not self.state_file.exists():
            return
        source = str(self.state_file)
        # Read as every user file is: a device is refused, the depth and the bytes checked.
        document = load_json_document(read_bytes(self.state_file), source)
        try:
            state = _STATE.validate_python(document)
        except ValidationError as error:
            raise InputError(validation_problems(error, source)) from None
        for window, document in state.items():
            if window not in WINDOW_SECONDS:
                raise InputError([join_location(str(self.state_file), window,
                                                f"unknown window (one of {', '.join(WINDOWS)})")])
            self._append(window, document)

    def save_state(self) -> None:
        """Write the latest result per window atomically (a crash leaves the old file)."""
        if self.state_file is None:
            return
        with self._lock:
            state = {window: cache[-1].to_json() for window, cache in self._cache.items()
                     if cache}
        directory = self.state_file.parent
        directory.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=self.state_file.name, dir=directory)
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(orjson.dumps(state))
            os.replace(temporary, self.state_file)
        except OSError as error:
            log.error("cannot write state file %s: %s", self.state_file, error)
            with contextlib.suppress(OSError):
                os.unlink(temporary)

    # -- HTTP (§6) --

    def unavailable(self) -> str:
        """Why `/watcher` has no metrics to answer with."""
        error = self.last_error
        if error is not None:
            return f"no metrics yet: the last fetch from {self.provider.name} failed: {error}"
        return f"no metrics yet: the first fetch from {self.provider.name} has not finished"

    async def _watcher(self, request: Request) -> Response:
        document = self.latest("15m")
        if document is None:
            # load-watcher answers 500 with an empty body; the status stays, the body says why.
            return Response(orjson.dumps({"error": self.unavailable()}), status_code=500,
                            media_type="application/json")
        host = request.query_params.get("host", "")
        if host:
            only = document.only_host(host)
            if only is None:
                return PlainTextResponse(f"No metrics found for host {host}", status_code=404)
            document = only
        return Response(orjson.dumps(document.to_json()), media_type="application/json")

    async def _health(self, request: Request) -> Response:
        healthy = await self.provider.healthy()
        return Response(status_code=200 if healthy else 503)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(self.run())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def app(self) -> Starlette:
        """`GET /watcher[?host=]` and `GET /watcher/health`; fetching runs while it serves."""
        return Starlette(routes=[
            Route("/watcher", self._watcher, methods=["GET"]),
            Route("/watcher/health", self._health, methods=["GET"]),
        ], lifespan=self._lifespan)
