"""The Watermark Pod Autoscaler (DataDog's `datadoghq.com/v1alpha1` CRD), as pure functions.

Why a band: a WPA scales up only above a high watermark and down only below a low one, at most
by its limit factors per event and never inside its forbidden windows, so a noisy metric does
not make the target flap.  This module holds the object model (the real CRD's schema, so
existing objects work unchanged), its defaults and validation (wpa.md §2), and the decision of
wpa.md §3-6: usage, per-metric proposals, velocity limits, forbidden windows and delays,
readiness, dry run and convergence.  The clock is an input; state lives only in the object's
`status` (lastScaleTime and condition transition times), which `decide_watermark` reads and
returns updated.  It also holds what the memory autoscaler shares with it: pod and scale
records, label selectors and HPA-style conditions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from tasks.core.quantity import canonical_quantity, memory_bytes, parse_quantity

GROUP = "datadoghq.com"
VERSION = "v1alpha1"
PLURAL = "watermarkpodautoscalers"
KIND = "WatermarkPodAutoscaler"

# §2 defaults, filled by the controller when the field is unset (zero counts as unset).
DEFAULT_MIN_REPLICAS = 1
DEFAULT_ALGORITHM = "absolute"
DEFAULT_TOLERANCE_MILLI = 100
DEFAULT_SCALE_UP_LIMIT_FACTOR = 50
DEFAULT_SCALE_DOWN_LIMIT_FACTOR = 20
DEFAULT_UPSCALE_FORBIDDEN_WINDOW_SECONDS = 60
DEFAULT_DOWNSCALE_FORBIDDEN_WINDOW_SECONDS = 300
DEFAULT_MODULO = 1

ALGORITHMS = ("absolute", "average")
CONVERGE_TYPES = ("", "highwatermark", "lowwatermark")
RESOURCE_NAMES = ("cpu", "memory")

# §2.2 annotations.
LOGS_ATTRIBUTES_ANNOTATION = "wpa.datadoghq.com/logs-attributes"
SKIP_OWNER_CHECK_ANNOTATION = "wpa.datadoghq.com/skip-owner-check"
LIFECYCLE_CONTROL_ANNOTATION = "wpa.datadoghq.com/lifecycle-control.enabled"
MONITOR_PLURAL = "datadogmonitors"  # datadoghq.com/v1alpha1 DatadogMonitor, same name/namespace

# §2.3 condition types.
ABLE_TO_SCALE = "AbleToScale"
SCALING_ACTIVE = "ScalingActive"
SCALING_LIMITED = "ScalingLimited"
DRY_RUN = "DryRun"
ABOVE_HIGH_WATERMARK = "AboveHighWatermark"
BELOW_LOW_WATERMARK = "BelowLowWatermark"
CONVERGE_TO_WATERMARK = "ConvergeToWatermark"
SCALING_BLOCKED = "ScalingBlocked"

DESIRED_WITHIN_RANGE = "the desired count is within the acceptable range"

Position = Literal["above", "below", "within"]
Quantity = str | int | float


# --- small helpers ------------------------------------------------------------------------


def milli_value(quantity: Quantity) -> int:
    """Quantity.MilliValue(): the value in thousandths, rounded up (§1)."""
    text = quantity if isinstance(quantity, str) else repr(quantity)
    return math.ceil(parse_quantity(text) * 1000)


def milli_of(value: float) -> int:
    """A metric sample as milli-units, rounded up as MilliValue does, without float noise."""
    return math.ceil(Decimal(repr(float(value))) * 1000)


def format_milli(milli: int) -> str:
    """resource.NewMilliQuantity(x, DecimalSI).String(): `8600m`, `270`, `3k`."""
    if milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    for suffix in ("E", "P", "T", "G", "M", "k"):
        scale = 10 ** (3 * ("kMGTPE".index(suffix) + 1))
        if whole and whole % scale == 0:
            return f"{whole // scale}{suffix}"
    return str(whole)


def _trunc_div(numerator: int, denominator: int) -> int:
    """Go's int64 division, truncating toward zero."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator >= 0) == (denominator > 0) else -quotient


def _int32(value: float) -> int:
    """Go's int32(float64): truncation toward zero."""
    return int(value)


def rfc3339(unix_seconds: float) -> str:
    """metav1.Time on the wire: UTC, whole seconds."""
    return datetime.fromtimestamp(math.floor(unix_seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def go_map(labels: Mapping[str, str] | None) -> str:
    """fmt's `%v` of a Go map (keys sorted): `map[foo:bar]`, how upstream names a metric."""
    return "map[" + " ".join(f"{k}:{v}" for k, v in sorted((labels or {}).items())) + "]"


# --- label selectors --------------------------------------------------------------------------


# The CRD's integer fields are int32s (the API server refuses larger ones).
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]


class CrdModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore",
                              frozen=True)


class LabelSelectorRequirement(CrdModel):
    key: str
    operator: str
    values: list[str] | None = None


