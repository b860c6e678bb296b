"""A scenario's workload shapes from a cluster snapshot: `kubectl get pods,nodes,pv,pvc -A -o
json` (one List, or a file per kind), for `elevator scenario from-kubectl` and for
`from-prometheus --shapes`.

Pods are grouped by their controlling owner, as the controllers that made them: a ReplicaSet's
pods are their Deployment's (the name less `-<pod-template-hash>`), a StatefulSet's, a Job's
and a bare pod's are their own. Each owner is a wave of as many pods as it had (terminal pods
aside), with what its pods say about placement: requests as kube-scheduler counts them
(`tasks.core.records.pod_requests`: the containers' sum, init containers and sidecars, pod
overhead), the labels all its pods share, node selector, tolerations, priority, affinity,
topology spreading, host ports, and the zone of a bound volume (the PV's zone label, or its
node affinity), one wave per zone when its pods' volumes are in several. A DaemonSet's pods,
and a node's static pods, are what each node of their group runs (`asgs[].daemonsets`), as
`from-prometheus` has them.

Nodes become one ASG per node group (its label), of the group's node count, its nodes' instance
type (`node.kubernetes.io/instance-type`, else the known type nearest their allocatable), its
nodes' zone, and the labels all its nodes share (a pod's node affinity on `kubernetes.io/os`
must find them on the simulated nodes too).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from pydantic import BaseModel, ValidationError

from kube_elevator.fakes.scenario_constraints import (
    REGION_LABEL,
    ZONE_LABEL,
    Affinity,
    ContainerPort,
    TopologySpreadConstraint,
)
from kube_elevator.fakes.scenario_import import PerNodePod, per_node_pods
from kube_elevator.fakes.scenario_import_nodes import INSTANCE_TYPE_KEYS, NodeSize, NodeType, node_type
from kube_elevator.tasks.core.api_objects import RawMetadata, RawNodeSelector
from kube_elevator.tasks.core.decode import ClusterSnapshot, decode_items
from kube_elevator.tasks.core.documents import load_file
from kube_elevator.tasks.core.errors import InputError, join_location
from kube_elevator.tasks.core.quantity import bytes_quantity, canonical_quantity
from kube_elevator.tasks.core.records import NodeRecord, PodRecord
from kube_elevator.tasks.escalator.config import NodeGroupConfig

BETA_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# Labels a controller gives each pod its own value of: no wave's pods share them.
_PER_POD_LABELS = frozenset({"statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index",
                             "batch.kubernetes.io/job-completion-index"})
# Node labels the simulator sets itself (the node's name and its ASG's zone).
_SIMULATOR_NODE_LABELS = frozenset({HOSTNAME_LABEL, ZONE_LABEL, BETA_ZONE_LABEL, REGION_LABEL,
                                    *INSTANCE_TYPE_KEYS,
                                    "failure-domain.beta.kubernetes.io/region"})
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
PER_NODE_KINDS = ("DaemonSet", "Node")
DEFAULT_ZONE = "us-east-1a"  # a node without a zone label: the scenario's default zone
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass
class Snapshot:
    """The snapshot's objects: pods and nodes as records (and each pod's object, with the
    place it was read from), PersistentVolumes by name, claims by (namespace, name)."""

    pods: list[tuple[PodRecord, dict[str, Any], str]] = field(default_factory=list)
    nodes: list[NodeRecord] = field(default_factory=list)
    volumes: dict[str, _Volume] = field(default_factory=dict)
    claims: dict[tuple[str, str], _Volume] = field(default_factory=dict)


class _VolumeNodeAffinity(msgspec.Struct):
    required: RawNodeSelector | None = None


class _VolumeSpec(msgspec.Struct):
    volumeName: str = ""  # a claim's
    nodeAffinity: _VolumeNodeAffinity | None = None  # a volume's


class _Volume(msgspec.Struct):
    """What is read of a PersistentVolume or claim, checked before it is read."""

    metadata: RawMetadata = msgspec.field(default_factory=RawMetadata)
    spec: _VolumeSpec = msgspec.field(default_factory=_VolumeSpec)


def _volume(item: dict[str, Any], where: str, kind: str, name: str) -> _Volume:
    try:
        return msgspec.convert(item, _Volume)
    except msgspec.ValidationError as error:  # "Expected `str`, got `int` - at `$.spec.x`"
        rule, _, path = str(error).partition(" - at `$.")
        raise InputError([join_location(where, f"{kind} {name} {path.rstrip('`')}".strip(),
                                        rule)]) from None


def _items(document: Any, source: str) -> tuple[list[Any], str]:
    """A List's (or typed list's) items and the kind its items default to."""
    if not isinstance(document, dict) or not str(document.get("kind", "")).endswith("List"):
        shown = document.get("kind") if isinstance(document, dict) else type(document).__name__
        raise InputError([join_location(source, "kind", (
            f"expected a Kubernetes List (kubectl get pods,nodes,pv,pvc -A -o json), got "
            f"{shown or 'no kind'}"))])
    kind = str(document["kind"])
    items = document.get("items") or []
    if not isinstance(items, list):
        raise InputError([join_location(source, "items", "must be a list")])
    return items, kind[:-4] if kind != "List" else ""


def read_snapshot(paths: Sequence[str | Path]) -> Snapshot:
    """Every file's pods, nodes, PersistentVolumes and claims (other kinds are ignored); a pod
    or node the records' decoder refuses is refused as `elevator plan` refuses it (file, item,
    key path, rule), and so is one listed twice."""
    snapshot = Snapshot()
    seen: dict[tuple[str, str, str], str] = {}
    for path in paths:
        source = str(path)
        items, default_kind = _items(load_file(path), source)
        for index, item in enumerate(items):
            where = f"{source}: items[{index}]"
            if not isinstance(item, dict):
                raise InputError([join_location(where, "", "an object, as kubectl lists them")])
            kind = str(item.get("kind") or default_kind)
            metadata = item.get("metadata")
            if not isinstance(metadata, dict):
                metadata = {}
            key = (kind, str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
            if kind in ("Pod", "Node", "PersistentVolume", "PersistentVolumeClaim"):
                if key in seen:
                    raise InputError([join_location(where, "", (
                        f"{_named(kind, key[1], key[2])} is listed twice (also at {seen[key]})"))])
                seen[key] = where
            if kind in ("Pod", "Node"):
                records = ClusterSnapshot()
                # the stdlib's encoder: orjson stops at 64-bit integers, which the decoder
                # refuses with the item's key path
                decode_items(records, [msgspec.Raw(json.dumps(item).encode())], source, kind,
                             first_index=index)
                if kind == "Pod":
                    snapshot.pods.append((records.pods[0], item, where))
                else:
                    snapshot.nodes.append(records.nodes[0])
            elif kind == "PersistentVolume":
                snapshot.volumes[key[2]] = _volume(item, where, kind, key[2])
            elif kind == "PersistentVolumeClaim":
                snapshot.claims[(key[1], key[2])] = _volume(item, where, kind,
                                                            f"{key[1]}/{key[2]}")
    return snapshot


def _named(kind: str, namespace: str, name: str) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _without_nulls(value: Any) -> Any:
    """The object as the API server serves it: a null is a field left out (`omitempty`)."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def _validated(model: type[BaseModel], value: Any, where: str, path: str) -> dict[str, Any]:
    """`value` through the scenario's model of it (Kubernetes' own shape), as it goes into the
    scenario; InputError naming the file, item, key path and rule."""
    try:
        return model.model_validate(_without_nulls(value)).model_dump(
            by_alias=True, exclude_none=True, exclude_defaults=True)
    except ValidationError as error:
        raise InputError([join_location(f"{where} {path}" + "".join(
            f"[{step}]" if isinstance(step, int) else f".{step}" for step in detail["loc"]),
            "", detail["msg"].removeprefix("Value error, ")) for detail in error.errors()]) \
            from None


