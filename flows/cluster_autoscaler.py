"""The Cluster Autoscaler's part of a tick, after the groups: its steps in the algorithm's order.

Scale-up from unschedulable pods (CA §1.1): read the Leases; give up on instances that never
became Nodes (terminate, back the group off, save it in the Lease); offer the pending pods to
every group; choose; then for each group grown, Escalator's order: the Lease with the scale lock
first, then the ASG. Scale-down of unneeded nodes (CA §1.3): read the Leases, plan, save each
group's unneeded timers, taint what goes. Every read, effect and decision is its own task run;
every Lease write goes through `write_lock` with a fresh claim, so a write whose answer was lost
is recognised on retry. Without adapters to act through (`elevator plan`, `--dry-run`) both
parts decide exactly as they would live, and say so in the groups' notes, changing nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from logging import getLogger as get_logger

from kube_elevator.tasks.cluster_autoscaler.backoff import ProvisioningState, check_provisioning
from kube_elevator.tasks.cluster_autoscaler.config import ClusterAutoscalerConfig, ScaleDownOptions
from kube_elevator.tasks.cluster_autoscaler.estimator import unschedulable_pods
from kube_elevator.tasks.cluster_autoscaler.scale_up import (
    Growth,
    Notes,
    ScaleUpOutcome,
    frozen_notes,
    group_candidates,
    grown_note,
    not_helped,
    priorities_from,
    unregistered_node,
)
from kube_elevator.tasks.cluster_autoscaler.unneeded import (
    EscalatorTick,
    GroupView,
    RemovalSimulation,
    ScaleDownOutcome,
)
from kube_elevator.tasks.core.errors import LeaseConflict
from kube_elevator.tasks.core.lease_state import GroupState
from kube_elevator.tasks.core.pdb import PodDisruptionBudget
from kube_elevator.tasks.core.records import AsgTemplateSource, AutoScalingGroup, NodeRecord, PodRecord
from kube_elevator.tasks.core.retry import is_retryable
from kube_elevator.tasks.core.step import Runner
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.steps.cluster_autoscaler import (
    plan_unneeded_scale_down,
    plan_unschedulable_scale_up,
    read_config_map,
    read_group_states,
    read_template_sources,
    set_desired_capacity,
    taint_nodes,
    terminate_instances,
)
from kube_elevator.tasks.steps.lease import write_lock
from kube_elevator.tasks.steps.node_groups import Adapters


@dataclass(frozen=True)
class ClusterReads:
    """What the Cluster Autoscaler's parts read beyond the tick's lists: the groups' Leases as
    the group ticks left them, launch templates (scale from zero) and the priority ConfigMap.
    Live, from the API and the cloud (`live_reads`); in `elevator plan`, from the files, which
    hold Leases only (`config_map` None: no ConfigMap to read)."""

    lease_namespace: str
    group_states: Callable[[Sequence[str]], dict[str, GroupState]]
    template_sources: Callable[[Sequence[str]], dict[str, AsgTemplateSource]]
    config_map: Callable[[str, str], dict[str, str] | None] | None


def live_reads(run: Runner, adapters: Adapters) -> ClusterReads:
    """The reads through the live adapters, each a task run with retries."""
    namespace = adapters.lease_namespace
    return ClusterReads(
        namespace,
        lambda names: run(read_group_states, adapters.kube, namespace, names),
        lambda asg_names: run(read_template_sources, adapters.cloud, asg_names),
        lambda where, name: run(read_config_map, adapters.kube, where, name))


def claimed(state: GroupState) -> GroupState:
    """The state with a claim token of this write (see `write_lock`)."""
    return replace(state, claim=uuid.uuid4().hex)


def scale_up_unschedulable(
    run: Runner, adapters: Adapters | None, reads: ClusterReads,
    config: ClusterAutoscalerConfig,
    groups: Sequence[NodeGroupConfig], pods: Sequence[PodRecord], nodes: Sequence[NodeRecord],
    group_nodes: Mapping[str, Sequence[NodeRecord]], asgs: Mapping[str, AutoScalingGroup],
    helped: Mapping[str, frozenset[str]], desired_now: Mapping[str, int], now: float,
) -> ScaleUpOutcome:
    """One CA scale-up over every group; `helped` maps a group that scaled up this tick (its
    own Escalator rule) to its pods (namespace/name), `desired_now` the ASG sizes ticks set.
    `adapters` None decides only: the notes say what would be done."""
    notes: Notes = {}
    terminated: dict[str, tuple[str, ...]] = {}
    namespace = reads.lease_namespace
    registered = {node.provider_id for node in nodes if node.provider_id}
    live = [g for g in groups if g.cloud_provider_group_name in asgs and not g.dry_mode]
    states = reads.group_states([g.name for g in live])
    provisioning: dict[str, ProvisioningState] = {}

    # 1. Instances that never became Nodes: give up after max_node_provision_time (CA §1.1).
    for group in live:
        asg = asgs[group.cloud_provider_group_name]
        state = states[group.name]
        before = ProvisioningState.from_annotations(dict(state.provisioning))
        check = check_provisioning(before, asg.instances, registered, now,
                                   config.max_node_provision_seconds)
        saved = adapters is not None  # deciding only: nothing saved, nothing terminated
        if check.state != before and adapters is not None:
            new = replace(state, provisioning=tuple(sorted(check.state.to_annotations().items())))
            try:
                state = run(write_lock, adapters.kube, namespace, group.name, claimed(new), now)
            except LeaseConflict:
                notes.setdefault(group.name, []).append(
                    "Lease written by another tick: provisioning not saved")
                saved = False
        # Terminated only once the back-off is in the Lease: terminated first, a Lease write
        # that failed would leave the next tick seeing the instances gone, which it counts as
        # a success, and the group would never back off.
        if check.to_terminate and saved and adapters is not None:
            by_id = {i.instance_id: i for i in asg.instances}
            doomed = [unregistered_node(i, by_id[i].provider_id) for i in check.to_terminate]
            try:
                terminated[group.name] = run(terminate_instances, adapters.cloud, asg.name, doomed)
            except Exception as error:  # retried next tick: the ids stay in timed_out
                notes.setdefault(group.name, []).append(
                    f"terminating unregistered instances failed: {error}")
        if check.failed:
            outcome = "terminated" if adapters is not None else "to be terminated"
            notes.setdefault(group.name, []).append(
                f"instances {', '.join(check.to_terminate)} did not register within "
                f"{config.max_node_provision_time}: {outcome}, group backed off for "
                f"{check.state.backoff_seconds:g}s")
        states[group.name] = state
        provisioning[group.name] = check.state

    # 2. The pods the scheduler gave up on, less those a group's own scale-up serves.
    unschedulable = unschedulable_pods(pods, nodes)
    if not unschedulable:
        return ScaleUpOutcome(terminated=terminated, notes=frozen_notes(notes))
    needs_source = [g.cloud_provider_group_name for g in live if not group_nodes.get(g.name)]
    sources = reads.template_sources(needs_source) if needs_source else {}
    candidates, upcoming = group_candidates(live, asgs, group_nodes, pods, sources, desired_now,
                                            provisioning, notes)
    pending = not_helped(unschedulable, candidates, helped)
    if not pending:
        return ScaleUpOutcome(terminated=terminated, notes=frozen_notes(notes))

    # 3. Estimate, choose, cap, balance.
    priorities = None
    if config.priority_configmap is not None:
        # "name" lives beside the Leases; "namespace/name" anywhere (RBAC must grant that read).
        where, _, name = config.priority_configmap.rpartition("/")
        where = where or namespace
        if reads.config_map is None:
            notes.setdefault("cluster", []).append(
                f"ConfigMap {where}/{name} is not read from files: the priority expander "
                "passes every option on")
            priorities = {}
        else:
            data = reads.config_map(where, name)
            priorities = priorities_from(data, f"{where}/{name}",
                                         notes.setdefault("cluster", []))
    decision = run(plan_unschedulable_scale_up, config, live, pending, pods, nodes, candidates,
                   upcoming, states, priorities, now)
    for group_name, line in decision.notes:
        notes.setdefault(group_name, []).append(line)
    if not decision.growths:
        return ScaleUpOutcome(decision.plan, terminated=terminated, notes=frozen_notes(notes))
    if adapters is None:  # deciding only: what each group would be grown to
        for growth in decision.growths:
            notes.setdefault(growth.group, []).append(
                grown_note(decision, growth, growth.target))
        return ScaleUpOutcome(decision.plan, terminated=terminated, notes=frozen_notes(notes),
                              balanced=decision.split if decision.balanced else None,
                              would_set={growth.group: growth.target
                                         for growth in decision.growths})

    # 4. Act like Escalator's scale-up, group by group: the Lease with the scale lock, then
    # the cloud.
    by_name = {g.name: g for g in live}
    desired_set: dict[str, int] = {}
    errors: list[Exception] = []
    for growth in decision.growths:
        group = by_name[growth.group]
        try:
            desired = _grow(run, adapters, asgs[group.cloud_provider_group_name],
                            states[growth.group], growth, now)
        except Exception as error:
            if len(decision.growths) == 1:
                raise  # as without balancing: the scale-up fails, the next tick tries again
            # Several groups: the others still grow; this one's lock was released if
            # the cloud refused (`_grow`).
            get_logger(__name__).warning("balanced scale-up of %s failed: %s", growth.group,
                                         error)
            notes.setdefault(growth.group, []).append(
                f"scale-up for unschedulable pods failed: {error}")
            errors.append(error)
            continue
        if desired is None:
            notes.setdefault(growth.group, []).append(
                "scale-up for unschedulable pods lost the Lease race")
            continue
        desired_set[growth.group] = desired
        notes.setdefault(growth.group, []).append(grown_note(decision, growth, desired))
    if errors and not desired_set:
        raise errors[0]
    return ScaleUpOutcome(decision.plan, desired_set, terminated, frozen_notes(notes),
                          decision.split if decision.balanced else None)


def _grow(run: Runner, adapters: Adapters, asg: AutoScalingGroup, state: GroupState,
          growth: Growth, now: float) -> int | None:
    """Escalator's order for one group: the Lease with the scale lock first (None: another tick
    wrote it), then the ASG's absolute target. A cloud that refused the increase gets the old
    lock back, so the group is not left locked for a scale-up that never happened; an unknown
    answer keeps it, as the node-group tick does (`flows/tick.py`)."""
    namespace = adapters.lease_namespace
    # The lock records the increase, so a later tick can tell one that never reached the cloud.
    lock = state.lock.lock(growth.count, now, asg.desired_capacity, growth.target)
    try:
        written = run(write_lock, adapters.kube, namespace, growth.group,
                      claimed(replace(state, lock=lock)), now)
    except LeaseConflict:
        return None
    try:
        return run(set_desired_capacity, adapters.cloud, asg, growth.target)
    except Exception as error:
        if is_retryable(error):
            # Lost, throttled or timed out: the increase may be in the ASG, and a released lock
            # would let Escalator scale up again inside its cool-down. The next tick compares
            # the lock with the ASG (ScaleLock.never_reached_cloud).
            raise
        try:
            run(write_lock, adapters.kube, namespace, growth.group,
                claimed(replace(written, lock=state.lock)), now)
        except Exception as release:  # the lock then expires after the cool-down
            get_logger(__name__).warning("scale lock of %s not released: %s", growth.group,
                                         release)
        raise


def scale_down_unneeded(
    run: Runner, adapters: Adapters | None, reads: ClusterReads, options: ScaleDownOptions,
    groups: Sequence[NodeGroupConfig], group_nodes: Mapping[str, Sequence[NodeRecord]],
    asgs: Mapping[str, AutoScalingGroup], nodes: Sequence[NodeRecord],
    pods_by_node: Mapping[str, Sequence[PodRecord]], pdbs: Sequence[PodDisruptionBudget],
    escalator: Mapping[str, EscalatorTick], leaving_now: Collection[str],
    scaled_up_this_tick: bool, now: float,
) -> ScaleDownOutcome:
    """Update the unneeded timers and taint the nodes unneeded long enough (CA §1.3).

    `leaving_now` are nodes this tick already tainted or deleted: no pod moves onto them.
    A Lease written by someone else since we read it means another tick is acting on the
    group: its nodes are left alone this time. `adapters` None decides only: the timers are
    not saved and the notes say which nodes would be tainted.
    """
    live = [g for g in groups
            if g.cloud_provider_group_name in asgs and g.name in escalator and not g.dry_mode]
    states = reads.group_states([g.name for g in live])
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
                                   pods_by_node, pdbs, now)
    plan = run(plan_unneeded_scale_down, views, simulation, options, now, last_scale_up,
               scaled_up_this_tick)

    tainted: dict[str, tuple[str, ...]] = {}
    notes: dict[str, tuple[str, ...]] = {}
    for group in live:
        decided = plan.groups[group.name]
        state = states[group.name]
        if adapters is None:
            if decided.notes:
                notes[group.name] = tuple(decided.notes)
            continue
        namespace = adapters.lease_namespace
        if decided.unneeded_since != state.unneeded_since:
            try:
                run(write_lock, adapters.kube, namespace, group.name,
                    claimed(replace(state, unneeded_since=decided.unneeded_since)), now)
            except LeaseConflict:
                notes[group.name] = ("scale-down: Lease written by another tick; "
                                     "nothing removed this time",)
                continue
        if decided.taint:
            stamp = str(int(now))  # Escalator's taint value: Unix seconds
            tainted[group.name] = run(taint_nodes, adapters.kube, decided.taint, stamp,
                                      group.effective_taint_effect)
        if decided.notes:
            notes[group.name] = tuple(decided.notes)
    return ScaleDownOutcome({k: v for k, v in tainted.items() if v}, notes, plan.paused)


__all__ = ["ClusterReads", "live_reads", "scale_down_unneeded", "scale_up_unschedulable"]
