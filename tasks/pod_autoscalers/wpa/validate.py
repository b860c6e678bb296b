"""The WPA's defaults and validation (wpa.md §2): every problem, in the controller's words."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from kube_elevator.tasks.core.quantity import canonical_quantity
from kube_elevator.tasks.pod_autoscalers.wpa.crd import (
    ALGORITHMS,
    CONVERGE_TYPES,
    DEFAULT_ALGORITHM,
    DEFAULT_DOWNSCALE_FORBIDDEN_WINDOW_SECONDS,
    DEFAULT_MIN_REPLICAS,
    DEFAULT_MODULO,
    DEFAULT_SCALE_DOWN_LIMIT_FACTOR,
    DEFAULT_SCALE_UP_LIMIT_FACTOR,
    DEFAULT_TOLERANCE_MILLI,
    DEFAULT_UPSCALE_FORBIDDEN_WINDOW_SECONDS,
    RESOURCE_NAMES,
    SKIP_OWNER_CHECK_ANNOTATION,
    CrossVersionObjectReference,
    ExternalMetricSource,
    LabelSelector,
    MetricSpec,
    Quantity,
    ResourceMetricSource,
    WatermarkPodAutoscalerObject,
    go_map,
    milli_value,
    validation_problems,
)

# --- defaults and validation (§2) -------------------------------------------------------------


@dataclass(frozen=True)
class MetricRule:
    """One metric after validation, watermarks filled in (fillMissingWatermark, §2.1)."""

    index: int
    type: Literal["External", "Resource"]
    name: str  # metricName, or the resource name (cpu, memory)
    selector: LabelSelector
    high_milli: int
    low_milli: int

    @property
    def display_name(self) -> str:
        """How upstream names the metric in reasons: `name{map[k:v]}`."""
        return f"{self.name}{{{go_map(self.selector.match_labels)}}}"


@dataclass(frozen=True)
class WatermarkRules:
    """A WPA's spec with §2's defaults applied, in the units the arithmetic uses."""

    target: CrossVersionObjectReference
    min_replicas: int
    max_replicas: int
    algorithm: str
    tolerance_milli: int
    scale_up_limit_factor_milli: int
    scale_down_limit_factor_milli: int
    upscale_forbidden_window_seconds: int
    downscale_forbidden_window_seconds: int
    upscale_delay_above_watermark_seconds: int
    downscale_delay_below_watermark_seconds: int
    modulo: int
    converge_towards_watermark: str
    min_available_replica_percentage: int
    readiness_delay_seconds: int
    dry_run: bool
    tolerate_zero: bool
    metrics: tuple[MetricRule, ...]
    skip_owner_check: bool = False


class ObjectView:
    """Read-only views of a raw API object, for the parsed autoscaler objects."""

    raw: Mapping[str, Any]

    @property
    def annotations(self) -> Mapping[str, str]:
        return (self.raw.get("metadata") or {}).get("annotations") or {}

    @property
    def status(self) -> Mapping[str, Any]:
        status = self.raw.get("status")
        return status if isinstance(status, Mapping) else {}


@dataclass(frozen=True)
class ParsedWatermark(ObjectView):
    """A WPA object read from the cluster: its rules, or every reason it is invalid."""

    namespace: str
    name: str
    raw: Mapping[str, Any]
    rules: WatermarkRules | None
    problems: tuple[str, ...]

    @property
    def target_name(self) -> str:
        ref = ((self.raw.get("spec") or {}).get("scaleTargetRef") or {})
        return str(ref.get("name", "")) if isinstance(ref, Mapping) else ""

    @property
    def target_kind(self) -> str:
        ref = ((self.raw.get("spec") or {}).get("scaleTargetRef") or {})
        return str(ref.get("kind", "")) if isinstance(ref, Mapping) else ""


def _quantity_milli(value: Quantity | None, path: str, problems: list[str]) -> int | None:
    if value is None:
        return None
    try:
        return milli_value(value)
    except ValueError:
        problems.append(f"{path}: {value!r} is not a Kubernetes quantity")
        return None


def _metric_rule(index: int, metric: MetricSpec, problems: list[str]) -> MetricRule | None:
    """checkWPAMetricsValidity for one metric, then fillMissingWatermark."""
    path = f"spec.metrics[{index}]"
    source: ExternalMetricSource | ResourceMetricSource | None
    if metric.type == "External":
        source, where, name = metric.external, f"{path}.external", (
            metric.external.metric_name if metric.external else "")
        if source is None:
            problems.append(f"{path}: metric.External is nil while metric.Type is 'External'")
            return None
        if not name:
            problems.append(f"{where}.metricName: required")
    elif metric.type == "Resource":
        source, where, name = metric.resource, f"{path}.resource", (
            metric.resource.name if metric.resource else "")
        if source is None:
            problems.append(f"{path}: metric.Resource is nil while metric.Type is 'Resource'")
            return None
        if name not in RESOURCE_NAMES:
            problems.append(f"{where}.name: {name!r} is not served: use cpu or memory")
    else:
        problems.append(f"{path}.type: incorrect metric.Type: '{metric.type}' "
                        "(External or Resource)")
        return None
    before = len(problems)
    high = _quantity_milli(source.high_watermark, f"{where}.highWatermark", problems)
    low = _quantity_milli(source.low_watermark, f"{where}.lowWatermark", problems)
    if source.high_watermark is None and source.low_watermark is None:
        problems.append(f"{where}: Watermarks are not set correctly: set highWatermark, "
                        "lowWatermark or both")
    if source.metric_selector is None:
        kind = "External" if metric.type == "External" else "Resource"
        problems.append(f"{where}.metricSelector: Missing Labels for the {kind} metric {name}")
    else:
        problems.extend(source.metric_selector.problems(f"{where}.metricSelector"))
    if high is not None and low is not None and high < low:
        # Upstream's text says "strictly" but equal watermarks are accepted (§2.1).
        problems.append(f"{where}: Low WaterMark of {metric.type} metric {name}"
                        f"{{{go_map((source.metric_selector or LabelSelector()).match_labels)}}} "
                        "has to be strictly inferior to the High Watermark "
                        f"(high {source.high_watermark}, low {source.low_watermark})")
    high = high if high is not None else low  # fillMissingWatermark
    low = low if low is not None else high
    if high is not None and high <= 0:
        # Our rule: proposals divide by the high watermark (§3), so it must be positive.
        problems.append(f"{where}.highWatermark: must be positive")
    if len(problems) > before or high is None or low is None:
        return None
    return MetricRule(index, "External" if metric.type == "External" else "Resource", name,
                      source.metric_selector or LabelSelector(), high, low)


def _shown(quantity: Quantity | None) -> str:
    """A quantity as Go's `%v` prints a resource.Quantity: its canonical String()."""
    if quantity is None:
        return "0"
    text = quantity if isinstance(quantity, str) else repr(quantity)
    try:
        return canonical_quantity(text)
    except ValueError:
        return text