# --- owners -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Owner:
    """The controller a pod's wave stands for: (kind, namespace, name); kind "" for a bare pod."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind or 'Pod'} {self.namespace}/{self.name}"


def owner_of(pod: Mapping[str, Any]) -> Owner:
    """The pod's controlling owner; a ReplicaSet's pods are its Deployment's when the
    ReplicaSet's name is the Deployment's and the pod's `pod-template-hash`."""
    metadata = pod.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    for reference in metadata.get("ownerReferences") or ():
        if not reference.get("controller"):
            continue
        kind, name = str(reference.get("kind", "")), str(reference.get("name", ""))
        template_hash = (metadata.get("labels") or {}).get("pod-template-hash")
        if kind == "ReplicaSet" and template_hash and name.endswith(f"-{template_hash}"):
            return Owner("Deployment", namespace, name[:-len(template_hash) - 1])
        return Owner(kind, namespace, name)
    return Owner("", namespace, str(metadata.get("name") or ""))


def deployment_of_replicaset(name: str) -> str:
    """A ReplicaSet's Deployment when only its name is known (kube-state-metrics'
    `created_by_name`): the name less a last part that looks like a pod-template-hash
    (rand.SafeEncodeString: 6 to 10 of `bcdfghjklmnpqrstvwxz2456789`)."""
    base, _, suffix = name.rpartition("-")
    if base and re.fullmatch(r"[bcdfghjklmnpqrstvwxz2456789]{6,10}", suffix):
        return base
    return name