class LabelSelector(CrdModel):
    """metav1.LabelSelector: used for metric selectors and Deployment selectors."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None

    def problems(self, path: str) -> list[str]:
        found = []
        for i, requirement in enumerate(self.match_expressions or ()):
            where = f"{path}.matchExpressions[{i}]"
            if requirement.operator in ("In", "NotIn"):
                if not requirement.values:
                    found.append(f"{where}: values must be non-empty for {requirement.operator}")
            elif requirement.operator in ("Exists", "DoesNotExist"):
                if requirement.values:
                    found.append(f"{where}: values must be empty for {requirement.operator}")
            else:
                found.append(f"{where}: operator must be In, NotIn, Exists or DoesNotExist, "
                             f"not {requirement.operator!r}")
        return found

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in (self.match_labels or {}).items():
            if labels.get(key) != value:
                return False
        for requirement in self.match_expressions or ():
            present = requirement.key in labels
            values = requirement.values or []
            if requirement.operator == "In" and not (present and labels[requirement.key] in values):
                return False
            if requirement.operator == "NotIn" and present and labels[requirement.key] in values:
                return False
            if requirement.operator == "Exists" and not present:
                return False
            if requirement.operator == "DoesNotExist" and present:
                return False
        return True

    def to_query(self) -> str:
        """The `labelSelector` query string the API server understands."""
        parts = [f"{k}={v}" for k, v in sorted((self.match_labels or {}).items())]
        for requirement in self.match_expressions or ():
            values = ",".join(requirement.values or ())
            parts.append({"In": f"{requirement.key} in ({values})",
                          "NotIn": f"{requirement.key} notin ({values})",
                          "Exists": requirement.key,
                          "DoesNotExist": f"!{requirement.key}"}[requirement.operator])
        return ",".join(parts)


# --- the CRD's object model (api/datadoghq/v1alpha1/watermarkpodautoscaler_types.go) ----------


class CrossVersionObjectReference(CrdModel):
    kind: str = ""
    name: str = ""
    api_version: str = ""


class ExternalMetricSource(CrdModel):
    metric_name: str = ""
    metric_selector: LabelSelector | None = None
    high_watermark: Quantity | None = None
    low_watermark: Quantity | None = None


class ResourceMetricSource(CrdModel):
    name: str = ""
    metric_selector: LabelSelector | None = None
    high_watermark: Quantity | None = None
    low_watermark: Quantity | None = None


class MetricSpec(CrdModel):
    type: str = ""
    external: ExternalMetricSource | None = None
    resource: ResourceMetricSource | None = None


class RecommenderSpec(CrdModel):
    """Recommender mode (§9): parsed so such objects load; not supported by this controller."""

    url: str = ""
    settings: dict[str, str] | None = Field(default=None, alias="Settings")
    target_type: str = ""
    high_watermark: Quantity | None = Field(default=None, alias="highWaterMark")
    low_watermark: Quantity | None = Field(default=None, alias="lowWaterMark")


class WatermarkPodAutoscalerSpec(CrdModel):
    downscale_forbidden_window_seconds: Int32 | None = None
    upscale_forbidden_window_seconds: Int32 | None = None
    scale_up_limit_factor: Quantity | None = None
    upscale_delay_above_watermark_seconds: Int32 | None = None
    scale_down_limit_factor: Quantity | None = None
    downscale_delay_below_watermark_seconds: Int32 | None = None
    replica_scaling_absolute_modulo: Int32 | None = None
    converge_towards_watermark: str = ""
    tolerance: Quantity | None = None
    algorithm: str = ""
    dry_run: bool = False
    tolerate_zero: bool = False
    scale_target_ref: CrossVersionObjectReference = CrossVersionObjectReference()
    metrics: list[MetricSpec] | None = None
    recommender: RecommenderSpec | None = None
    min_replicas: Int32 | None = None
    min_available_replica_percentage: Int32 | None = None
    max_replicas: Int32 | None = None
    readiness_delay_seconds: Int32 | None = None


class ObjectMeta(CrdModel):
    name: str = ""
    namespace: str = ""
    resource_version: str = ""
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class Condition(CrdModel):
    """An autoscaling/v2beta1 HorizontalPodAutoscalerCondition."""

    type: str
    status: str
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class WatermarkPodAutoscalerObject(CrdModel):
    api_version: str = f"{GROUP}/{VERSION}"
    kind: str = KIND
    metadata: ObjectMeta = ObjectMeta()
    spec: WatermarkPodAutoscalerSpec = WatermarkPodAutoscalerSpec()


def validation_problems(error: ValidationError, prefix: str = "") -> list[str]:
    """pydantic's errors as `spec.minReplicas: Input should be a valid integer` lines."""
    problems = []
    for item in error.errors():
        path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in item["loc"])
        problems.append(f"{prefix}{path.replace('.[', '[')}: {item['msg']}")
    return problems


# --- conditions (HPA shape; lastTransitionTime moves only when the status flips, §2.3) ----------


@dataclass
class Conditions:
    """The status' condition list being rewritten by one reconcile, in upstream's order."""

    items: list[Condition]
    now: float
    last_type: str = ""
    last_status: str = ""
    # The conditions as read: a status that flips and flips back within one reconcile (the
    # ScalingActive default, say) keeps its transition time, so an idle cycle writes nothing.
    original: dict[str, Condition] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.original:
            self.original = {c.type: c for c in self.items}

    @classmethod
    def of(cls, raw: Sequence[Mapping[str, Any]] | None, now: float) -> Conditions:
        items = []
        for entry in raw or ():
            try:
                items.append(Condition.model_validate(entry))
            except ValidationError:
                continue  # a hand-edited, unreadable condition is dropped, not fatal
        return cls(items, now)

    def get(self, kind: str) -> Condition | None:
        return next((c for c in self.items if c.type == kind), None)

    def set(self, kind: str, status: bool | str, reason: str, message: str) -> None:
        """setCondition: add or update; a new transition time only when the status flips."""
        text = status if isinstance(status, str) else ("True" if status else "False")
        current = self.get(kind)
        if current is None:
            updated = Condition(type=kind, status=text, last_transition_time=rfc3339(self.now),
                                reason=reason, message=message)
            self.items.append(updated)
        else:
            before = self.original.get(kind)
            if before is not None and before.status == text:
                transition = before.last_transition_time
            elif current.status == text:
                transition = current.last_transition_time
            else:
                transition = rfc3339(self.now)
            updated = current.model_copy(update={
                "status": text, "reason": reason, "message": message,
                "last_transition_time": transition})
            self.items[self.items.index(current)] = updated
        # Upstream sorts by transition time, newest first (a stable sort here).
        self.items.sort(key=lambda c: -(parse_time(c.last_transition_time) or 0.0))
        self.last_type, self.last_status = kind, text

    def is_true(self, kind: str) -> bool:
        found = self.get(kind)
        return found is not None and found.status == "True"

    def to_json(self) -> list[dict[str, Any]]:
        return [c.model_dump(by_alias=True, exclude_none=True) for c in self.items]


