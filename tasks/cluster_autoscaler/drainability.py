"""Which nodes can be drained for a scale-down, and why not (CA spec §1.3, §1.4).

Escalator terminates a tainted node after its hard grace period whatever runs there. CA first
asks of every pod "can it move?" and keeps the node when one cannot: a bare pod would be lost,
a kube-system pod without a PodDisruptionBudget may be critical, local storage would be wiped,
and the owner may have said "not safe to evict". Each blocked node gets a reason a person can
act on, so `elevator plan` can say why a node stays.

Pure functions over records; the PodDisruptionBudgets are plain records too (`pdb_from_api`
reads a `policy/v1` object).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from kube_elevator.tasks.cluster_autoscaler.templates import GPU_RESOURCE
from kube_elevator.tasks.core.api_objects import SAFE_TO_EVICT, SCALE_DOWN_DISABLED
from kube_elevator.tasks.core.pdb import PodDisruptionBudget, matching_pdbs, remaining_pdbs
from kube_elevator.tasks.core.records import TERMINAL_PHASES, NodeRecord, PodRecord

KUBE_SYSTEM = "kube-system"
EXPENDABLE_PRIORITY_CUTOFF = -10  # CA --expendable-pods-priority-cutoff's default
LONG_TERMINATING_EXTRA_SECONDS = 30  # CA drain.PodLongTerminatingExtraThreshold
# CA's replicated rule: the controllers that re-create a pod elsewhere (DaemonSet pods are
# handled before this rule).
REPLICATED_KINDS = frozenset({"ReplicationController", "ReplicaSet", "StatefulSet", "Job"})


# --- one pod --------------------------------------------------------------------------------


class Outcome(StrEnum):
    """What a drain does with a pod (CA drainability statuses)."""

    # Not evicted, never block: mirror pods (the kubelet owns them), pods stuck terminating,
    # and expendable pods (they go with the node).
    IGNORE = "ignore"
    DAEMONSET = "daemonset"  # never block; CA may evict them from occupied nodes
    EVICT = "evict"  # moves elsewhere through the Eviction API
    BLOCK = "block"  # cannot move: the node stays


@dataclass(frozen=True)
class DrainOptions:
    """CA's flags for the blocking rules, all on by default (spec §1.4)."""

    skip_nodes_with_system_pods: bool = True
    skip_nodes_with_local_storage: bool = True
    skip_nodes_with_custom_controller_pods: bool = True


@dataclass(frozen=True)
class PodVerdict:
    pod: PodRecord
    outcome: Outcome
    reason: str = ""  # why it blocks


def _name(pod: PodRecord) -> str:
    return f"{pod.namespace}/{pod.name}"


def _blocking_local_volumes(pod: PodRecord) -> list[str]:
    """Local volumes not opted out by safe-to-evict-local-volumes (every one must be listed)."""
    allowed = set(pod.safe_to_evict_local_volumes)
    return [f'{volume.kind} volume "{volume.name}"' for volume in pod.local_volumes
            if volume.name not in allowed]


def long_terminating(pod: PodRecord, now: float) -> bool:
    """CA's IsPodLongTerminating: deleted longer ago than its grace period plus 30 s."""
    return bool(pod.deleting_since_unix_seconds) and now > (
        pod.deleting_since_unix_seconds + pod.termination_grace_seconds
        + LONG_TERMINATING_EXTRA_SECONDS)


