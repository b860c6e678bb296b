"""The scheduler's view of a pod, read from the API object as `kubectl get pod -o json` gives it.

Nodes are read as every other system reads them (`tasks.core.records.NodeRecord`); a pod needs
more than `PodRecord` carries: the requests kube-scheduler scores with missing container requests
defaulted (`NonZeroRequested`), preferred node affinity, topology spread constraints, pod
(anti-)affinity terms (framework.AffinityTerm, pkg/scheduler/framework/types.go), host ports,
the zones of its bound volumes, and the selector of the Services and controllers that own it
(`helper.DefaultSelector`), which the system default spreading constraints use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import msgspec
import orjson

from kube_elevator.tasks.core.api_objects import (
    CPU,
    MEMORY,
    OBJECT_DECODER,
    ExtendedResources,
    HostPort,
    NodeSelectorTerm,
    PodPlacement,
    RawContainer,
    RawObject,
    RawResources,
    RawSpec,
    Toleration,
)
from kube_elevator.tasks.core.records import (
    NodeRecord,
    PodRecord,
    node_record,
    pod_placement,
    pod_requests,
)
from kube_elevator.tasks.core.selectors import (
    LabelRequirement,
    LabelSelector,
    aggregated,
    requirement_errors,
    selector_from_api,
)

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


class SchedulingError(ValueError):
    """What a plugin's PreFilter or PreScore answers with an Error status: a pod whose terms
    the scheduler cannot read (an invalid label key or value)."""


NamespaceLabels = Mapping[str, Mapping[str, str]]  # namespace name -> its labels
NO_NAMESPACES: NamespaceLabels = {}


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """framework.AffinityTerm: a PodAffinityTerm with its selectors parsed. `namespaces` is
    the term's list, or the pod's own namespace when neither the list nor a namespaceSelector
    is given (GetNamespacesFromPodAffinityTerm); `all_namespaces` is an empty namespaceSelector
    (`{}`: every namespace), `namespace_selector` a non-empty one (matched against the labels
    of the namespace, which must exist: the plugin lists namespaces with it). `selector` None is
    a null labelSelector (labels.Nothing)."""

    namespaces: frozenset[str]
    selector: LabelSelector | None
    topology_key: str
    all_namespaces: bool = False
    namespace_selector: LabelSelector | None = None

    def matches(self, namespace: str, labels: Mapping[str, str],
                namespace_labels: NamespaceLabels) -> bool:
        """AffinityTerm.Matches: the pod's namespace is among the term's, and its labels
        match the term's selector."""
        if self.selector is None or not self.selector.matches(labels):
            return False
        if namespace in self.namespaces or self.all_namespaces:
            return True
        if self.namespace_selector is None:
            return False
        known = namespace_labels.get(namespace)
        return known is not None and self.namespace_selector.matches(known)


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    """framework.WeightedAffinityTerm."""

    term: AffinityTerm
    weight: int


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """A pod's podAffinity and podAntiAffinity terms (framework.PodInfo's
    RequiredAffinityTerms, RequiredAntiAffinityTerms, PreferredAffinityTerms,
    PreferredAntiAffinityTerms)."""

    required: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti: tuple[WeightedAffinityTerm, ...] = ()


