"""The load-watcher and the scheduler extender over real HTTP: a fake Prometheus and a fake
load-watcher served by the test, the services served as `elevator` serves them, the pod watch
against the fake Kubernetes API, and the commands' bad input and signals."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import typer
import yaml
from kubernetes import client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from typer.testing import CliRunner

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.cli.services import ServiceThread, register
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.load_aware.extender import (
    BoundPods,
    KubeWatch,
    Policy,
    SchedulerExtender,
    WatcherCollector,
)
from kube_elevator.tasks.load_aware.scoring import (
    LoadVariationRiskBalancingArgs,
    Metric,
    PodLoad,
    TargetLoadPackingArgs,
    Window,
)
from kube_elevator.tasks.load_aware.watcher import LoadWatcher, PrometheusProvider, prom_query
from tests.builders import api_node, api_pod

NOW = 1_767_225_600.0


def clock() -> float:
    return NOW


@contextmanager
def serving(app: Any, **options: Any) -> Iterator[str]:
    """The app served as the commands serve it; `options` are ServiceThread's keywords."""
    with ServiceThread(app, name="test", **options) as service:
        yield service.url


# --- a fake Prometheus HTTP API ----------------------------------------------------------------


class FakePrometheus:
    """Answers `/api/v1/query` with fixed vectors, keyed by `method(series)`."""

    def __init__(self, vectors: dict[str, list[tuple[str, str]]]) -> None:
        self.vectors = vectors
        self.queries: list[str] = []
        self.failing: set[str] = set()      # full PromQL answered with a 503 error
        self.matrix: set[str] = set()       # full PromQL answered with a matrix result
        self.gate = threading.Event()       # cleared: answers wait until the test opens it
        self.gate.set()
        self.health_status = 200

    async def _query(self, request: Request) -> Response:
        promql = request.query_params["query"]
        self.queries.append(promql)
        await asyncio.to_thread(self.gate.wait, 10)
        if promql in self.failing:
            return JSONResponse({"status": "error", "errorType": "unavailable",
                                 "error": "storage is down"}, status_code=503)
        if promql in self.matrix:
            return JSONResponse({"status": "success", "data": {"resultType": "matrix",
                                                                "result": []}})
        key = re.sub(r"\[\w+\]", "", promql)  # avg_over_time(instance:node_cpu:ratio)
        result = [{"metric": {"instance": host, "job": "node-exporter"},
                   "value": [float(request.query_params["time"]), value]}
                  for host, value in self.vectors.get(key, ())]
        return JSONResponse({"status": "success",
                             "data": {"resultType": "vector", "result": result}})

    async def _root(self, request: Request) -> Response:
        return Response(status_code=self.health_status)

    def app(self) -> Starlette:
        # As a real Prometheus routes them: HEAD / is 405, HEAD /-/healthy the health check.
        return Starlette(routes=[Route("/api/v1/query", self._query, methods=["GET", "POST"]),
                                 Route("/-/healthy", self._root, methods=["GET", "HEAD"]),
                                 Route("/", self._root, methods=["GET"])])


VECTORS = {
    "avg_over_time(instance:node_cpu:ratio)": [("worker-1", "0.25"), ("worker-2", "0.5")],
    "avg_over_time(instance:node_memory_utilisation:ratio)": [("worker-1", "0.5")],
    "stddev_over_time(instance:node_cpu:ratio)": [("worker-1", "0.125"), ("worker-3", "NaN")],
    "stddev_over_time(instance:node_memory_utilisation:ratio)": [("worker-1", "0.0625")],
}


def metric(name: str, type_: str, operator: str, window: str, value: float) -> dict[str, Any]:
    return {"name": name, "type": type_, "operator": operator, "rollup": window, "value": value}


