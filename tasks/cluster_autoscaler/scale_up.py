"""The Cluster Autoscaler's scale-up from unschedulable pods, decided (CA §1.1, §1.2, §1.5).

Escalator grows a group from its summed requests, so a pod that fits no node of its group can
wait while utilization looks fine. After the per-group ticks, the pods the scheduler gave up on
that no group's own scale-up helped are offered to every group ("how many of your nodes would
they need?"), the expander chain chooses, and with `balance_similar_node_groups` the new nodes
are split among the groups similar to the chosen one. Everything here is pure: the Leases, the
ASG tags and the priority ConfigMap are read by steps, and the growth is applied by steps
(`flows/cluster_autoscaler.py` composes them).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from kube_elevator.tasks.cluster_autoscaler.backoff import ProvisioningState
from kube_elevator.tasks.cluster_autoscaler.balancing import BalancedScaleUp, Tolerances, balance_scale_up
from kube_elevator.tasks.cluster_autoscaler.config import ClusterAutoscalerConfig
from kube_elevator.tasks.cluster_autoscaler.estimator import fits_empty_template, free_slots
from kube_elevator.tasks.cluster_autoscaler.expanders import expander_context, priorities_from_configmap
from kube_elevator.tasks.cluster_autoscaler.limits import cluster_limits, cluster_totals
from kube_elevator.tasks.cluster_autoscaler.scale_up_plan import GroupCandidate, ScaleUpPlan, plan_scale_up
from kube_elevator.tasks.cluster_autoscaler.scheduling import FilterSnapshot, needs_filters
from kube_elevator.tasks.cluster_autoscaler.templates import TemplateNode, template_for_group
from kube_elevator.tasks.core.lease_state import GroupState
from kube_elevator.tasks.core.records import AsgTemplateSource, AutoScalingGroup, NodeRecord, PodRecord
from kube_elevator.tasks.escalator.config import NodeGroupConfig

Notes = dict[str, list[str]]  # group (or "cluster") -> note lines, in the order they arose


@dataclass(frozen=True)
class ScaleUpOutcome:
    """What the scale-up did, per group, for the group's result line and `elevator plan`."""

    plan: ScaleUpPlan | None = None
    # group -> the ASG desired capacity set: the chosen group, or with balancing each group
    # the new nodes were split to (empty: nothing grown)
    asg_desired_set: Mapping[str, int] = field(default_factory=dict)
    terminated: Mapping[str, tuple[str, ...]] | None = None  # group -> timed-out instance ids
    notes: Mapping[str, tuple[str, ...]] | None = None  # group -> notes
    balanced: BalancedScaleUp | None = None  # the split, when balance_similar_node_groups
    # group -> the ASG desired capacity a decision without acting would set (`elevator plan`,
    # dry runs): the numbers of the group's plan, as `asg_desired_set` is of a live tick's.
    would_set: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Growth:
    """One group to grow: `count` new nodes, the ASG set to the absolute `target`."""

    group: str
    count: int
    target: int


@dataclass(frozen=True)
class UnschedulableScaleUp:
    """The decision: which groups grow by how much, or why none does."""

    plan: ScaleUpPlan
    growths: tuple[Growth, ...] = ()
    split: BalancedScaleUp | None = None  # how the nodes were split (always set when growing)
    balanced: bool = False  # balance_similar_node_groups was on
    chain: str = ""  # the expander chain's trace, for the notes
    notes: tuple[tuple[str, str], ...] = ()  # (group, line): skipped groups, a held lock


def unregistered_node(instance_id: str, provider_id: str) -> NodeRecord:
    """terminate_instances works on NodeRecords by providerID; an unregistered instance has
    no Node, so it gets a record of its own."""
    return NodeRecord(name=instance_id, labels={}, created_unix_seconds=0.0,
                      cpu_allocatable_milli=0, memory_allocatable_bytes=0,
                      provider_id=provider_id)


def with_group_label(template: TemplateNode, group: NodeGroupConfig) -> TemplateNode:
    """Every node of an Escalator group carries its label_key=label_value (that is how the
    group finds its nodes), so a template imagined from the ASG alone gets it too."""
    if not group.label_key or group.label_key in template.labels:
        return template
    return replace(template, labels={**template.labels, group.label_key: group.label_value})


def group_candidates(
    live: Sequence[NodeGroupConfig], asgs: Mapping[str, AutoScalingGroup],
    group_nodes: Mapping[str, Sequence[NodeRecord]], pods: Sequence[PodRecord],
    sources: Mapping[str, AsgTemplateSource], desired_now: Mapping[str, int],
    provisioning: Mapping[str, ProvisioningState], notes: Notes,
) -> tuple[list[GroupCandidate], list[tuple[TemplateNode, int]]]:
    """A template per group (a live node, else the ASG: scale from zero) and what it could add;
    with the nodes already on their way, which the cluster limits count."""
    pods_by_node: dict[str, list[PodRecord]] = {}
    for pod in pods:
        if pod.node_name:
            pods_by_node.setdefault(pod.node_name, []).append(pod)
    candidates: list[GroupCandidate] = []
    upcoming: list[tuple[TemplateNode, int]] = []
    for group in live:
        asg = asgs[group.cloud_provider_group_name]
        members = group_nodes.get(group.name, ())
        try:
            template = template_for_group(group.name, asg.name, members, pods_by_node,
                                          sources.get(asg.name))
        except ValueError as error:
            notes.setdefault(group.name, []).append(str(error))
            template = None
        if template is not None:
            template = with_group_label(template, group)
        # An ASG known only from the config (`elevator plan` without --asg) is its nodes: its
        # desired size is their count, so none is on its way.
        registered = sum(1 for n in members if n.provider_id in asg.provider_ids()) \
            if asg.instances_known else len(members)
        candidate = GroupCandidate(
            group.name, asg.name, template, desired_now.get(group.name, asg.desired_capacity),
            asg.max_size, registered, provisioning[group.name].backoff_until)
        candidates.append(candidate)
        if template is not None:
            upcoming.append((template, candidate.upcoming))
    return candidates, upcoming