# --- pods, targets ------------------------------------------------------------------------------


@dataclass(frozen=True)
class OwnerReference:
    kind: str
    name: str


@dataclass(frozen=True)
class PodState:
    """What the pod autoscalers read of a pod: readiness (§5) and memory limits."""

    name: str
    namespace: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    owners: tuple[OwnerReference, ...] = ()
    phase: str = "Running"
    ready: str | None = "True"  # status of the Ready condition; None when there is none
    ready_transition: float | None = 0.0
    start_time: float | None = 0.0
    deleting: bool = False
    memory_limit_bytes: int | None = None  # sum over containers; None if one has no limit


def pod_state(obj: Mapping[str, Any]) -> PodState:
    """Fold a pod's API JSON into a PodState."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready: str | None = None
    transition: float | None = None
    for condition in status.get("conditions") or ():
        if condition.get("type") == "Ready":
            ready = condition.get("status")
            transition = parse_time(condition.get("lastTransitionTime"))
    limit: int | None = 0
    containers = spec.get("containers") or []
    for container in containers:
        value = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if value is None or limit is None:
            limit = None
        else:
            limit += memory_bytes(value)
    return PodState(
        name=metadata.get("name", ""),
        namespace=metadata.get("namespace", ""),
        labels=metadata.get("labels") or {},
        owners=tuple(OwnerReference(o.get("kind", ""), o.get("name", ""))
                     for o in metadata.get("ownerReferences") or ()),
        phase=status.get("phase") or "",
        ready=ready,
        ready_transition=transition,
        start_time=parse_time(status.get("startTime")),
        deleting=bool(metadata.get("deletionTimestamp")),
        memory_limit_bytes=limit if containers else None,
    )


@dataclass(frozen=True)
class TargetScale:
    """The target's `/scale` subresource (autoscaling/v1 Scale)."""

    kind: str
    name: str
    namespace: str
    spec_replicas: int
    status_replicas: int
    selector: str = ""


# The workload kinds whose `/scale` the autoscalers read and write (apps/v1).
SCALABLE_KINDS = ("Deployment", "StatefulSet", "ReplicaSet")


def unsupported_scale_kind(kind: str) -> str:
    """Why a scaleTargetRef of another kind cannot be scaled, in the API adapter and in files."""
    return f"scaleTargetRef.kind: {kind!r} is not supported: use {', '.join(SCALABLE_KINDS)}"


def owned_by(pod: PodState, target_name: str) -> bool:
    """§5.1: some owner is the target; a ReplicaSet's hash suffix is removed first."""
    for owner in pod.owners:
        name = owner.name
        if owner.kind == "ReplicaSet" and "-" in name:
            name = name[:name.rfind("-")]
        if name == target_name:
            return True
    return False


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


# kube-elevator's own annotations: how an External metric becomes PromQL (tasks/prometheus.py).
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


# --- §3: one metric's proposal ------------------------------------------------------------------


class MetricError(Exception):
    """A metric could not be computed: the WPA holds and says why (§6)."""


@dataclass(frozen=True)
class ConvergeNote:
    """What a proposal says about convergence, for the ConvergeToWatermark condition."""

    status: bool
    reason: str
    message: str


CONVERGE_HIGH_ALLOWED = "Allow downscaling to converge to the High Watermark"
CONVERGE_LOW_ALLOWED = "Allow upscaling to converge to the Low Watermark"
CONVERGE_STABLE_ONLY = "Converging to Watermark only allowed in stable regime"
CONVERGE_UNSTABLE = "Proposal could lead to an unstable regime"
CONVERGE_DISABLED = "Feature not enabled"
CONVERGE_ALLOWED_REASON = "Value between Watermarks"


@dataclass(frozen=True)
class Proposal:
    """One metric's replica proposal (§3), with what the status and the gauges report."""

    metric: MetricRule
    replicas: int
    usage: float  # milli-units, after averaging
    ready: int
    position: Position
    converge: ConvergeNote | None = None

    @property
    def utilization_milli(self) -> int:
        """`int(usage)`: what status.currentMetrics and `value` report (truncated, §3)."""
        return _int32(self.usage)


def round_up_to_multiple(replicas: int, modulo: int) -> int:
    """§3 roundUpToMultiple: proposals are rounded up to a multiple of the modulo."""
    remainder = replicas % modulo
    return replicas + (modulo - remainder) if remainder > 0 else replicas


def adjusted_watermarks(high_milli: int, low_milli: int, tolerance_milli: int
                        ) -> tuple[float, float]:
    """§3: tolerance widens both watermarks, in int64 arithmetic, then float."""
    return (float(high_milli + _trunc_div(high_milli * tolerance_milli, 1000)),
            float(low_milli - _trunc_div(low_milli * tolerance_milli, 1000)))


def _clamp(value: int, lowest: int, highest: int) -> int:
    # §4.3: maxReplicas 0 (unset) caps everything to the minimum.
    return max(min(value, highest), lowest)


def converge(rules: WatermarkRules, spec_replicas: int, ready: int, usage: float,
             high_milli: int, low_milli: int) -> tuple[int, ConvergeNote]:
    """§4.3: inside the band, step by the modulo towards a watermark if that stays inside it."""
    kind = rules.converge_towards_watermark
    if kind not in ("highwatermark", "lowwatermark"):
        return spec_replicas, ConvergeNote(False, CONVERGE_DISABLED, CONVERGE_ALLOWED_REASON)
    min_r = rules.min_replicas if rules.min_replicas > 0 else 1
    max_r = rules.max_replicas
    step = rules.modulo
    if kind == "highwatermark":
        # The fewest replicas keeping usage at or under the high watermark.
        lower = spec_replicas if high_milli == 0 else _clamp(
            math.ceil(float(ready) / float(high_milli) * usage), min_r, max_r)
        candidate = max(spec_replicas - step, 1)
        if candidate < lower:
            return spec_replicas, ConvergeNote(False, CONVERGE_HIGH_ALLOWED, CONVERGE_UNSTABLE)
        return candidate, ConvergeNote(True, CONVERGE_HIGH_ALLOWED, CONVERGE_ALLOWED_REASON)
    # The most replicas keeping usage at or over the low watermark.
    upper = spec_replicas if low_milli == 0 else _clamp(
        math.floor(float(ready) / float(low_milli) * usage), min_r, max_r)
    candidate = spec_replicas + step
    if candidate > upper:
        return spec_replicas, ConvergeNote(False, CONVERGE_LOW_ALLOWED, CONVERGE_UNSTABLE)
    return candidate, ConvergeNote(True, CONVERGE_LOW_ALLOWED, CONVERGE_ALLOWED_REASON)


