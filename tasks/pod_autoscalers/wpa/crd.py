"""The WPA custom resource: its constants and defaults, the object model of the real CRD (so existing
objects work unchanged), label selectors and HPA-style conditions."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from kube_elevator.tasks.core.quantity import parse_quantity
from kube_elevator.tasks.core.selectors import label_selector
from kube_elevator.tasks.core.timefmt import parse_time, rfc3339

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
        return label_selector(self.match_labels, [
            (r.key, r.operator, r.values) for r in self.match_expressions or ()]).matches(labels)

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
