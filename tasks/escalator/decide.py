"""The decision: one node group's tick as a frozen `ScalePlan`, computed without touching anything.

This is Escalator's `scale_node_group` (spec/escalator.md §5, steps 1 to 23, and §6, §7, §9) as a
pure function of records, config, the ASG, the group's stored state and `now`. Actions that
Escalator performs one by one are planned here in the same order, with the same guards, so that
executing the plan (tasks/steps/node_groups.py) does what Escalator would have done.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from kube_elevator.tasks.core.lease_state import GroupState
from kube_elevator.tasks.core.records import (
    ESCALATOR_TAINT_KEY,
    AutoScalingGroup,
    NodeRecord,
    PodRecord,
    Resources,
)
from kube_elevator.tasks.core.timefmt import rfc3339
from kube_elevator.tasks.escalator.config import NodeGroupConfig, effective_min_max
from kube_elevator.tasks.escalator.filter_nodes import GroupMembers, NodeClasses, filter_group, is_unhealthy
from kube_elevator.tasks.escalator.node_selection import nodes_to_taint
from kube_elevator.tasks.escalator.plan import NodeCounts, ScalePlan
from kube_elevator.tasks.escalator.utilization import (
    SCALE_FROM_ZERO,
    GroupPods,
    PercentCalculationError,
    Utilization,
    calc_percent_usage,
    group_utilization,
)


class NegativeScaleUpDelta(Exception):
    """Escalator: `negative scale up delta`."""


# --- pure helpers, each one rule ---------------------------------------------------------


def calc_scale_up_delta(
    untainted_count: int, cpu_percent: float, mem_percent: float, threshold_percent: int,
    requests: Resources, node_capacity: Resources | None,
) -> int:
    """Escalator §5.6: nodes to add so the larger of cpu/memory falls to the threshold."""
    if cpu_percent == SCALE_FROM_ZERO or mem_percent == SCALE_FROM_ZERO:
        if node_capacity is None or node_capacity.cpu_milli == 0 or node_capacity.memory_bytes == 0:
            return 1
        need_cpu = math.ceil(requests.cpu_milli / node_capacity.cpu_milli
                             / threshold_percent * 100)
        need_memory = math.ceil(requests.memory_bytes / node_capacity.memory_bytes
                                / threshold_percent * 100)
        delta = max(need_cpu, need_memory)
    else:
        need_cpu = math.ceil(untainted_count * ((cpu_percent - threshold_percent)
                                                / threshold_percent))
        need_memory = math.ceil(untainted_count * ((mem_percent - threshold_percent)
                                                   / threshold_percent))
        delta = max(need_cpu, need_memory)
    if delta < 0:
        raise NegativeScaleUpDelta("negative scale up delta")
    return delta


def is_group_healthy(nodes: Sequence[NodeRecord], group: NodeGroupConfig, now: float) -> bool:
    """Escalator §5.11: the newest `health_check_newest_nodes_percent` past grace, vs the limit."""
    if not group.unhealthy_node_feature:
        return True
    grace = group.unhealthy_node_grace_seconds
    newest_first = sorted(nodes, key=lambda node: node.created_unix_seconds, reverse=True)
    past_grace = [node for node in newest_first if node.created_unix_seconds + grace < now]
    checked = past_grace[:math.ceil(group.health_check_newest_nodes_percent / 100
                                    * len(past_grace))]
    if not checked:
        return True
    unhealthy = sum(1 for node in checked if is_unhealthy(node, grace, now))
    return unhealthy * 100 // len(checked) <= group.max_unhealthy_nodes_percent


def taint_time(node: NodeRecord) -> int | None:
    """The escalator taint's value as Unix seconds, or None when absent or unparsable."""
    value = node.taint_value(ESCALATOR_TAINT_KEY)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def oldest_first(nodes: Sequence[NodeRecord]) -> list[NodeRecord]:
    return sorted(nodes, key=lambda node: node.created_unix_seconds)


def newest_first(nodes: Sequence[NodeRecord]) -> list[NodeRecord]:
    # Python's sort is stable with reverse=True too, so equal ages keep listing order.
    return sorted(nodes, key=lambda node: node.created_unix_seconds, reverse=True)


def _percent_text(value: float) -> str:
    return "∞ (no untainted capacity)" if value == SCALE_FROM_ZERO else f"{value:.1f}%"


