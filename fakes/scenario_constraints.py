"""What real workloads say about placement, as a scenario's waves carry it: inter-pod
(anti-)affinity, node affinity, topology spreading, host ports and a zone-pinned volume.

The shapes are Kubernetes' own (core/v1 `Affinity`, `TopologySpreadConstraint`,
`ContainerPort`), spelled in camelCase as in a manifest, so a block copied from a Deployment's
pod template validates as it is; a typo is refused with its key path, as the API server's
validation does (k8s.io/kubernetes pkg/apis/core/validation/validation.go).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator, model_validator

# A qualified name (`app`, `kubernetes.io/hostname`): an optional DNS-subdomain prefix and a name
# of at most 63 characters (apimachinery's IsQualifiedName).
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_QUALIFIED_NAME = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                             rf"{_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_NAME})?$")


def qualified_name(value: str) -> str:
    prefix = value.rpartition("/")[0]
    if len(prefix) > 253 or not _QUALIFIED_NAME.match(value):
        raise ValueError(f"{value!r} is not a valid label key (a name of at most 63 characters: "
                         "letters, digits, '-', '_', '.', with an optional DNS prefix and '/', "
                         "e.g. app or kubernetes.io/hostname)")
    return value


def label_value(value: str) -> str:
    if not _LABEL_VALUE.match(value):
        raise ValueError(f"{value!r} is not a valid label value (at most 63 characters: "
                         "letters, digits, '-', '_', '.', beginning and ending with a letter or "
                         "digit)")
    return value


LabelKey = Annotated[str, Field(min_length=1)]


class _Kube(BaseModel):
    """Kubernetes' spelling: camelCase keys, unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False)

    def as_api_object(self) -> dict[str, Any]:
        """The object as it goes into a pod spec: camelCase, unset keys left out."""
        return self.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)


