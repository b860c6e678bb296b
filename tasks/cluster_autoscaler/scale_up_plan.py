"""The scale-up plan: estimate every group, let the expander chain choose, cap by the limits
(CA §1.1-§1.3)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from kube_elevator.tasks.cluster_autoscaler.estimator import (
    Slot,
    estimate_nodes,
    filter_out_schedulable,
    upcoming_slots,
)
from kube_elevator.tasks.cluster_autoscaler.expanders import ExpanderContext, ScaleUpOption, choose
from kube_elevator.tasks.cluster_autoscaler.limits import (
    ClusterLimits,
    ClusterTotals,
    exceeded_limit,
    nodes_within_limits,
)
from kube_elevator.tasks.cluster_autoscaler.scheduling import FilterSnapshot
from kube_elevator.tasks.cluster_autoscaler.templates import TemplateNode
from kube_elevator.tasks.core.lease_state import format_time
from kube_elevator.tasks.core.records import PodRecord

T = TypeVar("T")


# --- the plan -------------------------------------------------------------------------------

MAX_NODES_PER_SCALE_UP = 1000  # CA --max-nodes-per-scaleup


@dataclass(frozen=True)
class GroupCandidate:
    """One node group as the scale-up sees it this tick."""

    group: str
    asg_name: str
    template: TemplateNode | None
    target_size: int  # the ASG's desired capacity
    max_size: int
    registered_nodes: int  # nodes of the group that have joined; the rest are upcoming
    backed_off_until: float = 0.0  # unix seconds; see ProvisioningState

    @property
    def upcoming(self) -> int:
        return max(self.target_size - self.registered_nodes, 0)


@dataclass(frozen=True)
class ScaleUpPlan:
    """What to grow, by how much, and why the others were not grown."""

    option: ScaleUpOption | None
    new_target_size: int = 0
    pending: tuple[PodRecord, ...] = ()  # unschedulable pods no upcoming node will take
    unhelped: tuple[PodRecord, ...] = ()  # pending pods the chosen option does not help
    skipped: tuple[tuple[str, str], ...] = ()  # (group, reason)
    trace: tuple[tuple[str, tuple[str, ...]], ...] = ()
    capped_from: int = 0  # the chosen option's node count before the cluster limits


def plan_scale_up(
    unschedulable: Sequence[PodRecord], groups: Sequence[GroupCandidate], totals: ClusterTotals,
    limits: ClusterLimits, chain: Sequence[str], context: ExpanderContext, rng: random.Random,
    now: float, free: Sequence[Slot] = (), max_nodes_per_scale_up: int = MAX_NODES_PER_SCALE_UP,
    snapshot: FilterSnapshot | None = None,
) -> ScaleUpPlan:
    """One CA scale-up (§1.1): drop pods that fit existing or upcoming nodes, estimate each
    group that may grow, let the chain choose, then cap the choice by the cluster limits.
    `snapshot` (the live cluster as the scheduler sees it) makes both steps run the
    scheduler's filters, for pods with pod affinity, spreading or host ports."""
    slots = list(free)
    for candidate in groups:
        if candidate.template is not None:
            slots.extend(upcoming_slots(candidate.template, candidate.upcoming))
    pending, _ = filter_out_schedulable(unschedulable, slots, snapshot)
    if not pending:
        return ScaleUpPlan(None)
    skipped: list[tuple[str, str]] = []
    options: list[ScaleUpOption] = []
    for candidate in sorted(groups, key=lambda c: c.group):
        template = candidate.template
        headroom = candidate.max_size - candidate.target_size
        if template is None:
            skipped.append((candidate.group, "no template node (no live node, no ASG template)"))
            continue
        if now < candidate.backed_off_until:
            skipped.append((candidate.group, "backed off after a failed scale-up until "
                                             f"{format_time(candidate.backed_off_until)}"))
            continue
        if headroom <= 0:
            skipped.append((candidate.group, f"at max size {candidate.max_size}"))
            continue
        limit = exceeded_limit(template, totals, limits)
        if limit is not None:
            skipped.append((candidate.group, limit))
            continue
        cap = min(headroom, max_nodes_per_scale_up)
        if limits.max_nodes_total > 0:
            cap = min(cap, limits.max_nodes_total - totals.node_count)
        estimate = estimate_nodes(pending, template, cap, snapshot)
        if estimate.node_count == 0:
            skipped.append((candidate.group, "no pending pod fits its template node"))
            continue
        options.append(ScaleUpOption(candidate.group, candidate.asg_name, estimate.node_count,
                                     estimate.pods, template))
    choice = choose(options, chain, context, rng)
    if choice.option is None:
        return ScaleUpPlan(None, pending=tuple(pending), unhelped=tuple(pending),
                           skipped=tuple(skipped), trace=choice.trace)
    chosen = choice.option
    allowed = nodes_within_limits(chosen.template, chosen.node_count, totals, limits)
    if allowed == 0:
        skipped.append((chosen.group, "cluster limits leave no room for a node"))
        return ScaleUpPlan(None, pending=tuple(pending), unhelped=tuple(pending),
                           skipped=tuple(skipped), trace=choice.trace,
                           capped_from=chosen.node_count)
    if allowed < chosen.node_count:
        # CA's ApplyLimits caps the count; we also say which pods the smaller count still helps.
        estimate = estimate_nodes(pending, chosen.template, allowed, snapshot)
        chosen = replace(chosen, node_count=estimate.node_count, pods=estimate.pods)
    target = next(c.target_size for c in groups if c.group == chosen.group)
    helped = {id(pod) for pod in chosen.pods}
    return ScaleUpPlan(
        chosen,
        new_target_size=target + chosen.node_count,
        pending=tuple(pending),
        unhelped=tuple(pod for pod in pending if id(pod) not in helped),
        skipped=tuple(skipped), trace=choice.trace, capped_from=choice.option.node_count,
    )