# --- the tick ------------------------------------------------------------------------------


@dataclass
class _Tick:
    """Mutable working state of one decision; frozen into a ScalePlan at the end."""

    group: NodeGroupConfig
    pods: Sequence[PodRecord] | GroupPods
    nodes: Sequence[NodeRecord]
    asg: AutoScalingGroup
    state: GroupState
    now: float
    dry_mode: bool
    min_nodes: int
    max_nodes: int
    classes: NodeClasses = field(default_factory=lambda: NodeClasses((), (), (), ()))
    pods_on_node: Mapping[str, Sequence[PodRecord]] = field(default_factory=dict)
    untaint: list[str] = field(default_factory=list)
    taint: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    cloud_increase: int = 0
    deleted: int = 0  # instances terminated this tick, each decrementing the ASG's desired
    tracker: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lock_held_at_check: bool = False
    lock_released_after_seconds: float | None = None
    group_healthy: bool = True
    cpu_load_percent: Mapping[str, float] | None = None  # from a load watcher, if any
    untaint_requested: int = 0
    taint_requested: int = 0
    delete_error: str | None = None  # why the last reap deleted nothing (see ScalePlan)
    delete_errors: list[str] = field(default_factory=list)
    # A scale-down a minimum held back: (which minimum, nodes asked for, nodes it lets taint).
    held: tuple[str, int, int] | None = None
    capped: str = ""  # a scale-up the ASG's MaxSize held back, in words

    def limit(self) -> str:
        """What a minimum or the ASG's MaxSize let this tick do, when less than decided."""
        if self.held is None:
            return self.capped
        minimum, asked, allowed = self.held
        return f"held at {minimum}: " + (
            "nothing tainted" if allowed == 0 else f"taint {allowed} of {asked}")

    @property
    def unhealthy_feature(self) -> bool:
        return self.group.unhealthy_node_feature

    def unhealthy(self, node: NodeRecord) -> bool:
        return self.unhealthy_feature and is_unhealthy(
            node, self.group.unhealthy_node_grace_seconds, self.now)

    def empty(self, node: NodeRecord) -> bool:
        """Escalator: in node_info_map with no (non-daemonset) pods of this group."""
        bound = self.pods_on_node.get(node.name)
        return bound is not None and len(bound) == 0

    # Escalator §7.2: tainting is "ensure present" (dry mode: the tracker).
    # The plan lists the node either way; in dry mode only the tracker changes (§9).
    def add_taint(self, node: NodeRecord) -> None:
        if self.dry_mode and node.name not in self.tracker:
            self.tracker.append(node.name)
        if node.name not in self.taint:
            self.taint.append(node.name)

    # §6 step 1: untaint newest first, skipping unhealthy nodes; returns how many.
    def untaint_newest(self, count: int) -> int:
        done = 0
        for node in newest_first(self.classes.tainted):
            if done >= count:
                break
            if self.unhealthy(node):
                continue
            if self.dry_mode and node.name in self.tracker:
                self.tracker.remove(node.name)
            self.untaint.append(node.name)
            done += 1
        return done

    def scale_up(self, count: int) -> tuple[int, str | None]:
        """Escalator §6: untaint first, then ask the cloud for the rest, clamped to the ASG max."""
        untainted = 0
        if self.classes.tainted:
            self.untaint_requested += count  # §6: untaint_event += n, the requested amount
            untainted = self.untaint_newest(count)
        remaining = count - untainted
        if remaining <= 0:
            return untainted, None
        to_add = remaining
        # Escalator's scaleUpCloudProviderNodeGroup/calculateNodesToAdd clamp against
        # TargetSize(), the ASG as described when the tick began (see `target_size`).
        target = self.target_size
        if target + to_add > self.asg.max_size:
            to_add = self.asg.max_size - target
            if to_add <= 0:
                self.capped = (f"at MaxSize {self.asg.max_size}: no scale-up" if not untainted
                               else f"at MaxSize {self.asg.max_size}: nothing from the cloud")
                return 0, ("refusing to scaleup up beyond the maximum size of the autoscaling "
                           f"group (TargetSize: {target}; MaxNodes: {self.max_nodes}). "
                           "Taking no action")
            self.capped = (f"capped by MaxSize {self.asg.max_size}: scale up by "
                           f"{untainted + to_add} of {count}")
            self.notes.append(f"increasing nodes exceeds maximum ({self.asg.max_size}). "
                              f"Clamping add amount to ({to_add})")
        # In dry mode the cloud call is skipped but counts as done: the lock is still taken (§9).
        self.cloud_increase = to_add
        # The claim records the increase (not in dry mode, where the ASG never changes), so a
        # later tick can tell a lock whose request never reached the cloud (tasks/core/lease_state.py).
        before, after = (0, 0) if self.dry_mode else (self.asg.desired_capacity,
                                                      self.asg_desired)
        self.state = replace(self.state, lock=self.state.lock.lock(to_add, self.now, before,
                                                                   after))
        return untainted + to_add, None

    @property
    def target_size(self) -> int:
        """Escalator's TargetSize(): the ASG's DesiredCapacity as described at the tick's start.

        escalator pkg/cloudprovider/aws/aws.go: TargetSize reads `n.asg.DesiredCapacity`, which
        only Refresh (RegisterNodeGroups, once at the top of RunOnce) updates; DeleteNodes'
        TerminateInstanceInAutoScalingGroup(ShouldDecrementDesiredCapacity) and IncreaseSize
        leave it as it was. So every guard of the tick (scaleDownTaint's ASG clamp,
        calculateNodesToAdd, IncreaseSize) reads the size before this tick's terminations.
        """
        return self.asg.desired_capacity

    @property
    def asg_desired(self) -> int:
        """The ASG's desired capacity after this tick, as Escalator leaves it.

        Each termination decrements it (DeleteNodes, ShouldDecrementDesiredCapacity true); an
        increase is IncreaseSize's setASGDesiredSize(TargetSize() + delta), an absolute value
        from the size read before the terminations, so it undoes their decrements (escalator
        aws.go IncreaseSize). A one-shot group's increase is AttachInstances instead
        (setASGDesiredSizeOneShot), which adds to the decremented size. Our step sets this
        absolute value once, so a retry cannot add twice (tasks/steps/node_groups.py).
        """
        if self.cloud_increase and not self.group.aws.one_shot:
            return self.target_size + self.cloud_increase
        return self.target_size - self.deleted + self.cloud_increase

    def delete_nodes(self, candidates: Sequence[NodeRecord]) -> int:
        """Escalator TryDeleteNodes with the AWS DeleteNodes guards (§7.3, §8)."""
        if self.asg.instances_known:
            # Escalator's AWS DeleteNodes refuses a node whose instance is not in the group
            # (NodeNotInNodeGroup): not deleted, not counted off the desired capacity. Escalator
            # stops at the first; the others are still judged here (listing order is no rule).
            members = self.asg.provider_ids()
            for node in candidates:
                if node.provider_id not in members:
                    self.notes.append(
                        f"node {node.name}, {node.provider_id or 'no providerID'} belongs in a "
                        f"different node group than {self.asg.name}: not deleted")
                    self.delete_error = node.name if self.delete_error is None else self.delete_error
            candidates = [node for node in candidates if node.provider_id in members]
        if not candidates:
            return 0
        # escalator aws.go DeleteNodes checks TargetSize() (the size read at the tick's start);
        # AWS itself refuses a termination that would take the live desired capacity below
        # MinSize, and the live desired already lost this tick's earlier terminations (a
        # force-deleted node, then a reaped one). The live check is the stricter of the two,
        # and the one our AsgClient makes (termination_plan, on a fresh description).
        live = self.target_size - self.deleted
        if live <= self.asg.min_size:
            self.notes.append("min sized reached, nodes will not be deleted")
            self.delete_error = ""
            return 0
        if live - len(candidates) < self.asg.min_size:
            self.notes.append("terminating nodes will breach minimum node size")
            self.delete_error = ""
            return 0
        self.delete.extend(node.name for node in candidates)
        self.deleted += len(candidates)
        return -len(candidates)

    def remove_tainted(self, healthy_nodes_allowed: bool) -> int:
        """Escalator §7.3: reap tainted nodes past the soft grace (empty) or the hard grace."""
        soft = self.group.soft_delete_grace_seconds
        hard = self.group.hard_delete_grace_seconds
        candidates = []
        for node in self.classes.tainted:
            if self.unhealthy_feature and not healthy_nodes_allowed and not self.unhealthy(node):
                continue
            if node.no_delete:
                continue
            tainted_at = taint_time(node)
            if tainted_at is None:
                continue
            age = self.now - tainted_at
            if age > soft and (self.empty(node) or age > hard):
                candidates.append(node)
        if self.dry_mode:
            return 0  # Escalator only logs; dry-mode nodes carry no real taint anyway
        return self.delete_nodes(candidates)

    def remove_force_tainted(self) -> None:
        """Escalator §7.4: empty force-tainted nodes go every unlocked tick, no grace periods."""
        candidates = [node for node in self.classes.force_tainted if self.empty(node)]
        if candidates and not self.dry_mode:
            self.delete_nodes(candidates)

    def scale_down(self, count: int) -> None:
        """Escalator §7.1: reap first, then taint the oldest untainted nodes within both minimums."""
        self.delete_error = None
        self.remove_tainted(healthy_nodes_allowed=True)
        if self.delete_error is not None:
            self.delete_errors.append(self.delete_error)
        untainted = len(self.classes.untainted)
        asked = count
        if untainted - count < self.min_nodes:
            count = untainted - self.min_nodes
            self.held = (f"min_nodes {self.min_nodes}", asked, max(count, 0))
            if count < 0:
                self.notes.append(f"the number of nodes({untainted}) is less than specified "
                                  f"minimum of {self.min_nodes}. Taking no action")
                return
        # escalator scale_down.go scaleDownTaint: "Check ASG constraint early before tainting",
        # against TargetSize(), the size read before this tick's reaping (`target_size`): a
        # node reaped just now does not lower the number it lets taint.
        target = self.target_size
        if target - count < self.asg.min_size and target - self.asg.min_size >= 0:
            count = target - self.asg.min_size
            self.held = (f"the ASG's MinSize {self.asg.min_size}", asked, count)
        self.taint_requested += count  # §7.1: taint_event += n (not the unhealthy nodes' taints)
        for node in nodes_to_taint(self.classes.untainted, count,
                                   self.group.scale_down_selection, self.cpu_load_percent):
            self.add_taint(node)


