"""The watch cache against the fake API server and the real client: list, then watch; resume;
relist on 410 Gone; bookmarks; and a tick that reads it decides as one that lists."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from benchmarks.deadlines import scaled
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.autoscale import live_tick
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.adapters.kube_cache import ClusterCache
from kube_elevator.tasks.core.records import PodRecord
from kube_elevator.tasks.core.step import run_plain
from tests.builders import api_node, api_pod, make_group


@pytest.fixture
def cache(fake_kube: FakeKubeApi) -> Iterator[ClusterCache]:
    with ClusterCache(fake_kube.api_client(), timeout_seconds=30, page_size=2,
                      retry_seconds=0.05) as started:
        assert started.wait_synced(10)
        yield started


def pod_names(cache: ClusterCache) -> set[str]:
    return {pod.name for pod in cache.pods()}


def test_the_first_list_holds_active_pods_nodes_and_budgets(fake_kube: FakeKubeApi) -> None:
    fake_kube.create("nodes", api_node("n1"))
    for index in range(5):  # pages of 2: three pages
        fake_kube.create("pods", api_pod(f"web-{index}", node="n1"), namespace="default")
    fake_kube.create("pods", api_pod("done", phase="Succeeded"), namespace="default")
    fake_kube.create("poddisruptionbudgets", {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}},
        namespace="default")
    with ClusterCache(fake_kube.api_client(), page_size=2) as cache:
        assert not cache.synced or cache.counts()["pods"] == 5
        assert cache.wait_synced(10)
        assert pod_names(cache) == {f"web-{index}" for index in range(5)}
        assert [node.name for node in cache.nodes()] == ["n1"]
        assert [pdb.name for pdb in cache.pdbs()] == ["web"]


def test_a_listed_cache_is_out_of_the_collectors_way(fake_kube: FakeKubeApi) -> None:
    import gc

    fake_kube.create("nodes", api_node("n1"))
    fake_kube.create("pods", api_pod("web-0", node="n1"), namespace="default")
    gc.unfreeze()
    try:
        with ClusterCache(fake_kube.api_client()) as cache:
            assert cache.wait_synced(10)
            # Frozen once listed: full collections no longer walk what the cache holds.
            assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_changes_reach_the_cache_and_finished_pods_leave_it(
        fake_kube: FakeKubeApi, cache: ClusterCache) -> None:
    seen: list[tuple[str, str]] = []
    cache.on_pod = lambda event_type, pod: seen.append((event_type, pod.name))
    fake_kube.create("pods", api_pod("job", phase="Pending"), namespace="default")
    assert cache.wait_for(lambda: "job" in pod_names(cache))
    fake_kube.patch("pods", "job", {"status": {"phase": "Succeeded"}}, namespace="default")
    assert cache.wait_for(lambda: "job" not in pod_names(cache))
    fake_kube.create("nodes", api_node("n2"))
    assert cache.wait_for(lambda: [n.name for n in cache.nodes()] == ["n2"])
    fake_kube.delete("nodes", "n2")
    assert cache.wait_for(lambda: cache.nodes() == [])
    assert seen[0] == ("ADDED", "job")


def test_an_ended_watch_resumes_from_the_last_resource_version(
        fake_kube: FakeKubeApi) -> None:
    with ClusterCache(fake_kube.api_client(), timeout_seconds=1,
                      retry_seconds=0.05) as cache:
        assert cache.wait_synced(10)
        loop = cache.loops["pods"]
        # The server ends each watch after 1 s; a pod created while the next watch is still
        # on its way (held 1.5 s) comes with it, from the resourceVersion last seen.
        fake_kube.delay_next("watch", "pods", 1.5)
        assert fake_kube.wait_for_watchers("pods", 0, timeout=scaled(10))
        fake_kube.create("pods", api_pod("between"), namespace="default")
        assert cache.wait_for(lambda: pod_names(cache) == {"between"}, 10)
        assert loop.relists == 1  # resumed, never listed again


def test_410_gone_lists_again() -> None:
    with FakeKubeApi(history_size=3) as kube, \
            ClusterCache(kube.api_client(), timeout_seconds=1, retry_seconds=0.05) as cache:
        assert cache.wait_synced(10)
        loop = cache.loops["pods"]
        kube.delay_next("watch", "pods", 1.5)
        assert kube.wait_for_watchers("pods", 0, timeout=scaled(10))
        for index in range(6):  # more changes than the server remembers
            kube.create("pods", api_pod(f"p{index}"), namespace="default")
        assert cache.wait_for(lambda: pod_names(cache) == {f"p{i}" for i in range(6)}, 10)
        assert loop.relists == 2


def test_bookmarks_keep_a_quiet_watch_current() -> None:
    with FakeKubeApi(bookmark_interval=0.05) as kube, \
            ClusterCache(kube.api_client(), timeout_seconds=30) as cache:
        assert cache.wait_synced(10)
        # Another kind moves the resourceVersion; the quiet pod watch hears of it by bookmark,
        # so a resumed watch starts from there and not from history the server has dropped.
        kube.create("configmaps", {"metadata": {"name": "y", "namespace": "default"}},
                    namespace="default")
        wanted = str(kube.resource_version)
        reached = threading.Event()
        cache.loops["pods"].on_bookmark = lambda version: (
            reached.set() if version == wanted else None)
        assert reached.wait(scaled(10))
        assert cache.loops["pods"].resource_version == wanted


def test_a_tick_reading_the_cache_decides_as_one_that_lists(
        fake_kube: FakeKubeApi, fake_aws: Any, kubeconfig: Path) -> None:
    from kube_elevator.tasks.adapters.cloud import AsgClient
    from kube_elevator.tasks.steps.node_groups import Adapters

    fake_aws.create_asg("cache-asg", 1, 10, 2)
    for index, instance in enumerate(fake_aws.instances("cache-asg")):
        from kube_elevator.fakes.cluster import node_for_instance

        fake_kube.create("nodes", node_for_instance(instance, {"customer": "batch"}, 1000,
                                                    4000 * 2**20, 1_700_000_000.0 + index))
    for index in range(4):
        fake_kube.create("pods", api_pod(f"w{index}", "jobs", cpu="500m", memory="100Mi",
                                         phase="Pending", node_selector={"customer": "batch"}),
                         namespace="jobs")
    group = make_group(cloud_provider_group_name="cache-asg")
    adapters = Adapters(KubeClient.from_config(kubeconfig),
                        AsgClient.from_environment(), "kube-system")
    listed = live_tick(run_plain, adapters, [group], 1_800_000_000.0, dry_run=True)
    with ClusterCache(fake_kube.api_client()) as cache:
        assert cache.wait_synced(10)
        list_calls = _count_lists(fake_kube)
        cached = live_tick(run_plain, adapters, [group], 1_800_000_000.0, dry_run=True,
                           cache=cache)
        assert _count_lists(fake_kube) == list_calls  # the tick listed nothing
    assert [r.plan.to_json() for r in cached] == [r.plan.to_json() for r in listed]
    assert cached[0].plan.delta > 0


def _count_lists(kube: FakeKubeApi) -> int:
    return sum(1 for request in kube.requests
               if request.verb == "list" and request.resource in ("pods", "nodes"))


def test_a_pod_the_cache_cannot_read_is_skipped_not_fatal(
        fake_kube: FakeKubeApi, cache: ClusterCache) -> None:
    bad = api_pod("bad", cpu="lots")
    # A real server refuses such a quantity (400); one that holds it anyway (stored before a
    # stricter version, or by a lenient fake) is what the cache must survive.
    fake_kube.layers.validation = False
    fake_kube.create("pods", bad, namespace="default")
    fake_kube.layers.validation = True
    fake_kube.create("pods", api_pod("good"), namespace="default")
    assert cache.wait_for(lambda: "good" in pod_names(cache))
    assert "bad" not in pod_names(cache)
    assert all(isinstance(pod, PodRecord) for pod in cache.pods())



def test_the_group_index_follows_every_change(fake_kube: FakeKubeApi,
                                               cache: ClusterCache) -> None:
    from kube_elevator.tasks.escalator.filter_nodes import pods_by_group
    from kube_elevator.tasks.escalator.utilization import GroupPods, PodTally, summarize_pods

    groups = [make_group(), make_group(name="web", label_value="web")]

    def grouper(pod: PodRecord) -> list[str]:
        return [name for name, members in pods_by_group([pod], groups).items() if members]

    def agrees() -> bool:
        pods, grouped, tallies = cache.grouped_pods("groups", grouper, PodTally)
        expected = pods_by_group(pods, groups)
        return all(grouped.get(name, []) == members
                   and tallies.get(name, GroupPods()) == summarize_pods(members)
                   for name, members in expected.items())

    fake_kube.create("pods", api_pod("b0", node_selector={"customer": "batch"}),
                     namespace="default")
    assert cache.wait_for(lambda: "b0" in pod_names(cache))
    assert agrees()  # built on first use
    fake_kube.create("pods", api_pod("w0", node_selector={"customer": "web"}),
                     namespace="default")
    fake_kube.create("pods", api_pod("b1", node_selector={"customer": "batch"}),
                     namespace="default")
    fake_kube.patch("pods", "b0", {"status": {"phase": "Running"}, "spec": {"nodeName": "n"}},
                    namespace="default")
    fake_kube.delete("pods", "w0", "default")
    assert cache.wait_for(lambda: pod_names(cache) == {"b0", "b1"})
    assert agrees()  # kept current, in the cache's order
    _, grouped, tallies = cache.grouped_pods("groups", grouper, PodTally)
    assert tallies["batch"].count == 2 and set(tallies["batch"].on_node) == {"n"}
    assert [pod.name for pod in grouped["batch"]] == ["b0", "b1"]
    assert grouped["batch"][0].node_name == "n"


def test_a_watch_stopped_while_connecting_does_not_spoil_the_next_request(
        tmp_path: Path) -> None:
    """A loop stopped while its watch request is on the way leaves the stream the server then
    opens unread. Handed back to the client's pool, that connection would give the next request
    the stream's end as its answer (`BadStatusLine`), and our client does not retry underneath:
    a write would be applied with its answer lost. So it is closed instead."""
    from kube_elevator.tasks.adapters.kube_watch import ListWatch

    with FakeKubeApi() as kube:
        core = KubeClient.from_config(kube.write_kubeconfig(tmp_path / "kubeconfig")).core
        for index in range(3):
            kube.create("pods", api_pod(f"p{index}"), namespace="default")
        loop = ListWatch(core.list_pod_for_all_namespaces, "pods", lambda items, version: None,
                         lambda kind, raw: None, timeout_seconds=2)
        loop.resource_version = "0"
        loop.stop()  # as if stop() came between the watch request and its answer
        loop.watch()
        listed = client.CoreV1Api(core.api_client).list_namespaced_pod("default")
        assert sorted(pod.metadata.name for pod in listed.items) == ["p0", "p1", "p2"]


def test_a_loop_stopped_while_listing_leaves_the_list_at_the_next_page() -> None:
    """SIGTERM during the first list of a big cluster: the loop does not read the remaining
    pages (seconds at 150,000 pods, longer than `stop()` waits for its thread, and a daemon
    thread alive at interpreter exit aborts the process), nor hand on a part of the list as
    the cluster's state, nor start a watch."""
    from kube_elevator.tasks.adapters.kube_watch import ListWatch

    with FakeKubeApi() as kube:
        for index in range(7):
            kube.create("pods", api_pod(f"p{index}"), namespace="default")
        core = KubeClient(kube.api_client()).core
        kube.faults.add("delay", method="GET", path="/api/v1/pods", delay_seconds=0.01)
        second_page = kube.faults.add("delay", method="GET", path="/api/v1/pods",
                                      delay_seconds=120)
        # Counted as each request arrives: the server records a request only once it has
        # answered, and the held second page is answered after `release()`, at its own pace.
        later_pages = kube.faults.add("delay", count=None, method="GET", path="/api/v1/pods",
                                      delay_seconds=0.001)
        relisted: list[list[Any]] = []
        loop = ListWatch(core.list_pod_for_all_namespaces, "pods",
                         lambda items, version: relisted.append(items), lambda kind, raw: None,
                         page_size=3).start()
        stopper = threading.Thread(target=loop.stop)
        try:
            assert kube.faults.wait_fired(second_page, timeout=scaled(10))
            stopper.start()  # stop() comes while the second page is on its way
            assert loop._stop.wait(scaled(10))
        finally:
            kube.faults.release()
            stopper.join(10)
        assert not stopper.is_alive() and loop._thread is not None
        assert not loop._thread.is_alive()
        assert relisted == [] and loop.relists == 0
        assert second_page.fired == 1 and later_pages.fired == 0  # no third page, no watch

