"""The one place tests build what they feed the code: records, configs and API objects, so each
test states only what matters to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kube_elevator.tasks.core.api_objects import Taint
from kube_elevator.tasks.core.records import AutoScalingGroup, NodeRecord, PodRecord
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.node_group_file import parse_node_groups

MiB = 2**20
GiB = 2**30
LABEL = ("customer", "batch")

GROUP_DEFAULTS: dict[str, Any] = {
    "name": "batch",
    "label_key": "customer",
    "label_value": "batch",
    "cloud_provider_group_name": "batch-asg",
    "min_nodes": 1,
    "max_nodes": 10,
    "taint_upper_capacity_threshold_percent": 40,
    "taint_lower_capacity_threshold_percent": 10,
    "scale_up_threshold_percent": 70,
    "slow_node_removal_rate": 1,
    "fast_node_removal_rate": 2,
    "soft_delete_grace_period": "1m",
    "hard_delete_grace_period": "10m",
    "scale_up_cool_down_period": "2m",
}


def group_dict(**overrides: Any) -> dict[str, Any]:
    return {**GROUP_DEFAULTS, **overrides}


def make_group(**overrides: Any) -> NodeGroupConfig:
    return parse_node_groups({"node_groups": [group_dict(**overrides)]},
                             "test.yaml").node_groups[0]


def make_pod(name: str = "p", cpu: int = 500, memory: int = 100 * MiB, node: str = "",
             phase: str | None = None, **fields: Any) -> PodRecord:
    return PodRecord(
        name=name, namespace="default", node_name=node,
        phase=phase or ("Running" if node else "Pending"),
        cpu_request_milli=cpu, memory_request_bytes=memory,
        node_selector=fields.pop("node_selector", {LABEL[0]: LABEL[1]}),
        scheduled=fields.pop("scheduled", bool(node)), **fields)


def make_node(name: str, created: float = 0.0, cpu: int = 1000, memory: int = 4000 * MiB,
              tainted_at: int | None = None, force: bool = False, cordoned: bool = False,
              **fields: Any) -> NodeRecord:
    taints = []
    if tainted_at is not None:
        taints.append(Taint("atlassian.com/escalator", str(tainted_at), "NoSchedule"))
    if force:
        taints.append(Taint("atlassian.com/escalator-force", "", "NoSchedule"))
    return NodeRecord(
        name=name, labels=fields.pop("labels", {LABEL[0]: LABEL[1]}),
        created_unix_seconds=created, cpu_allocatable_milli=cpu,
        memory_allocatable_bytes=memory, unschedulable=cordoned, taints=tuple(taints),
        provider_id=fields.pop("provider_id", f"aws:///us-east-1a/i-{name}"), **fields)


def make_asg(desired: int, min_size: int = 1, max_size: int = 10) -> AutoScalingGroup:
    return AutoScalingGroup("batch-asg", min_size, max_size, desired)


def pending_pod(name: str = "p", cpu: int = 500, memory: int = 256 * MiB,
                extended: tuple[tuple[str, int], ...] = (), **fields: Any) -> PodRecord:
    """A pod the scheduler gave up on (PodScheduled=False, Unschedulable), bound to no node."""
    fields.setdefault("unschedulable", True)
    return PodRecord(name=name, namespace=fields.pop("namespace", "default"),
                     node_name=fields.pop("node_name", ""), phase=fields.pop("phase", "Pending"),
                     cpu_request_milli=cpu, memory_request_bytes=memory,
                     extended_requests=extended, **fields)


def plain_node(name: str, cpu: int = 2000, memory: int = 8 * GiB, *,
               labels: dict[str, str] | None = None, created: float = 0.0,
               extended: tuple[tuple[str, int], ...] = (), **fields: Any) -> NodeRecord:
    """A node record with no group label, taint or providerID unless given."""
    return NodeRecord(name=name, labels=labels if labels is not None else {},
                      created_unix_seconds=created, cpu_allocatable_milli=cpu,
                      memory_allocatable_bytes=memory, extended_allocatable=extended,
                      extended_capacity=extended, **fields)


# --- API objects, as `kubectl get -o json` prints them ----------------------------------------


def api_node(name: str, cpu: str = "1", memory: str = "4Gi", *,
             labels: dict[str, str] | None = None, tainted_at: float | None = None,
             provider_id: str | None = None, created: str = "2026-11-21T10:00:00Z",
             pods: str | None = None, ready: bool = True) -> dict[str, Any]:
    """A Node with allocatable (and capacity, when `pods` is given) and a Ready condition."""
    spec: dict[str, Any] = {"providerID": provider_id or f"aws:///us-east-1a/i-{name}"}
    if tainted_at is not None:
        spec["taints"] = [{"key": "atlassian.com/escalator", "value": str(int(tainted_at)),
                           "effect": "NoSchedule"}]
    resources = {"cpu": cpu, "memory": memory, **({"pods": pods} if pods else {})}
    status: dict[str, Any] = {"allocatable": resources,
                              "conditions": [{"type": "Ready",
                                              "status": "True" if ready else "False"}]}
    if pods:
        status["capacity"] = dict(resources)
    return {"kind": "Node",
            "metadata": {"name": name, "creationTimestamp": created,
                         "labels": labels if labels is not None else {LABEL[0]: LABEL[1]}},
            "spec": spec, "status": status}


def api_pod(name: str, namespace: str = "default", *, cpu: str | None = None,
            memory: str | None = None, node: str = "", phase: str | None = "Running",
            labels: dict[str, str] | None = None, owner_kind: str | None = "ReplicaSet",
            node_selector: dict[str, str] | None = None, scheduled: bool | None = None,
            uid: str | None = None) -> dict[str, Any]:
    """A Pod with one container's requests, its controller, and its phase."""
    container: dict[str, Any] = {"name": "c", "image": "i"}
    requests = {key: value for key, value in (("cpu", cpu), ("memory", memory)) if value}
    if requests:
        container["resources"] = {"requests": requests}
    spec: dict[str, Any] = {"containers": [container]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if node:
        spec["nodeName"] = node
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    if uid:
        metadata["uid"] = uid
    if owner_kind:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind,
                                        "name": f"{name}-owner", "uid": f"{name}-uid",
                                        "controller": True}]
    status: dict[str, Any] = {"phase": phase} if phase else {}
    if scheduled is not None:
        status["conditions"] = [{"type": "PodScheduled",
                                 "status": "True" if scheduled else "False"}]
    return {"kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


@dataclass
class SteppingClock:
    """A clock whose sleep moves it on at once (`tasks.adapters.fleet.WaitClock`): a wait with
    a deadline runs to its end without taking any time."""

    now: float = 0.0
    sleeps: list[float] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

# --- kube-scheduler's test wrappers (pkg/scheduler/testing/wrappers.go), as API objects --------
# So the ported scheduler tables read as upstream's: `MakePod().name("p").req({...}).obj()`.


class MakePod:
    """st.MakePod(): each `req` adds a container with those requests, `container` one without."""

    def __init__(self) -> None:
        self._obj: dict[str, Any] = {"kind": "Pod", "metadata": {},
                                     "spec": {"containers": []}, "status": {}}

    def name(self, name: str) -> MakePod:
        self._obj["metadata"]["name"] = name
        return self

    def namespace(self, namespace: str) -> MakePod:
        self._obj["metadata"]["namespace"] = namespace
        return self

    def label(self, key: str, value: str) -> MakePod:
        self._obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def node(self, name: str) -> MakePod:
        self._obj["spec"]["nodeName"] = name
        return self

    def req(self, requests: dict[str, str]) -> MakePod:
        containers = self._obj["spec"]["containers"]
        containers.append({"name": f"con{len(containers)}", "image": "pause",
                           "resources": {"requests": dict(requests)}})
        return self

    def container(self, name: str) -> MakePod:
        self._obj["spec"]["containers"].append({"name": name, "image": "pause"})
        return self

    def owner_reference(self, name: str, kind: str, api_version: str = "apps/v1") -> MakePod:
        self._obj["metadata"]["ownerReferences"] = [
            {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"{name}-uid",
             "controller": True}]
        return self

    def node_selector(self, selector: dict[str, str]) -> MakePod:
        self._obj["spec"]["nodeSelector"] = dict(selector)
        return self

    def node_affinity_in(self, key: str, values: list[str]) -> MakePod:
        affinity = self._obj["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": values}]}]}
        return self

    def preferred_node_affinity(self, terms: list[tuple[int, list[tuple[str, list[str]]]]]
                                ) -> MakePod:
        """(weight, [(key, values In), ...]) per preferred term."""
        affinity = self._obj["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": weight, "preference": {"matchExpressions": [
                {"key": key, "operator": "In", "values": values} for key, values in exprs]}}
            for weight, exprs in terms]
        return self

    def tolerations(self, tolerations: list[dict[str, str]]) -> MakePod:
        self._obj["spec"]["tolerations"] = tolerations
        return self

    def spread_constraint(self, max_skew: int, key: str, mode: str,
                          selector: dict[str, Any] | None, min_domains: int | None = None,
                          node_affinity_policy: str | None = None,
                          node_taints_policy: str | None = None,
                          match_label_keys: list[str] | None = None) -> MakePod:
        constraint: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key,
                                      "whenUnsatisfiable": mode}
        optional = {"labelSelector": selector, "minDomains": min_domains,
                    "nodeAffinityPolicy": node_affinity_policy,
                    "nodeTaintsPolicy": node_taints_policy, "matchLabelKeys": match_label_keys}
        constraint.update({k: v for k, v in optional.items() if v is not None})
        self._obj["spec"].setdefault("topologySpreadConstraints", []).append(constraint)
        return self

    def terminating(self) -> MakePod:
        self._obj["metadata"]["deletionTimestamp"] = "2026-11-21T10:00:00Z"
        return self

    def obj(self) -> dict[str, Any]:
        return self._obj