# --- the zones of volumes -------------------------------------------------------------------------

def volume_zone(snapshot: Snapshot, pod: Mapping[str, Any]) -> str | None:
    """The zone the pod's bound volumes pin it to (VolumeZone's reading of the PV: its zone
    label, else a required node-affinity term on the zone naming one zone); None for a pod
    without one."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    spec = pod.get("spec")
    for volume in (spec.get("volumes") if isinstance(spec, dict) else None) or ():
        claim_ref = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
        if not isinstance(claim_ref, dict):
            continue
        claim = snapshot.claims.get((namespace, str(claim_ref.get("claimName") or "")))
        bound = snapshot.volumes.get(claim.spec.volumeName) if claim is not None else None
        zone = _zone_of_volume(bound) if bound is not None else ""
        if zone:
            return zone
    return None


def _zone_of_volume(volume: _Volume) -> str:
    labels = volume.metadata.labels or {}
    for key in (ZONE_LABEL, BETA_ZONE_LABEL):
        zone = labels.get(key) or ""
        if zone and "__" not in zone:  # "a__b": a volume several zones reach pins no zone
            return zone
    affinity = volume.spec.nodeAffinity
    required = affinity.required if affinity is not None else None
    for term in required.nodeSelectorTerms if required is not None else ():
        for expression in term.matchExpressions:
            values = expression.values or ()
            if (expression.key in (ZONE_LABEL, BETA_ZONE_LABEL) and expression.operator == "In"
                    and len(values) == 1):
                return str(values[0])
    return ""


# --- waves ---------------------------------------------------------------------------------------

@dataclass
class Shape:
    """One owner's pods (in one volume zone): the wave they become."""

    owner: Owner
    zone: str | None
    pods: list[PodRecord] = field(default_factory=list)
    objects: list[tuple[dict[str, Any], str]] = field(default_factory=list)


@dataclass
class Shapes:
    """The snapshot's workload as waves, the per-node pods of each group, and what was left
    out (one line each, for the command to print)."""

    waves: list[dict[str, Any]]
    per_node: dict[str, tuple[PerNodePod, ...]]
    notes: list[str]
    # The wave (its `name`) each owner's pods became, for `from-prometheus --shapes`.
    wave_of_owner: dict[Owner, str] = field(default_factory=dict)


def _group_of_node(nodes: Iterable[NodeRecord], groups: Sequence[NodeGroupConfig]
                   ) -> dict[str, str]:
    found = {}
    for node in nodes:
        for group in groups:
            if node.labels.get(group.label_key) == group.label_value:
                found[node.name] = group.name
                break
    return found


def _common_labels(label_sets: Sequence[Mapping[str, str]]) -> dict[str, str]:
    if not label_sets:
        return {}
    common = dict(label_sets[0])
    for labels in label_sets[1:]:
        common = {key: value for key, value in common.items() if labels.get(key) == value}
    return common