def _values_as_the_operator_needs(operator: str, values: list[str]) -> None:
    """ValidateLabelSelectorRequirement / ValidateNodeSelectorRequirement: values for In and
    NotIn, none for Exists and DoesNotExist, one integer for Gt and Lt."""
    if operator in ("In", "NotIn") and not values:
        raise ValueError(f"values: must be non-empty when operator is {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"values: must be empty when operator is {operator}")
    if operator in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
        raise ValueError(f"values: must be one integer when operator is {operator}")


class LabelSelectorRequirement(_Kube):
    key: LabelKey
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = []

    _key = field_validator("key")(lambda cls, value: qualified_name(value))

    @model_validator(mode="after")
    def values_as_the_operator_needs(self) -> LabelSelectorRequirement:
        _values_as_the_operator_needs(self.operator, self.values)
        return self


class LabelSelector(_Kube):
    match_labels: dict[str, str] = Field(default={}, alias="matchLabels")
    match_expressions: list[LabelSelectorRequirement] = Field(default=[],
                                                               alias="matchExpressions")

    @field_validator("match_labels")
    @classmethod
    def valid_labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, label in value.items():
            qualified_name(key)
            label_value(label)
        return value


class NodeSelectorRequirement(_Kube):
    key: LabelKey
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = []

    _key = field_validator("key")(lambda cls, value: qualified_name(value))

    @model_validator(mode="after")
    def values_as_the_operator_needs(self) -> NodeSelectorRequirement:
        _values_as_the_operator_needs(self.operator, self.values)
        return self


class NodeSelectorTerm(_Kube):
    match_expressions: list[NodeSelectorRequirement] = Field(default=[], alias="matchExpressions")
    match_fields: list[NodeSelectorRequirement] = Field(default=[], alias="matchFields")


class NodeSelector(_Kube):
    """A scenario shape's required node affinity (`nodeSelectorTerms`), as in a pod spec.

    Example:
        >>> expression = {"key": "zone", "operator": "Exists"}
        >>> selector = ke.NodeSelector.model_validate(
        ...     {"nodeSelectorTerms": [{"matchExpressions": [expression]}]})
        >>> selector.node_selector_terms[0].match_expressions[0].operator
        'Exists'
    """

    node_selector_terms: list[NodeSelectorTerm] = Field(alias="nodeSelectorTerms", min_length=1)


class PreferredSchedulingTerm(_Kube):
    """A preferred node-affinity term and its weight (1-100), as in a pod spec.

    Example:
        >>> expression = {"key": "spot", "operator": "DoesNotExist"}
        >>> term = ke.PreferredSchedulingTerm.model_validate(
        ...     {"weight": 50, "preference": {"matchExpressions": [expression]}})
        >>> term.weight
        50
    """

    weight: StrictInt = Field(ge=1, le=100)
    preference: NodeSelectorTerm


class NodeAffinity(_Kube):
    """A scenario shape's node affinity: required and preferred terms, as in a pod spec.

    Example:
        >>> expression = {"key": "zone", "operator": "In", "values": ["us-east-1a"]}
        >>> required = {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}
        >>> affinity = ke.NodeAffinity.model_validate(
        ...     {"requiredDuringSchedulingIgnoredDuringExecution": required})
        >>> len(affinity.required.node_selector_terms)
        1
    """

    required: NodeSelector | None = Field(
        default=None, alias="requiredDuringSchedulingIgnoredDuringExecution")
    preferred: list[PreferredSchedulingTerm] = Field(
        default=[], alias="preferredDuringSchedulingIgnoredDuringExecution")


class PodAffinityTerm(_Kube):
    """A pod (anti-)affinity term: the pods a label selector picks, per `topologyKey`.

    Example:
        >>> ke.PodAffinityTerm(topologyKey="kubernetes.io/hostname").topology_key
        'kubernetes.io/hostname'
    """

    topology_key: LabelKey = Field(alias="topologyKey")
    label_selector: LabelSelector | None = Field(default=None, alias="labelSelector")
    namespaces: list[str] = []
    namespace_selector: LabelSelector | None = Field(default=None, alias="namespaceSelector")
    match_label_keys: list[str] = Field(default=[], alias="matchLabelKeys")
    mismatch_label_keys: list[str] = Field(default=[], alias="mismatchLabelKeys")

    _topology_key = field_validator("topology_key")(lambda cls, value: qualified_name(value))


class WeightedPodAffinityTerm(_Kube):
    """A preferred pod (anti-)affinity term and its weight (1-100).

    Example:
        >>> host = ke.PodAffinityTerm(topologyKey="kubernetes.io/hostname")
        >>> term = ke.WeightedPodAffinityTerm(weight=10, podAffinityTerm=host)
        >>> term.weight
        10
    """

    weight: StrictInt = Field(ge=1, le=100)
    pod_affinity_term: PodAffinityTerm = Field(alias="podAffinityTerm")


class PodAffinity(_Kube):
    """A scenario shape's pod affinity or anti-affinity: required and preferred terms.

    Example:
        >>> term = {"topologyKey": "topology.kubernetes.io/zone",
        ...         "labelSelector": {"matchLabels": {"app": "cache"}}}
        >>> affinity = ke.PodAffinity.model_validate(
        ...     {"requiredDuringSchedulingIgnoredDuringExecution": [term]})
        >>> affinity.required[0].topology_key
        'topology.kubernetes.io/zone'
    """

    required: list[PodAffinityTerm] = Field(
        default=[], alias="requiredDuringSchedulingIgnoredDuringExecution")
    preferred: list[WeightedPodAffinityTerm] = Field(
        default=[], alias="preferredDuringSchedulingIgnoredDuringExecution")


class Affinity(_Kube):
    """core/v1 Affinity: a pod's node affinity and its (anti-)affinity to other pods.

    Example:
        >>> term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}
        >>> affinity = ke.Affinity.model_validate(
        ...     {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
        >>> affinity.pod_anti_affinity.required[0].topology_key
        'kubernetes.io/hostname'
    """

    node_affinity: NodeAffinity | None = Field(default=None, alias="nodeAffinity")
    pod_affinity: PodAffinity | None = Field(default=None, alias="podAffinity")
    pod_anti_affinity: PodAffinity | None = Field(default=None, alias="podAntiAffinity")


class TopologySpreadConstraint(_Kube):
    """core/v1 TopologySpreadConstraint.

    Example:
        >>> spread = ke.TopologySpreadConstraint(
        ...     maxSkew=1, topologyKey="topology.kubernetes.io/zone", whenUnsatisfiable="DoNotSchedule")
        >>> spread.as_api_object()
        {'maxSkew': 1, 'topologyKey': 'topology.kubernetes.io/zone', 'whenUnsatisfiable': 'DoNotSchedule'}
    """

    max_skew: StrictInt = Field(alias="maxSkew", ge=1)
    topology_key: LabelKey = Field(alias="topologyKey")
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = Field(
        alias="whenUnsatisfiable")
    label_selector: LabelSelector | None = Field(default=None, alias="labelSelector")
    min_domains: StrictInt | None = Field(default=None, alias="minDomains", ge=1)
    node_affinity_policy: Literal["Honor", "Ignore"] | None = Field(
        default=None, alias="nodeAffinityPolicy")
    node_taints_policy: Literal["Honor", "Ignore"] | None = Field(
        default=None, alias="nodeTaintsPolicy")
    match_label_keys: list[str] = Field(default=[], alias="matchLabelKeys")

    _topology_key = field_validator("topology_key")(lambda cls, value: qualified_name(value))

    @model_validator(mode="after")
    def min_domains_only_when_hard(self) -> TopologySpreadConstraint:
        # ValidateTopologySpreadConstraints: minDomains goes with DoNotSchedule only.
        if self.min_domains is not None and self.when_unsatisfiable != "DoNotSchedule":
            raise ValueError("minDomains: may be set only when whenUnsatisfiable is "
                             "DoNotSchedule")
        return self


class ContainerPort(_Kube):
    """core/v1 ContainerPort; a `hostPort` takes the port on the node (NodePorts).

    Example:
        >>> ke.ContainerPort(containerPort=8080, hostPort=8080).as_api_object()
        {'containerPort': 8080, 'hostPort': 8080}
    """

    container_port: StrictInt = Field(alias="containerPort", ge=1, le=65535)
    host_port: StrictInt | None = Field(default=None, alias="hostPort", ge=1, le=65535)
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    host_ip: str | None = Field(default=None, alias="hostIP")
    name: str | None = None


# The label a simulated pod carries its wave's name in, which its ReplicaSet selects: `app` is
# the wave's to set (a snapshot's pods keep the `app` label their selectors name).
WAVE_LABEL = "simulator.kube-elevator.io/wave"


class _Shape(BaseModel):
    """The scenario's own spelling (snake_case keys), unknown keys refused, as its other keys."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Toleration(_Shape):
    """A pod's toleration; operator and effect as the API server admits them: a typo was taken
    silently (`operator: Exist` matched as Equal, `effect: Bogus` matched no taint)."""

    key: str = ""
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""

    @model_validator(mode="after")
    def as_the_api_server_validates(self) -> Toleration:
        # Kubernetes' ValidateTolerations: an empty key matches every taint only with Exists,
        # and Exists matches any value, so a value beside it is refused.
        if not self.key and self.operator != "Exists":
            raise ValueError("operator must be Exists when key is empty (it tolerates every "
                             "taint)")
        if self.operator == "Exists" and self.value:
            raise ValueError("value must be empty when operator is Exists")
        return self


class PodShape(_Shape):
    """What a kind of pod says besides its requests and arrival: tolerations, priority, and
    what real workloads say about placement (Kubernetes' own shapes, camelCase inside):
    labels besides `app: <name>`, affinity, spreading, host ports, and a volume in one zone
    (each pod its own, as a StatefulSet's volumeClaimTemplate on EBS). A wave is one; so is
    each of a scenario's `shapes`, which trace rows name in their `shape` column.

    Example:
        >>> ke.Wave(name="web", at=0, count=3, cpu="1", memory="1Gi", labels={"app": "web"}).labels
        {'app': 'web'}
    """

    tolerations: list[Toleration] = []
    # spec.priority, a PriorityClass's value: the scheduler takes higher priorities first. At
    # most system-node-critical's (2,000,001,000): a snapshot's kube-system pods carry it.
    priority: StrictInt = Field(default=0, ge=-2_147_483_648, le=2_000_001_000)
    labels: dict[str, str] = {}
    affinity: Affinity | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] = []
    ports: list[ContainerPort] = []
    volume_zone: str | None = Field(default=None, min_length=1, max_length=63)

    @field_validator("labels")
    @classmethod
    def valid_labels(cls, value: dict[str, str]) -> dict[str, str]:
        if WAVE_LABEL in value:
            raise ValueError(f"{WAVE_LABEL} is the simulator's own label (the wave's name, "
                             "which its ReplicaSet selects): choose another key")
        for key, label in value.items():
            qualified_name(key)
            label_value(label)
        return value

    @field_validator("volume_zone")
    @classmethod
    def valid_zone(cls, value: str | None) -> str | None:
        return None if value is None else label_value(value)

    @property
    def constrained(self) -> bool:
        """Whether the pods carry anything beyond requests, selectors and tolerations."""
        return bool(self.affinity or self.topology_spread_constraints or self.ports
                    or self.volume_zone)

    @property
    def constrains_placement(self) -> bool:
        """Whether where its pods go depends on other pods, host ports or a volume's zone (pod
        affinity or anti-affinity, spreading, ports, volume zone): what `tune` also judges
        without."""
        pods = self.affinity is not None and bool(self.affinity.pod_affinity
                                                  or self.affinity.pod_anti_affinity)
        return pods or bool(self.topology_spread_constraints or self.ports or self.volume_zone)


ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"


def zonal_volume_objects(claim: str, namespace: str, zone: str,
                         size: str = "10Gi") -> tuple[dict[str, Any], dict[str, Any]]:
    """(PersistentVolume, PersistentVolumeClaim) bound to each other, the volume pinned to
    `zone` as an EBS volume is: by the zone label (VolumeZone) and by its node affinity."""
    volume_name = f"pv-{namespace}-{claim}"[:253]
    volume = {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": volume_name, "labels": {ZONE_LABEL: zone}},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 # the source an EBS volume has (the API server requires exactly one)
                 "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": volume_name},
                 "claimRef": {"namespace": namespace, "name": claim},
                 "storageClassName": "",
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": ZONE_LABEL, "operator": "In", "values": [zone]}]}]}}},
        "status": {"phase": "Bound"},
    }
    claim_object = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": volume_name,
                 "storageClassName": "", "resources": {"requests": {"storage": size}}},
        "status": {"phase": "Bound"},
    }
    return volume, claim_object