def usage_of(total_milli: float, ready: int, algorithm: str) -> float:
    """§3: the summed value as is ("absolute"), or divided by the ready count ("average")."""
    return float(total_milli) / (float(ready) if algorithm == "average" else 1.0)


def replica_proposal(rules: WatermarkRules, metric: MetricRule, spec_replicas: int, ready: int,
                     usage: float) -> Proposal:
    """§3 getReplicaCount: ceil above the band, floor below it, converge inside it."""
    high, low = metric.high_milli, metric.low_milli
    adjusted_high, adjusted_low = adjusted_watermarks(high, low, rules.tolerance_milli)
    if usage > adjusted_high:  # strictly above
        replicas = math.ceil(float(ready) * usage / float(high))  # raw HW, not adjusted
        replicas = round_up_to_multiple(replicas, rules.modulo)
        replicas = max(replicas, spec_replicas)  # an upscale never proposes fewer than spec
        return Proposal(metric, replicas, usage, ready, "above",
                        ConvergeNote(False, CONVERGE_HIGH_ALLOWED, CONVERGE_STABLE_ONLY))
    if usage < adjusted_low:  # strictly below
        replicas = math.floor(float(ready) * usage / float(low))  # raw LW
        replicas = max(replicas, 1)
        replicas = round_up_to_multiple(replicas, rules.modulo)  # rounds up even when shrinking
        replicas = min(replicas, spec_replicas)  # a downscale never proposes more than spec
        return Proposal(metric, replicas, usage, ready, "below",
                        ConvergeNote(False, CONVERGE_STABLE_ONLY, CONVERGE_STABLE_ONLY))
    replicas, note = converge(rules, spec_replicas, ready, usage, high, low)
    return Proposal(metric, replicas, usage, ready, "within", note)


# --- §5: readiness --------------------------------------------------------------------------------


def count_ready_pods(pods: Sequence[PodState], target: TargetScale, readiness_delay_seconds: int,
                     min_available_percentage: int, now: float, skip_owner_check: bool) -> int:
    """§5 for External metrics: the ready count, or MetricError when too few are ready."""
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    ready = incorrect = 0
    for pod in pods:
        if not skip_owner_check and not owned_by(pod, target.name):
            incorrect += 1  # §5.1: the selector is broader than the target
            continue
        if pod.phase in ("Failed", "Succeeded"):
            incorrect += 1  # §5.2: evicted or completed pods leave the denominator
            continue
        if pod.ready is None or pod.start_time is None or pod.deleting:
            continue  # §5.3: not ready, still counted
        if pod.phase == "Running" and pod.ready == "True":
            ready += 1
        elif pod.phase == "Pending" and pod.ready_transition is not None and \
                now - pod.ready_transition < readiness_delay_seconds:
            ready += 1  # §5.4: image pulls are tolerated for readinessDelaySeconds
    if ready == 0:
        raise MetricError(f"unable to get the number of ready pods across all namespaces for "
                          f"{target.selector}: among the {len(pods)} pods, none is ready. "
                          "Skipping recommendation")
    ready = min(ready, target.status_replicas)  # §5.6
    ratio = 100 * ready // (len(pods) - incorrect)
    if ratio < min_available_percentage:
        raise MetricError(f"{ratio} % of the pods are unready, will not autoscale "
                          f"{target.namespace}/{target.name}")
    return ready


@dataclass(frozen=True)
class PodGroups:
    """§5 groupPods for Resource metrics."""

    ready: frozenset[str]
    ignored: frozenset[str]
    missing: frozenset[str]


def group_pods(pods: Sequence[PodState], target_name: str, pod_metrics: Mapping[str, int],
               resource: str, readiness_delay_seconds: int, skip_owner_check: bool) -> PodGroups:
    """§5 Resource readiness: pending/failed ignored; CPU also ignores not-yet-ready pods."""
    ready, ignored, missing = set(), set(), set()
    for pod in pods:
        if not skip_owner_check and not owned_by(pod, target_name):
            continue  # skipped, but still in the denominator
        if pod.phase in ("Failed", "Pending"):
            ignored.add(pod.name)
            continue
        if pod.name not in pod_metrics:
            missing.add(pod.name)
            continue
        if resource == "cpu":  # memory is never readiness-filtered
            if pod.ready is None or pod.start_time is None:
                ignored.add(pod.name)
                continue
            transition = pod.ready_transition if pod.ready_transition is not None else 0.0
            if pod.ready == "False" or pod.start_time + readiness_delay_seconds > transition:
                ignored.add(pod.name)
                continue
        ready.add(pod.name)
    return PodGroups(frozenset(ready), frozenset(ignored), frozenset(missing))


# --- readings: what the metrics adapter returned for each metric --------------------------------


@dataclass(frozen=True)
class MetricReading:
    """One metric's raw values: External samples, or usage per pod (milli-units), or why not."""

    external_milli: tuple[int, ...] = ()
    pod_usage_milli: Mapping[str, int] = field(default_factory=dict)
    error: str | None = None