def _wave(shape: Shape, name: str, zones: set[str], notes: list[str]) -> dict[str, Any]:
    """The wave of one owner's pods: the largest request among them (a rollout mid-way has
    two), the rest from its first pod (a controller gives them all one template)."""
    placements = [_placement(obj, f"{where}: Pod {pod.namespace}/{pod.name}")
                  for pod, (obj, where) in zip(shape.pods, shape.objects, strict=True)]
    record = shape.pods[0]
    wave: dict[str, Any] = {
        "name": name, "at": "0s", "count": len(shape.pods),
        "cpu": canonical_quantity(f"{max(pod.cpu_request_milli for pod in shape.pods)}m"),
        "memory": bytes_quantity(max(pod.memory_request_bytes for pod in shape.pods))}
    extended: dict[str, int] = {}
    for pod in shape.pods:
        for resource, amount in pod.extended_requests:
            extended[resource] = max(extended.get(resource, 0), amount)
    if any(extended.values()):
        wave["extended"] = {key: canonical_quantity(str(value))
                            for key, value in sorted(extended.items()) if value}
    if record.node_selector:
        wave["node_selector"] = dict(record.node_selector)
    if record.tolerations:
        wave["tolerations"] = [
            {key: value for key, value in (("key", t.key), ("operator", t.operator or "Equal"),
                                           ("value", t.value), ("effect", t.effect)) if value}
            for t in record.tolerations]
    if record.priority:
        wave["priority"] = record.priority
    labels = _common_labels([pod.labels for pod in shape.pods])
    labels = {key: value for key, value in labels.items() if key not in _PER_POD_LABELS}
    if labels.get("app") == name:
        del labels["app"]  # a simulated pod's app label is its wave's name
    if labels:
        wave["labels"] = labels
    wave.update(placements[0])
    if shape.zone is not None:
        if shape.zone in zones:
            wave["volume_zone"] = shape.zone
        else:
            notes.append(f"{shape.owner}: its volumes are in {shape.zone}, where no node group "
                         "has nodes: the simulated pods go without the volume's zone")
    if shape.owner.kind == "Job":
        notes.append(f"{shape.owner}: a snapshot does not say how long a Job's pods run: its "
                     "wave runs to the end (give it a duration)")
    return wave


def _placement(pod: Mapping[str, Any], described: str) -> dict[str, Any]:
    """The pod's affinity, spreading and host ports as a wave's keys, each checked as the
    scenario checks it (file, item, key path, rule)."""
    spec = pod.get("spec") or {}
    found: dict[str, Any] = {}
    if spec.get("affinity"):
        affinity = _validated(Affinity, spec["affinity"], described, "spec.affinity")
        if affinity:
            found["affinity"] = affinity
    constraints = [_validated(TopologySpreadConstraint, constraint, described,
                              f"spec.topologySpreadConstraints[{index}]")
                   for index, constraint in enumerate(_listed(
                       spec, "topologySpreadConstraints", described, "spec"))]
    if constraints:
        found["topology_spread_constraints"] = constraints
    ports = [_validated(ContainerPort, port, described,
                        f"spec.containers[{index}].ports[{number}]")
             for index, container in enumerate(_listed(spec, "containers", described, "spec"))
             for number, port in enumerate(_listed(container, "ports", described,
                                                   f"spec.containers[{index}]"))
             if isinstance(port, dict) and port.get("hostPort")]
    if ports:
        found["ports"] = ports
    return found


def _listed(parent: Mapping[str, Any], key: str, described: str, path: str) -> list[Any]:
    """`parent[key]` when it is a list (absent or null: empty); else InputError."""
    value = parent.get(key) if isinstance(parent, Mapping) else None
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError([join_location(f"{described} {path}.{key}", "", "must be a list")])
    return value


def _wave_names(shapes: Sequence[Shape]) -> list[str]:
    """Each wave's name, unique: the pods' `app` label when it is a DNS label the other waves
    do not take, else the owner's name (the pods keep their `app` label), with the volume zone
    when an owner's pods are in several; a number when still taken."""
    def candidate(shape: Shape, use_app: bool) -> str:
        app = _common_labels([pod.labels for pod in shape.pods]).get("app", "")
        base = app if use_app and app and _DNS_LABEL.match(app) else shape.owner.name
        split = sum(1 for other in shapes if other.owner == shape.owner) > 1
        return f"{base}-{shape.zone}" if split and shape.zone else base

    apps = Counter(candidate(shape, True) for shape in shapes)
    names: list[str] = []
    taken: set[str] = set()
    for shape in shapes:
        name = candidate(shape, True)
        if apps[name] > 1:
            name = candidate(shape, False)
        unique, number = name, 1
        while unique in taken:
            number += 1
            unique = f"{name}-{number}"
        taken.add(unique)
        names.append(unique)
    return names


