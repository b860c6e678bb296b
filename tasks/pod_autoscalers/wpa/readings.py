"""A WPA's metric readings: each metric of the object asked of a metrics source (wpa.md §1).

An `External` metric `metricName{matchLabels}` becomes the PromQL `sum(metricName{k="v",...})`
(or `avg`/`max`/`min` with `elevator.io/aggregation`; a full PromQL in `elevator.io/query`
replaces it); a `Resource` metric is the per-pod usage of the pods its selector picks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kube_elevator.tasks.adapters.prometheus import ExternalQuery, MetricsSource, MetricUnavailable
from kube_elevator.tasks.pod_autoscalers.wpa.crd import LabelSelector, milli_of
from kube_elevator.tasks.pod_autoscalers.wpa.proposal import MetricReading
from kube_elevator.tasks.pod_autoscalers.wpa.validate import (
    AGGREGATION_ANNOTATION,
    MetricRule,
    ParsedWatermark,
    metric_query_override,
)


def external_query(metric: MetricRule, annotations: Mapping[str, str]) -> ExternalQuery:
    return ExternalQuery(metric.name, metric.selector,
                         annotations.get(AGGREGATION_ANNOTATION, "sum"),
                         metric_query_override(annotations, metric))


def read_watermark_metrics(parsed: ParsedWatermark, source: MetricsSource,
                           pods_selected_by: Callable[[LabelSelector], Sequence[str]]
                           ) -> list[MetricReading]:
    """One reading per metric of a valid WPA, in milli-units (wpa.md §1).

    `pods_selected_by(selector)` names the namespace's pods a Resource metric's
    `metricSelector` picks (the metrics API's selection, by pod labels).
    """
    assert parsed.rules is not None
    readings = []
    for metric in parsed.rules.metrics:
        try:
            if metric.type == "External":
                values = source.external_values(parsed.namespace,
                                                external_query(metric, parsed.annotations))
                readings.append(MetricReading(external_milli=tuple(milli_of(v) for v in values)))
            else:
                usage = source.pod_usage(parsed.namespace, metric.name)
                selected = set(pods_selected_by(metric.selector))
                readings.append(MetricReading(pod_usage_milli={
                    pod: milli_of(value) for pod, value in usage.items() if pod in selected}))
        except MetricUnavailable as error:
            readings.append(MetricReading(error=str(error)))
    return readings