def external_proposal(rules: WatermarkRules, metric: MetricRule, reading: MetricReading,
                      target: TargetScale, pods: Sequence[PodState], now: float) -> Proposal:
    """GetExternalMetricReplicas: ready pods, summed samples, zero handling, §3."""
    ready = count_ready_pods(pods, target, rules.readiness_delay_seconds,
                             rules.min_available_replica_percentage, now, rules.skip_owner_check)
    if reading.error is not None:
        raise MetricError(f"unable to get external metric {target.namespace}/{metric.name}/"
                          f"{go_map(metric.selector.match_labels)}: {reading.error}")
    if not reading.external_milli:
        raise MetricError(f"unable to get external metric {target.namespace}/{metric.name}/"
                          f"{go_map(metric.selector.match_labels)}: no data")
    total = sum(reading.external_milli)
    if total == 0 and not rules.tolerate_zero:
        # §3 zero handling: "within" at the ready count (which may be below spec).
        return Proposal(metric, ready, 0.0, ready, "within")
    return replica_proposal(rules, metric, target.spec_replicas, ready,
                            usage_of(total, ready, rules.algorithm))


def resource_proposal(rules: WatermarkRules, metric: MetricRule, reading: MetricReading,
                      target: TargetScale, pods: Sequence[PodState]) -> Proposal:
    """GetResourceReplicas: per-pod usage summed over the ready pods (§3, §5)."""
    if reading.error is not None:
        raise MetricError(f"unable to get resource metric {target.namespace}/{metric.name}/"
                          f"{go_map(metric.selector.match_labels)}: {reading.error}")
    if not reading.pod_usage_milli:
        raise MetricError(f"unable to get resource metric {target.namespace}/{metric.name}/"
                          f"{go_map(metric.selector.match_labels)}: no metrics returned from "
                          "resource metrics API")
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    groups = group_pods(pods, target.name, reading.pod_usage_milli, metric.name,
                        rules.readiness_delay_seconds, rules.skip_owner_check)
    counted = len(pods) - len(groups.ignored)
    if counted == 0:
        raise MetricError("did not receive metrics for any ready pods")
    ratio = 100 * len(groups.ready) // counted
    if ratio < rules.min_available_replica_percentage:
        raise MetricError(f"{ratio} % of the pods are unready, will not autoscale "
                          f"{target.namespace}/{target.name}")
    # Ignored pods' samples are dropped; every other selected pod's sample counts.
    samples = {pod: value for pod, value in reading.pod_usage_milli.items()
               if pod not in groups.ignored}
    if not samples or not groups.ready:
        raise MetricError("did not receive metrics for any ready pods")
    ready = len(groups.ready)
    return replica_proposal(rules, metric, target.spec_replicas, ready,
                            usage_of(sum(samples.values()), ready, rules.algorithm))


# --- §4.2: velocity limits and min/max ----------------------------------------------------------


@dataclass(frozen=True)
class Limited:
    """convertDesiredReplicasWithRules: the allowed count and the ScalingLimited reason."""

    replicas: int
    condition: str
    message: str
    downscale_capping: bool = False
    upscale_capping: bool = False