def _bare_identity(record: PodRecord, obj: dict[str, Any], where: str, zones: set[str]) -> str:
    """What a bare pod's wave would be, its name aside: bare pods with the same one (requests,
    selector, tolerations, priority, labels, affinity, spreading, ports) are one wave, as a
    controller's pods are (ten identical bare pods are one wave of ten, not ten waves)."""
    alone = _wave(Shape(owner_of(obj), None, [record], [(obj, where)]), "", zones, [])
    return json.dumps(alone, sort_keys=True, default=str)


def read_shapes(snapshot: Snapshot, groups: Sequence[NodeGroupConfig],
                zones: set[str]) -> Shapes:
    """The snapshot's owners as waves (module docstring); `zones` are the zones the scenario's
    ASGs launch in (a volume elsewhere could never be reached)."""
    group_of_node = _group_of_node(snapshot.nodes, groups)
    shapes: dict[tuple[Owner, str | None], Shape] = {}
    bare: dict[tuple[str, str | None, str], list[tuple[Owner, PodRecord, dict[str, Any], str]]] \
        = {}
    per_node: dict[str, dict[tuple[str, str], tuple[int, int]]] = defaultdict(dict)
    terminal = elsewhere = 0
    for record, obj, where in snapshot.pods:
        owner = owner_of(obj)
        if record.phase in TERMINAL_PHASES:
            terminal += 1
            continue
        if record.node_name and record.node_name not in group_of_node:
            elsewhere += 1
            continue
        if owner.kind in PER_NODE_KINDS or record.mirror or record.static:
            if record.node_name:
                name = owner.name if owner.kind == "DaemonSet" else \
                    record.name.removesuffix(f"-{record.node_name}")
                pods = per_node[group_of_node[record.node_name]]
                was = pods.get((record.namespace, name), (0, 0))
                pods[(record.namespace, name)] = (max(was[0], record.cpu_request_milli),
                                                  max(was[1], record.memory_request_bytes))
            continue
        zone = volume_zone(snapshot, obj)
        if not owner.kind:  # a bare pod: a wave with the bare pods it is identical to
            identity = (owner.namespace, zone, _bare_identity(record, obj, where, zones))
            bare.setdefault(identity, []).append((owner, record, obj, where))
            continue
        shape = shapes.setdefault((owner, zone), Shape(owner, zone))
        shape.pods.append(record)
        shape.objects.append((obj, where))
    also: dict[Owner, list[Owner]] = {}  # a bare pods' wave's owner: the other bare pods in it
    for (_, zone, _), alike in bare.items():
        alike.sort(key=lambda found: found[0].name)
        shape = Shape(alike[0][0], zone, [pod[1] for pod in alike],
                      [(pod[2], pod[3]) for pod in alike])
        shapes[(shape.owner, zone)] = shape
        also[shape.owner] = [pod[0] for pod in alike[1:]]
    notes: list[str] = []
    ordered = sorted(shapes.values(), key=lambda s: (s.owner.namespace, s.owner.name,
                                                     s.owner.kind, s.zone or ""))
    names = _wave_names(ordered)
    waves = [_wave(shape, name, zones, notes) for shape, name in zip(ordered, names, strict=True)]
    if terminal:
        notes.append(f"{terminal} pod(s) in phase Succeeded or Failed left out")
    if elsewhere:
        notes.append(f"{elsewhere} pod(s) on nodes of no node group left out (control plane, "
                     "other pools)")
    wave_of_owner = {owner: name for shape, name in zip(ordered, names, strict=True)
                     for owner in (shape.owner, *also.get(shape.owner, ()))}
    return Shapes(waves, per_node_pods(per_node), notes, wave_of_owner)


# --- node groups ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class GroupNodes:
    """What one node group's nodes were: count, instance type, zone, shared labels."""

    count: int
    node_type: NodeType
    zone: str
    labels: dict[str, str]
    notes: tuple[str, ...] = ()


