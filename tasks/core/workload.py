"""Pods and scale targets as the pod autoscalers read them: the `/scale` subresource and owners."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kube_elevator.tasks.core.quantity import memory_bytes
from kube_elevator.tasks.core.timefmt import parse_time

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
    """The target's `/scale` subresource (autoscaling/v1 Scale).

    Example:
        >>> scale = ke.TargetScale("Deployment", "web", "default", spec_replicas=3, status_replicas=2)
        >>> scale.spec_replicas - scale.status_replicas
        1
    """

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