def expected_document(window: str, seconds: int) -> dict[str, Any]:
    cpu, mem = "instance:node_cpu:ratio", "instance:node_memory_utilisation:ratio"
    return {
        "timestamp": int(NOW),
        "window": {"duration": window, "start": int(NOW) - seconds, "end": int(NOW)},
        "source": "Prometheus",
        "data": {"NodeMetricsMap": {
            "worker-1": {"metrics": [metric(cpu, "CPU", "AVG", window, 25.0),
                                     metric(mem, "Memory", "AVG", window, 50.0),
                                     metric(cpu, "CPU", "STD", window, 12.5),
                                     metric(mem, "Memory", "STD", window, 6.25)],
                         "tags": {}, "metadata": {"dataCenter": ""}},
            "worker-2": {"metrics": [metric(cpu, "CPU", "AVG", window, 50.0)],
                         "tags": {}, "metadata": {"dataCenter": ""}},
        }},
    }


def new_watcher(prometheus_url: str, state: Path | None = None) -> LoadWatcher:
    return LoadWatcher(PrometheusProvider(prometheus_url, clock=clock), state, clock=clock,
                       interval_seconds=3600)


# --- the load-watcher --------------------------------------------------------------------------


def test_load_watcher_serves_prometheus_metrics(tmp_path: Path) -> None:
    prometheus = FakePrometheus(VECTORS)
    prometheus.gate.clear()
    with serving(prometheus.app()) as prometheus_url:
        watcher = new_watcher(prometheus_url, tmp_path / "state.json")
        with serving(watcher.app()) as url:
            # Fetching has started but nothing has come back: 500, as load-watcher answers.
            assert httpx.get(f"{url}/watcher").status_code == 500
            prometheus.gate.set()
            assert watcher.wait_for_fetches(3)

            answer = httpx.get(f"{url}/watcher")
            assert answer.status_code == 200
            assert answer.headers["content-type"] == "application/json"
            assert answer.json() == expected_document("15m", 900)

            one = httpx.get(f"{url}/watcher", params={"host": "worker-2"})
            assert one.status_code == 200
            everything = expected_document("15m", 900)
            everything["data"]["NodeMetricsMap"].pop("worker-1")
            assert one.json() == everything

            unknown = httpx.get(f"{url}/watcher", params={"host": "worker-9"})
            assert (unknown.status_code, unknown.text) == (404, "No metrics found for host worker-9")

            assert httpx.get(f"{url}/watcher/health").status_code == 200
            prometheus.health_status = 503
            assert httpx.get(f"{url}/watcher/health").status_code == 503

    # load-watcher's PromQL, CPU and memory, AVG and STD, for each window.
    assert sorted(prometheus.queries) == sorted(
        prom_query(method, series, window)
        for method in ("avg_over_time", "stddev_over_time")
        for series in ("instance:node_cpu:ratio", "instance:node_memory_utilisation:ratio")
        for window in ("15m", "10m", "5m"))
    assert "avg_over_time(instance:node_cpu:ratio[15m])" in prometheus.queries
    assert [r.window.duration for r in (watcher.latest("15m"), watcher.latest("10m"),
                                        watcher.latest("5m")) if r] == ["15m", "10m", "5m"]


def test_state_file_makes_a_restarted_watcher_answer_at_once(tmp_path: Path) -> None:
    state = tmp_path / "state" / "watcher.json"
    prometheus = FakePrometheus(VECTORS)
    with serving(prometheus.app()) as prometheus_url:
        first = new_watcher(prometheus_url, state)
        for window in ("15m", "10m", "5m"):
            assert asyncio.run(first.fetch_once(window)) is not None
    assert set(json.loads(state.read_text())) == {"15m", "10m", "5m"}

    # Restarted with Prometheus gone: the persisted document is served before any fetch works.
    restarted = new_watcher("http://127.0.0.1:1", state)
    restarted.load_state()
    with serving(restarted.app()) as url:
        answer = httpx.get(f"{url}/watcher")
        assert answer.status_code == 200
        assert answer.json() == expected_document("15m", 900)
        assert restarted.wait_for_fetches(3)  # the fetches failed; the state still answers
        assert httpx.get(f"{url}/watcher").json() == expected_document("15m", 900)
        assert httpx.get(f"{url}/watcher/health").status_code == 503