def test_a_list_whose_continue_token_expired_starts_again(tmp_path: Path) -> None:
    """A paged list that outlives the server's history (etcd compacted past its revision) gets
    410 Expired on its next page; as client-go's pager does, the list starts again rather than
    fail the tick, and holds what the server holds now."""
    with FakeKubeApi(history_size=3) as kube:
        for index in range(7):
            kube.create("pods", api_pod(f"p{index}"), namespace="default")
        client = KubeClient.from_config(kube.write_kubeconfig(tmp_path / "kubeconfig"))
        client.page_size = 3
        # The first page passes; the second waits while the cluster changes past the history.
        kube.faults.add("delay", method="GET", path="/api/v1/pods", delay_seconds=0.01)
        second_page = kube.faults.add("delay", method="GET", path="/api/v1/pods",
                                      delay_seconds=120)
        listed: list[PodRecord] = []
        listing = threading.Thread(target=lambda: listed.extend(client.list_pods()))
        listing.start()
        try:
            assert kube.faults.wait_fired(second_page, timeout=scaled(10))
            for index in range(7, 11):  # 4 changes: more than the 3 the server remembers
                kube.create("pods", api_pod(f"p{index}"), namespace="default")
        finally:
            kube.faults.release()
            listing.join(10)
        assert sorted(pod.name for pod in listed) == sorted(f"p{i}" for i in range(11))
        pod_lists = [(request.query.get("continue"), request.status) for request in kube.requests
                     if request.verb == "list" and request.resource == "pods"]
        assert [status for _, status in pod_lists].count(410) == 1
        assert [token for token, _ in pod_lists].count(None) == 2  # listed again from the start


