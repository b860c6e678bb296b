"""The Cluster Autoscaler's scale-up from unschedulable pods, as one step of the tick (CA §1.1).

Escalator grows a group from its summed requests, so a pod that fits no node of its group can
wait while utilization looks fine. After the per-group ticks, this step takes the pods the
scheduler gave up on that no group's own scale-up helped, asks each group "how many of your
nodes would they need?" (`tasks.expanders`), lets the expander chain choose, and sets that
group's ASG to the new absolute size under its Escalator scale lock. With
`balance_similar_node_groups` the new nodes are split among the groups similar to the chosen one
(`tasks.balancing`, CA §1.5), each grown the same way. It also gives up on instances that never
registered as Nodes, and backs their group off (CA's provisioning timeout).

State lives in each group's Lease (`GroupState.provisioning`), so a restarted worker keeps it.
Only runs with `cluster_autoscaler.enabled`.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from logging import getLogger as get_logger
from typing import TYPE_CHECKING

from tasks.cluster_autoscaler.backoff import ProvisioningState, check_provisioning
from tasks.cluster_autoscaler.balancing import BalancedScaleUp, Tolerances, balance_scale_up
from tasks.cluster_autoscaler.config import ClusterAutoscalerConfig
from tasks.cluster_autoscaler.estimator import fits_empty_template, free_slots, unschedulable_pods
from tasks.cluster_autoscaler.expanders import expander_context, priorities_from_configmap
from tasks.cluster_autoscaler.limits import cluster_limits, cluster_totals
from tasks.cluster_autoscaler.scale_up_plan import GroupCandidate, ScaleUpPlan, plan_scale_up
from tasks.cluster_autoscaler.templates import TemplateNode, template_for_group
from tasks.core.errors import LeaseConflict
from tasks.core.lease_state import GroupState, lease_name
from tasks.core.records import AutoScalingGroup, NodeRecord, PodRecord
from tasks.core.retry import step
from tasks.escalator.config import NodeGroupConfig

if TYPE_CHECKING:
    from tasks.steps.node_groups import Adapters


@dataclass(frozen=True)
class ScaleUpOutcome:
    """What the step did, per group, for the group's result line and `elevator plan`."""

    plan: ScaleUpPlan | None = None
    # group -> the ASG desired capacity set: the chosen group, or with balancing each group
    # the new nodes were split to (empty: nothing grown)
    asg_desired_set: Mapping[str, int] = field(default_factory=dict)
    terminated: Mapping[str, tuple[str, ...]] | None = None  # group -> timed-out instance ids
    notes: Mapping[str, tuple[str, ...]] | None = None  # group -> notes
    balanced: BalancedScaleUp | None = None  # the split, when balance_similar_node_groups


def _group_label(template: TemplateNode, group: NodeGroupConfig) -> TemplateNode:
    """Every node of an Escalator group carries its label_key=label_value (that is how the
    group finds its nodes), so a template imagined from the ASG alone gets it too."""
    if not group.label_key or group.label_key in template.labels:
        return template
    return replace(template, labels={**template.labels, group.label_key: group.label_value})


def _instance_node(instance_id: str, provider_id: str) -> NodeRecord:
    # terminate_instances works on NodeRecords by providerID; an unregistered instance has none.
    return NodeRecord(name=instance_id, labels={}, created_unix_seconds=0.0,
                      cpu_allocatable_milli=0, memory_allocatable_bytes=0,
                      provider_id=provider_id)


def _priorities(adapters: Adapters, config: ClusterAutoscalerConfig,
                notes: list[str]) -> dict[int, tuple[str, ...]] | None:
    """CA §1.2: the priority expander reads its ConfigMap every time it runs."""
    reference = config.priority_configmap
    if reference is None:
        return None
    # "name" lives beside the Leases; "namespace/name" anywhere (RBAC must grant that read).
    namespace, _, name = reference.rpartition("/")
    namespace = namespace or adapters.lease_namespace
    data = adapters.kube.read_config_map(namespace, name)
    if data is None:
        notes.append(f"ConfigMap {namespace}/{name} not found: "
                     "the priority expander passes every option on")
        return {}
    try:
        return priorities_from_configmap(data, f"{namespace}/{name}")
    except ValueError as error:
        notes.append(f"{error}: the priority expander passes every option on")
        return {}