def test_a_failed_query_discards_the_cycle_and_windows_fall_back(tmp_path: Path) -> None:
    prometheus = FakePrometheus(VECTORS)
    with serving(prometheus.app()) as prometheus_url:
        watcher = new_watcher(prometheus_url)
        first = asyncio.run(watcher.fetch_once("15m"))
        prometheus.failing = {"stddev_over_time(instance:node_memory_utilisation:ratio[15m])"}
        assert asyncio.run(watcher.fetch_once("15m")) is None
        assert watcher.results("15m") == [first]  # the older entry is kept

        # Nothing for 15m yet: GET /watcher falls back to the newest 10m, then 5m (§6).
        fallback = new_watcher(prometheus_url)
        prometheus.failing = {prom_query("avg_over_time", "instance:node_cpu:ratio", "15m")}
        assert asyncio.run(fallback.fetch_once("15m")) is None
        assert asyncio.run(fallback.fetch_once("5m")) is not None
        latest = fallback.latest("15m")
        assert latest is not None and latest.window.duration == "5m"
        assert asyncio.run(fallback.fetch_once("10m")) is not None
        latest = fallback.latest("15m")
        assert latest is not None and latest.window.duration == "10m"
        assert fallback.latest("5m") is not None and fallback.latest("5m").window.duration == "5m"  # type: ignore[union-attr]


def test_non_vector_results_yield_no_metrics_without_failing() -> None:
    prometheus = FakePrometheus(VECTORS)
    prometheus.matrix = {"avg_over_time(instance:node_cpu:ratio[5m])"}
    with serving(prometheus.app()) as prometheus_url:
        provider = PrometheusProvider(prometheus_url, clock=clock)
        hosts = asyncio.run(provider.fetch_all_hosts(Window(duration="5m", start=0, end=1)))
    assert [m.operator + " " + m.type for m in hosts["worker-1"]] == [
        "AVG Memory", "STD CPU", "STD Memory"]
    assert "worker-2" not in hosts  # its only series was the matrix answer
    assert "worker-3" not in hosts  # NaN samples are skipped


class Stop(Exception):
    pass


def test_fetch_loops_every_interval_and_keep_five_results() -> None:
    class CountingProvider:
        name = "Counting"
        calls = 0

        async def fetch_all_hosts(self, window: Window) -> dict[str, list[Metric]]:
            self.calls += 1
            return {"n1": [Metric(type="CPU", operator="AVG", value=float(self.calls))]}

        async def healthy(self) -> bool:
            return True

    ticks = iter(range(1_000_000, 2_000_000, 60))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 21:  # 7 cycles of the 3 windows
            raise Stop
        await asyncio.sleep(0)  # let the other windows run, without waiting

    watcher = LoadWatcher(CountingProvider(), clock=lambda: float(next(ticks)),
                          interval_seconds=60, sleep=sleep)
    with pytest.raises(Stop):
        asyncio.run(watcher.run())
    assert len(waits) >= 21 and set(waits) == {60}  # the others end when run() is cancelled
    for window in ("15m", "10m", "5m"):
        results = watcher.results(window)
        assert len(results) == 5  # a ring of 5 (§6)
        assert [r.timestamp for r in results] == sorted(r.timestamp for r in results)
        assert all(r.window.end - r.window.start == {"15m": 900, "10m": 600, "5m": 300}[window]
                   for r in results)


# --- a fake load-watcher and the extender ------------------------------------------------------