def test_a_server_that_ends_every_watch_at_once_is_not_asked_in_a_tight_loop() -> None:
    """A server or proxy that ends each watch as soon as it opens, with nothing in it: as
    client-go's reflector does, the loop waits before asking again, as after a failure."""
    from kube_elevator.tasks.adapters.kube_watch import ListWatch

    retry_seconds = 0.5
    with FakeKubeApi() as kube:
        kube.watches_end_at_once = True
        core = KubeClient(kube.api_client()).core
        # Counts the pod requests: the list, then each watch (a delay too short to matter).
        requests = kube.faults.add("delay", count=None, method="GET", path="/api/v1/pods",
                                   delay_seconds=0.001)
        loop = ListWatch(core.list_pod_for_all_namespaces, "pods", lambda items, version: None,
                         lambda kind, raw: None, retry_seconds=retry_seconds).start()
        try:
            assert kube.faults.wait_fired(requests, times=2)  # listed, and the first watch
            first_watch = time.monotonic()
            assert kube.faults.wait_fired(requests, times=4)  # two watches more
            between = time.monotonic() - first_watch
        finally:
            loop.stop()
        # Two waits of retry_seconds each (one is margin for this thread's own wake-up);
        # without them, the watches come milliseconds apart.
        assert between >= retry_seconds
        assert loop.short_watches >= 2
        assert loop.relists == 1  # resumed each time, never listed again