def _default(value: int | None, default: int) -> int:
    """§2 defaulting quirk: zero means unset, so 0 cannot be expressed for these fields."""
    return value or default


def parse_watermark(obj: Mapping[str, Any]) -> ParsedWatermark:
    """Read a WPA, apply §2's defaults and check it; every problem names its key path."""
    metadata = obj.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "") if isinstance(metadata, Mapping) else ""
    name = str(metadata.get("name") or "") if isinstance(metadata, Mapping) else ""
    try:
        model = WatermarkPodAutoscalerObject.model_validate(obj)
    except ValidationError as error:
        return ParsedWatermark(namespace, name, obj, None, tuple(validation_problems(error)))
    spec = model.spec
    problems: list[str] = []
    ref = spec.scale_target_ref
    if not ref.kind or not ref.name:
        problems.append("spec.scaleTargetRef: the Spec.ScaleTargetRef should be populated, "
                        f"currently Kind:{ref.kind} and/or Name:{ref.name} are not set properly")
    min_replicas = DEFAULT_MIN_REPLICAS if spec.min_replicas is None else spec.min_replicas
    max_replicas = spec.max_replicas or 0
    if min_replicas < 1:
        problems.append(f"spec.minReplicas: must be at least 1 (CRD minimum), not {min_replicas}")
    if max_replicas < min_replicas:
        problems.append("spec.maxReplicas: watermark pod autoscaler requires the minimum number "
                        "of replicas to be configured and inferior to the maximum "
                        f"(minReplicas {min_replicas}, maxReplicas {max_replicas})")
    algorithm = spec.algorithm or DEFAULT_ALGORITHM
    if algorithm not in ALGORITHMS:
        # Upstream treats any other value as "absolute"; kube-elevator rejects it (issue 7).
        problems.append(f"spec.algorithm: {algorithm!r} is not an algorithm: use absolute or "
                        "average")
    tolerance = _quantity_milli(spec.tolerance, "spec.tolerance", problems)
    tolerance = _default(tolerance, DEFAULT_TOLERANCE_MILLI)
    # Upstream's CheckWPAValidity messages, word for word: `%v` of a Quantity is its canonical
    # String() ("5000m" prints "5"), and the percentages are MilliValue()/10 and /1000.
    if not 0 <= tolerance <= 1000:
        problems.append(f"spec.tolerance: tolerance should be set as a quantity between 0 and 1, "
                        f"currently set to : {_shown(spec.tolerance)}, which is "
                        f"{tolerance / 10:.0f}%")
    up = _quantity_milli(spec.scale_up_limit_factor, "spec.scaleUpLimitFactor", problems)
    up = DEFAULT_SCALE_UP_LIMIT_FACTOR * 1000 if up is None else up
    if up < 0:
        problems.append("spec.scaleUpLimitFactor: scaleuplimitfactor should be set as a positive "
                        f"quantity, currently set to : {_shown(spec.scale_up_limit_factor)}, "
                        f"which could yield a {up / 1000:.0f}% growth")
    down = _quantity_milli(spec.scale_down_limit_factor, "spec.scaleDownLimitFactor", problems)
    down = DEFAULT_SCALE_DOWN_LIMIT_FACTOR * 1000 if down is None else down
    if not 0 <= down < 100_000:
        problems.append("spec.scaleDownLimitFactor: scaledownlimitfactor should be set as a "
                        "quantity between 0 and 100 (exc.), currently set to : "
                        f"{_shown(spec.scale_down_limit_factor)}, which could yield a "
                        f"{down / 1000:.0f}% decrease")
    for key, value, minimum in (
            ("upscaleForbiddenWindowSeconds", spec.upscale_forbidden_window_seconds, 0),
            ("downscaleForbiddenWindowSeconds", spec.downscale_forbidden_window_seconds, 0),
            ("upscaleDelayAboveWatermarkSeconds", spec.upscale_delay_above_watermark_seconds, 0),
            ("downscaleDelayBelowWatermarkSeconds", spec.downscale_delay_below_watermark_seconds,
             0),
            ("replicaScalingAbsoluteModulo", spec.replica_scaling_absolute_modulo, 1),
            ("readinessDelaySeconds", spec.readiness_delay_seconds, 0),
            ("minAvailableReplicaPercentage", spec.min_available_replica_percentage, 0)):
        if value is not None and value < minimum:
            problems.append(f"spec.{key}: must be at least {minimum}, not {value}")
    if (spec.min_available_replica_percentage or 0) > 100:
        problems.append("spec.minAvailableReplicaPercentage: must be at most 100 (CRD maximum)")
    if spec.converge_towards_watermark not in CONVERGE_TYPES:
        problems.append(f"spec.convergeTowardsWatermark: {spec.converge_towards_watermark!r} "
                        "must be highwatermark or lowwatermark")
    if spec.recommender is not None:
        problems.append("spec.recommender: recommender mode is not supported by kube-elevator "
                        "(use metrics)" + ("; it may not be combined with metrics"
                                           if spec.metrics else ""))
    rules_metrics = []
    if not spec.metrics and spec.recommender is None:
        problems.append("spec.metrics: at least one metric is required")
    for index, metric in enumerate(spec.metrics or ()):
        rule = _metric_rule(index, metric, problems)
        if rule is not None:
            rules_metrics.append(rule)
    annotations = model.metadata.annotations or {}
    problems.extend(annotation_problems(annotations, rules_metrics))
    if problems:
        return ParsedWatermark(namespace, name, obj, None, tuple(problems))
    rules = WatermarkRules(
        target=ref,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        algorithm=algorithm,
        tolerance_milli=tolerance,
        scale_up_limit_factor_milli=up,
        scale_down_limit_factor_milli=down,
        upscale_forbidden_window_seconds=_default(
            spec.upscale_forbidden_window_seconds, DEFAULT_UPSCALE_FORBIDDEN_WINDOW_SECONDS),
        downscale_forbidden_window_seconds=_default(
            spec.downscale_forbidden_window_seconds, DEFAULT_DOWNSCALE_FORBIDDEN_WINDOW_SECONDS),
        upscale_delay_above_watermark_seconds=spec.upscale_delay_above_watermark_seconds or 0,
        downscale_delay_below_watermark_seconds=spec.downscale_delay_below_watermark_seconds or 0,
        modulo=_default(spec.replica_scaling_absolute_modulo, DEFAULT_MODULO),
        converge_towards_watermark=spec.converge_towards_watermark,
        min_available_replica_percentage=spec.min_available_replica_percentage or 0,
        readiness_delay_seconds=spec.readiness_delay_seconds or 0,
        dry_run=spec.dry_run,
        tolerate_zero=spec.tolerate_zero,
        metrics=tuple(rules_metrics),
        # §2.2: exactly "true".
        skip_owner_check=annotations.get(SKIP_OWNER_CHECK_ANNOTATION) == "true",
    )
    return ParsedWatermark(namespace, name, obj, rules, ())