class MakeNode:
    """st.MakeNode(): capacity and allocatable alike, 32 pods unless given."""

    def __init__(self) -> None:
        self._obj: dict[str, Any] = {"kind": "Node", "metadata": {"labels": {}}, "spec": {},
                                     "status": {"capacity": {"pods": "32"},
                                                "allocatable": {"pods": "32"}}}

    def name(self, name: str) -> MakeNode:
        self._obj["metadata"]["name"] = name
        return self

    def label(self, key: str, value: str) -> MakeNode:
        self._obj["metadata"]["labels"][key] = value
        return self

    def capacity(self, resources: dict[str, str]) -> MakeNode:
        merged = {"pods": "32", **resources}
        self._obj["status"]["capacity"] = dict(merged)
        self._obj["status"]["allocatable"] = dict(merged)
        return self

    def taints(self, taints: list[dict[str, str]]) -> MakeNode:
        self._obj["spec"]["taints"] = taints
        return self

    def obj(self) -> dict[str, Any]:
        return self._obj


def exists_selector(key: str) -> dict[str, Any]:
    """st.MakeLabelSelector().Exists(key).Obj()."""
    return {"matchExpressions": [{"key": key, "operator": "Exists"}]}


def crd_manifest(group: str, plural: str, kind: str, *, versions: tuple[str, ...] = ("v1",),
                 short_names: tuple[str, ...] = (), scale: bool = True) -> dict[str, Any]:
    """A namespaced CustomResourceDefinition (the first version stored) with a `status`
    subresource and, with `scale`, a `scale` one at .spec.replicas/.status.replicas."""
    subresources: dict[str, Any] = {"status": {}}
    if scale:
        subresources["scale"] = {"specReplicasPath": ".spec.replicas",
                                 "statusReplicasPath": ".status.replicas",
                                 "labelSelectorPath": ".status.selector"}
    names: dict[str, Any] = {"plural": plural, "singular": kind.lower(), "kind": kind}
    if short_names:
        names["shortNames"] = list(short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "names": names,
                 "versions": [{"name": v, "served": True, "storage": i == 0,
                               "subresources": subresources,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}
                              for i, v in enumerate(versions)]},
    }