class FakeWatcher:
    """Serves a fixed `/watcher` document (or an error status)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.body = orjson.dumps(document)
        self.status = 200

    async def _watcher(self, request: Request) -> Response:
        return Response(self.body, status_code=self.status, media_type="application/json")

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/watcher", self._watcher, methods=["GET"])])


def watcher_document(nodes: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"timestamp": int(NOW), "window": {"duration": "15m", "start": int(NOW) - 900,
                                              "end": int(NOW)},
            "source": "Prometheus",
            "data": {"NodeMetricsMap": {name: {"metrics": metrics, "tags": {},
                                               "metadata": {"dataCenter": ""}}
                                        for name, metrics in nodes.items()}}}


def avg(type_: str, value: float, operator: str = "AVG") -> dict[str, Any]:
    return {"name": "", "type": type_, "operator": operator, "rollup": "15m", "value": value}


def node_object(name: str, cpu: str, memory: str = "16Gi") -> dict[str, Any]:
    return api_node(name, cpu, memory, labels={"kubernetes.io/hostname": name}, pods="110")


def pod_object(name: str, requests: dict[str, str] | None = None,
               node_name: str | None = None) -> dict[str, Any]:
    requests = requests or {}
    return api_pod(name, cpu=requests.get("cpu"), memory=requests.get("memory"),
                   node=node_name or "", phase=None, owner_kind=None, uid=f"uid-{name}")


TLP_DOCUMENT = watcher_document({"a": [avg("CPU", 25)], "b": [avg("CPU", 50)],
                                 "c": [avg("CPU", 75)]})
NODES = {"metadata": {}, "items": [node_object("a", "4"), node_object("b", "4"),
                                   node_object("c", "4000m"), node_object("d", "4")]}


def test_extender_prioritizes_with_target_load_packing_over_http() -> None:
    fake = FakeWatcher(TLP_DOCUMENT)
    with serving(fake.app()) as watcher_url:
        extender = SchedulerExtender(WatcherCollector(watcher_url), Policy.TARGET_LOAD_PACKING,
                                     TargetLoadPackingArgs(target_utilization_percent=50),
                                     clock=clock)
        with serving(extender.app()) as url:
            pod = pod_object("web", {"cpu": "200m"})  # no limit: 200m × 1.5 = 300m predicted
            answer = httpx.post(f"{url}/prioritize",
                                json={"Pod": pod, "Nodes": NODES, "NodeNames": None})
            assert answer.status_code == 200
            # U = 32.5 / 57.5 / 82.5 → 82.5→83 / 42.5→43 / 17.5→18 → ÷10: 8 / 4 / 2;
            # d has no metrics → 0.
            assert answer.json() == [{"Host": "a", "Score": 8}, {"Host": "b", "Score": 4},
                                     {"Host": "c", "Score": 2}, {"Host": "d", "Score": 0}]

            # nodeCacheCapable: names only (older lower-case keys also decode, as in Go).
            by_name = httpx.post(f"{url}/prioritize", json={
                "pod": pod, "nodes": None, "nodenames": ["a", "b", "c", "d", "e"]})
            assert by_name.json() == [*answer.json(), {"Host": "e", "Score": 0}]

            # A best-effort pod bound to a 10 s before the window's end is not in the
            # metrics yet: a's U becomes 32.5 + 25 = 57.5, as b's.
            extender.note_bound(pod_object("batch", node_name="a"), "a", at=NOW - 10)
            again = httpx.post(f"{url}/prioritize", json={"Pod": pod, "Nodes": NODES})
            assert again.json()[0] == {"Host": "a", "Score": 4}
            extender.note_bound(PodLoad(uid="old"), "b", at=NOW - 600)  # long in the metrics
            assert httpx.post(f"{url}/prioritize",
                              json={"Pod": pod, "Nodes": NODES}).json()[1]["Score"] == 4


def test_extender_prioritizes_with_load_variation_risk_balancing_over_http() -> None:
    fake = FakeWatcher(watcher_document({
        "n1": [avg("CPU", 40), avg("CPU", 16, "STD"), avg("Memory", 50),
               avg("Memory", 10, "STD")],
        "n2": [avg("CPU", 50)],
    }))
    with serving(fake.app()) as watcher_url:
        extender = SchedulerExtender(WatcherCollector(watcher_url),
                                     Policy.LOAD_VARIATION_RISK_BALANCING,
                                     load_variation=LoadVariationRiskBalancingArgs(1, 1))
        with serving(extender.app()) as url:
            pod = pod_object("web", {"cpu": "100m", "memory": "512Mi"})
            nodes = {"items": [node_object("n1", "1", "1Gi"), node_object("n2", "1", "1Gi")]}
            answer = httpx.post(f"{url}/prioritize", json={"Pod": pod, "Nodes": nodes})
            # n1: the upstream "CPU and Memory" case, 45 → 4.5 → 5;
            # n2: CPU only, mu 0.6 → 70 → 7.
            assert answer.json() == [{"Host": "n1", "Score": 5}, {"Host": "n2", "Score": 7}]


def test_extender_filter_passes_every_node() -> None:
    extender = SchedulerExtender(WatcherCollector("http://127.0.0.1:1"))
    with serving(extender.app()) as url:
        pod = pod_object("web")
        full = httpx.post(f"{url}/filter", json={"Pod": pod, "Nodes": NODES, "NodeNames": None})
        assert full.status_code == 200
        assert full.json() == {"Nodes": NODES, "NodeNames": None, "FailedNodes": {},
                               "FailedAndUnresolvableNodes": {}, "Error": ""}
        names = httpx.post(f"{url}/filter", json={"Pod": pod, "NodeNames": ["a", "b"]})
        assert names.json() == {"Nodes": None, "NodeNames": ["a", "b"], "FailedNodes": {},
                                "FailedAndUnresolvableNodes": {}, "Error": ""}


def test_extender_rejects_malformed_requests() -> None:
    extender = SchedulerExtender(WatcherCollector("http://127.0.0.1:1"))
    with serving(extender.app()) as url:
        bad = httpx.post(f"{url}/prioritize", json={"Pod": pod_object("web", {"cpu": "lots"}),
                                                    "Nodes": NODES})
        assert bad.status_code == 400
        assert ("/prioritize body: Pod.spec.containers[0].resources.requests.cpu: "
                "malformed quantity 'lots'") in bad.text
        assert httpx.post(f"{url}/prioritize", json={"Nodes": NODES}).status_code == 400
        assert httpx.post(f"{url}/filter", content=b"{").status_code == 400


def test_collector_keeps_the_last_document_when_the_watcher_fails(
        caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeWatcher(TLP_DOCUMENT)
    with serving(fake.app()) as watcher_url:
        collector = WatcherCollector(watcher_url + "/")
        assert asyncio.run(collector.refresh())
        document = collector.document
        assert document is not None and document.window.end == int(NOW)
        fake.status = 500
        assert not asyncio.run(collector.refresh())
        fake.status, fake.body = 200, b'{"data": {"NodeMetricsMap": {"a": {"metrics": 7}}}}'
        assert not asyncio.run(collector.refresh())
        assert collector.document is document
    assert f"{watcher_url}/watcher: data.NodeMetricsMap.a.metrics: " in caplog.text


def test_bound_pod_cache_cleanup_and_delete() -> None:
    cache = BoundPods()
    for uid, at in (("p1", NOW - 200), ("p2", NOW - 30), ("p3", NOW - 10)):
        cache.add("a", PodLoad(uid=uid), at)
    cache.add("b", PodLoad(uid="old"), NOW - 500)
    cache.cleanup(NOW)
    assert [e.pod.uid for e in cache.on_node("a")] == ["p2", "p3"]
    # Upstream quirk kept: a node whose entries are ALL old is skipped by the cleanup.
    assert [e.pod.uid for e in cache.on_node("b")] == ["old"]
    cache.delete("a", "p2")
    assert [e.pod.uid for e in cache.on_node("a")] == ["p3"]
    cache.observe("a", PodLoad(uid="p3"), NOW)  # same node again: not a new bind
    cache.observe("c", PodLoad(uid="p3"), NOW)  # moved: counted on its new node
    assert cache.nodes() == {"a": 1, "b": 1, "c": 1}


def test_pod_watch_records_binds_and_nodes(fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    extender = SchedulerExtender(WatcherCollector("http://127.0.0.1:1"), clock=clock)
    events = {name: threading.Event() for name in ("observe", "delete", "node")}
    observe, delete, note_node = (extender.bound_pods.observe, extender.bound_pods.delete,
                                  extender.note_node)

    def observed(*args: Any) -> None:
        observe(*args)
        events["observe"].set()

    def deleted(*args: Any) -> None:
        delete(*args)
        events["delete"].set()

    def noted(*args: Any) -> None:
        note_node(*args)
        events["node"].set()

    extender.bound_pods.observe = observed  # type: ignore[method-assign, assignment]
    extender.bound_pods.delete = deleted  # type: ignore[method-assign, assignment]
    extender.note_node = noted  # type: ignore[method-assign, assignment]
    core = client.CoreV1Api(KubeClient.from_config(kubeconfig).api)
    watch = KubeWatch(extender, KubeClient.from_config(kubeconfig).api).start()
    try:
        assert fake_kube.wait_for_watchers("pods") and fake_kube.wait_for_watchers("nodes")
        core.create_node(node_object("n1", "2"))  # type: ignore[arg-type]
        created = core.create_namespaced_pod(
            "default", pod_object("job", {"cpu": "1"}, "n1"))  # type: ignore[arg-type]
        assert created.metadata is not None
        assert events["observe"].wait(scaled(10)) and events["node"].wait(scaled(10))
        (entry,) = extender.bound_pods.on_node("n1")
        assert entry.pod.uid == created.metadata.uid and entry.bound_at_unix_seconds == NOW
        assert entry.pod.containers[0].cpu_request_milli == 1000
        assert extender.known_nodes["n1"].cpu_capacity_milli == 2000
        core.delete_namespaced_pod("job", "default")
        assert events["delete"].wait(scaled(10))
        assert extender.bound_pods.on_node("n1") == ()
    finally:
        watch.stop()


# --- the commands ------------------------------------------------------------------------------


def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


@pytest.mark.parametrize(("args", "problem"), [
    (["load-watcher", "--prometheus", "prometheus:9090"],
     "error: --prometheus: 'prometheus:9090' must be an http:// or https:// URL with a host"),
    (["load-watcher", "--prometheus", "http://[::1"], "error: --prometheus: 'http://[::1' is not a URL"),
    (["load-watcher", "--prometheus", "http://p:9090", "--port", "70000"],
     "error: --port: 70000 is out of range"),
    (["load-watcher", "--prometheus", "http://p:9090", "--interval", "0"],
     "error: --interval: 0.0 must be a positive number of seconds"),
    (["scheduler-extender", "--watcher-url", "http://w:2020", "--policy", "most-allocated"],
     "error: --policy: unknown policy 'most-allocated' (one of target-load-packing, "
     "load-variation-risk-balancing)"),
    (["scheduler-extender", "--watcher-url", "ftp://w", "--policy", "target-load-packing"],
     "error: --watcher-url: 'ftp://w' must be an http:// or https:// URL with a host"),
    (["scheduler-extender", "--watcher-url", "http://w:2020", "--policy", "target-load-packing",
      "--port", "-1"], "error: --port: -1 is out of range"),
    (["scheduler-extender", "--watcher-url", "http://w:2020", "--policy", "target-load-packing",
      "--default-requests-multiplier", "one and a half"],
     "error: --default-requests-multiplier: unable to parse 'one and a half' as a number"),
])
def test_bad_input_exits_2_without_traceback(args: list[str], problem: str) -> None:
    result = CliRunner().invoke(cli(), args)
    assert result.exit_code == 2, result.output
    assert problem in result.stderr
    assert "Traceback" not in result.stderr
    assert isinstance(result.exception, SystemExit)  # typer.Exit(2), nothing uncaught


def test_unreadable_kubeconfig_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    result = CliRunner().invoke(cli(), [
        "scheduler-extender", "--watcher-url", "http://w:2020", "--policy",
        "target-load-packing", "--kubeconfig", str(missing)])
    assert result.exit_code == 2
    assert f"error: --kubeconfig: {missing}" in result.stderr


def test_malformed_state_file_exits_2(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text('{"15m": {"window": {"end": "yesterday"}}}')
    result = CliRunner().invoke(cli(), ["load-watcher", "--prometheus", "http://p:9090",
                                        "--state", str(state)])
    assert result.exit_code == 2
    assert f"error: {state}: 15m.window.end: Input should be a valid integer" in result.stderr


@pytest.mark.parametrize(("state", "problem"), [
    ("/dev/zero", "cannot read file: it is a character device, not a file"),  # read forever
    ("recursive", "a YAML alias inside the node its anchor names"),
    ("deep", "nested deeper than 100 levels"),
])
def test_a_hostile_state_file_exits_2(state: str, problem: str, tmp_path: Path) -> None:
    """The state file is read as every user file is (issue 27)."""
    path = Path(state) if state.startswith("/") else tmp_path / "state.json"
    if state == "recursive":
        path.write_text("15m: &a {data: [*a]}\n")
    elif state == "deep":
        path.write_text('{"15m": ' + "[" * 5000 + "]" * 5000 + "}")
    result = CliRunner().invoke(cli(), ["load-watcher", "--prometheus", "http://p:9090",
                                        "--state", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}: ") and problem in result.stderr


def test_a_busy_port_exits_2() -> None:
    with ServiceThread(Starlette(), name="busy") as busy:
        result = CliRunner().invoke(cli(), [
            "scheduler-extender", "--watcher-url", "http://127.0.0.1:1", "--policy",
            "target-load-packing", "--port", str(busy.port)])
    assert result.exit_code == 2
    assert f"error: --host/--port: cannot listen on 127.0.0.1:{busy.port}" in result.stderr


def test_command_defaults_match_the_services() -> None:
    import kube_elevator.flows.cli.services as commands
    import kube_elevator.tasks.load_aware.watcher as watcher

    assert commands.WATCHER_PORT == watcher.DEFAULT_PORT == 2020
    assert commands.FETCH_INTERVAL_SECONDS == watcher.FETCH_INTERVAL_SECONDS == 60


def test_shipped_scheduler_configuration_calls_our_routes() -> None:
    path = Path(__file__).resolve().parents[2] / "deployments/kubernetes/scheduler-extender.yaml"
    configuration = yaml.safe_load(path.read_text())
    assert configuration["kind"] == "KubeSchedulerConfiguration"
    (extender,) = configuration["extenders"]
    assert extender["weight"] > 0 and extender["nodeCacheCapable"] is False
    # kube-scheduler posts to strings.TrimRight(urlPrefix, "/") + "/" + verb.
    called = httpx.URL(extender["urlPrefix"].rstrip("/") + "/" + extender["prioritizeVerb"])
    routes = {route.path for route in SchedulerExtender(WatcherCollector("http://w")).app().routes
              if isinstance(route, Route)}
    assert called.path in routes and called.port == 8888
    assert not extender.get("filterVerb")


RUN_CLI = ("import typer; from kube_elevator.flows.cli.services import register; "
           "app = typer.Typer(); register(app); app()")


@contextmanager
def command(*args: str, stop_signal: int = signal.SIGTERM
            ) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`elevator <args> --port 0 --health-address 127.0.0.1:0` in a subprocess: its URL once it
    serves (the health endpoint's is the next line), then `stop_signal`."""
    process = subprocess.Popen([sys.executable, "-c", RUN_CLI, *args, "--port", "0",
                                "--health-address", "127.0.0.1:0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until the service listens
        match = re.search(r"serving on (http://\S+)", line)
        assert match, line + (process.stderr.read() if process.stderr else "")
        yield match.group(1), process
    finally:
        process.send_signal(stop_signal)
        process.wait(timeout=scaled(30))


@pytest.mark.parametrize(("args", "stop_signal"), [
    (["load-watcher", "--prometheus", "http://127.0.0.1:1"], signal.SIGTERM),
    (["scheduler-extender", "--watcher-url", "http://127.0.0.1:1",
      "--policy", "load-variation-risk-balancing"], signal.SIGINT),
])
def test_services_stop_cleanly_on_signals(args: list[str], stop_signal: int) -> None:
    with command(*args, stop_signal=stop_signal) as (url, process):
        if args[0] == "load-watcher":
            assert httpx.get(f"{url}/watcher").status_code == 500  # Prometheus is unreachable
        else:
            answer = httpx.post(f"{url}/prioritize", json={"Pod": pod_object("web"),
                                                          "Nodes": NODES})
            assert [entry["Score"] for entry in answer.json()] == [0, 0, 0, 0]  # no metrics
    stderr = process.stderr.read() if process.stderr else ""
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
