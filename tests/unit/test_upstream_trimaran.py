"""Trimaran's own test tables (kubernetes-sigs/scheduler-plugins pkg/trimaran, master), ported.

Each parametrize id is `<upstream test>:<upstream case name>`. Already ported in
tests/unit/test_load_scoring.py and not repeated here: loadvariationriskbalancing TestScore and
analysis_test TestComputeScore. Skipped as Go-isms: TestNew (plugin construction through the
scheduler framework), TestNewCollector/TestNewCollectorSpecs/TestNewCollectorLoadWatcher (the
collector's choice between a watcher address and a provider library: we only talk to a watcher
over HTTP), TestUpdateMetrics (an HTTP fetch that returns nil), lowriskovercommitment and peaks
(plugins we do not implement).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kube_elevator.tasks.load_aware.extender import BoundPods
from kube_elevator.tasks.load_aware.scoring import (
    ContainerLoad,
    NodeLoad,
    PodLoad,
    ResourceRequest,
    ResourceStats,
    go_round,
    node_metrics,
    parse_watcher_metrics,
    requested_resources,
    resource_stats,
    risk_score,
    target_load_packing_score,
)

NOW = 1_800_000_000.0
MiB = 2**20


def go_json(node_metrics_map: dict[str, list[dict[str, Any]]]) -> bytes:
    """watcher.WatcherMetrics as encoding/json marshals it in the Go tests (Window{} is zero)."""
    return json.dumps({
        "timestamp": 0, "window": {"duration": "", "start": 0, "end": 0}, "source": "",
        "data": {"NodeMetricsMap": {
            host: {"metrics": [{"name": m.get("name", ""), "type": m["type"],
                                "operator": m.get("operator", ""), "value": m["value"]}
                               for m in metrics],
                   "tags": {}, "metadata": {}}
            for host, metrics in node_metrics_map.items()}},
    }).encode()


# --- pkg/trimaran/resourcestats_test.go ----------------------------------------------------------

METRICS = [
    {"name": "no_name", "type": "CPU", "operator": "", "value": 40},
    {"name": "cpu_running_avg", "type": "CPU", "operator": "AVG", "value": 40},
    {"name": "cpu_running_std", "type": "CPU", "operator": "STD", "value": 36},
    {"name": "mem_running_avg", "type": "Memory", "operator": "AVG", "value": 20},
    {"name": "mem_running_std", "type": "Memory", "operator": "STD", "value": 10},
]
NODE0 = NodeLoad("node0", cpu_capacity_milli=1000, cpu_allocatable_milli=1000,
                 memory_allocatable_bytes=1024 * MiB)


@pytest.mark.parametrize(("metrics", "metric_type", "want"), [
    (METRICS, "CPU", ResourceStats(capacity=1000, requested=100, used_average=400,
                                   used_stdev=360)),
    (METRICS[3:], "CPU", None),
    (METRICS, "Memory", ResourceStats(capacity=1024, requested=1, used_average=204.8,
                                      used_stdev=102.4)),
], ids=["TestCreateResourceStats:test-cpu", "TestCreateResourceStats:test-missing",
        "TestCreateResourceStats:test-memory"])
def test_trimaran_create_resource_stats(metrics: list[dict[str, Any]], metric_type: str,
                                        want: ResourceStats | None) -> None:
    """resourcestats_test.go TestCreateResourceStats (CreateResourceStats): percentages of the
    node's allocatable, memory in MiB; no metric of the type is not valid."""
    document = parse_watcher_metrics(go_json({"node0": metrics}), "test")
    node = node_metrics(document, "node0")
    assert node is not None
    got = resource_stats(node, NODE0, ResourceRequest(100, 1024 * 1024), metric_type)
    if want is None:
        assert got is None
    else:
        assert got is not None
        assert got.capacity == want.capacity and got.requested == want.requested
        assert got.used_average == pytest.approx(want.used_average)
        assert got.used_stdev == pytest.approx(want.used_stdev)


