"""Trimaran's scores against spec/trimaran.md: its worked examples, the upstream Go test tables,
and one test per rule (Go rounding, defaults, missing load, capacity, clamping, no metrics)."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import pytest

from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.load_aware.scoring import (
    BoundPod,
    ContainerLoad,
    LoadVariationRiskBalancingArgs,
    Metric,
    NodeLoad,
    PodLoad,
    ResourceStats,
    TargetLoadPackingArgs,
    WatcherMetrics,
    counts_as_missing,
    extender_priority,
    go_round,
    load_variation_risk_balancing_score,
    node_metrics,
    parse_watcher_metrics,
    predicted_pod_cpu_milli,
    requested_resources,
    resource_data,
    risk_score,
    target_load_packing_score,
)

MiB = 2**20
GiB = 2**30
WINDOW_END = 1_767_225_600


def metric(type_: str, operator: str, value: float) -> dict[str, Any]:
    return {"name": "", "type": type_, "operator": operator, "rollup": "", "value": value}


def document(nodes: dict[str, list[dict[str, Any]]], end: int = WINDOW_END) -> WatcherMetrics:
    return WatcherMetrics.model_validate({
        "timestamp": end, "window": {"duration": "15m", "start": end - 900, "end": end},
        "source": "Prometheus",
        "data": {"NodeMetricsMap": {name: {"metrics": metrics} for name, metrics in nodes.items()}},
    })


def cpu(value: float, operator: str = "AVG") -> dict[str, Any]:
    return metric("CPU", operator, value)


def memory(value: float, operator: str = "AVG") -> dict[str, Any]:
    return metric("Memory", operator, value)


def node(name: str = "node-1", cpu_milli: int = 1000, memory_bytes: int = GiB,
         allocatable_cpu_milli: int | None = None) -> NodeLoad:
    return NodeLoad(name=name, cpu_capacity_milli=cpu_milli,
                    cpu_allocatable_milli=cpu_milli if allocatable_cpu_milli is None
                    else allocatable_cpu_milli,
                    memory_allocatable_bytes=memory_bytes)


EMPTY_POD = PodLoad(name="p")  # st.MakePod().Obj(): no containers, so TLP predicts 0


def tlp(pod: PodLoad, target: NodeLoad, doc: WatcherMetrics | None,
        bound: tuple[BoundPod, ...] = (), **args: Any) -> int:
    return target_load_packing_score(pod, target, doc, bound, TargetLoadPackingArgs(**args))


# --- Go rounding ---------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    (62.5, 63), (2.5, 3), (7.5, 8), (-2.5, -3), (0.5, 1), (1.4999999999999998, 1),
    (0.49999999999999994, 0), (33.333, 33), (-0.4, 0), (100.0, 100),
])
def test_go_round_is_half_away_from_zero(value: float, expected: int) -> None:
    assert go_round(value) == expected


def test_python_round_would_be_wrong_on_the_spec_case() -> None:
    assert round(62.5) == 62 and go_round(62.5) == 63


# --- TargetLoadPacking: worked examples ----------------------------------------------------


def test_kep_three_node_example() -> None:
    """§3: T = 50, 4-core nodes using 1/2/3 cores, a pod predicting 0 → 75 / 100 / 25."""
    doc = document({"a": [cpu(25)], "b": [cpu(50)], "c": [cpu(75)]})
    scores = [tlp(EMPTY_POD, node(name, 4000), doc, target_utilization_percent=50)
              for name in "abc"]
    assert scores == [75, 100, 25]
    assert [extender_priority(s) for s in scores] == [8, 10, 3]  # 7.5 → 8, 2.5 → 3


def test_request_times_multiplier_lands_on_x_5() -> None:
    """§7: request 1000m × 1.5 = 1500m on an idle 10-core node: U = 15 → 62.5 → 63."""
    pod = PodLoad(containers=(ContainerLoad(cpu_request_milli=1000),))
    assert predicted_pod_cpu_milli(pod, TargetLoadPackingArgs()) == 1500
    assert tlp(pod, node(cpu_milli=10_000), document({"node-1": [cpu(0)]})) == 63


@pytest.mark.parametrize(("name", "pod", "utilization", "expected"), [
    ("new node", EMPTY_POD, 0.0, 40),
    ("hot node", EMPTY_POD, 50.0, 33),
    ("excess utilization returns min score",
     PodLoad(containers=(ContainerLoad(cpu_limit_milli=1000, cpu_request_milli=1000),)), 30.0, 0),
])
def test_upstream_tlp_table(name: str, pod: PodLoad, utilization: float, expected: int) -> None:
    doc = document({"node-1": [cpu(utilization, "Latest")]}, end=0)  # Window{} in the Go test
    assert tlp(pod, node(), doc) == expected, name


def test_upstream_tlp_404_from_watcher_scores_min() -> None:
    assert tlp(EMPTY_POD, node(), None) == 0
    assert tlp(EMPTY_POD, node(), WatcherMetrics()) == 0  # NodeMetricsMap never populated


# --- TargetLoadPacking: one rule each ------------------------------------------------------


def test_rises_to_100_at_target_then_drops() -> None:
    doc = document({"node-1": [cpu(40)]})
    assert tlp(EMPTY_POD, node(), doc) == 100  # U == T: the penalty branch needs U > T
    assert tlp(EMPTY_POD, node(), document({"node-1": [cpu(40.5)]})) == 40  # 39.66 → 40
    assert tlp(EMPTY_POD, node(), document({"node-1": [cpu(100)]})) == 0
    assert tlp(EMPTY_POD, node(), document({"node-1": [cpu(0)]})) == 40


def test_over_100_percent_scores_min() -> None:
    pod = PodLoad(containers=(ContainerLoad(cpu_limit_milli=600),))
    assert tlp(pod, node(), document({"node-1": [cpu(50)]})) == 0  # U = 110


def test_prediction_limit_then_request_times_multiplier_then_default() -> None:
    args = TargetLoadPackingArgs(default_requests_cpu_milli=250, default_requests_multiplier=2)
    pod = PodLoad(containers=(
        ContainerLoad(cpu_limit_milli=300, cpu_request_milli=100),  # limit wins: 300
        ContainerLoad(cpu_request_milli=100),                       # 100 × 2 = 200
        ContainerLoad(),                                            # best effort: 250
        ContainerLoad(cpu_limit_milli=0),                           # a set limit of 0 counts
    ), init_containers=(ContainerLoad(cpu_limit_milli=5000),),     # init containers ignored
        overhead_cpu_milli=50)
    assert predicted_pod_cpu_milli(pod, args) == 300 + 200 + 250 + 0 + 50


def test_default_request_and_multiplier_defaults() -> None:
    args = TargetLoadPackingArgs()
    best_effort = PodLoad(containers=(ContainerLoad(), ContainerLoad()))
    assert predicted_pod_cpu_milli(best_effort, args) == 2000
    odd = PodLoad(containers=(ContainerLoad(cpu_request_milli=333),))
    assert predicted_pod_cpu_milli(odd, args) == 500  # 499.5 → 500, Go rounding


def test_target_defaulting() -> None:
    assert TargetLoadPackingArgs(target_utilization_percent=0).target_utilization_percent == 40
    assert TargetLoadPackingArgs(target_utilization_percent=-5).target_utilization_percent == 40
    assert TargetLoadPackingArgs(target_utilization_percent=70).target_utilization_percent == 70


def test_a_target_above_100_percent_falls_back_to_40() -> None:
    """Ours (Go keeps it): with T = 1000 every node scored above 100, clamped to the top."""
    assert TargetLoadPackingArgs(target_utilization_percent=100).target_utilization_percent == 100
    for target in (101, 1000):
        args = TargetLoadPackingArgs(target_utilization_percent=target)
        assert args.target_utilization_percent == 40
    assert tlp(EMPTY_POD, node(), document({"node-1": [cpu(20)]}),
               target_utilization_percent=1000) == 70  # 60 × 20 / 40 + 40


@pytest.mark.parametrize("multiplier", [0.0, -1.0, 1000.5, 1e308, math.inf, math.nan])
def test_requests_multiplier_outside_0_to_1000_is_refused(multiplier: float) -> None:
    with pytest.raises(ValueError, match=r"default_requests_multiplier must be a number in "
                                         r"\(0, 1000\]"):
        TargetLoadPackingArgs(default_requests_multiplier=multiplier)


def test_requests_multiplier_range_ends() -> None:
    for multiplier in (1e-9, 1000.0):
        assert TargetLoadPackingArgs(
            default_requests_multiplier=multiplier).default_requests_multiplier == multiplier


def test_capacity_not_allocatable() -> None:
    doc = document({"node-1": [cpu(20)]})
    # 20 % of 4000m capacity; allocatable 2000m is ignored: U = 20 → 60*20/40 + 40 = 70.
    assert tlp(EMPTY_POD, node(cpu_milli=4000, allocatable_cpu_milli=2000), doc) == 70


def test_zero_capacity_counts_as_idle() -> None:
    assert tlp(EMPTY_POD, node(cpu_milli=0), document({"node-1": [cpu(90)]})) == 40


def test_cpu_metric_choice() -> None:
    # The LAST CPU metric with AVG or Latest; STD, "" and memory are not the utilisation.
    doc = document({"node-1": [cpu(10), cpu(99, "STD"), cpu(20, "Latest"), cpu(30, ""),
                               memory(99)]})
    assert tlp(EMPTY_POD, node(), doc) == 70  # U = 20
    assert tlp(EMPTY_POD, node(), document({"node-1": [memory(10), cpu(5, "STD")]})) == 0
    assert tlp(EMPTY_POD, node(), document({"node-1": [cpu(10, "")]})) == 0


def test_no_metrics_for_the_node_scores_min() -> None:
    doc = document({"other": [cpu(10)], "empty": []})
    assert tlp(EMPTY_POD, node("absent"), doc) == 0
    assert tlp(EMPTY_POD, node("empty"), doc) == 0
    assert node_metrics(doc, "empty") is None and node_metrics(doc, "absent") is None


@pytest.mark.parametrize(("bound_at", "missing"), [
    (WINDOW_END + 5, True),      # bound after the window's end
    (WINDOW_END, True),          # 0 s before the end
    (WINDOW_END - 59, True),     # less than 60 s before: the agent has not reported it
    (WINDOW_END - 59.5, False),  # Go compares whole seconds: floor → 60 s before
    (WINDOW_END - 60, False),
    (WINDOW_END - 600, False),
])
def test_when_a_bound_pod_counts_as_missing(bound_at: float, missing: bool) -> None:
    assert counts_as_missing(bound_at, WINDOW_END) is missing


def test_recently_bound_pods_add_missing_load() -> None:
    doc = document({"node-1": [cpu(0)]})
    target = node(cpu_milli=4000)
    assert tlp(EMPTY_POD, target, doc) == 40
    best_effort = PodLoad(uid="u1", containers=(ContainerLoad(),))  # predicted 1000m
    recent = BoundPod(best_effort, WINDOW_END - 10)
    old = BoundPod(best_effort, WINDOW_END - 120)
    # U = 100 × 1000 / 4000 = 25 → 60 × 25 / 40 + 40 = 77.5 → 78; the old pod is in the metrics.
    assert tlp(EMPTY_POD, target, doc, (recent, old)) == 78
    with_overhead = BoundPod(PodLoad(containers=(ContainerLoad(cpu_limit_milli=900),),
                                     overhead_cpu_milli=100), WINDOW_END + 30)
    assert tlp(EMPTY_POD, target, doc, (with_overhead,)) == 78


# --- LoadVariationRiskBalancing ------------------------------------------------------------


@pytest.mark.parametrize(("name", "margin", "sensitivity", "stats", "expected"), [
    ("valid data", 1, 1, (100, 10, 40, 36), 57),
    ("zero capacity", 1, 2, (0, 10, 40, 36), 0),
    ("negative usedAvg", 1, 2, (100, 10, -40, 36), 65),
    ("large usedAvg", 1, 2, (100, 10, 200, 36), 20),
    ("negative usedStdev", 1, 2, (100, 10, 40, -36), 75),
    ("large usedStdev", 1, 2, (100, 10, 40, 120), 25),
    ("negative margin", -1, 1, (100, 10, 40, 36), 75),
    ("negative sensitivity", 1, -1, (100, 10, 40, 36), 57),
    ("zero sensitivity", 1, 0, (100, 10, 40, 36), 75),
])
def test_upstream_compute_score_table(name: str, margin: float, sensitivity: float,
                                      stats: tuple[float, float, float, float],
                                      expected: int) -> None:
    capacity, requested, average, stdev = stats
    score = risk_score(ResourceStats(capacity, requested, average, stdev), margin, sensitivity)
    assert go_round(score) == expected, name


@pytest.mark.parametrize(("name", "pod", "metrics", "expected"), [
    ("new node", EMPTY_POD, [cpu(50)], 75),
    ("hot node", EMPTY_POD, [cpu(100)], 50),
    ("average and stDev metrics",
     PodLoad(containers=(ContainerLoad(200, 200, 256 * MiB),),
             init_containers=(ContainerLoad(cpu_request_milli=0, memory_request_bytes=0),)),
     [cpu(30), cpu(16, "STD")], 67),
    ("CPU and Memory metrics",
     PodLoad(containers=(ContainerLoad(100, 100, 512 * MiB),)),
     [cpu(40), cpu(16, "STD"), memory(50), memory(10, "STD")], 45),
    ("pick worst case: CPU or Memory",
     PodLoad(containers=(ContainerLoad(100, 100, 512 * MiB),)),
     [cpu(80), cpu(20, "STD"), memory(25), memory(15, "STD")], 45),
])
def test_upstream_lvrb_table(name: str, pod: PodLoad, metrics: list[dict[str, Any]],
                             expected: int) -> None:
    """The Go TestScore table: 1000m / 1Gi nodes, margin 1, sensitivity 1."""
    doc = document({"node-1": metrics}, end=0)
    assert load_variation_risk_balancing_score(pod, node(), doc) == expected, name


def test_lvrb_example_landing_on_x_5() -> None:
    # mu = 0.75, sigma = 0: (1 - 0.375) × 100 = 62.5 → 63.
    assert load_variation_risk_balancing_score(EMPTY_POD, node(),
                                               document({"node-1": [cpu(75)]})) == 63


def test_lvrb_sensitivity_2_takes_the_square_root() -> None:
    # sigma = sqrt(0.16) = 0.4 → risk (0.5 + 0.4) / 2 = 0.45 → 55.
    doc = document({"node-1": [cpu(40), cpu(16, "STD")]})
    pod = PodLoad(containers=(ContainerLoad(cpu_request_milli=100),))
    args = LoadVariationRiskBalancingArgs(safe_variance_sensitivity=2)
    assert load_variation_risk_balancing_score(pod, node(), doc, args) == 55


def test_lvrb_uses_allocatable_and_requests_without_defaults() -> None:
    doc = document({"node-1": [cpu(50)]})
    # Allocatable 2000m (capacity 4000m ignored): 1000m used + 500m requested → mu 0.75 → 63.
    pod = PodLoad(containers=(ContainerLoad(cpu_request_milli=500),))
    assert load_variation_risk_balancing_score(
        pod, node(cpu_milli=4000, allocatable_cpu_milli=2000), doc) == 63
    # A best-effort pod requests nothing (no default as in TLP): mu 0.5 → 75.
    best_effort = PodLoad(containers=(ContainerLoad(cpu_limit_milli=4000),))
    assert load_variation_risk_balancing_score(
        best_effort, node(cpu_milli=4000, allocatable_cpu_milli=2000), doc) == 75


def test_requested_resources_take_init_containers_and_overhead() -> None:
    pod = PodLoad(
        containers=(ContainerLoad(cpu_request_milli=100, memory_request_bytes=100),
                    ContainerLoad(cpu_request_milli=200)),
        init_containers=(ContainerLoad(cpu_request_milli=250, memory_request_bytes=50),
                         ContainerLoad(memory_request_bytes=400)),
        overhead_cpu_milli=10, overhead_memory_bytes=1)
    request = requested_resources(pod)
    assert (request.cpu_milli, request.memory_bytes) == (310, 401)


def test_resource_data_operators() -> None:
    def m(operator: str, value: float) -> Metric:
        return Metric(type="CPU", operator=operator, value=value)

    assert resource_data([m("", 10), m("AVG", 20), m("", 30)], "CPU") == (20, 0, True)
    assert resource_data([m("Latest", 10), m("STD", 5)], "CPU") == (10, 5, True)
    assert resource_data([m("STD", 5)], "CPU") == (0, 5, True)  # valid, average 0
    assert resource_data([m("AVG", 5)], "Memory") == (0, 0, False)


def test_lvrb_one_valid_resource_and_none() -> None:
    pod = PodLoad(containers=(ContainerLoad(memory_request_bytes=256 * MiB),))
    # Memory only: (256 + 256) / 1024 = 0.5 → 75; CPU has no data, so it does not count.
    assert load_variation_risk_balancing_score(
        pod, node(), document({"node-1": [memory(25)]})) == 75
    assert load_variation_risk_balancing_score(
        pod, node(), document({"node-1": [metric("Storage", "AVG", 5)]})) == 0
    assert load_variation_risk_balancing_score(pod, node("absent"), document({})) == 0
    assert load_variation_risk_balancing_score(pod, node(), None) == 0


def test_lvrb_args_defaulting() -> None:
    args = LoadVariationRiskBalancingArgs(safe_variance_margin=-2, safe_variance_sensitivity=-1)
    assert (args.safe_variance_margin, args.safe_variance_sensitivity) == (1, 1)
    kept = LoadVariationRiskBalancingArgs(safe_variance_margin=0, safe_variance_sensitivity=0)
    assert (kept.safe_variance_margin, kept.safe_variance_sensitivity) == (0, 0)


# --- the extender's range ------------------------------------------------------------------


@pytest.mark.parametrize(("score", "priority"), [
    (0, 0), (4, 0), (5, 1), (25, 3), (33, 3), (75, 8), (100, 10), (-7, 0), (150, 10),
])
def test_extender_priority(score: int, priority: int) -> None:
    assert extender_priority(score) == priority


# --- the watcher document ------------------------------------------------------------------

SPEC_EXAMPLE = """{"timestamp":1767225600,"window":{"duration":"15m","start":1767224700,
"end":1767225600},"source":"Prometheus","data":{"NodeMetricsMap":{"worker-1":{"metrics":[
{"name":"instance:node_cpu:ratio","type":"CPU","operator":"AVG","rollup":"15m","value":32.5},
{"name":"instance:node_cpu:ratio","type":"CPU","operator":"STD","rollup":"15m","value":6.1},
{"name":"instance:node_memory_utilisation:ratio","type":"Memory","operator":"AVG","rollup":"15m",
"value":58.0},
{"name":"instance:node_memory_utilisation:ratio","type":"Memory","operator":"STD","rollup":"15m",
"value":1.2}],"tags":{},"metadata":{"dataCenter":""}}}}}"""


def test_spec_example_round_trips_and_scores() -> None:
    doc = parse_watcher_metrics(SPEC_EXAMPLE, "http://watcher/watcher")
    assert doc.to_json() == json.loads(SPEC_EXAMPLE)
    worker = node("worker-1", cpu_milli=4000, memory_bytes=16 * GiB)
    assert tlp(EMPTY_POD, worker, doc) == 89  # U = 32.5 → 60 × 32.5 / 40 + 40 = 88.75
    # CPU: (1 - (0.325 + 0.061) / 2) × 100 = 80.7; memory: (1 - (0.58 + 0.012) / 2) × 100 = 70.4.
    assert load_variation_risk_balancing_score(EMPTY_POD, worker, doc) == 70
    only = doc.only_host("worker-1")
    assert only is not None and only.to_json() == doc.to_json()
    assert doc.only_host("worker-2") is None


def test_outdated_kep_format_decodes_to_no_scores() -> None:
    kep = {"timestamp": 1, "window": {"duration": "15m", "start": 0, "end": 1},
           "source": "x", "data": {"worker-1": {"metrics": [
               {"name": "cpu", "type": "cpu", "rollup": "AVG", "value": 50}]}}}
    doc = parse_watcher_metrics(json.dumps(kep), "http://watcher/watcher")
    assert tlp(EMPTY_POD, node("worker-1"), doc) == 0


@pytest.mark.parametrize(("payload", "problem"), [
    ('{"data": {"NodeMetricsMap": {"w1": {"metrics": [{"value": "32"}]}}}}',
     "http://w:2020/watcher: data.NodeMetricsMap.w1.metrics[0].value: Input should be a valid "
     "number"),
    ('{"window": {"end": "soon"}}', "http://w:2020/watcher: window.end: Input should be a valid "
     "integer"),
    ('{"data": {"NodeMetricsMap": {"w1": {"metrics": [{"value": NaN}]}}}}',
     "http://w:2020/watcher"),
    ("[1, 2]", "http://w:2020/watcher: Input should be an object"),
    ("not json", "http://w:2020/watcher: Invalid JSON"),
])
def test_malformed_watcher_answer_names_url_and_key_path(payload: str, problem: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_watcher_metrics(payload, "http://w:2020/watcher")
    assert caught.value.problems[0].startswith(problem), caught.value.problems


def test_a_value_just_past_0_100_is_the_bound_and_a_broken_one_leaves_the_node_without(
        caplog: pytest.LogCaptureFixture) -> None:
    """A real Prometheus answers a saturated node's CPU ratio with 1.0025 (scrape jitter): the
    node is busy, not unknown (§4 clamps the load to the capacity). A value far outside is a
    broken answer: the node is scored as one without metrics, the minimum."""
    payload = json.dumps({"data": {"NodeMetricsMap": {
        "ok": {"metrics": [cpu(0), memory(100), metric("Storage", "AVG", -7)]},
        "negative": {"metrics": [cpu(25), memory(-0.5)]},
        "over": {"metrics": [cpu(100.25), cpu(0.2, "STD")]},
        "below": {"metrics": [cpu(-20)]},
        "above": {"metrics": [cpu(120, "STD")]},
        "huge": {"metrics": [cpu(-1e308)]},
    }}})
    with caplog.at_level(logging.WARNING, "kube_elevator.tasks.load_aware.scoring"):
        doc = parse_watcher_metrics(payload, "http://w:2020/watcher")
    # 0 and 100 are percentages; a type the scores do not read only has to be finite.
    ok = node_metrics(doc, "ok")
    assert ok is not None and [m.value for m in ok] == [0, 100, -7]
    assert [m.value for m in node_metrics(doc, "negative") or ()] == [25, 0]
    assert [m.value for m in node_metrics(doc, "over") or ()] == [100, 0.2]
    assert tlp(EMPTY_POD, node("over"), doc) == 0  # past the 40 % target: the lowest score
    assert load_variation_risk_balancing_score(EMPTY_POD, node("over"), doc) == \
        load_variation_risk_balancing_score(EMPTY_POD, node("full"), parse_watcher_metrics(
            json.dumps({"data": {"NodeMetricsMap": {"full": {"metrics": [
                cpu(100), cpu(0.2, "STD")]}}}}), "w"))
    for host in ("below", "above", "huge"):
        assert node_metrics(doc, host) is None
        assert tlp(EMPTY_POD, node(host), doc) == 0
        assert load_variation_risk_balancing_score(EMPTY_POD, node(host), doc) == 0
    assert caplog.messages == [
        "http://w:2020/watcher: data.NodeMetricsMap.below.metrics[0].value: -20.0 is not a "
        "percentage (0..100): ignoring the metrics of node below",
        "http://w:2020/watcher: data.NodeMetricsMap.above.metrics[0].value: 120.0 is not a "
        "percentage (0..100): ignoring the metrics of node above",
        "http://w:2020/watcher: data.NodeMetricsMap.huge.metrics[0].value: -1e+308 is not a "
        "percentage (0..100): ignoring the metrics of node huge",
    ]


def test_an_in_range_document_is_returned_unchanged(caplog: pytest.LogCaptureFixture) -> None:
    doc = parse_watcher_metrics(SPEC_EXAMPLE, "http://watcher/watcher")
    assert doc.to_json() == json.loads(SPEC_EXAMPLE)
    assert caplog.messages == []
