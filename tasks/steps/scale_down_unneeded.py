"""The Cluster Autoscaler's scale-down as one step of the tick (CA §1.3), after the groups.

Reads each group's Lease again (the group ticks and the scale-up may have written it), keeps
the unneeded timers there (`GroupState.unneeded_since`, so a restarted worker keeps counting),
and taints the nodes `tasks.cluster_autoscaler.unneeded.plan_scale_down` removes. The taint is Escalator's: the
group's next ticks delete the node once it is empty, after draining it with `scale_down.drain`.
Only runs with `cluster_autoscaler.enabled` and `scale_down.enabled`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tasks.cluster_autoscaler.config import ScaleDownOptions
from tasks.cluster_autoscaler.unneeded import GroupView, RemovalSimulation, plan_scale_down
from tasks.core.errors import LeaseConflict
from tasks.core.lease_state import GroupState, lease_name
from tasks.core.pdb import PodDisruptionBudget
from tasks.core.records import ESCALATOR_TAINT_KEY, AutoScalingGroup, NodeRecord, PodRecord, Resources
from tasks.core.retry import step
from tasks.escalator.config import NodeGroupConfig

if TYPE_CHECKING:
    from tasks.steps.node_groups import Adapters


@dataclass(frozen=True)
class EscalatorTick:
    """What one group's Escalator tick did, as the scale-down needs it."""

    acted: bool  # tainted, untainted, deleted or scaled up: CA leaves the group alone
    requests: Resources
    capacity: Resources


@dataclass(frozen=True)
class ScaleDownOutcome:
    tainted: Mapping[str, tuple[str, ...]]  # group -> nodes tainted for removal
    notes: Mapping[str, tuple[str, ...]]
    paused: str = ""


@step
def scale_down_unneeded(
    adapters: Adapters, options: ScaleDownOptions, groups: Sequence[NodeGroupConfig],
    group_nodes: Mapping[str, Sequence[NodeRecord]], asgs: Mapping[str, AutoScalingGroup],
    nodes: Sequence[NodeRecord], pods_by_node: Mapping[str, Sequence[PodRecord]],
    pdbs: Sequence[PodDisruptionBudget], escalator: Mapping[str, EscalatorTick],
    leaving_now: Collection[str], scaled_up_this_tick: bool, now: float,
) -> ScaleDownOutcome:
    """Update the unneeded timers and taint the nodes unneeded long enough (CA §1.3).

    `leaving_now` are nodes this tick already tainted or deleted: no pod moves onto them.
    A Lease written by someone else since we read it means another tick is acting on the
    group: its nodes are left alone this time.
    """
    namespace = adapters.lease_namespace
    live = [g for g in groups
            if g.cloud_provider_group_name in asgs and g.name in escalator and not g.dry_mode]
    states: dict[str, GroupState] = {
        group.name: adapters.kube.read_state(namespace, lease_name(group.name)) for group in live}
    last_scale_up = max((state.lock.lock_time_unix_seconds for state in states.values()),
                        default=0.0)
    gone = set(leaving_now)
    views = [GroupView(group, asgs[group.cloud_provider_group_name],
                       [node for node in group_nodes.get(group.name, ()) if node.name not in gone],
                       dict(states[group.name].unneeded_since),
                       escalator[group.name].acted, escalator[group.name].requests,
                       escalator[group.name].capacity)
             for group in live]
    simulation = RemovalSimulation([node for node in nodes if node.name not in gone],
                                   pods_by_node, pdbs)
    plan = plan_scale_down(views, simulation, options, now, last_scale_up, scaled_up_this_tick)

    tainted: dict[str, tuple[str, ...]] = {}
    notes: dict[str, tuple[str, ...]] = {}
    for group in live:
        decided = plan.groups[group.name]
        state = states[group.name]
        lines = list(decided.notes)
        if decided.unneeded_since != state.unneeded_since:
            try:
                adapters.kube.write_state(namespace, lease_name(group.name),
                                          replace(state, unneeded_since=decided.unneeded_since),
                                          now)
            except LeaseConflict:
                notes[group.name] = ("scale-down: Lease written by another tick; "
                                     "nothing removed this time",)
                continue
        stamp = str(int(now))  # Escalator's taint value: Unix seconds
        tainted[group.name] = tuple(
            name for name in decided.taint
            if adapters.kube.ensure_tainted(name, stamp, group.effective_taint_effect,
                                            ESCALATOR_TAINT_KEY))
        if lines:
            notes[group.name] = tuple(lines)
    return ScaleDownOutcome({k: v for k, v in tainted.items() if v}, notes, plan.paused)


__all__ = ["EscalatorTick", "ScaleDownOutcome", "scale_down_unneeded"]