def _pod(overhead: int, init_cpu: int, init_mem: int, cpu: list[int], mem: list[int]) -> PodLoad:
    """resourcestats_test.go getPodWithContainersAndOverhead: the overhead is CPU only."""
    return PodLoad(
        containers=tuple(ContainerLoad(cpu_request_milli=c, memory_request_bytes=m)
                         for c, m in zip(cpu, mem, strict=True)),
        init_containers=(ContainerLoad(cpu_request_milli=init_cpu,
                                       memory_request_bytes=init_mem),),
        overhead_cpu_milli=overhead)


@pytest.mark.parametrize(("pod", "want"), [
    (_pod(10, 100, 512, [1000, 500], [2048, 1024]), ResourceRequest(1510, 3072)),
    (_pod(10, 2000, 4096, [1000, 500], [2048, 1024]), ResourceRequest(2010, 4096)),
    (_pod(0, 0, 0, [0, 0, 1000], [0, 200 * MiB, 400 * MiB]), ResourceRequest(1000, 600 * MiB)),
], ids=["TestGetResourceRequested:containers win", "TestGetResourceRequested:init wins",
        "TestGetResourceRequested:zero requests"])
def test_trimaran_get_resource_requested(pod: PodLoad, want: ResourceRequest) -> None:
    """resourcestats_test.go TestGetResourceRequested (GetResourceRequested): max(sum of
    containers, init container) plus the overhead, per resource."""
    assert requested_resources(pod) == want


# (case, capacity, requested, used average, used stdev, mu, sigma)
MU_SIGMA = [
    ("proper arguments", 1000, 100, 400, 360, 0.5, 0.36),
    ("zero arguments", 0, 0, 0, 0, 0.0, 0.0),
    ("large used", 1000, 100, 1400, 300, 1.0, 0.3),
    ("large deviation", 1000, 100, 400, 1600, 0.5, 1.0),
    ("large arguments", 1000, 0, 1400, 1600, 1.0, 1.0),
    ("negative used", 1000, 0, -100, 200, 0.0, 0.2),
    ("negative deviation", 1000, 400, 0, -200, 0.4, 0.0),
]


@pytest.mark.parametrize(("capacity", "requested", "average", "stdev", "mu", "sigma"),
                         [case[1:] for case in MU_SIGMA],
                         ids=[f"TestGetMuSigma:{case[0]}" for case in MU_SIGMA])
def test_trimaran_get_mu_sigma(capacity: float, requested: float, average: float, stdev: float,
                               mu: float, sigma: float) -> None:
    """resourcestats_test.go TestGetMuSigma (GetMuSigma), read through computeScore with margin
    and sensitivity 1, where the score is (1 - (mu + sigma) / 2) * 100; zero capacity scores 0."""
    score = risk_score(ResourceStats(capacity, requested, average, stdev), 1.0, 1.0)
    if capacity <= 0:
        assert score == 0.0
    else:
        assert score == pytest.approx((1 - (mu + sigma) / 2) * 100)


# --- pkg/trimaran/handler_test.go ----------------------------------------------------------------

GO_ZERO_TIME = -62135596800.0  # time.Time{}: year 1


@pytest.mark.parametrize(("entries", "update", "want"), [
    ([("Pod-1", GO_ZERO_TIME), ("Pod-2", GO_ZERO_TIME), ("Pod-3", GO_ZERO_TIME)], "Pod-4",
     ["Pod-4"]),
    ([("Pod-1", GO_ZERO_TIME), ("Pod-2", GO_ZERO_TIME), ("Pod-3", GO_ZERO_TIME),
      ("Pod-4", NOW)], "Pod-5", ["Pod-4", "Pod-5"]),
    ([("Pod-1", NOW - 300), ("Pod-2", NOW - 10), ("Pod-3", NOW - 5)], "", ["Pod-2", "Pod-3"]),
], ids=["TestHandlerCacheCleanup:OnUpdate doesn't add unassigned pods",
        "TestHandlerCacheCleanup:cleanupCache doesn't delete newly added pods",
        "TestHandlerCacheCleanup:cleanupCache deletes old pods"])
