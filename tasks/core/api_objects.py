"""Raw API JSON, only the fields we read, decoded with msgspec.

The Kubernetes client's typed models cost ~30 s and 3 GB for 100,000 pods; these structs name
only the fields the algorithms read (unknown fields are skipped without being built).
"""

from __future__ import annotations

import msgspec

from kube_elevator.tasks.core.quantity import QuantityText

# --- raw API JSON, only the fields we read ---------------------------------------------
# One struct decodes any object kind (unknown fields are skipped), so a mixed `List` such as
# `kubectl get nodes,pods,leases -o json` decodes in one pass.


# A resource list (`requests`, `allocatable`, `overhead`) is decoded whole, every resource name
# kept: extended resources (`nvidia.com/gpu`, `example.com/foo`), hugepages and
# `ephemeral-storage` count in fit checks as cpu and memory do (CA §1.1, the scheduler's
# NodeResourcesFit). A two-key dict costs the decoder about what the old two-field struct did.
ResourceList = dict[str, QuantityText]
CPU = "cpu"
MEMORY = "memory"
PODS = "pods"  # a node's pod capacity: not a request, kept out of `extended_*`
# (resource name, amount) pairs besides cpu and memory, sorted by name, zero amounts left out;
# amounts as Quantity.Value(): whole units for extended resources, bytes for hugepages and
# ephemeral-storage.
ExtendedResources = tuple[tuple[str, int], ...]
NO_EXTENDED: ExtendedResources = ()


class RawResources(msgspec.Struct, gc=False):
    requests: ResourceList | None = None


class RawPort(msgspec.Struct, gc=False):
    hostPort: int = 0
    hostIP: str = ""
    protocol: str = ""


class RawContainer(msgspec.Struct, gc=False):
    resources: RawResources | None = None
    restartPolicy: str | None = None  # "Always" on an init container: a native sidecar
    ports: list[RawPort] | None = None
HostPort = tuple[str, str, int]  # (hostIP, protocol, hostPort), "0.0.0.0" and "TCP" when unset


class PodPlacement(msgspec.Struct, frozen=True, gc=False):
    """What the scheduler's filters read of a pod beyond its requests, node affinity and
    tolerations, for the few pods that have any: podAffinity, podAntiAffinity and
    topologySpreadConstraints as their JSON (parsed where a filter needs them), host ports.

    Example:
        >>> ke.PodPlacement(host_ports=(("TCP", "0.0.0.0", 8080),)).host_ports
        (('TCP', '0.0.0.0', 8080),)
    """

    pod_affinity: bytes = b""
    pod_anti_affinity: bytes = b""
    spread_constraints: bytes = b""
    host_ports: tuple[HostPort, ...] = ()

    @property
    def required_anti_affinity(self) -> bool:
        """It has required anti-affinity terms (other pods are then checked against them)."""
        return b"requiredDuringSchedulingIgnoredDuringExecution" in self.pod_anti_affinity


class RawOwnerReference(msgspec.Struct, gc=False):
    kind: str = ""
    controller: bool = False


SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
DAEMONSET_POD = "cluster-autoscaler.kubernetes.io/daemonset-pod"
CONFIG_MIRROR = "kubernetes.io/config.mirror"


class RawAnnotations(msgspec.Struct, gc=False):
    """The annotations the records read, by key; every other annotation is skipped unbuilt."""

    config_source: str | None = msgspec.field(default=None, name="kubernetes.io/config.source")
    config_mirror: str | None = msgspec.field(default=None, name=CONFIG_MIRROR)
    no_delete: str | None = msgspec.field(default=None, name="atlassian.com/no-delete")
    safe_to_evict: str | None = msgspec.field(default=None, name=SAFE_TO_EVICT)
    safe_to_evict_local_volumes: str | None = msgspec.field(
        default=None, name=SAFE_TO_EVICT_LOCAL_VOLUMES)
    scale_down_disabled: str | None = msgspec.field(default=None, name=SCALE_DOWN_DISABLED)
    daemonset_pod: str | None = msgspec.field(default=None, name=DAEMONSET_POD)


NO_ANNOTATIONS = RawAnnotations()
ANNOTATIONS_DECODER = msgspec.json.Decoder(RawAnnotations | None)
_ANNOTATION_DICT_DECODER = msgspec.json.Decoder(dict[str, str])


def absent(raw: msgspec.Raw) -> bool:
    """An empty Raw (key missing) or JSON null."""
    size = len(raw)
    return size == 0 or (size == 4 and bytes(raw) == b"null")


class RawMetadata(msgspec.Struct, gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    labels: dict[str, str] | None = None
    # Kept as undecoded bytes: a pod's annotations (often large: last-applied configuration)
    # are never built as a dict; records decode only the keys of RawAnnotations from them.
    annotations_raw: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="annotations")
    ownerReferences: list[RawOwnerReference] | None = None

    @property
    def annotations(self) -> dict[str, str] | None:
        """All annotations as a dict, decoded on demand (Leases read theirs whole)."""
        if absent(self.annotations_raw):
            return None
        return _ANNOTATION_DICT_DECODER.decode(self.annotations_raw)

    def known_annotations(self) -> RawAnnotations:
        """Only the annotations the records read."""
        if absent(self.annotations_raw):
            return NO_ANNOTATIONS
        return ANNOTATIONS_DECODER.decode(self.annotations_raw) or NO_ANNOTATIONS


