"""CA's `--balance-similar-node-groups` (spec §1.5): split a scale-up among similar groups.

With one ASG per availability zone (the AWS README's advice for EBS-backed StatefulSets), the
expander alone would grow one zone at a time. CA instead finds the groups whose template nodes
compare "similar" to the chosen one and spreads the new nodes over them, smallest group first,
so their sizes stay close. All pure: templates, sizes and pods in, the split out.

CA sources followed (kubernetes/autoscaler, cluster-autoscaler/):
- `processors/nodegroupset/compare_nodegroups.go`: `IsCloudProviderNodeInfoSimilar`, the
  tolerances and `BasicIgnoredLabels`; `processors/nodegroupset/aws_nodegroups.go` (the AWS
  comparator, moved under `cloudprovider/aws/` in newer releases): the AWS labels it adds;
- `processors/nodegroupset/balancing_processor.go`: `BalanceScaleUpBetweenGroups`;
- `core/scaleup/orchestrator/orchestrator.go`: `ComputeSimilarNodeGroups` (a similar group must
  be ready to scale up and hold every pod the chosen group can hold) and the estimation limit
  that counts the similar groups' room too (`estimator/sng_capacity_threshold.go`).

Our one addition: each Escalator group's own label (`label_key`) is ignored when two groups are
compared. Every node of an Escalator group carries `label_key=label_value`, and that value is
the group's identity (two groups cannot share it), so comparing it would make no two groups
similar, ever. CA ignores `eks.amazonaws.com/nodegroup` and `kops.k8s.io/instancegroup` for the
same reason. Pods that select one group by that label are still safe: they fit only that
group's template, so the pod rule below keeps the other groups out of their scale-up.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kube_elevator.tasks.cluster_autoscaler.estimator import estimate_nodes, fits_empty_template
from kube_elevator.tasks.cluster_autoscaler.expanders import ScaleUpOption
from kube_elevator.tasks.cluster_autoscaler.limits import (
    ClusterLimits,
    ClusterTotals,
    exceeded_limit,
    nodes_within_limits,
)
from kube_elevator.tasks.cluster_autoscaler.scale_up_plan import (
    MAX_NODES_PER_SCALE_UP,
    GroupCandidate,
    ScaleUpPlan,
)
from kube_elevator.tasks.cluster_autoscaler.scheduling import FilterSnapshot
from kube_elevator.tasks.cluster_autoscaler.templates import TemplateNode
from kube_elevator.tasks.core.records import PodRecord

# CA's BasicIgnoredLabels: labels whose value differs from node to node or zone to zone.
BASIC_IGNORED_LABELS = frozenset({
    "kubernetes.io/hostname",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "beta.kubernetes.io/fluentd-ds-ready",  # fluentd DaemonSet migration marker (k8s 1.8 → 1.9)
    "kops.k8s.io/instancegroup",  # kops' group name: its value differs by definition
})
# CA's AWS comparator adds these (we only run on AWS ASGs).
AWS_IGNORED_LABELS = frozenset({
    "alpha.eksctl.io/instance-id",
    "alpha.eksctl.io/nodegroup-name",
    "eks.amazonaws.com/nodegroup",
    "k8s.amazonaws.com/eniConfig",  # AWS CNI custom networking, one ENIConfig per zone
    "lifecycle",  # spot / on-demand marker
    "topology.ebs.csi.aws.com/zone",  # the EBS CSI driver's zone label
})
IGNORED_LABELS = BASIC_IGNORED_LABELS | AWS_IGNORED_LABELS


@dataclass(frozen=True)
class Tolerances:
    """How far two similar groups' nodes may differ (CA's flags and their defaults)."""

    memory_difference_ratio: float = 0.015  # --memory-difference-ratio (capacity)
    max_allocatable_difference_ratio: float = 0.05  # --max-allocatable-difference-ratio
    max_free_difference_ratio: float = 0.05  # --max-free-difference-ratio


def within_tolerance(a: int, b: int, ratio: float) -> bool:
    """CA's resourceListWithinTolerance: larger - smaller <= larger x ratio."""
    larger, smaller = max(a, b), min(a, b)
    return larger - smaller <= larger * ratio