def decide_plan(
    group: NodeGroupConfig,
    members: GroupMembers,
    usage: Utilization,
    asg: AutoScalingGroup,
    state: GroupState,
    now: float,
    cpu_load_percent: Mapping[str, float] | None = None,
) -> ScalePlan:
    """Escalator's steps 2 and 5 to 23 for one group, on its classified members and usage."""
    pods, nodes, classes = members.pods, members.nodes, members.classes
    dry = members.dry_mode
    min_nodes, max_nodes = effective_min_max(group, asg.min_size, asg.max_size)
    tick = _Tick(group=group, pods=pods, nodes=nodes, asg=asg, state=state, now=now,
                 dry_mode=dry, min_nodes=min_nodes, max_nodes=max_nodes,
                 tracker=list(members.dry_mode_tainted),
                 classes=classes, pods_on_node=usage.pods_on_node,
                 taint=list(members.unhealthy_to_taint), cpu_load_percent=cpu_load_percent)

    # 2. Cache a node's allocatable for scaling up from zero (kept in the Lease, not in memory).
    if nodes:
        first = nodes[0]
        tick.state = replace(tick.state, node_capacity=Resources(
            first.cpu_allocatable_milli, first.memory_allocatable_bytes))

    counts = NodeCounts(len(nodes), len(classes.untainted), len(classes.tainted),
                        len(classes.force_tainted), len(classes.cordoned))

    def finish(delta: int, reason: str, error: str | None = None,
               cpu: float | None = None, mem: float | None = None) -> ScalePlan:
        next_state = replace(tick.state, dry_mode_tainted=tuple(tick.tracker))
        return ScalePlan(
            name=group.name, pods=len(pods), nodes=counts, utilization=usage,
            cpu_percent=None if cpu == SCALE_FROM_ZERO else cpu,
            mem_percent=None if mem == SCALE_FROM_ZERO else mem,
            locked=next_state.lock.held(now, group.scale_up_cool_down_seconds),
            delta=delta, error=error, reason=reason,
            untaint=tuple(tick.untaint), taint=tuple(tick.taint), delete=tuple(tick.delete),
            cloud_increase=tick.cloud_increase, asg_desired=tick.asg_desired,
            asg_desired_before=asg.desired_capacity, dry_mode=dry,
            taint_effect=group.effective_taint_effect, next_state=next_state,
            notes=tuple(tick.notes), lock_held_at_check=tick.lock_held_at_check,
            lock_released_after_seconds=tick.lock_released_after_seconds,
            group_healthy=tick.group_healthy,
            untaint_requested=tick.untaint_requested, taint_requested=tick.taint_requested,
            delete_errors=tuple(tick.delete_errors), limit=tick.limit(),
            pods_on_deleted_nodes=sum(len(usage.pods_on_node.get(name, ()))
                                      for name in tick.delete),
        )

    # 6, 7. Early exits.
    if not nodes and not pods:
        return finish(0, "no nodes and no pods in the group: nothing to do", cpu=0.0, mem=0.0)
    if len(nodes) < min_nodes:
        return finish(0, f"{len(nodes)} nodes is fewer than min_nodes {min_nodes}: waiting for "
                         "the ASG's own minimum to add nodes",
                      error="node count less than the minimum")

    # 11. Minimum enforcement, even while locked.
    if len(classes.untainted) < min_nodes:
        missing = min_nodes - len(classes.untainted)
        delta, error = tick.scale_up(missing)
        return finish(delta, f"{len(classes.untainted)} untainted nodes is fewer than min_nodes "
                             f"{min_nodes}: bringing back {missing} (untaint "
                             f"{len(tick.untaint)}, ask the cloud for {tick.cloud_increase})"
                      + (f"; {tick.capped}" if tick.capped else ""), error=error)

    # 12. Percent usage.
    try:
        cpu, mem = calc_percent_usage(usage.requests, usage.capacity, len(classes.untainted))
    except PercentCalculationError as error:
        return finish(0, "untainted nodes report no allocatable capacity", error=str(error))

    # 14. The scale lock: nothing else happens while it is held; but a lock whose increase the
    # ASG does not show (the claiming tick died, or the request never applied) is released.
    cool_down = group.scale_up_cool_down_seconds
    lock = tick.state.lock
    if lock.held(now, cool_down) and lock.never_reached_cloud(asg.desired_capacity, now,
                                                              group.claim_settle_seconds):
        tick.notes.append(f"the scale lock's increase {lock.desired_before} → "
                          f"{lock.desired_target} never reached the ASG (desired "
                          f"{asg.desired_capacity}): lock released")
        tick.state = replace(tick.state, lock=lock.unlock())
    if tick.state.lock.held(now, cool_down):
        tick.lock_held_at_check = True
        lock = tick.state.lock
        return finish(lock.requested_nodes,
                      f"scale lock held until {rfc3339(lock.unlocks_at(cool_down))} "
                      f"(cool-down after asking the cloud for {lock.requested_nodes} nodes)",
                      cpu=cpu, mem=mem)
    if tick.state.lock.is_locked:
        tick.lock_released_after_seconds = now - tick.state.lock.lock_time_unix_seconds
        tick.state = replace(tick.state, lock=tick.state.lock.unlock())

    # 16. The decision on the larger of cpu and memory.
    usage_percent = max(cpu, mem)
    shown = _percent_text(usage_percent)
    lower = group.taint_lower_capacity_threshold_percent
    upper = group.taint_upper_capacity_threshold_percent
    threshold = group.scale_up_threshold_percent
    reasons: list[str] = []
    if usage_percent < lower:
        delta = -group.fast_node_removal_rate
        reasons.append(f"usage {shown} is below taint_lower {lower}%: fast removal of "
                       f"{group.fast_node_removal_rate}")
    elif usage_percent < upper:
        delta = -group.slow_node_removal_rate
        reasons.append(f"usage {shown} is below taint_upper {upper}%: slow removal of "
                       f"{group.slow_node_removal_rate}")
    elif usage_percent > threshold:
        try:
            delta = calc_scale_up_delta(len(classes.untainted), cpu, mem, threshold,
                                        usage.requests, tick.state.node_capacity)
        except NegativeScaleUpDelta as error:
            return finish(0, "scale-up delta came out negative", error=str(error),
                          cpu=cpu, mem=mem)
        reasons.append(f"usage {shown} is above scale_up_threshold {threshold}%: "
                       f"scale up by {delta}")
    else:
        delta = 0
        reasons.append(f"usage {shown} is within thresholds ({upper}%..{threshold}%)")

    # 17. Scale on starve: a pending pod larger than any node's free room.
    if group.scale_on_starve and len(classes.untainted) < max_nodes:
        pending_cpu, pending_mem = usage.largest_pending_cpu, usage.largest_pending_memory
        if ((not pending_cpu.empty
             and pending_cpu.cpu_milli > usage.largest_available_cpu.cpu_milli)
                or (not pending_mem.empty
                    and pending_mem.memory_bytes > usage.largest_available_memory.memory_bytes)):
            if delta < 1:
                reasons.append("scale_on_starve: a pending pod fits on no untainted node: add 1")
            delta = max(delta, 1)

    # 18. Max node age: rotate a too-old node when the group sits at its minimum.
    max_age = group.max_node_age_seconds
    if (max_age > 0 and len(classes.untainted) == min_nodes and classes.untainted
            and not classes.tainted
            and any(now - node.created_unix_seconds > max_age for node in classes.untainted)):
        if delta < 1:
            reasons.append(f"max_node_age: a node is older than {group.max_node_age}: add 1 "
                           "to rotate it out")
        delta = max(delta, 1)

    # 19. More untainted nodes than max_nodes forces removal.
    if len(classes.untainted) > max_nodes:
        excess = len(classes.untainted) - max_nodes
        if delta > -excess:
            reasons.append(f"{len(classes.untainted)} untainted nodes exceed max_nodes "
                           f"{max_nodes}: remove {excess}")
        delta = min(delta, -excess)

    # 20. Empty force-tainted nodes go every unlocked tick.
    tick.remove_force_tainted()

    # 21. An unhealthy group does nothing but reap its unhealthy tainted nodes.
    healthy = tick.group_healthy = is_group_healthy(nodes, group, now)
    if not healthy:
        reasons.append("group unhealthy: too many of the newest nodes are not Ready: delta 0")
        delta = 0

    # 22. Act. Errors here are only logged by Escalator (§13): they become notes.
    if delta < 0:
        tick.scale_down(-delta)
    elif delta > 0:
        _, refusal = tick.scale_up(delta)
        if refusal:
            tick.notes.append(refusal)
    else:
        tick.remove_tainted(healthy_nodes_allowed=healthy)
    if tick.untaint or tick.cloud_increase:
        reasons.append(f"untaint {len(tick.untaint)}, ask the cloud for {tick.cloud_increase}")
    # The decided delta stands (Escalator's), but a minimum or MaxSize may let less happen.
    if tick.limit():
        reasons.append(tick.limit())
    if tick.taint and (tick.held is None or len(tick.taint) != tick.held[2]):
        reasons.append(f"taint {len(tick.taint)}")
    if tick.delete:
        reasons.append(f"delete {len(tick.delete)}")
    return finish(delta, "; ".join(reasons), cpu=cpu, mem=mem)


