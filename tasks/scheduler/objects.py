"""The scheduler's view of a pod, read from the API object as `kubectl get pod -o json` gives it.

Nodes are read as every other system reads them (`tasks.core.records.NodeRecord`); a pod needs
more than `PodRecord` carries: the requests kube-scheduler scores with missing container requests
defaulted (`NonZeroRequested`), preferred node affinity, topology spread constraints, and the
selector of the Services and controllers that own it (`helper.DefaultSelector`), which the
system default spreading constraints use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import orjson

from kube_elevator.tasks.core.api_objects import (
    CPU,
    MEMORY,
    OBJECT_DECODER,
    ExtendedResources,
    NodeSelectorTerm,
    RawContainer,
    RawObject,
    RawResources,
    RawSpec,
    Toleration,
)
from kube_elevator.tasks.core.records import NodeRecord, node_record, pod_requests
from kube_elevator.tasks.core.selectors import LabelRequirement, LabelSelector, selector_from_api

# pkg/scheduler/util/pod_resources.go: what a container without a cpu or memory request counts
# as when nodes are scored (never when they are filtered).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST_BYTES = 200 * 1024 * 1024

SCHEDULE_ANYWAY = "ScheduleAnyway"
DO_NOT_SCHEDULE = "DoNotSchedule"
HONOR = "Honor"
IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """One `preferredDuringSchedulingIgnoredDuringExecution` entry."""

    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A pod's `topologySpreadConstraints` entry as the API holds it; `selector` None is a null
    labelSelector (labels.Nothing: it selects no pod)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector | None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SchedPod:
    """What the scheduler reads of a pod. The shapes are hashable summaries of what the filters
    and the per-node scores read, so a scheduler can cache their answers per node."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    node_name: str = ""
    # component-helpers PodRequests (what NodeResourcesFit filters and BalancedAllocation scores)
    cpu_milli: int = 0
    memory_bytes: int = 0
    extended: ExtendedResources = ()
    # the same with a missing container request counted as the defaults above (Least/Most)
    nonzero_cpu_milli: int = 0
    nonzero_memory_bytes: int = 0
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] = ()
    preferred_terms: tuple[PreferredTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    # helper.DefaultSelector: the Services selecting the pod and its ReplicaSet, StatefulSet or
    # ReplicationController; None when there is none (no system default spreading then).
    default_selector: LabelSelector | None = None
    priority: int = 0
    terminating: bool = False
    # podAffinity or podAntiAffinity terms (InterPodAffinity, which this model leaves out)
    pod_affinity: bool = False

    @property
    def label_set(self) -> frozenset[tuple[str, str]]:
        return frozenset(self.labels.items())

    @property
    def filter_shape(self) -> tuple[Any, ...]:
        """Everything the filters read of the pod."""
        return (self.cpu_milli, self.memory_bytes, self.extended,
                tuple(sorted(self.node_selector.items())), self.required_terms,
                self.tolerations)

    @property
    def score_shape(self) -> tuple[Any, ...]:
        """Everything the per-node scores read of the pod (PodTopologySpread apart)."""
        return (self.cpu_milli, self.memory_bytes, self.extended, self.nonzero_cpu_milli,
                self.nonzero_memory_bytes, self.tolerations, self.preferred_terms)


class Workloads:
    """The Services, ReplicaSets, StatefulSets and ReplicationControllers the system default
    spreading reads (`helper.DefaultSelector`), from their API objects."""

    def __init__(self, objects: Iterable[Mapping[str, Any]] = ()) -> None:
        self.services: dict[str, list[dict[str, str]]] = {}
        self.controllers: dict[tuple[str, str, str], Any] = {}  # (kind, namespace, name)
        for obj in objects:
            self.add(obj)

    def add(self, obj: Mapping[str, Any]) -> None:
        kind = str(obj.get("kind", ""))
        metadata = obj.get("metadata") or {}
        namespace = str(metadata.get("namespace") or "")
        spec = obj.get("spec") or {}
        if kind == "Service":
            # "services with nil selectors match nothing, not everything" (GetPodServices)
            if spec.get("selector") is not None:
                self.services.setdefault(namespace, []).append(dict(spec["selector"]))
        elif kind in _CONTROLLER_KINDS:
            self.controllers[(kind, namespace, str(metadata.get("name") or ""))] = \
                spec.get("selector")

    def controller_selector(self, kind: str, namespace: str, name: str) -> Any:
        """The controller's `spec.selector` as the API holds it (a map for an RC, a
        LabelSelector for the others); None when there is no such object."""
        return self.controllers.get((kind, namespace, name))

    def default_selector(self, namespace: str, labels: Mapping[str, str],
                         owner: tuple[str, str, str] | None) -> LabelSelector | None:
        """helper.DefaultSelector (pkg/scheduler/framework/plugins/helper/spread.go): the
        selectors of the Services that select the pod, merged, and those of its controller
        (`owner`: apiVersion, kind, name of the controller reference); None when empty."""
        label_set: dict[str, str] = {}
        for selector in self.services.get(namespace, ()):
            if all(labels.get(key) == value for key, value in selector.items()):
                label_set.update(selector)
        requirements = [LabelRequirement(key, "=", (value,))
                        for key, value in sorted(label_set.items())]
        if owner is not None and (owner[0], owner[1]) in _CONTROLLER_API:
            selector = self.controller_selector(owner[1], namespace, owner[2])
            if owner[1] == "ReplicationController" and isinstance(selector, Mapping):
                label_set.update(selector)
                requirements = [LabelRequirement(key, "=", (value,))
                                for key, value in sorted(label_set.items())]
            elif owner[1] != "ReplicationController":
                parsed = selector_from_api(selector)
                if parsed is not None:
                    requirements += parsed.requirements
        return LabelSelector(tuple(requirements)) if requirements else None


_CONTROLLER_KINDS = ("ReplicaSet", "StatefulSet", "ReplicationController")
_CONTROLLER_API = {("v1", "ReplicationController"), ("apps/v1", "ReplicaSet"),
                   ("apps/v1", "StatefulSet")}
NO_WORKLOADS = Workloads()


def node_from_api(obj: Mapping[str, Any]) -> NodeRecord:
    """A Node object (`kubectl get node -o json`) as the record every system reads."""
    return node_record(OBJECT_DECODER.decode(orjson.dumps(obj)))


def _with_defaults(containers: Sequence[RawContainer] | None) -> list[RawContainer] | None:
    """applyNonMissing (component-helpers resource): a container without a cpu or a memory
    request counts the scheduler's default; an explicit 0 stays 0."""
    if containers is None:
        return None
    filled = []
    for container in containers:
        requests = dict(container.resources.requests or {}) if container.resources else {}
        requests.setdefault(CPU, f"{DEFAULT_MILLI_CPU_REQUEST}m")
        requests.setdefault(MEMORY, str(DEFAULT_MEMORY_REQUEST_BYTES))
        filled.append(RawContainer(RawResources(requests), container.restartPolicy))
    return filled


def nonzero_requests(spec: RawSpec) -> tuple[int, int]:
    """(milli-CPU, bytes) as resource_allocation.go's calculatePodResourceRequest counts them
    for LeastAllocated and MostAllocated (`NonMissingContainerRequests`)."""
    filled = msgspec.structs.replace(spec, containers=_with_defaults(spec.containers),
                                     initContainers=_with_defaults(spec.initContainers))
    cpu, memory, _ = pod_requests(filled)
    return cpu, memory


def _term(obj: Any) -> NodeSelectorTerm:
    return msgspec.convert(obj or {}, NodeSelectorTerm)


def _constraint(obj: Mapping[str, Any]) -> SpreadConstraint:
    return SpreadConstraint(
        max_skew=int(obj.get("maxSkew", 1)), topology_key=str(obj.get("topologyKey", "")),
        when_unsatisfiable=str(obj.get("whenUnsatisfiable", DO_NOT_SCHEDULE)),
        selector=selector_from_api(obj.get("labelSelector")),
        min_domains=obj.get("minDomains"),
        node_affinity_policy=obj.get("nodeAffinityPolicy"),
        node_taints_policy=obj.get("nodeTaintsPolicy"),
        match_label_keys=tuple(obj.get("matchLabelKeys") or ()))


def controller_owner(metadata: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """metav1.GetControllerOf: the owner reference with `controller: true`."""
    for owner in metadata.get("ownerReferences") or ():
        if owner.get("controller"):
            return (str(owner.get("apiVersion", "")), str(owner.get("kind", "")),
                    str(owner.get("name", "")))
    return None


def sched_pod(obj: Mapping[str, Any], workloads: Workloads = NO_WORKLOADS) -> SchedPod:
    """The scheduler's view of a Pod object; `workloads` resolves the default spreading."""
    raw: RawObject = OBJECT_DECODER.decode(orjson.dumps(obj))
    spec = raw.spec or RawSpec()
    metadata = obj.get("metadata") or {}
    body = obj.get("spec") or {}
    cpu, memory, extended = pod_requests(spec)
    nonzero_cpu, nonzero_memory = nonzero_requests(spec)
    affinity = body.get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
    namespace = str(metadata.get("namespace") or "")
    labels = dict(metadata.get("labels") or {})
    return SchedPod(
        namespace=namespace, name=str(metadata.get("name") or ""), labels=labels,
        node_name=str(body.get("nodeName") or ""), cpu_milli=cpu, memory_bytes=memory,
        extended=extended, nonzero_cpu_milli=nonzero_cpu, nonzero_memory_bytes=nonzero_memory,
        node_selector=dict(body.get("nodeSelector") or {}),
        required_terms=tuple(_term(t) for t in required.get("nodeSelectorTerms") or ()),
        preferred_terms=tuple(PreferredTerm(int(p.get("weight", 0)), _term(p.get("preference")))
                              for p in preferred),
        tolerations=spec.tolerations or (),
        spread_constraints=tuple(_constraint(c)
                                 for c in body.get("topologySpreadConstraints") or ()),
        default_selector=workloads.default_selector(namespace, labels,
                                                    controller_owner(metadata)),
        priority=int(body.get("priority") or 0),
        terminating=metadata.get("deletionTimestamp") is not None,
        pod_affinity=bool(affinity.get("podAffinity") or affinity.get("podAntiAffinity")))


__all__ = [
    "DEFAULT_MEMORY_REQUEST_BYTES",
    "DEFAULT_MILLI_CPU_REQUEST",
    "NO_WORKLOADS",
    "PreferredTerm",
    "SchedPod",
    "SpreadConstraint",
    "Workloads",
    "controller_owner",
    "node_from_api",
    "nonzero_requests",
    "sched_pod",
]