def _value(milli: int) -> int:
    """Quantity.Value(): rounded up, so a factor in (0, 1) does not disable scaling."""
    return -((-milli) // 1000)


def scale_down_limit(spec_replicas: int, factor_milli: int) -> int:
    if _value(factor_milli) == 0:
        return spec_replicas  # a zero factor disables downscaling
    # The max(1, …) term lets any non-zero factor move at least one replica.
    return _int32(float(spec_replicas) - max(
        1.0, math.floor(float(factor_milli) / 1000 * float(spec_replicas) / 100)))


def scale_up_limit(spec_replicas: int, factor_milli: int) -> int:
    if _value(factor_milli) == 0:
        return spec_replicas  # a zero factor disables upscaling
    return _int32(float(spec_replicas) + max(
        1.0, math.floor(float(factor_milli) / 1000 * float(spec_replicas) / 100)))


def limit_replicas(spec_replicas: int, desired: int, min_replicas: int, max_replicas: int,
                   ready: int, up_factor_milli: int, down_factor_milli: int) -> Limited:
    """§4.2, base = spec: min/max act inside the velocity limits."""
    down_limit = scale_down_limit(spec_replicas, down_factor_milli)
    condition = message = ""
    capped_down = False
    if min_replicas == 0:
        minimum = 1  # the down-limit is not applied at all
    elif desired < down_limit:
        minimum = max(down_limit, min_replicas)
        condition = "ScaleDownLimit"
        message = "the desired replica count is decreasing faster than the maximum scale rate"
        capped_down = True
        if 0 < ready < minimum:
            minimum = spec_replicas  # do not remove ready pods below the limit
    else:
        minimum = min_replicas
        condition = "TooFewReplicas"
        message = "the desired replica count is below the minimum replica count"
    if desired < minimum:
        return Limited(minimum, condition, message, downscale_capping=capped_down)
    up_limit = scale_up_limit(spec_replicas, up_factor_milli)
    if desired > up_limit:
        maximum = min(up_limit, max_replicas)
        condition = "ScaleUpLimit"
        message = "the desired replica count is increasing faster than the maximum scale rate"
        capped_up = True
    else:
        maximum = max_replicas
        condition = "TooManyReplicas"
        message = "the desired replica count is above the maximum replica count"
        capped_up = False
    if desired > maximum:
        return Limited(maximum, condition, message, capped_down, capped_up)
    return Limited(desired, "DesiredWithinRange", DESIRED_WITHIN_RANGE, capped_down, capped_up)


# --- §4.5: forbidden windows and delays ---------------------------------------------------------


@dataclass(frozen=True)
class Gate:
    """shouldScale: whether this change may happen now, and why not."""

    allowed: bool
    upscale_countdown: float = 0.0
    downscale_countdown: float = 0.0
    why_not: str = ""


def _after_delay(backoff: bool, window_name: str, countdown: float, condition: Condition | None,
                 delay: int, stable: bool, now: float) -> tuple[bool, str]:
    """canScaleAfterDelay: the metric must have been out of bounds for `delay` seconds."""
    if delay == 0 or stable:  # off, or converging
        return (not backoff, f"within the {window_name} forbidden window ({countdown:.0f} s left)"
                if backoff else "")
    transition = parse_time(condition.last_transition_time) if condition is not None else None
    elapsed = _int32(now - transition) if transition is not None else 0
    left = delay - elapsed
    if condition is None or condition.status != "True" or left > 0:
        return False, (f"the {window_name} delay needs the value out of bounds for {delay} s "
                       f"({max(left, 0)} s left)")
    return (not backoff, f"within the {window_name} forbidden window ({countdown:.0f} s left)"
            if backoff else "")


def scale_gate(rules: WatermarkRules, last_scale_time: float | None, now: float,
               spec_replicas: int, desired: int, conditions: Conditions, stable: bool) -> Gate:
    """§4.5 shouldScale, with `now` the cycle's clock (never the metric timestamp)."""
    if last_scale_time is None:
        # The very first cycle may scale (even to the same count) and stamps lastScaleTime.
        return Gate(True)
    down = last_scale_time + rules.downscale_forbidden_window_seconds - now
    up = last_scale_time + rules.upscale_forbidden_window_seconds - now
    backoff_down, backoff_up = down > 0, up > 0
    # A single lastScaleTime for both directions: any scale event restarts both windows.
    if backoff_down:
        conditions.set(ABLE_TO_SCALE, False, "BackoffDownscale",
                       "the time since the previous scale is still within the downscale "
                       "forbidden window")
    if backoff_up:
        if backoff_down:
            conditions.set(ABLE_TO_SCALE, False, "BackoffBoth",
                           "the time since the previous scale is still within both the "
                           "downscale and upscale forbidden windows")
        else:
            conditions.set(ABLE_TO_SCALE, False, "BackoffUpscale",
                           "the time since the previous scale is still within the upscale "
                           "forbidden window")
    countdowns = {"upscale_countdown": max(up, 0.0), "downscale_countdown": max(down, 0.0)}
    if desired > spec_replicas:
        allowed, why = _after_delay(backoff_up, "upscale", up,
                                    conditions.get(ABOVE_HIGH_WATERMARK),
                                    rules.upscale_delay_above_watermark_seconds, stable, now)
        return Gate(allowed, why_not=why, **countdowns)
    if desired < spec_replicas:
        allowed, why = _after_delay(backoff_down, "downscale", down,
                                    conditions.get(BELOW_LOW_WATERMARK),
                                    rules.downscale_delay_below_watermark_seconds, stable, now)
        return Gate(allowed, why_not=why, **countdowns)
    return Gate(False, why_not="the replica count would not change", **countdowns)


# --- §2.2: lifecycle control through a DatadogMonitor ----------------------------------------


_TRUE_WORDS = ("1", "t", "T", "TRUE", "true", "True")
_FALSE_WORDS = ("0", "f", "F", "FALSE", "false", "False")


def lifecycle_control(annotations: Mapping[str, str]) -> bool | str:
    """Whether the annotation enables lifecycle control (Go's strconv.ParseBool), or why not."""
    value = annotations.get(LIFECYCLE_CONTROL_ANNOTATION, "")
    if value in _TRUE_WORDS:
        return True
    if value == "" or value in _FALSE_WORDS:
        return False
    return f'strconv.ParseBool: parsing "{value}": invalid syntax'


@dataclass(frozen=True)
class MonitorReading:
    """The WPA's DatadogMonitor as read: absent, or its `status.monitorState`."""

    found: bool
    state: str | None = None


# --- §4.4: the reconcile decision ---------------------------------------------------------------


@dataclass(frozen=True)
class MetricGauge:
    """Per-metric figures §7 exports."""

    name: str
    value_milli: float
    high_milli: int
    low_milli: int
    proposal: int


@dataclass(frozen=True)
class Decision:
    """One autoscaler's cycle: what to do to the target and the status to write back.

    `scale_to` is set when the target's `/scale` must be written (never in dry run);
    `status` is the whole new status, `status_changed` whether it differs from the old one.
    """

    kind: str
    namespace: str
    name: str
    target_kind: str
    target_name: str
    current_replicas: int | None
    ready_replicas: int | None
    value: float | None  # the winning metric, in its own unit
    proposal: int | None
    desired_replicas: int | None
    rescale: bool
    dry_run: bool
    reason: str
    status: Mapping[str, Any]
    status_changed: bool
    valid: bool = True
    problems: tuple[str, ...] = ()
    metrics: tuple[MetricGauge, ...] = ()
    min_replicas: int | None = None
    max_replicas: int | None = None
    restricted: Mapping[str, bool] = field(default_factory=dict)
    upscale_countdown: float = 0.0
    downscale_countdown: float = 0.0
    metric_failed: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)
    previous_status: Mapping[str, Any] = field(default_factory=dict)
    lifecycle_blocked: bool | None = None  # None: lifecycle control is off

    @property
    def scale_to(self) -> int | None:
        return self.desired_replicas if self.rescale and not self.dry_run else None

    def conditions(self) -> list[dict[str, Any]]:
        return list(self.status.get("conditions") or [])

    def condition_true(self, kind: str) -> bool:
        return any(c.get("type") == kind and c.get("status") == "True"
                   for c in self.conditions())

    def to_json(self) -> dict[str, Any]:
        """The `elevator pods plan --output json` entry."""
        return {
            "kind": self.kind, "namespace": self.namespace, "name": self.name,
            "current_replicas": self.current_replicas, "ready_replicas": self.ready_replicas,
            "value": self.value, "proposal": self.proposal,
            "desired_replicas": self.desired_replicas, "reason": self.reason,
            "conditions": [{"type": c.get("type"), "status": c.get("status"),
                            "reason": c.get("reason", "")} for c in self.conditions()],
        }


def _status(old: Mapping[str, Any], conditions: Conditions, **fields: Any) -> dict[str, Any]:
    status = {k: v for k, v in old.items() if k not in ("conditions",)}
    status.update({k: v for k, v in fields.items() if v is not None})
    status["conditions"] = conditions.to_json()
    if conditions.last_type:
        status["lastConditionType"] = conditions.last_type
        status["lastConditionState"] = conditions.last_status
    return status