def test_trimaran_handler_cache_cleanup(entries: list[tuple[str, float]], update: str,
                                        want: list[str]) -> None:
    """handler_test.go TestHandlerCacheCleanup (OnUpdate, cleanupCache): entries older than the
    60 s reporting interval go, newer ones stay in bind order."""
    cache = BoundPods()
    for name, at in entries:
        cache.add("node-1", PodLoad(name=name, uid=name), at)
    if update:
        cache.add("", PodLoad(name=update, uid=update), NOW)  # the old pod: unassigned
        cache.add("node-1", PodLoad(name=update, uid=update), NOW)
    cache.cleanup(NOW)
    assert [entry.pod.name for entry in cache.on_node("node-1")] == want


# --- pkg/trimaran/collector_test.go --------------------------------------------------------------

WATCHER_RESPONSE = {"node-1": [
    {"type": "CPU", "operator": "AVG", "value": 80},
    {"type": "CPU", "operator": "STD", "value": 16},
    {"type": "Memory", "operator": "AVG", "value": 25},
    {"type": "Memory", "operator": "STD", "value": 6.25},
]}


def test_trimaran_get_node_metrics() -> None:
    """collector_test.go TestGetAllMetrics and TestGetNodeMetrics: the node's metrics as sent."""
    document = parse_watcher_metrics(go_json(WATCHER_RESPONSE), "test")
    metrics = node_metrics(document, "node-1")
    assert metrics is not None
    assert [(m.type, m.operator, m.value) for m in metrics] == [
        (m["type"], m["operator"], m["value"]) for m in WATCHER_RESPONSE["node-1"]]


def test_trimaran_get_node_metrics_nil_for_node() -> None:
    """collector_test.go TestGetNodeMetricsNilForNode: an empty map gives no metrics for the
    node, but the document itself is there."""
    document = parse_watcher_metrics(go_json({}), "test")
    assert document.data.node_metrics_map == {}
    assert node_metrics(document, "node-1") is None


# --- pkg/trimaran/targetloadpacking/targetloadpacking_test.go ------------------------------------

NODE_1 = NodeLoad("node-1", cpu_capacity_milli=1000, cpu_allocatable_milli=1000,
                  memory_allocatable_bytes=1024 * MiB)
EXCESS_POD = PodLoad(containers=(ContainerLoad(cpu_limit_milli=1000, cpu_request_milli=1000),))


@pytest.mark.parametrize(("pod", "response", "want"), [
    (PodLoad(), {"node-1": [{"type": "CPU", "operator": "Latest", "value": 0}]}, 40),
    (PodLoad(), {"node-1": [{"type": "CPU", "operator": "Latest", "value": 50}]}, 33),
    (EXCESS_POD, {"node-1": [{"type": "CPU", "operator": "Latest", "value": 30}]}, 0),
    (PodLoad(), None, 0),
], ids=["TestTargetLoadPackingScoring:new node", "TestTargetLoadPackingScoring:hot node",
        "TestTargetLoadPackingScoring:excess utilization returns min score",
        "TestTargetLoadPackingScoring:404 resp from watcher"])
def test_trimaran_target_load_packing_scoring(pod: PodLoad,
                                              response: dict[str, Any] | None,
                                              want: int) -> None:
    """targetloadpacking_test.go TestTargetLoadPackingScoring, through the watcher's JSON as Go
    marshals it (a 404 body is watcher.WatcherMetrics{}: a null NodeMetricsMap)."""
    if response is None:
        body = json.dumps({"timestamp": 0, "window": {"duration": "", "start": 0, "end": 0},
                           "source": "", "data": {"NodeMetricsMap": None}}).encode()
    else:
        body = go_json(response)
    document = parse_watcher_metrics(body, "test")
    assert go_round(target_load_packing_score(pod, NODE_1, document)) == want
