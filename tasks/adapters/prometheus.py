"""Where the pod autoscalers' metric values come from: Prometheus, or a fixed snapshot.

An external query is a metric name, a label selector and an aggregation (or a full PromQL);
`Resource` metrics (cpu, memory) come from cAdvisor's per-container series summed per pod.  No data, NaN or
a Prometheus error is a `MetricUnavailable`: the autoscaler holds and says why (wpa.md §6).
`StaticMetrics` answers the same questions from a JSON file, for `elevator pods plan`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from kube_elevator.tasks.core.documents import load_json_document, read_bytes
from kube_elevator.tasks.core.errors import InputError, redacted

CPU_SERIES = "container_cpu_usage_seconds_total"
MEMORY_SERIES = "container_memory_working_set_bytes"
DEFAULT_RATE_WINDOW = "1m"


class SelectorRequirement(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def operator(self) -> str: ...
    @property
    def values(self) -> Sequence[str] | None: ...


class Selector(Protocol):
    """A metav1.LabelSelector's shape (the WPA's CRD model is one)."""

    @property
    def match_labels(self) -> Mapping[str, str] | None: ...
    @property
    def match_expressions(self) -> Sequence[SelectorRequirement] | None: ...

    def matches(self, labels: Mapping[str, str]) -> bool: ...


class MetricUnavailable(Exception):
    """No usable value: no data, NaN, or the metrics backend failed."""


@dataclass(frozen=True)
class ExternalQuery:
    """One External metric as the WPA names it, and how to aggregate its series."""

    metric_name: str
    selector: Selector
    aggregation: str = "sum"
    promql: str | None = None  # a full query from `elevator.io/query`, used as is

    def to_promql(self) -> str:
        if self.promql:
            return self.promql
        return f"{self.aggregation}({self.metric_name}{label_matchers(self.selector)})"


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def label_matchers(selector: Selector) -> str:
    """A label selector as PromQL matchers: In/NotIn as anchored regexes, Exists as `!=""`."""
    matchers = [f"{k}={_quote(v)}" for k, v in sorted((selector.match_labels or {}).items())]
    for requirement in selector.match_expressions or ():
        alternatives = "|".join(re.escape(v) for v in requirement.values or ())
        matchers.append({
            "In": f"{requirement.key}=~{_quote(alternatives)}",
            "NotIn": f"{requirement.key}!~{_quote(alternatives)}",
            "Exists": f'{requirement.key}!=""',
            "DoesNotExist": f'{requirement.key}=""',
        }[requirement.operator])
    return "{" + ",".join(matchers) + "}"




class MetricsSource(Protocol):
    """What the pod autoscalers ask of a metrics backend."""

    def external_values(self, namespace: str, query: ExternalQuery) -> list[float]:
        """The query's series values (at least one, none NaN), or MetricUnavailable."""
        ...

    def pod_usage(self, namespace: str, resource: str) -> dict[str, float]:
        """Current usage per pod of the namespace: CPU in cores, memory in bytes."""
        ...


def _checked(values: list[float], what: str) -> list[float]:
    if not values:
        raise MetricUnavailable(f"no data for {what}")
    if any(math.isnan(v) for v in values):
        raise MetricUnavailable(f"{what} is NaN")
    if any(math.isinf(v) for v in values):  # a division by zero in the query: no replica count
        raise MetricUnavailable(f"{what} is infinite")
    return values


def _sample_value(sample: Any, promql: str) -> float:
    """An instant vector sample's value (`{"metric": ..., "value": [time, "1.5"]}`); a sample
    of another shape is the metric unavailable this cycle, not a crash of the autoscaler."""
    try:
        return float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        raise MetricUnavailable(f"{promql} answered a sample without a number: "
                                f"{str(sample)[:200]}") from None


