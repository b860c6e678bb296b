"""A watch that goes quiet without closing (issue 26 §1): the freezing proxy, the loop that notices
the silence and resumes from its resourceVersion, the tick that dates the cache before deciding,
and the fake API's bookmarks and `freeze` fault that these stand on."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import urllib3
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.event_latency import wait_until
from kube_elevator.fakes.freezing_proxy import FreezingProxy
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.autoscale import live_tick
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.adapters.kube_cache import ClusterCache, KindAge
from kube_elevator.tasks.adapters.kube_watch import ListWatch
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.step import run_plain
from kube_elevator.tasks.core.timeouts import CACHE_FRESHNESS_BOUND_ENV, WATCH_SILENCE_LIMIT_ENV
from kube_elevator.tasks.escalator.metrics import EscalatorMetrics
from kube_elevator.tasks.steps.report import cache_note, record_cache_ages
from kube_elevator.tasks.steps.source import CachedSource, CacheReading, cache_freshness
from tests.builders import api_node, api_pod, make_group

KINDS = ("pods", "nodes", "poddisruptionbudgets")


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def proxy(fake_kube: FakeKubeApi) -> Iterator[FreezingProxy]:
    with FreezingProxy(fake_kube.url) as running:
        yield running


def proxied_client(kube: FakeKubeApi, proxy: FreezingProxy, tmp_path: Path) -> KubeClient:
    return KubeClient.from_config(kube.write_kubeconfig(tmp_path / "proxied", server=proxy.url))


def watch_requests(kube: FakeKubeApi, resource: str = "pods") -> list[str | None]:
    """The resourceVersion each watch of `resource` asked for, in order."""
    return [request.query.get("resourceVersion") for request in kube.requests
            if request.resource == resource and request.verb == "watch"]


def lists_of(kube: FakeKubeApi, resource: str) -> int:
    return sum(1 for request in kube.requests
               if request.resource == resource and request.verb == "list")


# --- the proxy ----------------------------------------------------------------------------------


def test_the_proxy_freezes_open_connections_and_lets_new_ones_pass(
        fake_kube: FakeKubeApi, proxy: FreezingProxy) -> None:
    pool = urllib3.HTTPConnectionPool(proxy.host, proxy.port, maxsize=1, retries=False)
    assert pool.request("GET", "/version").status == 200  # forwarded
    assert proxy.wait_for_connections(1)
    assert proxy.freeze() == 1
    # The pooled connection is open and frozen: the next request on it is never answered.
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        pool.request("GET", "/version", timeout=urllib3.Timeout(connect=5, read=0.5))
    fresh = urllib3.HTTPConnectionPool(proxy.host, proxy.port, retries=False)
    assert fresh.request("GET", "/version").status == 200  # a new connection passes
    assert proxy.held_bytes > 0  # the request reached the proxy and went no further
    assert proxy.frozen_connections == 1 and proxy.accepted == 2


# --- the loop notices the silence ---------------------------------------------------------------


def test_a_frozen_watch_resumes_from_its_resource_version_without_a_list(
        fake_kube: FakeKubeApi, proxy: FreezingProxy, tmp_path: Path) -> None:
    for index in range(3):
        fake_kube.create("pods", api_pod(f"before-{index}"), namespace="default")
    # A 6 s limit: the server ends each watch after 4 s, so the pods watch is open (not between
    # two watches) when the freeze comes right after the server saw it.
    with ClusterCache(proxied_client(fake_kube, proxy, tmp_path).api, silence_limit_seconds=6.0,
                      retry_seconds=0.05) as cache:
        assert cache.wait_synced(10) and fake_kube.wait_for_watchers("pods", 1)
        fake_kube.create("pods", api_pod("streamed"), namespace="default")
        assert cache.wait_for(lambda: "streamed" in pod_names(cache), 10)
        loop = cache.loops["pods"]
        assert fake_kube.wait_for_watchers("pods", 1)
        frozen_at, watches_before = loop.resource_version, len(watch_requests(fake_kube))
        assert proxy.freeze() >= 1
        for index in range(3):  # made while the watch is frozen: held by the proxy
            fake_kube.create("pods", api_pod(f"during-{index}"), namespace="default")
        assert cache.wait_for(lambda: {"during-0", "during-1", "during-2"} <= pod_names(cache),
                              30), "the events made during the freeze never reached the cache"
    assert loop.silences >= 1
    assert loop.relists == 1  # resumed; never listed again
    assert watch_requests(fake_kube)[watches_before] == frozen_at  # the next watch: from there
    assert proxy.held_bytes > 0  # the frozen watch's events never came through it


def pod_names(cache: ClusterCache) -> set[str]:
    return {pod.name for pod in cache.pods()}


class TrickleServer:
    """Answers every request with a chunked 200 whose body is one byte every `every` seconds,
    never a newline: a stream that is busy on the wire and says nothing."""

    def __init__(self, every: float = 0.1) -> None:
        self.every = every
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._trickle, args=(connection,), daemon=True).start()

    def _trickle(self, connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)
            try:
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   b"Transfer-Encoding: chunked\r\n\r\n")
                while not self._stop.wait(self.every):
                    connection.sendall(b"1\r\n{\r\n")
            except OSError:
                return

    def close(self) -> None:
        self._stop.set()
        self.listener.close()


def test_bytes_that_never_make_an_event_are_silence_too() -> None:
    """A read timeout per socket read would never fire here: bytes come every 0.1 s."""
    from kubernetes import client

    server = TrickleServer()
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.port}"
    api = client.ApiClient(configuration)
    loop = ListWatch(client.CoreV1Api(api).list_pod_for_all_namespaces, "pods",
                     lambda items, version: None, lambda kind, raw: None,
                     silence_limit_seconds=1.0, retry_seconds=0.05)
    loop.resource_version = "7"  # watch at once, no list
    loop.start()
    try:
        wait_until(lambda: loop.silences >= 1 and server.connections >= 2, 20,
                   "the trickling watch to be replaced")
    finally:
        loop.stop()
        server.close()
    assert loop.relists == 0 and loop.resource_version == "7"


def test_the_silence_is_measured_on_the_loops_clock(fake_kube: FakeKubeApi) -> None:
    clock = Clock()
    loop = ListWatch(KubeClient(fake_kube.api_client()).core.list_pod_for_all_namespaces,
                     "pods", lambda items, version: None, lambda kind, raw: None,
                     silence_limit_seconds=45.0, clock=clock).start()
    try:
        assert fake_kube.wait_for_watchers("pods", 1)
        wait_until(lambda: loop.watches == 1, 10, "the watch to be answered")
        clock.now += 44.0
        assert not loop.check_silence()  # quiet, within the limit
        assert loop.silent_seconds() == 44.0
        clock.now += 2.0
        assert loop.check_silence() or loop.silences == 1  # (or its watchdog came first)
        wait_until(lambda: loop.watches == 2, 10, "a new watch")
    finally:
        loop.stop()
    assert loop.silences == 1 and loop.relists == 1
    assert watch_requests(fake_kube)[1] == watch_requests(fake_kube)[0]


def test_a_healthy_watch_is_heard_from_well_inside_the_limit() -> None:
    """The server ends each watch after two thirds of the limit, with a bookmark 2 s before:
    on a quiet cluster the loop hears a bookmark, then the next watch's answer."""
    with FakeKubeApi() as kube:
        loop = ListWatch(KubeClient(kube.api_client()).core.list_pod_for_all_namespaces,
                         "pods", lambda items, version: None, lambda kind, raw: None,
                         silence_limit_seconds=4.5).start()
        bookmarks: list[str] = []
        loop.on_bookmark = bookmarks.append
        try:
            assert loop.timeout_seconds == 3
            wait_until(lambda: loop.watches >= 3, 20, "two watches ended by the server")
        finally:
            loop.stop()
        assert loop.silences == 0 and bookmarks  # the pre-timeout bookmarks came