VolumeZone = tuple[str, frozenset[str]]  # a bound PV's zone or region label: key, its zones


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
    # spec.preemptionPolicy Never: it waits rather than preempt (PodEligibleToPreemptOthers)
    preempt_never: bool = False
    terminating: bool = False
    # podAffinity or podAntiAffinity given (framework.podWithAffinity), and their terms
    pod_affinity: bool = False
    affinity: PodAffinity | None = None
    # NodePorts: the host ports its containers ask for
    host_ports: tuple[HostPort, ...] = ()
    # VolumeZone: the zone labels of the PVs its claims are bound to; `volume_error` a claim
    # the plugin cannot resolve (no such claim, no PV): the pod fits no node
    volume_zones: tuple[VolumeZone, ...] = ()
    volume_error: str = ""

    @property
    def required_anti_affinity(self) -> bool:
        """framework.podWithRequiredAntiAffinity."""
        return self.affinity is not None and bool(self.affinity.required_anti)

    @property
    def hard_spread(self) -> bool:
        """A DoNotSchedule topology spread constraint of its own."""
        return any(c.when_unsatisfiable == DO_NOT_SCHEDULE for c in self.spread_constraints)

    @property
    def plain(self) -> bool:
        """Nothing but the node-level filters apply to it: no pod (anti-)affinity, spreading
        of its own, host port or zonal volume (the scheduler's fast path)."""
        return not (self.pod_affinity or self.spread_constraints or self.host_ports
                    or self.volume_zones or self.volume_error)

    @property
    def label_set(self) -> frozenset[tuple[str, str]]:
        return frozenset(self.labels.items())

    @property
    def filter_shape(self) -> tuple[Any, ...]:
        """Everything the filters read of the pod."""
        return (self.cpu_milli, self.memory_bytes, self.extended,
                tuple(sorted(self.node_selector.items())), self.required_terms,
                self.tolerations, self.namespace, self.label_set, self.affinity,
                self.spread_constraints, self.host_ports, self.volume_zones,
                self.volume_error)

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


# volumezone/volume_zone.go: the PV labels it reads, and the beta labels' GA names.
ZONE_LABELS = ("failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
               "topology.kubernetes.io/zone", "topology.kubernetes.io/region")
