"""The objects of `elevator pods plan --cluster` files, checked at the edge (issue 14).

The API server guarantees the types of what it serves; a hand-edited file does not. Each object
the pod-autoscaler cycle reads (the autoscalers, Pods, the scale targets, DatadogMonitors) is
checked here, strictly, against the types the API server (or the CRD's schema) would enforce on
the fields the cycle reads, so `replicas: "x"`, a selector given as a string, `startTime:
yesterday` or a WatermarkPodAutoscaler whose `metadata` is a string is one error line naming
the file, the item, the key path and the rule, instead of a traceback deep in the cycle. What
the API server would accept but the controller refuses (maxReplicas below minReplicas, an
unknown algorithm) is left to the autoscalers' own parsers: their problems become the
decision's reason, as in the live cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr
from pydantic import ValidationError as PydanticValidationError

from kube_elevator.tasks.core.quantity import parse_quantity
from kube_elevator.tasks.core.timefmt import parse_time
from kube_elevator.tasks.pod_autoscalers.memory import KIND as MEMORY_KIND
from kube_elevator.tasks.pod_autoscalers.memory import MemoryAutoscalerSpec
from kube_elevator.tasks.pod_autoscalers.wpa.crd import KIND as WPA_KIND
from kube_elevator.tasks.pod_autoscalers.wpa.crd import LabelSelector, WatermarkPodAutoscalerSpec

SCALABLE_KINDS = ("Deployment", "StatefulSet", "ReplicaSet")


def _time(text: str) -> str:
    parse_time(text)  # ValueError: not RFC 3339
    return text


def _quantity(text: str | int | float) -> str | int | float:
    value = parse_quantity(text if isinstance(text, str) else repr(text))
    if value < 0:
        raise ValueError("must not be negative")
    return text


Time = Annotated[StrictStr, AfterValidator(_time)]
Quantity = Annotated[StrictStr | StrictInt | float, AfterValidator(_quantity)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Owner(_Model):
    kind: StrictStr = ""
    name: StrictStr = ""


class _Metadata(_Model):
    name: StrictStr = Field(min_length=1)
    namespace: StrictStr = ""
    labels: dict[StrictStr, StrictStr] = {}
    annotations: dict[StrictStr, StrictStr] = {}
    ownerReferences: list[_Owner] = []
    deletionTimestamp: Time | None = None


class _Condition(_Model):
    type: StrictStr = ""
    status: StrictStr = ""
    lastTransitionTime: Time | None = None


class _Resources(_Model):
    limits: dict[StrictStr, Quantity] = {}
    requests: dict[StrictStr, Quantity] = {}


class _Container(_Model):
    resources: _Resources = _Resources()


class _PodSpec(_Model):
    containers: list[_Container] = []


class _PodStatus(_Model):
    phase: StrictStr = ""
    startTime: Time | None = None
    conditions: list[_Condition] = []


class _Pod(_Model):
    metadata: _Metadata
    spec: _PodSpec = _PodSpec()
    status: _PodStatus = _PodStatus()


INT32_MAX = 2**31 - 1  # replicas is an int32 in the API


class _WorkloadSpec(_Model):
    replicas: Annotated[StrictInt, Field(ge=0, le=INT32_MAX)] | None = None
    selector: LabelSelector | None = None


class _WorkloadStatus(_Model):
    replicas: Annotated[StrictInt, Field(ge=0, le=INT32_MAX)] | None = None


class _Workload(_Model):
    metadata: _Metadata
    spec: _WorkloadSpec = _WorkloadSpec()
    status: _WorkloadStatus = _WorkloadStatus()


class _MonitorStatus(_Model):
    monitorState: StrictStr | None = None


class _Monitor(_Model):
    metadata: _Metadata
    status: _MonitorStatus = _MonitorStatus()


class _AutoscalerStatus(_Model):
    """What the cycle reads back from an autoscaler's status (its own last write)."""

    conditions: list[_Condition] = []
    lastScaleTime: Time | None = None
    scalingEventsCount: Annotated[StrictInt, Field(ge=0)] | None = None
    currentReplicas: Annotated[StrictInt, Field(ge=0, le=INT32_MAX)] | None = None
    desiredReplicas: Annotated[StrictInt, Field(ge=0, le=INT32_MAX)] | None = None


class _Watermark(_Model):
    metadata: _Metadata
    spec: WatermarkPodAutoscalerSpec = WatermarkPodAutoscalerSpec()  # the CRD's own model
    status: _AutoscalerStatus = _AutoscalerStatus()


class _MemoryAutoscaler(_Model):
    metadata: _Metadata
    spec: MemoryAutoscalerSpec = MemoryAutoscalerSpec()
    status: _AutoscalerStatus = _AutoscalerStatus()


_MODELS: dict[str, type[_Model]] = {"Pod": _Pod, "DatadogMonitor": _Monitor,
                                    WPA_KIND: _Watermark, MEMORY_KIND: _MemoryAutoscaler,
                                    **{kind: _Workload for kind in SCALABLE_KINDS}}


def _key_path(location: tuple[int | str, ...]) -> str:
    """pydantic's location as the API writes a key path: `spec.metrics[0].type`."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}"
                   for part in location).removeprefix(".")


def _rule(message: str) -> str:
    """pydantic's message without the names of our classes (`... or instance of _Metadata`)."""
    return message.removeprefix("Value error, ").split(" or instance of ")[0]


def object_problems(obj: Mapping[str, Any], where: str) -> list[str]:
    """Why the cycle could not read this object as the API server would serve it (none: ok).

    Strict: `"5"` for an integer or `"true"` for a boolean is a wrong type, as the API server
    refuses it, not a value to coerce."""
    model = _MODELS.get(str(obj.get("kind")))
    if model is None:
        return []
    try:
        model.model_validate(obj, strict=True)
    except PydanticValidationError as error:
        return [f"{where}: {_key_path(detail['loc'])}: " + _rule(detail["msg"])
                for detail in error.errors()]
    return []
