"""What a node group's nodes were, read from kube-state-metrics, as a scenario's ASG holds it.

kube-state-metrics exports every node's allocatable (`kube_node_status_allocatable`, cpu in
cores, memory in bytes) but a node's labels only for the keys its
`--metric-labels-allowlist=nodes=[...]` names (`kube_node_labels`; with no list, v2.x exports no
series at all). So the group of a node, and its instance type, are read only where the cluster's
kube-state-metrics allows them; without the group's label the import says what is missing and
the flag that adds it. Label names follow KSM's internal/store/utils.go (`labelName`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kube_elevator.fakes.scenario import AsgSpec
from kube_elevator.tasks.core.instance_types import INSTANCE_TYPES, instance_gpus
from kube_elevator.tasks.core.quantity import GiB

# Where the kubelet (and EKS, GKE, AKS) say a node's instance type: the stable label, then the
# one deprecated since Kubernetes 1.17.
INSTANCE_TYPE_KEYS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")

# KSM's SanitizeLabelName and toSnakeCase (internal/store/utils.go).
_INVALID_LABEL_CHARACTERS = re.compile(r"[^a-zA-Z0-9_]")
_CAPITAL_AFTER = re.compile(r"([a-z0-9])([A-Z])")


def ksm_label_name(key: str) -> str:
    """The name kube-state-metrics gives a Kubernetes label key on `kube_*_labels`:
    `label_` + the key with every other character an underscore, in snake case
    (`node.kubernetes.io/instance-type` -> `label_node_kubernetes_io_instance_type`)."""
    sanitized = _INVALID_LABEL_CHARACTERS.sub("_", key)
    return "label_" + _CAPITAL_AFTER.sub(r"\1_\2", sanitized).lower()


def allowlist_flag(keys: Sequence[str]) -> str:
    """The kube-state-metrics flag that exports these node label keys."""
    return f"--metric-labels-allowlist=nodes=[{','.join(keys)}]"


def missing_label_keys(label_names_seen: Iterable[str], keys: Iterable[str]) -> list[str]:
    """The label keys (in the order given, once each) no `kube_node_labels` series carries."""
    seen = set(label_names_seen)
    return [key for key in dict.fromkeys(keys) if ksm_label_name(key) not in seen]


def missing_labels_problem(missing: Sequence[str], label_names_seen: Iterable[str],
                           window: str) -> str:
    """One line saying which node label keys kube-state-metrics did not export in the window,
    and the flag that exports them (the instance type's key too, for the node sizes)."""
    names = sorted({name for name in label_names_seen if name.startswith("label_")})
    found = (f"its series carry {', '.join(names)} only" if names
             else "it exported no node label (kube-state-metrics exports none by default)")
    wanted = [*missing, INSTANCE_TYPE_KEYS[0]]
    return (f"kube_node_labels has no {', '.join(map(ksm_label_name, missing))} {window}: "
            f"{found}, so no node is known to belong to a node group. The node groups select "
            f"their nodes by the label key{'s' if len(missing) > 1 else ''} "
            f"{', '.join(map(repr, missing))}: run kube-state-metrics with "
            f"{allowlist_flag(wanted)} (or add the keys to the list it has), then import a "
            "window it has scraped since")


@dataclass(frozen=True, order=True)
class NodeSize:
    """A node's allocatable, as kube-state-metrics exports it (cpu cores as milli-CPU)."""

    cpu_milli: int
    memory_bytes: int
    gpus: int = 0

    def __str__(self) -> str:
        gpus = f", {self.gpus} GPU" if self.gpus else ""
        return f"{self.cpu_milli}m CPU, {self.memory_bytes / GiB:.1f} GiB{gpus}"


def typical_size(sizes: Sequence[NodeSize]) -> tuple[NodeSize, int] | None:
    """The size most of a group's nodes had (ties: the larger) and how many sizes there were."""
    if not sizes:
        return None
    counts = Counter(sizes)
    size = max(counts, key=lambda each: (counts[each], each))
    return size, len(counts)


def simulated_size(instance_type: str) -> NodeSize:
    """What a node of the type offers pods in the simulator (AsgSpec.allocatable)."""
    cpu, memory = AsgSpec.model_construct(instance_type=instance_type).allocatable
    return NodeSize(cpu, memory, instance_gpus(instance_type))


def holds(instance_type: str, per_node: NodeSize) -> bool:
    """Whether a simulated node of the type has room for the pods every node runs (the
    scenario refuses DaemonSets a node cannot hold)."""
    offered = simulated_size(instance_type)
    return (offered.cpu_milli >= per_node.cpu_milli
            and offered.memory_bytes >= per_node.memory_bytes)


def nearest_instance_type(size: NodeSize, per_node: NodeSize = NodeSize(0, 0)) -> str:
    """The known instance type whose simulated node is nearest the size: among those that hold
    `per_node` and have the same GPUs (where any type does), the least sum of the cpu and
    memory ratios' distance from 1 (in logs, so twice and half count alike); ties go to the
    name first in order."""
    def distance(instance_type: str) -> float:
        offered = simulated_size(instance_type)
        return (abs(math.log(offered.cpu_milli / max(size.cpu_milli, 1)))
                + abs(math.log(offered.memory_bytes / max(size.memory_bytes, 1))))

    known = [name for name in sorted(INSTANCE_TYPES) if holds(name, per_node)] \
        or sorted(INSTANCE_TYPES)
    candidates = [name for name in known if instance_gpus(name) == size.gpus]
    return min(candidates or known, key=distance)


@dataclass(frozen=True)
class NodeType:
    """An ASG's instance type in the imported scenario, and where it came from (said in the
    command's output)."""

    instance_type: str
    source: str


def node_type(labelled: Sequence[str], sizes: Sequence[NodeSize], fallback: str,
              per_node: NodeSize = NodeSize(0, 0)) -> NodeType:
    """The instance type of a group whose nodes had these instance-type label values and
    allocatables, and ran pods of `per_node` on each: the label's most common value when the
    simulator knows the type and its node holds those pods; else the known type nearest the
    nodes' typical allocatable that holds them; else `fallback` (`--instance-type`)."""
    typical = typical_size(sizes)
    seen = ""
    if typical is not None:
        size, kinds = typical
        mixed = f", the most common of {kinds} sizes" if kinds > 1 else ""
        seen = f"; allocatable {size}{mixed}"
    if labelled:
        counts = Counter(labelled)
        named = max(counts, key=lambda each: (counts[each], each))
        if named in INSTANCE_TYPES and holds(named, per_node):
            return NodeType(named, f"from {INSTANCE_TYPE_KEYS[0]}{seen}")
        unknown = (f"{INSTANCE_TYPE_KEYS[0]} {named!r} is not a type the simulator knows"
                   if named not in INSTANCE_TYPES else
                   f"{INSTANCE_TYPE_KEYS[0]} {named!r}: its simulated node "
                   f"({simulated_size(named)}) cannot hold the DaemonSet pods ({per_node})")
    else:
        unknown = f"{INSTANCE_TYPE_KEYS[0]} not exported"
    if typical is not None:
        nearest = nearest_instance_type(typical[0], per_node)
        return NodeType(nearest, f"nearest to the nodes' kube_node_status_allocatable{seen} "
                                 f"(simulated: {simulated_size(nearest)}); {unknown}")
    return NodeType(fallback, f"from --instance-type: no node of the group in "
                              f"kube_node_status_allocatable; {unknown}")


def node_sizes(samples: Iterable[tuple[Mapping[str, str], float]]) -> dict[str, NodeSize]:
    """Each node's allocatable from `kube_node_status_allocatable` samples: `resource="cpu"`
    (`unit="core"`), `"memory"` (`unit="byte"`) and `"nvidia_com_gpu"` (`unit="integer"`).
    A node without both cpu and memory is left out."""
    found: dict[str, dict[str, float]] = {}
    for labels, value in samples:
        node, resource = labels.get("node", ""), labels.get("resource", "")
        if node and not math.isnan(value) and value >= 0:
            found.setdefault(node, {})[resource] = value
    return {node: NodeSize(round(values["cpu"] * 1000), round(values["memory"]),
                           round(values.get("nvidia_com_gpu", 0)))
            for node, values in found.items() if "cpu" in values and "memory" in values}


__all__ = ["INSTANCE_TYPE_KEYS", "NodeSize", "NodeType", "allowlist_flag", "holds", "ksm_label_name",
           "missing_label_keys", "missing_labels_problem", "nearest_instance_type", "node_sizes",
           "node_type", "simulated_size", "typical_size"]