def zone_of_node(node: NodeRecord) -> str:
    return node.labels.get(ZONE_LABEL) or node.labels.get(BETA_ZONE_LABEL) or ""


def _zone(group: str, members: Sequence[NodeRecord], default_zone: str
          ) -> tuple[str, tuple[str, ...]]:
    zones = Counter(zone for zone in map(zone_of_node, members) if zone)
    zone = min(zones, key=lambda z: (-zones[z], z)) if zones else default_zone  # ties: first
    notes = (f"node group {group}: nodes in {len(zones)} zones ({', '.join(sorted(zones))}); "
             f"its simulated ASG launches in {zone} only",) if len(zones) > 1 else ()
    return zone, notes


def group_zones(snapshot: Snapshot, groups: Sequence[NodeGroupConfig],
                default_zone: str = DEFAULT_ZONE) -> dict[str, str]:
    """The zone each group's ASG launches in: its nodes' most common zone."""
    group_of_node = _group_of_node(snapshot.nodes, groups)
    return {group.name: _zone(group.name, [node for node in snapshot.nodes
                                           if group_of_node.get(node.name) == group.name],
                              default_zone)[0]
            for group in groups}


def read_groups(snapshot: Snapshot, groups: Sequence[NodeGroupConfig], fallback_type: str,
                per_node: Mapping[str, Sequence[PerNodePod]],
                default_zone: str = DEFAULT_ZONE) -> dict[str, GroupNodes]:
    """Each group's nodes (module docstring); a group with nodes in several zones gets the
    most common one, and a note (a scenario's ASG launches in one zone)."""
    group_of_node = _group_of_node(snapshot.nodes, groups)
    found = {}
    for group in groups:
        members = [node for node in snapshot.nodes if group_of_node.get(node.name) == group.name]
        held = per_node.get(group.name, ())
        kind = node_type(
            [node.labels[key] for node in members for key in INSTANCE_TYPE_KEYS[:1]
             if node.labels.get(key)] or
            [node.labels[INSTANCE_TYPE_KEYS[1]] for node in members
             if node.labels.get(INSTANCE_TYPE_KEYS[1])],
            [NodeSize(node.cpu_allocatable_milli, node.memory_allocatable_bytes)
             for node in members], fallback_type,
            NodeSize(sum(pod.cpu_milli for pod in held), sum(pod.memory_bytes for pod in held)))
        # node_type speaks of kube-state-metrics' series; here the nodes' own fields
        kind = dataclasses.replace(kind, source=kind.source.replace(
            "kube_node_status_allocatable", "status.allocatable").replace(
            "not exported", "on no node"))
        zone, notes = _zone(group.name, members, default_zone)
        labels = {key: value for key, value in _common_labels([n.labels for n in members]).items()
                  if key not in _SIMULATOR_NODE_LABELS}
        found[group.name] = GroupNodes(len(members), kind, zone, labels, notes)
    return found


def scenario_document(nodegroups: Path, groups: Sequence[NodeGroupConfig], shapes: Shapes,
                      nodes: Mapping[str, GroupNodes], duration_s: float) -> dict[str, Any]:
    """scenario.yaml's content: `from-prometheus`'s ASGs (one a group, its node count, type
    and per-node pods) in each group's zone with its nodes' shared labels, and the waves."""
    from kube_elevator.fakes.scenario_import import ClusterHistory, GroupHistory
    from kube_elevator.fakes.scenario_import_files import scenario_document as trace_document

    history = ClusterHistory([], {name: GroupHistory(seen.count, seen.node_type,
                                                     shapes.per_node.get(name, ()))
                                  for name, seen in nodes.items()})
    document = trace_document(nodegroups, groups, history, duration_s)
    del document["trace"]
    for group, asg in zip(groups, document["asgs"], strict=True):
        seen = nodes[group.name]
        asg["node_labels"] = {**seen.labels, **asg["node_labels"]}
        asg["availability_zone"] = seen.zone
    document["workload"] = shapes.waves
    return document


__all__ = ["GroupNodes", "Owner", "Shapes", "Snapshot", "deployment_of_replicaset",
           "group_zones", "owner_of", "read_groups", "read_shapes", "read_snapshot",
           "scenario_document", "volume_zone"]