def difference(a: TemplateNode, b: TemplateNode, tolerances: Tolerances = Tolerances(),
               ignored_labels: Collection[str] = IGNORED_LABELS) -> str | None:
    """Why two template nodes are not similar, or None if they are (CA's
    IsCloudProviderNodeInfoSimilar, in its order: capacity, allocatable, free, labels).

    Every resource counts, extended ones too: a GPU group is never similar to a CPU group,
    nor a group with 4 GPUs per node to one with 1. A zero amount is the same as none (CA's
    AWS templates write `nvidia.com/gpu: 0` that a live CPU node does not report at all).

    Taints and instance type names are not compared: CA does not either (the instance type
    label is, unless ignored). "Free" is allocatable less the DaemonSet and static pods every
    new node runs, which is what CA's template NodeInfo has requested.
    """
    # Capacity: memory within --memory-difference-ratio, every other resource exactly ("If this
    # is ever changed, enforcing MaxCoresTotal limits as it is now may no longer work").
    if a.cpu_capacity_milli != b.cpu_capacity_milli:
        return f"CPU capacity {a.cpu_capacity_milli}m != {b.cpu_capacity_milli}m"
    if a.max_pods != b.max_pods:
        return f"pod capacity {a.max_pods} != {b.max_pods}"
    if a.gpu_count != b.gpu_count:
        return f"GPU capacity {a.gpu_count} != {b.gpu_count}"
    if a.extended_capacity != b.extended_capacity:
        # Every other resource exactly too (a resource one node lacks: CA's "missing capacity").
        return (f"extended resource capacity {_shown(a.extended_capacity)} != "
                f"{_shown(b.extended_capacity)}")
    if not within_tolerance(a.memory_capacity_bytes, b.memory_capacity_bytes,
                            tolerances.memory_difference_ratio):
        return (f"memory capacity differs by more than {tolerances.memory_difference_ratio:g} "
                f"({a.memory_capacity_bytes} vs {b.memory_capacity_bytes} bytes)")
    ratio = tolerances.max_allocatable_difference_ratio
    for resource, x, y in (("CPU", a.cpu_allocatable_milli, b.cpu_allocatable_milli),
                           ("memory", a.memory_allocatable_bytes, b.memory_allocatable_bytes),
                           *_paired(dict(a.extended_allocatable),
                                    dict(b.extended_allocatable))):
        if not within_tolerance(x, y, ratio):
            return f"allocatable {resource} differs by more than {ratio:g} ({x} vs {y})"
    ratio = tolerances.max_free_difference_ratio
    for resource, x, y in (("CPU", a.free_cpu_milli, b.free_cpu_milli),
                           ("memory", a.free_memory_bytes, b.free_memory_bytes),
                           *_paired(a.free_extended, b.free_extended)):
        if not within_tolerance(x, y, ratio):
            return f"free {resource} differs by more than {ratio:g} ({x} vs {y})"
    # Labels: the same keys with the same values, except the ignored ones (CA compareLabels).
    differing = sorted(key for key in set(a.labels) | set(b.labels)
                       if key not in ignored_labels and a.labels.get(key) != b.labels.get(key))
    if differing:
        return f"labels differ: {', '.join(differing)}"
    return None


def _shown(resources: Sequence[tuple[str, int]]) -> str:
    return "{" + ", ".join(f"{name}: {amount}" for name, amount in resources) + "}"


def _paired(a: Mapping[str, int], b: Mapping[str, int]) -> list[tuple[str, int, int]]:
    """(resource, a's amount, b's amount) for every extended resource either node has; CA's
    resourceMapsWithinTolerance compares every resource name, a missing one never within."""
    return [(name, a.get(name, 0), b.get(name, 0)) for name in sorted(set(a) | set(b))]


