"""The pod autoscalers' Prometheus adapter against answers a real server or a proxy may give:
a malformed sample, a non-finite value or a body without `data` makes the metric unavailable
this cycle (the autoscaler holds, its condition says why), never a crash of the cycle."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from kube_elevator.flows.cli.services import ServiceThread
from kube_elevator.tasks.adapters.prometheus import ExternalQuery, MetricUnavailable, PrometheusMetrics
from kube_elevator.tasks.pod_autoscalers.wpa.crd import LabelSelector

QUEUE = ExternalQuery("queue_depth", LabelSelector.model_validate({}))


class Answers:
    """A Prometheus whose next answer to /api/v1/query is set by the test."""

    def __init__(self) -> None:
        self.body: Any = None

    async def query(self, request: Request) -> Response:
        return JSONResponse(self.body)

    def vector(self, *samples: Any) -> None:
        self.body = {"status": "success", "data": {"resultType": "vector",
                                                   "result": list(samples)}}


@pytest.fixture
def prometheus() -> Iterator[tuple[Answers, PrometheusMetrics]]:
    answers = Answers()
    app = Starlette(routes=[Route("/api/v1/query", answers.query, methods=["GET", "POST"])])
    with ServiceThread(app, name="answers", bind_option=None) as service:
        yield answers, PrometheusMetrics(service.url, retries=0, timeout=5)


def sample(value: Any, pod: str = "web-0") -> dict[str, Any]:
    return {"metric": {"pod": pod}, "value": [1.8e9, value]}


@pytest.mark.parametrize("bad", [
    {"metric": {"pod": "web-0"}},  # no value
    {"metric": {"pod": "web-0"}, "value": [1.8e9]},  # no number in it
    sample("abc"), "web-0", sample(None)])
def test_a_malformed_sample_makes_the_metric_unavailable(
        prometheus: tuple[Answers, PrometheusMetrics], bad: Any) -> None:
    answers, source = prometheus
    answers.vector(sample("0.5", "web-1"), bad)
    with pytest.raises(MetricUnavailable, match="answered a sample without a number"):
        source.pod_usage("shop", "cpu")
    with pytest.raises(MetricUnavailable, match="answered a sample without a number"):
        source.external_values("shop", QUEUE)


def test_usage_keeps_the_finite_samples_and_an_infinite_external_value_holds(
        prometheus: tuple[Answers, PrometheusMetrics]) -> None:
    answers, source = prometheus
    answers.vector(sample("0.5", "web-0"), sample("+Inf", "web-1"), sample("NaN", "web-2"),
                   {"metric": "web-3", "value": [1.8e9, "1"]})
    assert source.pod_usage("shop", "cpu") == {"web-0": 0.5}
    answers.vector(sample("+Inf"))
    with pytest.raises(MetricUnavailable, match="is infinite"):
        source.external_values("shop", QUEUE)


@pytest.mark.parametrize("body", [{"status": "success"}, {"status": "success", "data": 5}, []])
def test_an_answer_without_data_makes_the_metric_unavailable(
        prometheus: tuple[Answers, PrometheusMetrics], body: Any) -> None:
    answers, source = prometheus
    answers.body = body
    with pytest.raises(MetricUnavailable):
        source.pod_usage("shop", "cpu")
