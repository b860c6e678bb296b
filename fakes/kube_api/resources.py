"""The resource types the fake serves: built-ins, custom resources, discovery."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from typing import Any

log = logging.getLogger(__name__)


Obj = dict[str, Any]
ObjList = list[Obj]
Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects

TOKEN = "fake-token"
SERVER_VERSION: Obj = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-fake",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


# Resource types ----------------------------------------------------------------------

_META_FIELDS = ("metadata.name", "metadata.namespace")
_BOOL_FIELDS = frozenset({"spec.unschedulable", "spec.hostNetwork"})


@dataclass(frozen=True)
class ResourceType:
    """What the server knows about one REST resource (discovery, scope, field labels).

    Example:
        >>> from kube_elevator.harness import FakeKubeApi
        >>> api = FakeKubeApi()
        >>> widgets = api.register_custom_resource("example.com", "v1", "widgets", "Widget")
        >>> widgets.kind, widgets.group, widgets.namespaced
        ('Widget', 'example.com', True)
    """

    plural: str
    singular: str
    kind: str
    group: str
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    fields: tuple[str, ...] = _META_FIELDS
    allow_create_on_update: bool = False
    return_deleted_object: bool = False
    has_generation: bool = False
    # Served for a CustomResourceDefinition: a main-resource write keeps the stored status
    # when `status` is a subresource (and a status write keeps the rest), strategic merge
    # patches answer 415, as on a real server.
    custom: bool = False
    # The `scale` subresource's JSON paths (specReplicasPath, statusReplicasPath,
    # labelSelectorPath as a CRD declares them; "" when not declared).
    scale_paths: tuple[str, str, str] = (".spec.replicas", ".status.replicas", "")

    @property
    def api_version(self) -> str:
        """`apiVersion` of objects of this resource."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        """Kind of the list response, e.g. `PodList`."""
        return f"{self.kind}List"

    @property
    def qualified(self) -> str:
        """`pods`, `deployments.apps`: how the API server names it in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @cached_property
    def key(self) -> str:
        """Which collection of the store holds its objects: the plural for a built-in (an
        alias such as events.k8s.io's Events shares the core one), `plural.group` for a
        custom resource, since two CRDs may serve one plural in two groups
        (`widgets.a.example.com`, `widgets.b.example.com`) with objects of their own."""
        return f"{self.plural}.{self.group}" if self.custom else self.plural

    @cached_property
    def field_index(self) -> dict[str, int]:
        """Field label -> its position in `fields` (a record's field values)."""
        return {f: i for i, f in enumerate(self.fields)}

    @cached_property
    def field_paths(self) -> tuple[tuple[tuple[str, ...], bool], ...]:
        """Each field label's path through the object and whether it is a bool field,
        computed once per type (the selectors' hot path)."""
        if self.custom:  # a CRD's selectableFields: JSON paths as written
            return tuple((tuple(f.split(".")), False) for f in self.fields)
        return tuple((tuple(("source.component" if f == "source" else f).split(".")),
                      f in _BOOL_FIELDS) for f in self.fields)


RESOURCES: dict[str, ResourceType] = {
    rt.plural: rt
    for rt in (
        ResourceType(
            "pods", "pod", "Pod", "", "v1", True, ("po",), ("all",),
            ("eviction", "status", "ephemeralcontainers"),
            (*_META_FIELDS, "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
             "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
             "status.nominatedNodeName"),
            return_deleted_object=True,
        ),
        ResourceType(
            "nodes", "node", "Node", "", "v1", False, ("no",), (), ("status",),
            ("metadata.name", "spec.unschedulable"),
        ),
        ResourceType(
            "events", "event", "Event", "", "v1", True, ("ev",), (), (),
            (*_META_FIELDS, "involvedObject.kind", "involvedObject.namespace",
             "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion",
             "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
             "reportingComponent", "source", "type"),
            allow_create_on_update=True,
        ),
        ResourceType(
            "leases", "lease", "Lease", "coordination.k8s.io", "v1", True,
            allow_create_on_update=True,
        ),
        ResourceType(
            "deployments", "deployment", "Deployment", "apps", "v1", True, ("deploy",),
            ("all",), ("scale", "status"), has_generation=True,
        ),
        # The other targets a pod autoscaler scales through /scale (WPA's scaleTargetRef).
        ResourceType(
            "statefulsets", "statefulset", "StatefulSet", "apps", "v1", True, ("sts",),
            ("all",), ("scale", "status"), has_generation=True,
        ),
        ResourceType(
            "replicasets", "replicaset", "ReplicaSet", "apps", "v1", True, ("rs",),
            ("all",), ("scale", "status"), has_generation=True,
        ),
        ResourceType("configmaps", "configmap", "ConfigMap", "", "v1", True, ("cm",)),
        # `type` is a Secret's one field label beyond metadata (pkg/registry/core/secret/
        # strategy.go SelectableFields); rules in validation/secrets.py, secret_data.py.
        ResourceType("secrets", "secret", "Secret", "", "v1", True, (), (), (),
                     (*_META_FIELDS, "type")),
        # Plain objects: a namespace need not exist for objects to live in it, and deleting
        # one deletes nothing else (operators such as kopf list and watch them).
        ResourceType("namespaces", "namespace", "Namespace", "", "v1", False, ("ns",), (),
                     (), ("metadata.name", "status.phase")),
        # A zonal volume and its claim (the simulator's StatefulSet-like pods; VolumeZone).
        ResourceType("persistentvolumes", "persistentvolume", "PersistentVolume", "", "v1",
                     False, ("pv",), (), ("status",), ("metadata.name",)),
        ResourceType("persistentvolumeclaims", "persistentvolumeclaim",
                     "PersistentVolumeClaim", "", "v1", True, ("pvc",), (), ("status",)),
        ResourceType(
            "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", "policy",
            "v1", True, ("pdb",), (), ("status",), has_generation=True,
        ),
        ResourceType(
            "customresourcedefinitions", "customresourcedefinition", "CustomResourceDefinition",
            "apiextensions.k8s.io", "v1", False, ("crd", "crds"), ("api-extensions",),
            ("status",), ("metadata.name",), has_generation=True,
        ),
    )
}
# events.k8s.io/v1 Events are the core Events under other names (one store, as on a real
# server): each write fills both spellings of a field (see `events_both_ways`).
EVENTS_V1 = ResourceType(
    "events", "event", "Event", "events.k8s.io", "v1", True, ("ev",), (), (),
    RESOURCES["events"].fields, allow_create_on_update=True,
)
# An alias serves another group/version of a stored resource (same plural, same objects).
ALIASES: tuple[ResourceType, ...] = (EVENTS_V1,)