def asg_from_config(group: NodeGroupConfig, node_count: int) -> AutoScalingGroup:
    """Without an ASG description: MinSize/MaxSize from the config, desired = the node count."""
    return AutoScalingGroup(name=group.cloud_provider_group_name, min_size=group.min_nodes,
                            max_size=group.max_nodes, desired_capacity=node_count)


def missing_asg_plan(group: NodeGroupConfig, pods: int, nodes: int) -> ScalePlan:
    """Escalator stops when a group's ASG is missing; we report it for that group only."""
    message = f'could not find node group "{group.cloud_provider_group_name}" on cloud provider'
    empty = Resources()
    return ScalePlan(
        name=group.name, pods=pods, nodes=NodeCounts(nodes, 0, 0, 0, 0),
        utilization=Utilization(empty, empty, empty, empty, empty, empty),
        cpu_percent=None, mem_percent=None, locked=False, delta=0, error=message,
        reason="the group's Auto Scaling Group was not found: nothing done")


def plan_group(
    group: NodeGroupConfig,
    pods: Sequence[PodRecord] | GroupPods,
    nodes: Sequence[NodeRecord],
    asg: AutoScalingGroup,
    state: GroupState,
    now: float,
    dry_mode: bool = False,
    cpu_load_percent: Mapping[str, float] | None = None,
) -> ScalePlan:
    """One whole Escalator tick for one group: filter, measure, decide. `pods` is the group's
    list, or its `GroupPods` as a watch cache keeps them."""
    members = filter_group(group, pods, nodes, state.dry_mode_tainted, now,
                           dry_mode or group.dry_mode)
    usage = group_utilization(pods, nodes, members.classes.untainted)
    return decide_plan(group, members, usage, asg, state, now, cpu_load_percent)