def similar(a: TemplateNode, b: TemplateNode, tolerances: Tolerances = Tolerances(),
            ignored_labels: Collection[str] = IGNORED_LABELS) -> bool:
    """Could the two groups be one group spread over zones? See `difference`."""
    return difference(a, b, tolerances, ignored_labels) is None


def balance(target_sizes: Mapping[str, int], max_sizes: Mapping[str, int],
            new_nodes: int) -> dict[str, int]:
    """CA's BalanceScaleUpBetweenGroups: nodes to add per group, smallest group first.

    Each node goes to the smallest group (by its size with the nodes given so far) still below
    its max size; ties go by the order of `target_sizes` (CA: the expander's choice first; Go
    sorts such short lists by insertion, which keeps that order). Groups already at max size
    take nothing, and a request larger than the groups' total room is capped to it. Only the
    groups that grow are returned.
    """
    sizes = dict(target_sizes)
    order = {group: index for index, group in enumerate(target_sizes)}
    room = [group for group in target_sizes if sizes[group] < max_sizes[group]]
    for _ in range(max(new_nodes, 0)):
        if not room:
            break  # CA: "Requested scale-up exceeds node group set capacity, capping"
        smallest = min(room, key=lambda group: (sizes[group], order[group]))
        sizes[smallest] += 1
        if sizes[smallest] >= max_sizes[smallest]:
            room.remove(smallest)
    return {group: sizes[group] - target_sizes[group] for group in target_sizes
            if sizes[group] != target_sizes[group]}


# --- one scale-up, balanced --------------------------------------------------------------


@dataclass(frozen=True)
class BalancedScaleUp:
    """The expander's choice spread over its similar groups: what each group grows by."""

    chosen: str  # the expander's choice
    option: ScaleUpOption  # its option, re-estimated with the similar groups' room
    similar: tuple[str, ...] = ()  # groups balanced with the chosen one
    added: Mapping[str, int] = field(default_factory=dict)  # group -> nodes added (> 0)
    new_target_sizes: Mapping[str, int] = field(default_factory=dict)  # group -> ASG size
    unhelped: tuple[PodRecord, ...] = ()  # pending pods the scale-up does not help
    left_out: tuple[tuple[str, str], ...] = ()  # (group, why it is not balanced with)

    @property
    def node_count(self) -> int:
        return sum(self.added.values())

    @property
    def balanced_set(self) -> tuple[str, ...]:
        """The chosen group and its similar groups, the chosen first."""
        return (self.chosen, *self.similar)

    @classmethod
    def alone(cls, plan: ScaleUpPlan) -> BalancedScaleUp:
        """The plan's single group, as without balancing."""
        option = plan.option
        if option is None:
            raise ValueError("a scale-up plan without an option has nothing to balance")
        return cls(option.group, option, (), {option.group: option.node_count},
                   {option.group: plan.new_target_size}, plan.unhelped)


def _why_not_ready(candidate: GroupCandidate, totals: ClusterTotals, limits: ClusterLimits,
                   now: float, unavailable: Mapping[str, str]) -> str | None:
    # CA's ComputeSimilarNodeGroups only takes groups valid for scale-up: not backed off, below
    # max size, and one more node within the cluster limits (filterValidScaleUpNodeGroups).
    if candidate.group in unavailable:
        return unavailable[candidate.group]
    if now < candidate.backed_off_until:
        return "backed off after a failed scale-up"
    if candidate.target_size >= candidate.max_size:
        return f"at max size {candidate.max_size}"
    if candidate.template is not None:
        return exceeded_limit(candidate.template, totals, limits)
    return None