def _metric_status(proposal: Proposal) -> dict[str, Any]:
    """An autoscaling/v2beta1 MetricStatus, as upstream writes it."""
    metric = proposal.metric
    value = format_milli(proposal.utilization_milli)
    if metric.type == "External":
        return {"type": "External", "external": {
            "metricName": metric.name,
            "metricSelector": metric.selector.model_dump(by_alias=True, exclude_none=True),
            "currentValue": value}}
    return {"type": "Resource", "resource": {"name": metric.name, "currentAverageValue": value}}


def _hold(parsed: ParsedWatermark, conditions: Conditions, reason: str, *,
          current: int | None = None, valid: bool = True, rules: WatermarkRules | None = None,
          metric_failed: bool = False, dry_run: bool = False,
          blocked: bool | None = None) -> Decision:
    """No scaling this cycle; the status records why (and the current count, if known)."""
    old = parsed.status
    status = _status(old, conditions, currentReplicas=current)
    return Decision(
        KIND, parsed.namespace, parsed.name, parsed.target_kind, parsed.target_name,
        current, None, None, None, current, False, dry_run, reason, status,
        status != dict(old), valid, parsed.problems,
        min_replicas=rules.min_replicas if rules else None,
        max_replicas=rules.max_replicas if rules else None,
        metric_failed=metric_failed, annotations=parsed.annotations, previous_status=old,
        lifecycle_blocked=blocked)