def pod_verdict(pod: PodRecord, pdbs: Sequence[PodDisruptionBudget] = (),
                options: DrainOptions = DrainOptions(), now: float = 0.0) -> PodVerdict:
    """CA's drainability rules, in CA's order (§1.4): mirror, long-terminating; pods below the
    expendable priority cutoff never block; DaemonSet, safe-to-evict "true" and terminal pods
    interrupt (they may go); then the blocking rules: not replicated, kube-system without PDB,
    safe-to-evict "false", local storage, a PDB allowing no disruption.

    Not reproduced: --min-replica-count (we do not read controller replicas).
    """
    name = _name(pod)
    if pod.mirror or pod.static or long_terminating(pod, now):
        return PodVerdict(pod, Outcome.IGNORE)
    if pod.priority < EXPENDABLE_PRIORITY_CUTOFF:
        return PodVerdict(pod, Outcome.IGNORE)
    if pod.is_daemonset_pod:
        return PodVerdict(pod, Outcome.DAEMONSET)
    if pod.safe_to_evict == "true":
        # CA ≥1.0.3: overrides the controller, kube-system and local-storage blocks.
        return PodVerdict(pod, Outcome.EVICT)
    if pod.phase in TERMINAL_PHASES:
        return PodVerdict(pod, Outcome.EVICT)
    if not pod.controller_kind:
        return PodVerdict(pod, Outcome.BLOCK,
                          f"pod {name} has no controller: it would not be re-created elsewhere")
    if options.skip_nodes_with_custom_controller_pods and pod.controller_kind not in REPLICATED_KINDS:
        return PodVerdict(pod, Outcome.BLOCK,
                          f"pod {name} is controlled by a {pod.controller_kind}, not a "
                          f"ReplicaSet, ReplicationController, StatefulSet or Job")
    matching = matching_pdbs(pod, pdbs)
    if options.skip_nodes_with_system_pods and pod.namespace == KUBE_SYSTEM and not matching:
        return PodVerdict(pod, Outcome.BLOCK,
                          f"pod {name} is a kube-system pod without a PodDisruptionBudget")
    if pod.safe_to_evict == "false":
        return PodVerdict(pod, Outcome.BLOCK, f'pod {name} has {SAFE_TO_EVICT}: "false"')
    if options.skip_nodes_with_local_storage:
        local = _blocking_local_volumes(pod)
        if local:
            return PodVerdict(pod, Outcome.BLOCK,
                              f"pod {name} has local storage ({', '.join(local)})")
    for pdb in matching:
        if pdb.disruptions_allowed < 1:
            return PodVerdict(pod, Outcome.BLOCK,
                              f"pod {name} is covered by PodDisruptionBudget "
                              f"{pdb.namespace}/{pdb.name}, which allows no disruption now")
    return PodVerdict(pod, Outcome.EVICT)


# --- one node -------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeDrainability:
    """Whether a node can be emptied, what moves, and if not, the first reason why not."""

    node: str
    drainable: bool
    reason: str = ""
    to_evict: tuple[PodRecord, ...] = ()
    daemonset_pods: tuple[PodRecord, ...] = ()
    blocking_pod: PodRecord | None = None


def _pdb_shortfall(evicted: Sequence[PodRecord], pdbs: Sequence[PodDisruptionBudget],
                   ) -> tuple[PodRecord, str] | None:
    """CA's RemainingPdbTracker.CanRemovePods: a PDB must allow every pod of the node it covers."""
    for pdb in pdbs:
        covered = [pod for pod in evicted if pdb.selects(pod)]
        if len(covered) > pdb.disruptions_allowed:
            pod = covered[max(pdb.disruptions_allowed, 0)]
            return pod, (f"PodDisruptionBudget {pdb.namespace}/{pdb.name} allows "
                         f"{pdb.disruptions_allowed} disruption(s) but {len(covered)} of its pods "
                         f"run on this node (pod {_name(pod)} could not be evicted)")
    return None