@step
def scale_up_unschedulable(
    adapters: Adapters, config: ClusterAutoscalerConfig, groups: Sequence[NodeGroupConfig],
    pods: Sequence[PodRecord], nodes: Sequence[NodeRecord],
    group_nodes: Mapping[str, Sequence[NodeRecord]], asgs: Mapping[str, AutoScalingGroup],
    helped: Mapping[str, frozenset[str]], desired_now: Mapping[str, int], now: float,
) -> ScaleUpOutcome:
    """One CA scale-up over every group; `helped` maps a group that scaled up this tick (its
    own Escalator rule) to its pods (namespace/name), `desired_now` the ASG sizes ticks set."""
    notes: dict[str, list[str]] = defaultdict(list)
    terminated: dict[str, tuple[str, ...]] = {}
    namespace = adapters.lease_namespace
    registered = {node.provider_id for node in nodes if node.provider_id}
    states: dict[str, GroupState] = {}
    provisioning: dict[str, ProvisioningState] = {}
    live = [g for g in groups if g.cloud_provider_group_name in asgs and not g.dry_mode]

    # 1. Instances that never became Nodes: give up after max_node_provision_time (CA §1.1).
    for group in live:
        asg = asgs[group.cloud_provider_group_name]
        state = adapters.kube.read_state(namespace, lease_name(group.name))
        before = ProvisioningState.from_annotations(dict(state.provisioning))
        check = check_provisioning(before, asg.instances, registered, now,
                                   config.max_node_provision_seconds)
        if check.to_terminate:
            by_id = {i.instance_id: i for i in asg.instances}
            doomed = [_instance_node(i, by_id[i].provider_id) for i in check.to_terminate]
            try:
                terminated[group.name] = tuple(
                    adapters.cloud.terminate_instances(asg.name, doomed))
            except Exception as error:  # retried next tick: the ids stay in timed_out
                notes[group.name].append(f"terminating unregistered instances failed: {error}")
        if check.failed:
            notes[group.name].append(
                f"instances {', '.join(check.to_terminate)} did not register within "
                f"{config.max_node_provision_time}: terminated, group backed off for "
                f"{check.state.backoff_seconds:g}s")
        if check.state != before:
            new = replace(state, provisioning=tuple(sorted(check.state.to_annotations().items())))
            try:
                state = adapters.kube.write_state(namespace, lease_name(group.name), new, now)
            except LeaseConflict:
                notes[group.name].append("Lease written by another tick: provisioning not saved")
        states[group.name] = state
        provisioning[group.name] = check.state

    # 2. The pods the scheduler gave up on.
    unschedulable = unschedulable_pods(pods)
    if not unschedulable:
        return ScaleUpOutcome(terminated=terminated, notes=_frozen(notes))

    # 3. A template per group: a live node, else the ASG (scale from zero).
    pods_by_node: dict[str, list[PodRecord]] = defaultdict(list)
    for pod in pods:
        if pod.node_name:
            pods_by_node[pod.node_name].append(pod)
    needs_source = [g.cloud_provider_group_name for g in live if not group_nodes.get(g.name)]
    sources = adapters.cloud.template_sources(needs_source) if needs_source else {}
    candidates: list[GroupCandidate] = []
    upcoming: list[tuple[TemplateNode, int]] = []
    for group in live:
        asg = asgs[group.cloud_provider_group_name]
        members = group_nodes.get(group.name, ())
        try:
            template = template_for_group(group.name, asg.name, members, pods_by_node,
                                          sources.get(asg.name))
        except ValueError as error:
            notes[group.name].append(str(error))
            template = None
        if template is not None:
            template = _group_label(template, group)
        candidate = GroupCandidate(
            group.name, asg.name, template, desired_now.get(group.name, asg.desired_capacity),
            asg.max_size, sum(1 for n in members if n.provider_id in asg.provider_ids()),
            provisioning[group.name].backoff_until)
        candidates.append(candidate)
        if template is not None:
            upcoming.append((template, candidate.upcoming))

    # Less the pods a group's own scale-up is serving: those that fit a node of that group (a
    # pod too big for its group's nodes is not helped by more of them).
    templates = {c.group: c.template for c in candidates}
    pending = [pod for pod in unschedulable
               if not any(f"{pod.namespace}/{pod.name}" in pods_of
                          and (template := templates.get(name)) is not None
                          and fits_empty_template(pod, template)
                          for name, pods_of in helped.items())]
    if not pending:
        return ScaleUpOutcome(terminated=terminated, notes=_frozen(notes))

    # 4. Estimate, choose (the expander chain, §1.2), cap by the cluster limits (§1.3).
    context = expander_context(config, len(nodes), _priorities(adapters, config,
                                                                notes["cluster"]))
    rng = random.Random(config.random_seed)
    totals = cluster_totals(nodes, upcoming)
    limits = cluster_limits(config)
    plan = plan_scale_up(pending, candidates, totals, limits, config.expander_chain, context,
                         rng, now, free_slots(nodes, pods))
    for group_name, reason in plan.skipped:
        notes[group_name].append(f"scale-up for unschedulable pods: skipped, {reason}")
    if plan.option is None:
        return ScaleUpOutcome(plan, terminated=terminated, notes=_frozen(notes))

    # The chosen group's scale lock gates the scale-up, balanced or not: it waits the cool-down.
    chosen = plan.option
    by_name = {g.name: g for g in live}
    if states[chosen.group].lock.held(now, by_name[chosen.group].scale_up_cool_down_seconds):
        notes[chosen.group].append("scale-up for unschedulable pods waits: scale lock held")
        return ScaleUpOutcome(plan, terminated=terminated, notes=_frozen(notes))

    # 5. CA --balance-similar-node-groups (§1.5): split the nodes among the similar groups. A
    # similar group whose scale lock is held is left out, as CA leaves out a group that is not
    # ready to scale up.
    split = BalancedScaleUp.alone(plan)
    if config.balance_similar_node_groups:
        locked = {g.name: "scale lock held" for g in live if g.name != chosen.group
                  and states[g.name].lock.held(now, g.scale_up_cool_down_seconds)}
        split = balance_scale_up(
            plan, candidates, totals, limits, now,
            Tolerances(config.memory_difference_ratio, config.max_allocatable_difference_ratio,
                       config.max_free_difference_ratio),
            config.balancing_ignore_labels, {g.name: g.label_key for g in live}, locked)

    # 6. Act like Escalator's scale-up, group by group: claim the Lease with the scale lock,
    # then the cloud.
    chain = " → ".join(f"{name}: {', '.join(kept) or 'none'}" for name, kept in plan.trace)
    desired_set: dict[str, int] = {}
    errors: list[Exception] = []
    for name, count in split.added.items():
        group = by_name[name]
        try:
            desired = _grow(adapters, group, asgs[group.cloud_provider_group_name],
                            states[name], count, split.new_target_sizes[name], now)
        except Exception as error:
            if len(split.added) == 1:
                raise  # as without balancing: the step fails, and is retried
            # Several groups: the others still grow; this one's lock was released (`_grow`).
            get_logger(__name__).warning("balanced scale-up of %s failed: %s", name, error)
            notes[name].append(f"scale-up for unschedulable pods failed: {error}")
            errors.append(error)
            continue
        if desired is None:
            notes[name].append("scale-up for unschedulable pods lost the Lease race")
            continue
        desired_set[name] = desired
        notes[name].append(_grown_note(split, name, count, desired, chain))
    if errors and not desired_set:
        raise errors[0]
    return ScaleUpOutcome(plan, desired_set, terminated, _frozen(notes),
                          split if config.balance_similar_node_groups else None)