class PrometheusMetrics:
    """The metrics source on a Prometheus server, through `prometheus-api-client`."""

    def __init__(self, url: str, rate_window: str = DEFAULT_RATE_WINDOW,
                 timeout: float | None = None, retries: int = 1) -> None:
        """`timeout` bounds connect and each read alike; None: `tasks.core.timeouts`' pair."""
        from prometheus_api_client import PrometheusConnect
        from urllib3.util.retry import Retry

        from kube_elevator.tasks.core.timeouts import timeouts

        self.url = url.rstrip("/")
        self.rate_window = rate_window
        retry = Retry(total=retries, backoff_factor=0.2, status_forcelist=(429, 502, 503, 504),
                      allowed_methods=None)
        # requests takes (connect, read) as well as one number for both.
        limit = (timeout, timeout) if timeout is not None else timeouts().pair
        self._client = PrometheusConnect(url=self.url, retry=retry,
                                         timeout=cast(Any, limit))

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result vector (at Unix time `at`, default now); every failure
        becomes MetricUnavailable."""
        import requests
        from prometheus_api_client.exceptions import PrometheusApiClientException

        try:
            result = self._client.custom_query(
                promql, params={"time": f"{at:.3f}"} if at is not None else None)
        except PrometheusApiClientException as error:
            raise MetricUnavailable(f"Prometheus refused {promql}: {error}") from None
        except (KeyError, TypeError, requests.JSONDecodeError):  # the client reads data.result
            raise MetricUnavailable(f"Prometheus answered {promql} without data.result") \
                from None
        except requests.RequestException as error:
            raise MetricUnavailable(f"Prometheus at {redacted(self.url)} is unreachable: "
                                    f"{type(error).__name__}") from None
        if not isinstance(result, list):
            raise MetricUnavailable(f"{promql} is not an instant vector")
        return result

    def external_values(self, namespace: str, query: ExternalQuery) -> list[float]:
        promql = query.to_promql()
        return _checked([_sample_value(sample, promql) for sample in self.query(promql)], promql)

    def resource_query(self, namespace: str, resource: str) -> str:
        # cAdvisor also reports the pod cgroup (container="") and the pause container: skip both.
        matchers = f'{{namespace={_quote(namespace)},container!="",container!="POD"}}'
        if resource == "cpu":
            return f"sum by (pod) (rate({CPU_SERIES}{matchers}[{self.rate_window}]))"
        if resource == "memory":
            return f"sum by (pod) ({MEMORY_SERIES}{matchers})"
        raise MetricUnavailable(f"resource {resource!r} has no cAdvisor series")

    def pod_usage(self, namespace: str, resource: str) -> dict[str, float]:
        usage = {}
        promql = self.resource_query(namespace, resource)
        for sample in self.query(promql):
            value = _sample_value(sample, promql)
            labels = sample.get("metric")
            pod = labels.get("pod") if isinstance(labels, dict) else None
            if isinstance(pod, str) and pod and math.isfinite(value):
                usage[pod] = value
        return usage


class CycleCache:
    """One cycle's view of a source: each namespace's pod usage is queried once."""

    def __init__(self, source: MetricsSource) -> None:
        self.source = source
        self._usage: dict[tuple[str, str], dict[str, float] | MetricUnavailable] = {}

    def external_values(self, namespace: str, query: ExternalQuery) -> list[float]:
        return self.source.external_values(namespace, query)

    def pod_usage(self, namespace: str, resource: str) -> dict[str, float]:
        key = (namespace, resource)
        if key not in self._usage:
            try:
                self._usage[key] = self.source.pod_usage(namespace, resource)
            except MetricUnavailable as error:
                self._usage[key] = error
        found = self._usage[key]
        if isinstance(found, MetricUnavailable):
            raise found
        return found


# --- a metrics file, for plans --------------------------------------------------------------------

_SERIES_KEY = re.compile(r"^\s*(?P<name>[A-Za-z_:][A-Za-z0-9_:.]*)\s*(?:\{(?P<labels>.*)\})?\s*$")


def parse_series_key(key: str) -> tuple[str, dict[str, str]]:
    """`name{k=v,k2="v2"}` to (name, labels); ValueError if malformed."""
    match = _SERIES_KEY.match(key)
    if match is None:
        raise ValueError(f"{key!r} is not metricName{{key=value,...}}")
    labels: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in (match["labels"] or "").split(","))):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{key!r}: label {part!r} is not key=value")
        labels[name.strip()] = value.strip().strip('"')
    return match["name"], labels


_AGGREGATE: dict[str, Callable[[Sequence[float]], float]] = {
    "sum": sum, "avg": lambda v: sum(v) / len(v), "max": max, "min": min}


def _finite(value: Any) -> bool:
    """A real number a float holds: not a bool, NaN, infinite, or an integer past 1e308."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float (JSON allows any length)
        return False