def node_drainability(node: NodeRecord, pods: Iterable[PodRecord],
                      pdbs: Sequence[PodDisruptionBudget] = (),
                      options: DrainOptions = DrainOptions(), now: float = 0.0
                      ) -> NodeDrainability:
    """Can `node` (with the pods bound to it) be drained, at `now`? CA §1.3 condition 3, §1.4."""
    if node.scale_down_disabled:
        return NodeDrainability(node.name, False, f'node has {SCALE_DOWN_DISABLED}: "true"')
    to_evict: list[PodRecord] = []
    daemonset: list[PodRecord] = []
    for pod in pods:
        verdict = pod_verdict(pod, pdbs, options, now)
        if verdict.outcome is Outcome.BLOCK:
            return NodeDrainability(node.name, False, verdict.reason, blocking_pod=pod)
        if verdict.outcome is Outcome.EVICT:
            to_evict.append(pod)
        elif verdict.outcome is Outcome.DAEMONSET:
            daemonset.append(pod)
    shortfall = _pdb_shortfall(to_evict, pdbs)
    if shortfall is not None:
        pod, reason = shortfall
        return NodeDrainability(node.name, False, reason, blocking_pod=pod)
    return NodeDrainability(node.name, True, "", tuple(to_evict), tuple(daemonset))


def drainable_nodes(nodes: Iterable[NodeRecord], pods_by_node: Mapping[str, Sequence[PodRecord]],
                    pdbs: Sequence[PodDisruptionBudget] = (),
                    options: DrainOptions = DrainOptions()) -> list[NodeDrainability]:
    """Check nodes in order; each drainable node uses up the PDB budget its pods need, so two
    nodes cannot both count on the last allowed disruption."""
    remaining = tuple(pdbs)
    results = []
    for node in nodes:
        result = node_drainability(node, pods_by_node.get(node.name, ()), remaining, options)
        if result.drainable:
            remaining = remaining_pdbs(remaining, result.to_evict)
        results.append(result)
    return results


def blocked_reasons(results: Iterable[NodeDrainability]) -> dict[str, str]:
    """Node name -> why it is kept, for `elevator plan`."""
    return {result.node: result.reason for result in results if not result.drainable}


# --- utilization ----------------------------------------------------------------------------


def gpus_allocatable(node: NodeRecord) -> int:
    return dict(node.extended_allocatable).get(GPU_RESOURCE, 0)


def is_gpu_node(node: NodeRecord) -> bool:
    """A node whose utilization is its GPUs' (and compared with the GPU threshold)."""
    return gpus_allocatable(node) > 0


def node_utilization(node: NodeRecord, pods: Iterable[PodRecord], now: float = 0.0) -> float:
    """CA §1.3: max(Σcpu requests / allocatable cpu, Σmemory requests / allocatable memory),
    DaemonSet and mirror pods included (CA's --ignore-*-utilization default to false); on a
    GPU node, its GPU requests over its GPUs only (CA's utilization.Calculate). Finished pods
    hold no resources, and CA does not count pods stuck terminating."""
    live = [pod for pod in pods
            if pod.phase not in TERMINAL_PHASES and not long_terminating(pod, now)]
    gpus = gpus_allocatable(node)
    if gpus > 0:
        return sum(dict(pod.extended_requests).get(GPU_RESOURCE, 0) for pod in live) / gpus
    cpu = sum(pod.cpu_request_milli for pod in live)
    memory = sum(pod.memory_request_bytes for pod in live)
    cpu_share = cpu / node.cpu_allocatable_milli if node.cpu_allocatable_milli > 0 else 0.0
    memory_share = (memory / node.memory_allocatable_bytes
                    if node.memory_allocatable_bytes > 0 else 0.0)
    return max(cpu_share, memory_share)


def below_threshold(node: NodeRecord, pods: Iterable[PodRecord], threshold: float,
                    now: float = 0.0) -> bool:
    """CA §1.3 condition 1: utilization strictly below the threshold (default 0.5). CA removes
    empty nodes on a separate path, whatever the threshold."""
    return node_utilization(node, pods, now) < threshold


__all__ = [
    "KUBE_SYSTEM",
    "REPLICATED_KINDS",
    "DrainOptions",
    "NodeDrainability",
    "Outcome",
    "PodVerdict",
    "below_threshold",
    "blocked_reasons",
    "drainable_nodes",
    "node_drainability",
    "node_utilization",
    "pod_verdict",
]