GA_LABEL = {"failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
            "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


class Volumes:
    """The PersistentVolumeClaims, PersistentVolumes and StorageClasses VolumeZone reads."""

    def __init__(self, objects: Iterable[Mapping[str, Any]] = ()) -> None:
        self.claims: dict[tuple[str, str], Mapping[str, Any]] = {}
        self.volumes: dict[str, Mapping[str, str]] = {}  # PV name -> its labels
        # StorageClass name -> its volumeBindingMode ("" when unset)
        self.binding_modes: dict[str, str] = {}
        for obj in objects:
            kind = str(obj.get("kind", ""))
            metadata = obj.get("metadata") or {}
            name = str(metadata.get("name") or "")
            if kind == "PersistentVolumeClaim":
                self.claims[(str(metadata.get("namespace") or ""), name)] = \
                    obj.get("spec") or {}
            elif kind == "PersistentVolume":
                self.volumes[name] = dict(metadata.get("labels") or {})
            elif kind == "StorageClass":
                self.binding_modes[name] = str(obj.get("volumeBindingMode") or "")

    def zones(self, namespace: str, spec: Mapping[str, Any]) -> tuple[tuple[VolumeZone, ...], str]:
        """VolumeZone's PreFilter (getPVbyPod): the zone labels of the PVs the pod's claims
        are bound to, split at "__" (LabelZonesToList); or the reason the pod is
        unschedulable (a missing claim, class or PV). A claim waiting for its first consumer
        is skipped (the volume binder places it)."""
        found: list[VolumeZone] = []
        for volume in spec.get("volumes") or ():
            claim_ref = volume.get("persistentVolumeClaim")
            if not claim_ref:
                continue
            claim_name = str(claim_ref.get("claimName") or "")
            claim = self.claims.get((namespace, claim_name))
            if claim is None:
                return (), f'persistentvolumeclaim "{claim_name}" not found'
            pv_name = str(claim.get("volumeName") or "")
            if not pv_name:
                class_name = str(claim.get("storageClassName") or "")
                if not class_name:
                    return (), "PersistentVolumeClaim had no pv name and storageClass name"
                mode = self.binding_modes.get(class_name)
                if mode is None:
                    return (), f'storageclasses.storage.k8s.io "{class_name}" not found'
                if not mode:
                    return (), f'VolumeBindingMode not set for StorageClass "{class_name}"'
                if mode == WAIT_FOR_FIRST_CONSUMER:
                    continue
                return (), "PersistentVolume had no name"
            labels = self.volumes.get(pv_name)
            if labels is None:
                return (), f'persistentvolume "{pv_name}" not found'
            found.extend((key, frozenset(value.split("__")))
                         for key, value in sorted(labels.items()) if key in ZONE_LABELS)
        return tuple(found), ""


NO_VOLUMES = Volumes()


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


# --- pod (anti-)affinity terms ------------------------------------------------------------------


def validated_selector(obj: Any, path: str) -> LabelSelector | None:
    """metav1.LabelSelectorAsSelector: None for a null selector (labels.Nothing), an empty
    LabelSelector for `{}` (labels.Everything); an invalid key, value or operator is the
    plugin's error (`SchedulingError`): where it is, then LabelSelectorAsSelector's own words
    (labels.NewRequirement's field errors, without a path of their own), as kube-scheduler
    prefixes them with the term they come from (framework.PodInfo.Update:
    `requiredAffinityTerms: key: Invalid value: "invalid key": name part must ...`)."""
    if obj is None:
        return None
    if not isinstance(obj, Mapping):
        raise SchedulingError(f"{path}: Invalid value: not a label selector")
    for key, value in sorted((obj.get("matchLabels") or {}).items()):
        if errors := requirement_errors(str(key), "In", [str(value)]):
            raise SchedulingError(f"{path}.matchLabels: {aggregated(errors)}")
    for index, expr in enumerate(obj.get("matchExpressions") or ()):
        if errors := requirement_errors(str(expr.get("key", "")), str(expr.get("operator", "")),
                                        expr.get("values")):
            raise SchedulingError(f"{path}.matchExpressions[{index}]: {aggregated(errors)}")
    return selector_from_api(obj)


def affinity_term(obj: Mapping[str, Any], namespace: str, path: str) -> AffinityTerm:
    """framework.newAffinityTerm over one PodAffinityTerm of a pod in `namespace`."""
    names = [str(n) for n in obj.get("namespaces") or ()]
    raw_ns_selector = obj.get("namespaceSelector")
    if not names and raw_ns_selector is None:
        names = [namespace]
    ns_selector = validated_selector(raw_ns_selector, f"{path}.namespaceSelector")
    return AffinityTerm(
        namespaces=frozenset(names),
        selector=validated_selector(obj.get("labelSelector"), f"{path}.labelSelector"),
        topology_key=str(obj.get("topologyKey") or ""),
        all_namespaces=ns_selector is not None and ns_selector.empty,
        namespace_selector=ns_selector if ns_selector is not None and not ns_selector.empty
        else None)


def read_pod_affinity(affinity: Mapping[str, Any], namespace: str) -> PodAffinity | None:
    """The pod's podAffinity and podAntiAffinity (None when it has neither)."""
    together = affinity.get("podAffinity")
    apart = affinity.get("podAntiAffinity")
    if together is None and apart is None:
        return None
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"

    def terms(section: Any, name: str) -> tuple[AffinityTerm, ...]:
        return tuple(affinity_term(t, namespace, f"{name}.{required}[{i}]")
                     for i, t in enumerate((section or {}).get(required) or ()))

    def weighted(section: Any, name: str) -> tuple[WeightedAffinityTerm, ...]:
        return tuple(WeightedAffinityTerm(
            affinity_term(t.get("podAffinityTerm") or {}, namespace,
                          f"{name}.{preferred}[{i}].podAffinityTerm"),
            int(t.get("weight") or 0))
            for i, t in enumerate((section or {}).get(preferred) or ()))

    return PodAffinity(terms(together, "podAffinity"), terms(apart, "podAntiAffinity"),
                       weighted(together, "podAffinity"), weighted(apart, "podAntiAffinity"))


@lru_cache(maxsize=8192)
def placement_terms(placement: PodPlacement | None, namespace: str
                    ) -> tuple[PodAffinity | None, tuple[SpreadConstraint, ...]]:
    """A pod's podAffinity/podAntiAffinity terms and topology spread constraints, read from
    its `PodPlacement` (the JSON pod records keep); parsed once per distinct placement."""
    if placement is None:
        return None, ()
    affinity: dict[str, Any] = {}
    if placement.pod_affinity:
        affinity["podAffinity"] = orjson.loads(placement.pod_affinity)
    if placement.pod_anti_affinity:
        affinity["podAntiAffinity"] = orjson.loads(placement.pod_anti_affinity)
    spread = orjson.loads(placement.spread_constraints) if placement.spread_constraints else ()
    return (read_pod_affinity(affinity, namespace),
            tuple(_constraint(c) for c in spread or ()))


def controller_owner(metadata: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """metav1.GetControllerOf: the owner reference with `controller: true`."""
    for owner in metadata.get("ownerReferences") or ():
        if owner.get("controller"):
            return (str(owner.get("apiVersion", "")), str(owner.get("kind", "")),
                    str(owner.get("name", "")))
    return None


def sched_pod(obj: Mapping[str, Any], workloads: Workloads = NO_WORKLOADS,
              volumes: Volumes | None = None) -> SchedPod:
    """The scheduler's view of a Pod object; `workloads` resolves the default spreading,
    `volumes` (when given) the zones of its bound PersistentVolumes. An invalid pod
    (anti-)affinity selector raises `SchedulingError`."""
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
    zones, volume_error = volumes.zones(namespace, body) if volumes is not None else ((), "")
    placement = pod_placement(spec)
    inter_pod, spread = placement_terms(placement, namespace)
    return SchedPod(
        namespace=namespace, name=str(metadata.get("name") or ""), labels=labels,
        node_name=str(body.get("nodeName") or ""), cpu_milli=cpu, memory_bytes=memory,
        extended=extended, nonzero_cpu_milli=nonzero_cpu, nonzero_memory_bytes=nonzero_memory,
        node_selector=dict(body.get("nodeSelector") or {}),
        required_terms=tuple(_term(t) for t in required.get("nodeSelectorTerms") or ()),
        preferred_terms=tuple(PreferredTerm(int(p.get("weight", 0)), _term(p.get("preference")))
                              for p in preferred),
        tolerations=spec.tolerations or (),
        spread_constraints=spread,
        default_selector=workloads.default_selector(namespace, labels,
                                                    controller_owner(metadata)),
        priority=int(body.get("priority") or 0),
        preempt_never=body.get("preemptionPolicy") == "Never",
        terminating=metadata.get("deletionTimestamp") is not None,
        pod_affinity=inter_pod is not None, affinity=inter_pod,
        host_ports=placement.host_ports if placement is not None else (),
        volume_zones=zones, volume_error=volume_error)


def sched_from_record(record: PodRecord) -> SchedPod:
    """The scheduler's view of a pod record, as the Cluster Autoscaler holds pods: what the
    filters read (requests, node selector and required terms, tolerations, labels, priority,
    pod (anti-)affinity, spreading, host ports); the parts only scores read are left out."""
    inter_pod, spread = placement_terms(record.placement, record.namespace)
    placement = record.placement
    return SchedPod(
        namespace=record.namespace, name=record.name, labels=record.labels,
        node_name=record.node_name, cpu_milli=record.cpu_request_milli,
        memory_bytes=record.memory_request_bytes, extended=record.extended_requests,
        nonzero_cpu_milli=record.cpu_request_milli,
        nonzero_memory_bytes=record.memory_request_bytes,
        node_selector=record.node_selector, required_terms=record.required_node_terms,
        tolerations=record.tolerations, spread_constraints=spread, priority=record.priority,
        terminating=bool(record.deleting_since_unix_seconds),
        pod_affinity=inter_pod is not None, affinity=inter_pod,
        host_ports=placement.host_ports if placement is not None else ())


__all__ = [
    "DEFAULT_MEMORY_REQUEST_BYTES",
    "DEFAULT_MILLI_CPU_REQUEST",
    "GA_LABEL",
    "NO_NAMESPACES",
    "NO_VOLUMES",
    "NO_WORKLOADS",
    "ZONE_LABELS",
    "AffinityTerm",
    "HostPort",
    "NamespaceLabels",
    "PodAffinity",
    "PreferredTerm",
    "SchedPod",
    "SchedulingError",
    "SpreadConstraint",
    "VolumeZone",
    "Volumes",
    "WeightedAffinityTerm",
    "Workloads",
    "affinity_term",
    "controller_owner",
    "node_from_api",
    "nonzero_requests",
    "placement_terms",
    "read_pod_affinity",
    "sched_from_record",
    "sched_pod",
    "validated_selector",
]