def _grow(adapters: Adapters, group: NodeGroupConfig, asg: AutoScalingGroup,
          state: GroupState, count: int, target: int, now: float) -> int | None:
    """Escalator's order for one group: the Lease with the scale lock first (None: another tick
    wrote it), then the ASG's absolute target. A failed cloud call puts the old lock back, so
    the group is not left locked for a scale-up that never happened."""
    namespace = adapters.lease_namespace
    locked = replace(state, lock=state.lock.lock(count, now))
    try:
        written = adapters.kube.write_state(namespace, lease_name(group.name), locked, now)
    except LeaseConflict:
        return None
    try:
        return adapters.cloud.set_desired_capacity(asg, target)
    except Exception:
        try:
            adapters.kube.write_state(namespace, lease_name(group.name),
                                      replace(written, lock=state.lock), now)
        except Exception as release:  # the lock then expires after the cool-down
            get_logger(__name__).warning("scale lock of %s not released: %s", group.name, release)
        raise


def _grown_note(split: BalancedScaleUp, name: str, count: int, desired: int, chain: str) -> str:
    """A grown group's line: how many nodes for how many pods, and with which groups."""
    pods = f"scale-up for {len(split.option.pods)} unschedulable pod(s)"
    if not split.similar:
        return f"{pods}: +{count} node(s), ASG desired {desired} (expanders {chain})"
    others = ", ".join(group for group in split.balanced_set if group != name)
    return (f"{pods}: +{count} of {split.node_count} node(s), balanced with {others} "
            f"(balance_similar_node_groups; the expanders chose {split.chosen}: {chain}), "
            f"ASG desired {desired}")


def _frozen(notes: Mapping[str, list[str]]) -> dict[str, tuple[str, ...]]:
    return {name: tuple(lines) for name, lines in notes.items() if lines}


__all__ = ["ScaleUpOutcome", "scale_up_unschedulable"]