class StaticMetrics:
    """Values from `--metrics FILE`:
    `{"external": {"<metricName>{<k>=<v>,...}": value}, "pods": {"<ns>/<pod>": {"cpu": cores,
    "memory": bytes}}}`.  External keys are series: a WPA's selector picks the matching ones,
    aggregated like the PromQL would be; a key may also be a WPA's full `elevator.io/query`.
    """

    def __init__(self, external: Mapping[str, float], pods: Mapping[str, Mapping[str, float]],
                 source: str = "") -> None:
        self.source = source
        self.raw_external = dict(external)
        self.series: list[tuple[str, dict[str, str], float]] = []
        problems = []
        for key, value in external.items():
            try:
                name, labels = parse_series_key(key)
            except ValueError as error:
                problems.append(f"{source}: external: {error}")
                continue
            self.series.append((name, labels, float(value)))
        self.pods: dict[tuple[str, str], Mapping[str, float]] = {}
        for key, usage in pods.items():
            namespace, sep, pod = key.partition("/")
            if not sep or not namespace or not pod:
                problems.append(f"{source}: pods: {key!r} is not <namespace>/<pod>")
                continue
            self.pods[(namespace, pod)] = usage
        if problems:
            raise InputError(problems)

    @classmethod
    def load(cls, path: str | Path) -> StaticMetrics:
        """A metrics file (`elevator pods plan --metrics`); one error line per problem."""
        where = str(path)
        document = load_json_document(read_bytes(path), where)  # every file reader's limits
        if not isinstance(document, dict):
            raise InputError([f"{where}: must be an object with `external` and `pods`"])
        unknown = sorted(set(document) - {"external", "pods"})
        if unknown:
            raise InputError([f"{where}: {', '.join(map(str, unknown))}: unknown keys: a "
                              "metrics file has only `external` and `pods`"])
        problems = []
        external = document.get("external") or {}
        pods = document.get("pods") or {}
        if not isinstance(external, dict) or not all(_finite(v) for v in external.values()):
            problems.append(f"{where}: external: must map series to finite numbers")
        if not isinstance(pods, dict) or not all(
                isinstance(u, dict) and all(k in ("cpu", "memory") and _finite(v) and v >= 0
                                            for k, v in u.items())
                for u in pods.values()):
            problems.append(f"{where}: pods: must map <namespace>/<pod> to "
                            '{"cpu": cores, "memory": bytes}')
        if problems:
            raise InputError(problems)
        return cls(external, pods, where)

    def external_values(self, namespace: str, query: ExternalQuery) -> list[float]:
        if query.promql:
            if query.promql not in self.raw_external:
                raise MetricUnavailable(f"no data for {query.promql} in {self.source}")
            return _checked([float(self.raw_external[query.promql])], query.promql)
        found = [value for name, labels, value in self.series
                 if name == query.metric_name and query.selector.matches(labels)]
        what = f"{query.metric_name}{label_matchers(query.selector)}"
        _checked(found, what)
        return [_AGGREGATE[query.aggregation](found)]

    def pod_usage(self, namespace: str, resource: str) -> dict[str, float]:
        return {pod: float(usage[resource]) for (ns, pod), usage in self.pods.items()
                if ns == namespace and resource in usage}