def decide_watermark(parsed: ParsedWatermark, target: TargetScale | str | None,
                     pods: Sequence[PodState], readings: Sequence[MetricReading],
                     now: float, monitor: MonitorReading | None = None) -> Decision:
    """§4.4 reconcileWPA for one WPA: validate, read, propose, limit, gate, override.

    `target` is the `/scale` read (a string says why it could not be read); `readings` has
    one entry per `rules.metrics`; `monitor` is the DatadogMonitor when lifecycle control is
    on (§2.2).  Pure: the caller scales and writes the returned status.
    """
    conditions = Conditions.of(parsed.status.get("conditions"), now)
    # Upstream defaults ScalingActive to False each reconcile; success sets it True below.
    conditions.set(SCALING_ACTIVE, False, "FailedProcessWPA",
                   "Error happened while processing the WPA")
    rules = parsed.rules
    if rules is None:
        message = "; ".join(parsed.problems)
        conditions.set(ABLE_TO_SCALE, False, "FailedSpecCheck",
                       f"Invalid WPA specification: {message}")
        return _hold(parsed, conditions, f"invalid spec: {message}", valid=False)
    blocked: bool | None = None
    control = lifecycle_control(parsed.annotations)
    if isinstance(control, str):  # unparsable: ignored, and said so
        conditions.set(SCALING_BLOCKED, False, "FailedGetDatadogMonitor",
                       f"Lifecycle Control is not correctly enabled: {control}")
    elif control:
        monitor_name = f"{parsed.namespace}/{parsed.name}"
        blocked = True
        if monitor is None or not monitor.found:
            conditions.set(SCALING_BLOCKED, True, "FailedGetDatadogMonitor",
                           f"monitor {monitor_name} not found, blocking the WPA from proceeding")
            return _hold(parsed, conditions, f"blocked: DatadogMonitor {monitor_name} not found",
                         rules=rules, blocked=True)
        if monitor.state != "OK":
            why = (f"monitor {monitor_name} state not found" if monitor.state is None else
                   f"monitor {monitor_name} is in {monitor.state} state")
            conditions.set(SCALING_BLOCKED, True, "DatadogMonitorNotOK",
                           f"{why}, blocking the WPA from proceeding")
            return _hold(parsed, conditions, f"blocked: {why}", rules=rules, blocked=True)
        blocked = False
        conditions.set(SCALING_BLOCKED, False, "DatadogMonitorOK",
                       f"monitor {monitor_name} is in a OK state, allowing the WPA from "
                       "proceeding")
    if target is None or isinstance(target, str):
        why = target or "scale not found"
        conditions.set(ABLE_TO_SCALE, False, "FailedProcessWPA",
                       f"Error happened while processing the WPA: {why}")
        return _hold(parsed, conditions, f"cannot read the target's scale: {why}", rules=rules,
                     blocked=blocked)
    current = target.spec_replicas  # §1: Scale.Spec.Replicas, not Status.Replicas
    if rules.dry_run:
        conditions.set(DRY_RUN, True, "DryRun mode enabled", "Scaling changes won't be applied")
    else:
        conditions.set(DRY_RUN, False, "DryRun mode disabled", "Scaling changes can be applied")
    conditions.set(ABLE_TO_SCALE, True, "SucceededGetScale",
                   "the WPA controller was able to get the target's current scale")
    if target.spec_replicas == 0:
        # §4.4.3: a target scaled to zero disables the WPA; no metric is read for it.
        why = "scaling is disabled since the replica count of the target is zero"
        conditions.set(SCALING_ACTIVE, False, "ScalingDisabled", why)
        hold = _hold(parsed, conditions, f"not scaling: {why}", current=0, rules=rules,
                     dry_run=rules.dry_run, blocked=blocked)
        return replace(hold, desired_replicas=0)
    if len(readings) != len(rules.metrics):
        raise ValueError(f"{len(rules.metrics)} metrics but {len(readings)} readings")

    # §4.1: each metric independently; any error aborts the cycle (§6).
    proposals: list[Proposal] = []
    for metric, reading in zip(rules.metrics, readings, strict=True):
        try:
            if metric.type == "External":
                proposal = external_proposal(rules, metric, reading, target, pods, now)
            else:
                proposal = resource_proposal(rules, metric, reading, target, pods)
        except MetricError as error:
            reason = ("FailedGetExternalMetric" if metric.type == "External"
                      else "FailedGetResourceMetric")
            # Above/BelowWatermark are left as they were: an outage neither starts nor resets
            # the delay clocks (upstream's snapshot also resets them; wpa.md §6 is silent).
            conditions.set(SCALING_ACTIVE, False, reason,
                           f"the WPA was unable to compute the replica count: {error}")
            return _hold(parsed, conditions, f"holding: {error}", current=current, rules=rules,
                         metric_failed=True, dry_run=rules.dry_run)
        if proposal.converge is not None:
            note = proposal.converge
            conditions.set(CONVERGE_TO_WATERMARK, note.status, note.reason, note.message)
        proposals.append(proposal)
    winner = proposals[0]
    for proposal in proposals[1:]:
        if winner.replicas == 0 or proposal.replicas > winner.replicas:  # ties keep the earlier
            winner = proposal
    above = any(p.position == "above" for p in proposals)
    below = any(p.position == "below" for p in proposals)
    stable = not above and not below
    conditions.set(ABOVE_HIGH_WATERMARK, above, "Value above High Watermark",
                   "Allow upscaling if the value stays over the Watermark")
    conditions.set(BELOW_LOW_WATERMARK, below, "Value above Low Watermark",
                   "Allow downscaling if the value stays under the Watermark")
    conditions.set(SCALING_ACTIVE, True, "ValidMetricFound",
                   "the WPA was able to successfully calculate a replica count from "
                   f"{winner.metric.display_name}")

    desired = winner.replicas
    reason = ""
    if desired > current:
        reason = f"{winner.metric.display_name} above target"
    if desired < current:
        reason = "All metrics below target"
    limited = limit_replicas(current, desired, rules.min_replicas, rules.max_replicas,
                             winner.ready, rules.scale_up_limit_factor_milli,
                             rules.scale_down_limit_factor_milli)
    conditions.set(SCALING_LIMITED, limited.replicas != desired, limited.condition,
                   limited.message)
    desired = limited.replicas
    if stable and desired != current:
        reason = "Metric within watermarks, attempting to scale to converge towards watermark"
    last_scale = parse_time(parsed.status.get("lastScaleTime"))
    gate = scale_gate(rules, last_scale, now, current, desired, conditions, stable)
    rescale = gate.allowed
    why_not = gate.why_not
    metric_statuses: list[dict[str, Any]] | None = [_metric_status(p) for p in proposals]

    # Overrides, first match wins; forced corrections ignore windows and delays (a target
    # scaled to zero, the first override, returned above).
    if current > rules.max_replicas:
        reason, desired, rescale = "Current number of replicas above Spec.MaxReplicas", \
            rules.max_replicas, True
        metric_statuses = None  # upstream keeps the previous currentMetrics
    elif current < rules.min_replicas:
        reason, desired, rescale = "Current number of replicas below Spec.MinReplicas", \
            rules.min_replicas, True
        metric_statuses = None
    elif target.status_replicas == 0:
        # wpa.md §4.4: checked on Status.Replicas although the arithmetic uses Spec.Replicas.
        reason, desired, rescale = "Current number of replicas must be greater than 0", 1, True
        metric_statuses = None

    status_fields: dict[str, Any] = {"currentReplicas": current}
    if metric_statuses is not None:
        status_fields["currentMetrics"] = metric_statuses
    if rescale:
        conditions.set(ABLE_TO_SCALE, True, "ReadyForScale",
                       "the last scaling time was sufficiently old as to warrant a new scale")
        if not rules.dry_run:
            conditions.set(ABLE_TO_SCALE, True, "SuccessfulScale",
                           f"the WPA controller was able to update the target scale to {desired}")
        # Dry run too: cooldowns are simulated from the recorded lastScaleTime (§4.4.4).
        status_fields.update(desiredReplicas=desired, lastScaleTime=rfc3339(now),
                             scalingEventsCount=int(parsed.status.get("scalingEventsCount")
                                                    or 0) + 1)
        reason = reason or "no previous scale event: the count is written and lastScaleTime set"
        if rules.dry_run:
            reason = f"dry run: would scale to {desired}: {reason}"
    else:
        desired = current
        status_fields["desiredReplicas"] = desired
        reason = f"not scaling: {why_not}" if why_not else "not scaling"
    old = parsed.status
    status = _status(old, conditions, **status_fields)
    return Decision(
        KIND, parsed.namespace, parsed.name, target.kind, target.name, current, winner.ready,
        winner.usage / 1000, winner.replicas, desired, rescale, rules.dry_run, reason, status,
        status != dict(old),
        metrics=tuple(MetricGauge(p.metric.name, p.usage, p.metric.high_milli,
                                  p.metric.low_milli, p.replicas) for p in proposals),
        min_replicas=rules.min_replicas, max_replicas=rules.max_replicas,
        restricted={"within_bounds": stable, "upscale_capping": limited.upscale_capping,
                    "downscale_capping": limited.downscale_capping},
        upscale_countdown=gate.upscale_countdown, downscale_countdown=gate.downscale_countdown,
        annotations=parsed.annotations, previous_status=old, lifecycle_blocked=blocked)


def scale_failed(decision: Decision, error: str, now: float) -> Decision:
    """The `/scale` write failed: AbleToScale=False FailedScale; only currentReplicas is
    recorded (setCurrentReplicasInStatus), so lastScaleTime is not stamped."""
    previous = decision.previous_status
    conditions = Conditions.of(decision.status.get("conditions"), now)
    conditions.set(ABLE_TO_SCALE, False, "FailedScale",
                   f"the WPA controller was unable to update the target scale: {error}")
    status = _status(previous, conditions, currentReplicas=decision.current_replicas)
    return replace(decision, rescale=False, desired_replicas=decision.current_replicas,
                   reason=f"scale failed: {error}", status=status,
                   status_changed=status != dict(previous))


def log_attributes(annotations: Mapping[str, str]) -> str:
    """§2.2 `wpa.datadoghq.com/logs-attributes`: ` key=value` pairs for every log line."""
    raw = annotations.get(LOGS_ATTRIBUTES_ANNOTATION)
    if not raw:
        return ""
    try:
        pairs = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(pairs, dict):
        return ""
    return "".join(f" {key}={value}" for key, value in sorted(pairs.items()))