def not_helped(unschedulable: Sequence[PodRecord], candidates: Sequence[GroupCandidate],
               helped: Mapping[str, frozenset[str]]) -> list[PodRecord]:
    """Less the pods a group's own scale-up is serving: those that fit a node of that group (a
    pod too big for its group's nodes is not helped by more of them)."""
    templates = {c.group: c.template for c in candidates}
    return [pod for pod in unschedulable
            if not any(f"{pod.namespace}/{pod.name}" in pods_of
                       and (template := templates.get(name)) is not None
                       and fits_empty_template(pod, template)
                       for name, pods_of in helped.items())]


def priorities_from(data: Mapping[str, str] | None, where: str,
                    notes: list[str]) -> dict[int, tuple[str, ...]]:
    """CA §1.2: the priority expander's ConfigMap; missing or malformed passes every option on."""
    if data is None:
        notes.append(f"ConfigMap {where} not found: the priority expander passes every option on")
        return {}
    try:
        return priorities_from_configmap(data, where)
    except ValueError as error:
        notes.append(f"{error}: the priority expander passes every option on")
        return {}


def decide_scale_up(
    config: ClusterAutoscalerConfig, live: Sequence[NodeGroupConfig],
    pending: Sequence[PodRecord], pods: Sequence[PodRecord], nodes: Sequence[NodeRecord],
    candidates: Sequence[GroupCandidate], upcoming: Sequence[tuple[TemplateNode, int]],
    states: Mapping[str, GroupState], priorities: dict[int, tuple[str, ...]] | None,
    now: float,
) -> UnschedulableScaleUp:
    """Estimate, choose (the expander chain, §1.2), cap by the cluster limits (§1.3); then the
    chosen group's scale lock, and the split among similar groups (§1.5)."""
    context = expander_context(config, len(nodes), priorities)
    rng = random.Random(config.random_seed)
    totals = cluster_totals(nodes, upcoming)
    limits = cluster_limits(config)
    snapshot = FilterSnapshot(nodes, pods) if needs_filters(pending, pods) else None
    plan = plan_scale_up(pending, candidates, totals, limits, config.expander_chain, context,
                         rng, now, free_slots(nodes, pods), snapshot=snapshot)
    notes = tuple((group_name, f"scale-up for unschedulable pods: skipped, {reason}")
                  for group_name, reason in plan.skipped)
    if plan.option is None:
        return UnschedulableScaleUp(plan, notes=notes)
    # The chosen group's scale lock gates the scale-up, balanced or not: it waits the cool-down.
    chosen = plan.option
    by_name = {g.name: g for g in live}
    if states[chosen.group].lock.held(now, by_name[chosen.group].scale_up_cool_down_seconds):
        held = (chosen.group, "scale-up for unschedulable pods waits: scale lock held")
        return UnschedulableScaleUp(plan, notes=(*notes, held))
    # CA --balance-similar-node-groups (§1.5): split the nodes among the similar groups. A
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
            config.balancing_ignore_labels, {g.name: g.label_key for g in live}, locked,
            snapshot=snapshot)
    chain = " → ".join(f"{name}: {', '.join(kept) or 'none'}" for name, kept in plan.trace)
    growths = tuple(Growth(name, count, split.new_target_sizes[name])
                    for name, count in split.added.items())
    return UnschedulableScaleUp(plan, growths, split, config.balance_similar_node_groups, chain,
                                notes)


def grown_note(decision: UnschedulableScaleUp, growth: Growth, desired: int) -> str:
    """A grown group's line: how many nodes for how many pods, and with which groups."""
    split = decision.split
    assert split is not None
    pods = f"scale-up for {len(split.option.pods)} unschedulable pod(s)"
    if not split.similar:
        return (f"{pods}: +{growth.count} node(s), ASG desired {desired} "
                f"(expanders {decision.chain})")
    others = ", ".join(group for group in split.balanced_set if group != growth.group)
    return (f"{pods}: +{growth.count} of {split.node_count} node(s), balanced with {others} "
            f"(balance_similar_node_groups; the expanders chose {split.chosen}: "
            f"{decision.chain}), ASG desired {desired}")


def frozen_notes(notes: Notes) -> dict[str, tuple[str, ...]]:
    return {name: tuple(lines) for name, lines in notes.items() if lines}


__all__ = ["Growth", "ScaleUpOutcome", "UnschedulableScaleUp", "decide_scale_up",
           "frozen_notes", "group_candidates", "grown_note", "not_helped", "priorities_from",
           "unregistered_node", "with_group_label"]
