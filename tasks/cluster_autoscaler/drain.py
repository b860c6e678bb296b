"""Safe scale-down (`cluster_autoscaler.scale_down.drain: true`): drain before terminating.

Escalator terminates a tainted node once its hard grace period ends, whatever runs there. CA
instead evicts the node's pods through the Eviction API, so PodDisruptionBudgets are honoured,
terminates the node only once it is empty, and keeps nodes whose pods cannot move (CA §1.3,
§1.4; the rules are `tasks.cluster_autoscaler.drainability`). This module turns Escalator's plan into that.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from kube_elevator.tasks.cluster_autoscaler.unneeded import RemovalSimulation, movable, safe_taint_selection
from kube_elevator.tasks.core.pdb import PodDisruptionBudget
from kube_elevator.tasks.core.records import NodeRecord, PodRecord
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.decide import taint_time
from kube_elevator.tasks.escalator.plan import ScalePlan


def pods_on_nodes(pods: Iterable[PodRecord]) -> dict[str, list[PodRecord]]:
    by_node: dict[str, list[PodRecord]] = defaultdict(list)
    for pod in pods:
        if pod.node_name:
            by_node[pod.node_name].append(pod)
    return by_node


@dataclass(frozen=True)
class RemovalInputs:
    """What CA's removal rules read, collected once per tick (`cluster_autoscaler.enabled`)."""

    nodes: Sequence[NodeRecord]  # every node: where evicted pods could go
    pods_by_node: Mapping[str, Sequence[PodRecord]]
    pdbs: Sequence[PodDisruptionBudget]
    drain: bool  # scale_down.drain


@dataclass(frozen=True)
class DrainPlan:
    """Escalator's plan with occupied nodes kept, and the pods to evict this tick."""

    plan: ScalePlan
    evict: tuple[PodRecord, ...] = ()


def safe_plan(plan: ScalePlan, group: NodeGroupConfig, members: Sequence[NodeRecord],
              removal: RemovalInputs, now: float,
              cpu_load_percent: Mapping[str, float] | None = None) -> DrainPlan:
    """Escalator's plan under CA's removal rules: only removable nodes are tainted, and with
    `drain` occupied nodes are drained instead of terminated."""
    if not plan.taint and not removal.drain:
        return DrainPlan(plan)  # nothing to check: spare every group the cluster-wide model
    simulation = RemovalSimulation(removal.nodes, removal.pods_by_node, removal.pdbs, now)
    plan = safe_taint_selection(plan, group, members, simulation, cpu_load_percent)
    if not removal.drain:
        return DrainPlan(plan)
    return drain_plan(plan, group, members, simulation, now)


def drain_plan(plan: ScalePlan, group: NodeGroupConfig, nodes: Sequence[NodeRecord],
               simulation: RemovalSimulation, now: float) -> DrainPlan:
    """Keep occupied nodes out of `plan.delete`; drain the tainted ones past the soft grace.

    A node is deleted only when it has no movable pod (CA terminates empty nodes only).
    Tainted nodes past the soft grace period (Escalator's "may go when empty" point) that still
    hold pods are drained when every pod can move (no blocker, and room on another node),
    else kept with the reason in the notes. So is a node Escalator would delete now that holds
    pods it does not count (a force-tainted node with another group's pod, §7.4).
    """
    soft = group.soft_delete_grace_seconds
    pods_by_node = simulation.pods_by_node
    occupied = {name for name, pods in pods_by_node.items() if any(map(movable, pods))}
    kept = [name for name in plan.delete if name in occupied]
    delete = tuple(name for name in plan.delete if name not in occupied)
    tainted = [node for node in nodes
               if node.name in occupied and node.name not in plan.taint
               and (node.name in kept
                    or ((stamp := taint_time(node)) is not None and now - stamp > soft))]
    tainted.sort(key=lambda node: (node.name not in kept, node.name))
    notes = list(plan.notes)
    evict: list[PodRecord] = []
    for node in tainted:
        verdict = simulation.check(node)
        if verdict.drainable:
            simulation.remove(node, verdict)  # the next node cannot count on the same room
            evict.extend(verdict.to_evict)
            notes.append(f"draining {node.name}: evicting {len(verdict.to_evict)} pod(s); "
                         "terminated once empty")
        else:
            notes.append(f"scale-down skipped {node.name}: {verdict.reason}")
    reason = plan.reason
    if kept:  # the decision's "delete N" counted the nodes now kept to be drained first
        reason = reason.replace(f"delete {len(plan.delete)}", (
            f"delete {len(delete)}, " if delete else "") + f"drain {len(kept)} before deleting")
    # A node kept is not terminated: its decrement comes back, unless the tick's increase sets
    # an absolute size (Escalator's IncreaseSize, tasks/escalator/decide.py `asg_desired`).
    absolute = plan.cloud_increase > 0 and not group.aws.one_shot
    adjusted = replace(plan, delete=delete,
                       asg_desired=plan.asg_desired + (0 if absolute else len(kept)),
                       notes=tuple(notes), reason=reason)
    return DrainPlan(adjusted, tuple(evict))


@dataclass(frozen=True)
class EvictionResult:
    """What `evict_pods` did: the pods evicted, and those a budget kept (left for a later tick).

    Example:
        >>> result = ke.EvictionResult(evicted=("default/web-0",), blocked=("default/db-0",))
        >>> result.blocked
        ('default/db-0',)
    """

    evicted: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()  # (namespace/name: why), a PDB answered 429




__all__ = ["DrainPlan", "EvictionResult", "RemovalInputs", "drain_plan",
           "movable", "pods_on_nodes", "safe_plan"]