# What serves /scale, and whose spec.replicas defaults to 1 on create (apps/v1 defaults).
SCALABLE_PLURALS = frozenset(rt.plural for rt in RESOURCES.values() if "scale" in rt.subresources)

_GROUP_VERSIONS: dict[str, list[ResourceType]] = {}
for _rt in (*RESOURCES.values(), *ALIASES):
    _GROUP_VERSIONS.setdefault(_rt.api_version, []).append(_rt)
_BY_PATH: dict[tuple[str, str], ResourceType] = {
    (rt.api_version, rt.plural): rt for rt in (*RESOURCES.values(), *ALIASES)
}


# Discovery's group order (`/apis`), which kubectl's RESTMapper takes as its priority when a
# name matches resources of two groups (`kubectl get widgets` with widgets.a.example.com and
# widgets.b.example.com served: the first group listed wins). The aggregator sorts APIServices
# by GroupPriorityMinimum, highest first, then by name (`v1.a.example.com`): kube-aggregator
# pkg/apis/apiregistration/v1/helper/helpers.go `ByGroupPriorityMinimum`, the built-in values
# in kube-apiserver pkg/controlplane/apiserver/aggregator.go `APIVersionPriorities`, and 1000
# for every CRD group (kube-aggregator's crdregistration_controller.go).
GROUP_PRIORITY = {"apps": 17800, "events.k8s.io": 17750, "autoscaling": 17500,
                  "policy": 17100, "apiextensions.k8s.io": 16700, "coordination.k8s.io": 16500}
CRD_GROUP_PRIORITY = 1000


def discovery_order(group_versions: list[tuple[str, str]]) -> list[str]:
    """The groups of these (group, version) pairs in the order `/apis` lists them."""
    first: dict[str, tuple[int, str]] = {}
    for group, version in group_versions:
        rank = (-GROUP_PRIORITY.get(group, CRD_GROUP_PRIORITY), f"{version}.{group}")
        first[group] = min(first.get(group, rank), rank)
    return sorted(first, key=first.__getitem__)


def custom_resource_type(group: str, version: str, plural: str, kind: str, *,
                         namespaced: bool = True, singular: str = "",
                         short_names: tuple[str, ...] = (), categories: tuple[str, ...] = (),
                         status: bool = True,
                         scale: tuple[str, str, str] | None = None,
                         selectable: tuple[str, ...] = ()) -> ResourceType:
    """The ResourceType a CustomResourceDefinition serves: metadata field selectors and the
    version's `selectableFields` (`selectable`, JSON paths such as `.spec.color`),
    `metadata.generation` bumped on spec changes, optional `/status` and `/scale`
    subresources (`scale` holds specReplicasPath, statusReplicasPath, labelSelectorPath)."""
    if not group or "." not in group:
        raise ValueError(f"a custom resource group must be a DNS subdomain with a dot: {group!r}")
    subresources = (("status",) if status else ()) + (("scale",) if scale else ())
    return ResourceType(plural, singular or kind.lower(), kind, group, version, namespaced,
                        short_names, categories, subresources,
                        (*(_META_FIELDS if namespaced else ("metadata.name",)),
                         *(path.lstrip(".") for path in selectable)), has_generation=True,
                        custom=True, scale_paths=scale or ("", "", ""))


# Errors -----------------------------------------------------------------------------