def balance_scale_up(
    plan: ScaleUpPlan, candidates: Sequence[GroupCandidate], totals: ClusterTotals,
    limits: ClusterLimits, now: float, tolerances: Tolerances = Tolerances(),
    extra_ignored_labels: Collection[str] = (), group_label_keys: Mapping[str, str] | None = None,
    unavailable: Mapping[str, str] | None = None,
    max_nodes_per_scale_up: int = MAX_NODES_PER_SCALE_UP,
    snapshot: FilterSnapshot | None = None,
) -> BalancedScaleUp:
    """Spread the plan's chosen scale-up over the groups similar to it (CA §1.5).

    A candidate joins the chosen group when it is ready to scale up (not backed off, below max
    size, within the cluster limits, not in `unavailable`: group -> reason, e.g. its scale lock
    is held), its template is `similar` (ignoring CA's labels, `extra_ignored_labels` and both
    groups' Escalator label from `group_label_keys`), and it can hold every pending pod the
    chosen group can hold (CA's matchingSchedulablePodGroups). The node count is then
    re-estimated with the room of all those groups (CA's similar-node-group capacity threshold),
    capped by the cluster limits as the chosen template counts them (CA's ApplyLimits), and
    split with `balance`. Without a similar group the plan's own choice is returned unchanged.
    """
    alone = BalancedScaleUp.alone(plan)
    chosen = alone.option
    by_name = {candidate.group: candidate for candidate in candidates}
    keys = group_label_keys or {}
    unready = unavailable or {}
    holdable = [pod for pod in plan.pending if fits_empty_template(pod, chosen.template)]
    members: list[GroupCandidate] = []
    left_out: list[tuple[str, str]] = []
    for candidate in sorted(candidates, key=lambda c: c.group):
        if candidate.group == chosen.group:
            continue
        if candidate.template is None:
            left_out.append((candidate.group, "no template node"))
            continue
        ignored = (IGNORED_LABELS | frozenset(extra_ignored_labels)
                   | {keys.get(chosen.group, ""), keys.get(candidate.group, "")})
        reason = difference(chosen.template, candidate.template, tolerances, ignored)
        if reason is None:
            reason = _why_not_ready(candidate, totals, limits, now, unready)
        if reason is None and not all(fits_empty_template(pod, candidate.template)
                                      for pod in holdable):
            reason = "cannot hold every pending pod the chosen group can hold"
        if reason is None:
            members.append(candidate)
        else:
            left_out.append((candidate.group, reason))
    if not members:
        return replace(alone, left_out=tuple(left_out))

    first = by_name[chosen.group]
    group_set = [first, *members]
    room = sum(max(c.max_size - c.target_size, 0) for c in group_set)
    cap = min(room, max_nodes_per_scale_up)
    if limits.max_nodes_total > 0:
        cap = min(cap, limits.max_nodes_total - totals.node_count)
    # (never fewer than the chosen option's own estimate, which already fit these limits)
    estimate = estimate_nodes(plan.pending, chosen.template, max(cap, chosen.node_count),
                              snapshot)
    allowed = nodes_within_limits(chosen.template, estimate.node_count, totals, limits)
    if allowed < estimate.node_count:
        estimate = estimate_nodes(plan.pending, chosen.template, allowed, snapshot)
    option = replace(chosen, node_count=estimate.node_count, pods=estimate.pods)
    sizes = {c.group: c.target_size for c in group_set}
    added = balance(sizes, {c.group: c.max_size for c in group_set}, option.node_count)
    helped = {id(pod) for pod in option.pods}
    return BalancedScaleUp(
        chosen.group, option, tuple(c.group for c in members), added,
        {group: sizes[group] + count for group, count in added.items()},
        tuple(pod for pod in plan.pending if id(pod) not in helped), tuple(left_out))


__all__ = [
    "AWS_IGNORED_LABELS",
    "BASIC_IGNORED_LABELS",
    "IGNORED_LABELS",
    "BalancedScaleUp",
    "Tolerances",
    "balance",
    "balance_scale_up",
    "difference",
    "similar",
    "within_tolerance",
]