# kube-elevator's own annotations: how an External metric becomes PromQL (tasks/adapters/prometheus.py).
AGGREGATION_ANNOTATION = "elevator.io/aggregation"
QUERY_ANNOTATION = "elevator.io/query"
AGGREGATIONS = ("sum", "avg", "max", "min")


def annotation_problems(annotations: Mapping[str, str],
                        metrics: Sequence[MetricRule]) -> list[str]:
    problems = []
    aggregation = annotations.get(AGGREGATION_ANNOTATION)
    if aggregation is not None and aggregation not in AGGREGATIONS:
        problems.append(f"metadata.annotations[{AGGREGATION_ANNOTATION}]: {aggregation!r} must "
                        "be one of avg, max, min, sum")
    external = [m for m in metrics if m.type == "External"]
    if QUERY_ANNOTATION in annotations and len(external) != 1:
        problems.append(f"metadata.annotations[{QUERY_ANNOTATION}]: applies to exactly one "
                        f"External metric, this WPA has {len(external)}; use "
                        f"{QUERY_ANNOTATION}.<metricName> per metric")
    return problems


def metric_query_override(annotations: Mapping[str, str], metric: MetricRule) -> str | None:
    """The full PromQL that replaces `metricName{matchLabels}`, if the WPA gives one."""
    return annotations.get(f"{QUERY_ANNOTATION}.{metric.name}") or annotations.get(
        QUERY_ANNOTATION)