@pytest.mark.parametrize("variable", [WATCH_SILENCE_LIMIT_ENV, CACHE_FRESHNESS_BOUND_ENV])
def test_the_bounds_come_from_the_environment_checked(
        variable: str, fake_kube: FakeKubeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("0", "soon", "-3"):
        monkeypatch.setenv(variable, bad)
        with pytest.raises(InputError, match=variable):
            ClusterCache(fake_kube.api_client())
    monkeypatch.setenv(variable, "6")
    cache = ClusterCache(fake_kube.api_client())
    if variable == WATCH_SILENCE_LIMIT_ENV:
        assert {(loop.silence_limit_seconds, loop.timeout_seconds)
                for loop in cache.loops.values()} == {(6.0, 4)}
    else:
        assert cache.freshness_bound_seconds == 6.0


# --- the cache's age, and the tick that reads it -----------------------------------------------


@pytest.fixture
def cached(fake_kube: FakeKubeApi) -> Iterator[tuple[ClusterCache, Clock]]:
    fake_kube.create("nodes", api_node("n1"))
    clock = Clock()
    with ClusterCache(fake_kube.api_client(), clock=clock, retry_seconds=0.05) as cache:
        assert cache.wait_synced(10)
        for loop in cache.loops.values():
            wait_until(lambda loop=loop: loop.watches >= 1, 10, f"the {loop.name} watch")
        yield cache, clock


def test_each_kind_knows_its_age_and_resource_version(
        fake_kube: FakeKubeApi, cached: tuple[ClusterCache, Clock]) -> None:
    cache, clock = cached
    assert {age.kind: age.age_seconds for age in cache.freshness()} == dict.fromkeys(KINDS, 0.0)
    clock.now += 10.0
    fake_kube.create("pods", api_pod("new"), namespace="default")
    version = str(fake_kube.resource_version)
    wait_until(lambda: cache.loops["pods"].resource_version == version, 10, "the pod event")
    ages = {age.kind: age for age in cache.freshness()}
    assert ages["pods"] == KindAge("pods", 0.0, version)
    assert ages["nodes"].age_seconds == 10.0


def test_the_tick_refreshes_a_stale_kind_and_leaves_a_fresh_one(
        fake_kube: FakeKubeApi, cached: tuple[ClusterCache, Clock]) -> None:
    cache, clock = cached
    watches = len(fake_kube.requests)
    reading = cache_freshness.fn(cache)
    assert (reading.refreshed, reading.listed) == ((), ())
    assert len(fake_kube.requests) == watches  # a fresh cache: nothing asked of the server
    clock.now += cache.freshness_bound_seconds + 1
    versions = {age.kind: age.resource_version for age in cache.freshness()}
    reading = cache_freshness.fn(cache)
    assert set(reading.refreshed) == set(KINDS) and reading.listed == ()
    assert all(age.age_seconds == 0.0 for age in reading.ages)  # answered after the refresh
    for kind in KINDS:  # each resumed from where it was, none listed again
        assert watch_requests(fake_kube, kind)[-1] == versions[kind]
        assert lists_of(fake_kube, kind) == 1


def test_a_kind_whose_server_stays_silent_is_listed_by_the_tick(
        fake_kube: FakeKubeApi, fake_aws: Any, proxy: FreezingProxy, kubeconfig: Path,
        tmp_path: Path) -> None:
    """The cache's path to the server is gone (its proxy stopped): past the bound, the tick
    reconnects, hears nothing within the wait, and lists every kind itself, through its own
    client, so the pods made since reach the decision."""
    from kube_elevator.tasks.adapters.cloud import AsgClient
    from kube_elevator.tasks.steps.node_groups import Adapters

    fake_aws.create_asg("silent-asg", 1, 10, 2)
    from kube_elevator.fakes.cluster import node_for_instance

    for index, instance in enumerate(fake_aws.instances("silent-asg")):
        fake_kube.create("nodes", node_for_instance(instance, {"customer": "batch"}, 1000,
                                                    4000 * 2**20, 1_700_000_000.0 + index))
    clock = Clock()
    group = make_group(cloud_provider_group_name="silent-asg")
    adapters = Adapters(KubeClient.from_config(kubeconfig), AsgClient.from_environment(),
                        "kube-system")
    with ClusterCache(proxied_client(fake_kube, proxy, tmp_path).api, clock=clock,
                      retry_seconds=0.05) as cache:
        assert cache.wait_synced(10)
        proxy.stop()
        for index in range(4):
            fake_kube.create("pods", api_pod(f"w{index}", "jobs", cpu="500m", memory="100Mi",
                                             phase="Pending",
                                             node_selector={"customer": "batch"}),
                             namespace="jobs")
        clock.now += cache.freshness_bound_seconds + 1
        pod_lists = lists_of(fake_kube, "pods")
        reading = cache_freshness.fn(cache, 0.5)
        assert set(reading.listed) == set(KINDS)
        source = CachedSource(cache, adapters, (group,), frozenset(reading.listed))
        [result] = live_tick(run_plain, adapters, [group], 1_800_000_000.0, dry_run=True,
                             source=source)
    assert lists_of(fake_kube, "pods") == pod_lists + 1  # the tick's own list
    assert result.plan.pods == 4 and result.plan.delta > 0


def test_the_artifact_and_the_gauge_carry_the_age() -> None:
    reading = CacheReading((KindAge("pods", 61.5, "120"), KindAge("nodes", 3.0, "118"),
                            KindAge("poddisruptionbudgets", 3.25, "90")), 45.0,
                           refreshed=("pods",))
    note = cache_note(reading)
    assert "pods 61.5 s (resourceVersion 120)" in note
    assert "nodes 3.0 s (resourceVersion 118)" in note
    assert "Past the 45 s freshness bound, reconnected before deciding: pods." in note
    assert "listed" not in note
    metrics = EscalatorMetrics()
    record_cache_ages(metrics, reading)
    [family] = [family for family in text_string_to_metric_families(metrics.render())
                if family.name == "elevator_watch_cache_age_seconds"]
    assert family.type == "gauge"
    assert {sample.labels["kind"]: sample.value for sample in family.samples} == {
        "pods": 61.5, "nodes": 3.0, "poddisruptionbudgets": 3.25}


# --- the fake API: bookmarks as the real one sends them, and the `freeze` fault ---------------


def test_a_quiet_watch_gets_a_bookmark_two_seconds_before_its_end(
        fake_kube: FakeKubeApi) -> None:
    from kubernetes import client

    assert fake_kube.bookmark_interval == 60.0  # the cacher's bookmarkFrequency
    version = fake_kube.create("pods", api_pod("one"))["metadata"]["resourceVersion"]
    core = client.CoreV1Api(fake_kube.api_client())
    response = core.list_pod_for_all_namespaces(watch=True, resource_version=version,
                                                timeout_seconds=3, allow_watch_bookmarks=True,
                                                _preload_content=False)
    lines = [orjson.loads(line) for line in response.read().splitlines()]
    assert [(line["type"], line["object"]["metadata"]["resourceVersion"])
            for line in lines] == [("BOOKMARK", version)]


def test_freeze_is_refused_where_nothing_streams() -> None:
    from kube_elevator.fakes.aws_faults import AwsFaultProxy
    from kube_elevator.fakes.faults import FaultSpecError

    with pytest.raises(FaultSpecError, match="'freeze' is not one of"):
        AwsFaultProxy("http://127.0.0.1:1").faults.add("freeze")


def test_the_freeze_fault_silences_open_watches_and_lets_new_ones_pass(
        fake_kube: FakeKubeApi) -> None:
    from kubernetes import client

    core = client.CoreV1Api(fake_kube.api_client())
    frozen = core.list_pod_for_all_namespaces(watch=True, resource_version="1",
                                              timeout_seconds=60, _preload_content=False,
                                              _request_timeout=(5, 1.0))
    assert fake_kube.wait_for_watchers("pods", 1)
    answer = urllib3.request("POST", fake_kube.faults_url, json={
        "action": "freeze", "path": "/api/v1/pods", "count": None})
    assert answer.status == 201 and answer.json()["faults"][0]["fired"] == 1
    fake_kube.create("pods", api_pod("during"))
    # The event is due on the frozen watch and does not come: its read times out.
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        frozen.read(1)
    frozen.close()
    fresh = core.list_pod_for_all_namespaces(watch=True, resource_version="1",
                                             timeout_seconds=1, _preload_content=False)
    names = [orjson.loads(line)["object"]["metadata"]["name"]
             for line in fresh.read().splitlines()]
    assert names == ["during"]
    # The client gave the frozen watch up: the server drops it.
    assert fake_kube.wait_for_watchers("pods", 0)