class MatchExpression(msgspec.Struct, frozen=True, gc=False):
    """A selector requirement: `key`, `operator` (In, NotIn, Exists, DoesNotExist, Gt, Lt), `values`.

    Example:
        >>> ke.MatchExpression("zone", "In", ("us-east-1a",)).values
        ('us-east-1a',)
    """

    key: str = ""
    operator: str = ""
    values: tuple[str, ...] = ()


class NodeSelectorTerm(msgspec.Struct, frozen=True, gc=False):
    """One term of a required node affinity: a node matches when every expression does.

    Example:
        >>> term = ke.NodeSelectorTerm(matchExpressions=(ke.MatchExpression("pool", "In", ("batch",)),))
        >>> term.matchExpressions[0].key
        'pool'
    """

    matchExpressions: tuple[MatchExpression, ...] = ()
    matchFields: tuple[MatchExpression, ...] = ()  # over the node's fields: `metadata.name`


class RawNodeSelector(msgspec.Struct, gc=False):
    nodeSelectorTerms: tuple[NodeSelectorTerm, ...] = ()


class RawNodeAffinity(msgspec.Struct, gc=False):
    requiredDuringSchedulingIgnoredDuringExecution: RawNodeSelector | None = None


class RawAffinity(msgspec.Struct, gc=False):
    nodeAffinity: RawNodeAffinity | None = None
    # Only presence matters; Raw keeps the bytes undecoded (an empty Raw means absent).
    podAffinity: msgspec.Raw = msgspec.Raw()
    podAntiAffinity: msgspec.Raw = msgspec.Raw()


class RawEmptyDir(msgspec.Struct, gc=False):
    medium: str = ""


class RawVolume(msgspec.Struct, gc=False):
    name: str = ""
    # Only presence matters for hostPath (an empty Raw means absent).
    hostPath: msgspec.Raw = msgspec.Raw()
    emptyDir: RawEmptyDir | None = None


class LocalVolume(msgspec.Struct, frozen=True, gc=False):
    """A volume that lives on the node's disk (CA §1.4: hostPath, emptyDir not in memory).

    Example:
        >>> ke.LocalVolume("scratch", "emptyDir").kind
        'emptyDir'
    """

    name: str
    kind: str  # "hostPath" or "emptyDir"


class Toleration(msgspec.Struct, frozen=True, gc=False):
    """A pod's toleration of a node taint (`spec.tolerations[]`).

    Example:
        >>> ke.Toleration("dedicated", "Equal", "gpu", "NoSchedule").effect
        'NoSchedule'
    """

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


class Taint(msgspec.Struct, frozen=True, gc=False):
    """A node's taint (`spec.taints[]`): Escalator's own is `atlassian.com/escalator`.

    Example:
        >>> ke.Taint("atlassian.com/escalator", "1795262400", "NoSchedule").key
        'atlassian.com/escalator'
    """

    key: str
    value: str = ""
    effect: str = ""


class RawCondition(msgspec.Struct, gc=False):
    type: str = ""
    status: str = ""
    reason: str | None = None


class RawSpec(msgspec.Struct, gc=False):
    # Pod
    nodeName: str | None = None
    nodeSelector: dict[str, str] | None = None
    affinity: RawAffinity | None = None
    containers: list[RawContainer] | None = None
    initContainers: list[RawContainer] | None = None
    overhead: ResourceList | None = None
    resources: RawResources | None = None  # pod-level resources (PodLevelResources)
    tolerations: tuple[Toleration, ...] | None = None
    volumes: list[RawVolume] | None = None
    priority: int | None = None
    preemptionPolicy: str | None = None
    terminationGracePeriodSeconds: int | None = None
    topologySpreadConstraints: msgspec.Raw = msgspec.Raw()
    # Node
    unschedulable: bool = False
    taints: tuple[Taint, ...] | None = None
    providerID: str | None = None


class RawStatus(msgspec.Struct, gc=False):
    phase: str | None = None
    nominatedNodeName: str | None = None
    conditions: list[RawCondition] | None = None
    allocatable: ResourceList | None = None
    capacity: ResourceList | None = None


class RawObject(msgspec.Struct, gc=False):
    kind: str = ""
    apiVersion: str = ""
    metadata: RawMetadata = msgspec.field(default_factory=RawMetadata)
    spec: RawSpec | None = None
    status: RawStatus | None = None


class RawListMetadata(msgspec.Struct, gc=False):
    continue_: str | None = msgspec.field(default=None, name="continue")
    resourceVersion: str | None = None


class RawList(msgspec.Struct, gc=False):
    kind: str = ""
    items: list[RawObject] = []
    metadata: RawListMetadata = msgspec.field(default_factory=RawListMetadata)


LIST_DECODER = msgspec.json.Decoder(RawList)
OBJECT_DECODER = msgspec.json.Decoder(RawObject)
