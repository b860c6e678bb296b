"""CA's --balance-similar-node-groups (spec §1.5): the comparator, the split, and the step."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any, cast

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_elevator.flows.cluster_autoscaler import live_reads, scale_up_unschedulable
from kube_elevator.tasks.cluster_autoscaler.balancing import (
    IGNORED_LABELS,
    BalancedScaleUp,
    Tolerances,
    balance,
    balance_scale_up,
    difference,
    similar,
    within_tolerance,
)
from kube_elevator.tasks.cluster_autoscaler.config import ClusterAutoscalerConfig
from kube_elevator.tasks.cluster_autoscaler.expanders import ExpanderContext
from kube_elevator.tasks.cluster_autoscaler.limits import ClusterLimits, ClusterTotals
from kube_elevator.tasks.cluster_autoscaler.scale_up_plan import GroupCandidate, ScaleUpPlan, plan_scale_up
from kube_elevator.tasks.cluster_autoscaler.scheduling import FilterSnapshot
from kube_elevator.tasks.cluster_autoscaler.templates import TemplateNode
from kube_elevator.tasks.core.api_objects import PodPlacement
from kube_elevator.tasks.core.lease_state import GroupState, lease_name
from kube_elevator.tasks.core.records import AsgInstance, AutoScalingGroup, NodeRecord, PodRecord
from kube_elevator.tasks.core.step import run_plain
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.steps.node_groups import Adapters
from tests.builders import GiB, MiB, make_group, pending_pod

NOW = 1_800_000_000.0
ZONE = "topology.kubernetes.io/zone"


def template(group: str = "a", zone: str = "us-east-1a", cpu: int = 2000,
             memory: int = 8 * GiB, labels: dict[str, str] | None = None,
             **fields: Any) -> TemplateNode:
    """A node of Escalator group `group` (label customer=<group>) in `zone`."""
    return TemplateNode(
        group=group, asg_name=f"{group}-asg", instance_type="m5.large",
        labels={"customer": group, ZONE: zone, "kubernetes.io/hostname": f"node-{group}",
                "node.kubernetes.io/instance-type": "m5.large", **(labels or {})},
        taints=(), cpu_capacity_milli=fields.pop("cpu_capacity", cpu),
        memory_capacity_bytes=fields.pop("memory_capacity", memory),
        cpu_allocatable_milli=fields.pop("cpu_allocatable", cpu - 100),
        memory_allocatable_bytes=fields.pop("memory_allocatable", memory - 512 * MiB),
        **fields)


WITH_GROUP_LABEL = IGNORED_LABELS | {"customer"}


def pod(name: str, cpu: int = 1500, memory: int = 256 * MiB, **fields: Any) -> PodRecord:
    return pending_pod(name, cpu, memory, **fields)


def pods(count: int, **fields: Any) -> list[PodRecord]:
    return [pod(f"p{index}", **fields) for index in range(count)]


# --- the comparator (compare_nodegroups.go) ------------------------------------------------


def test_tolerance_is_the_difference_over_the_larger_value() -> None:
    assert within_tolerance(100, 95, 0.05)
    assert within_tolerance(95, 100, 0.05)  # symmetric
    assert not within_tolerance(100, 94, 0.05)
    assert within_tolerance(0, 0, 0.0)


def test_groups_one_per_zone_are_similar_once_their_own_label_is_ignored() -> None:
    a, b = template("a", "us-east-1a"), template("b", "us-east-1b")
    # zone and hostname are CA's ignored labels; the Escalator label is the group's identity
    assert similar(a, b, ignored_labels=WITH_GROUP_LABEL)
    # without ignoring it, no two Escalator groups would ever be similar
    assert difference(a, b) == "labels differ: customer"


def test_cas_basic_and_aws_ignored_labels_may_differ() -> None:
    varying = ["kubernetes.io/hostname", "topology.kubernetes.io/zone",
               "topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
               "failure-domain.beta.kubernetes.io/region", "beta.kubernetes.io/fluentd-ds-ready",
               "kops.k8s.io/instancegroup", "eks.amazonaws.com/nodegroup",
               "alpha.eksctl.io/nodegroup-name", "alpha.eksctl.io/instance-id",
               "k8s.amazonaws.com/eniConfig", "lifecycle", "topology.ebs.csi.aws.com/zone"]
    a = template("a", labels={key: "one" for key in varying})
    b = template("b", labels={key: "two" for key in varying[::2]})  # some absent, too
    assert similar(a, b, ignored_labels=WITH_GROUP_LABEL)


def test_any_other_label_must_match_and_be_on_both() -> None:
    a = template("a", labels={"team": "web"})
    assert difference(a, template("b", labels={"team": "batch"}),
                      ignored_labels=WITH_GROUP_LABEL) == "labels differ: team"
    assert difference(a, template("b"), ignored_labels=WITH_GROUP_LABEL) == \
        "labels differ: team"  # a custom label opts a group out (§1.5)
    # --balancing-ignore-label
    assert similar(a, template("b", labels={"team": "batch"}),
                   ignored_labels=WITH_GROUP_LABEL | {"team"})


def test_cpu_capacity_must_be_equal() -> None:
    a = template("a")
    b = template("b", cpu_capacity=2001, cpu_allocatable=a.cpu_allocatable_milli)
    assert difference(a, b, ignored_labels=WITH_GROUP_LABEL) == "CPU capacity 2000m != 2001m"


def test_pod_and_gpu_capacity_must_be_equal() -> None:
    a = template("a")
    assert not similar(a, template("b", max_pods=58), ignored_labels=WITH_GROUP_LABEL)
    assert not similar(a, template("b", extended_capacity=(("nvidia.com/gpu", 1),)),
                       ignored_labels=WITH_GROUP_LABEL)


def test_memory_capacity_within_the_memory_difference_ratio() -> None:
    a = template("a")
    near = template("b", memory_capacity=int(8 * GiB * 0.99),
                    memory_allocatable=a.memory_allocatable_bytes)
    far = template("b", memory_capacity=int(8 * GiB * 0.98),
                   memory_allocatable=a.memory_allocatable_bytes)
    assert similar(a, near, ignored_labels=WITH_GROUP_LABEL)  # 1% < 1.5%
    reason = difference(a, far, ignored_labels=WITH_GROUP_LABEL)
    assert reason is not None and reason.startswith("memory capacity")  # 2% > 1.5%
    assert similar(a, far, Tolerances(memory_difference_ratio=0.025),
                   ignored_labels=WITH_GROUP_LABEL)


@pytest.mark.parametrize("resource", ["cpu", "memory"])
def test_allocatable_within_the_max_allocatable_difference_ratio(resource: str) -> None:
    a = template("a")
    base = a.cpu_allocatable_milli if resource == "cpu" else a.memory_allocatable_bytes

    def scaled(factor: float) -> TemplateNode:
        fields: dict[str, Any] = {f"{resource}_allocatable": int(base * factor)}
        return template("b", **fields)

    assert similar(a, scaled(0.96), ignored_labels=WITH_GROUP_LABEL)
    reason = difference(a, scaled(0.94), ignored_labels=WITH_GROUP_LABEL)
    assert reason is not None and reason.startswith(f"allocatable {resource.replace('cpu', 'CPU')}")
    assert similar(a, scaled(0.94),
                   Tolerances(max_allocatable_difference_ratio=0.1, max_free_difference_ratio=0.1),
                   ignored_labels=WITH_GROUP_LABEL)


def test_free_room_after_daemon_pods_within_the_max_free_difference_ratio() -> None:
    a = template("a")  # 1900m allocatable, no daemons
    some = template("b", daemon_cpu_milli=76)  # 4% less free CPU
    more = template("b", daemon_cpu_milli=114)  # 6% less free CPU
    assert similar(a, some, ignored_labels=WITH_GROUP_LABEL)
    reason = difference(a, more, ignored_labels=WITH_GROUP_LABEL)
    assert reason is not None and reason.startswith("free CPU")
    assert similar(a, more, Tolerances(max_free_difference_ratio=0.07),
                   ignored_labels=WITH_GROUP_LABEL)
    memory = template("b", daemon_memory_bytes=int(a.memory_allocatable_bytes * 0.06))
    reason = difference(a, memory, ignored_labels=WITH_GROUP_LABEL)
    assert reason is not None and reason.startswith("free memory")


# --- the split (BalanceScaleUpBetweenGroups) -----------------------------------------------

ROOMY = {"A": 10, "B": 10, "C": 10}


def test_the_proposals_worked_example() -> None:
    sizes = {"A": 1, "B": 3, "C": 6}
    assert balance(sizes, ROOMY, 1) == {"A": 1}
    assert balance(sizes, ROOMY, 4) == {"A": 3, "B": 1}


def test_even_groups_share_round_robin_and_ties_go_in_the_given_order() -> None:
    assert balance({"C": 2, "A": 2, "B": 2}, ROOMY, 4) == {"C": 2, "A": 1, "B": 1}
    assert balance({"A": 0, "B": 0}, ROOMY, 5) == {"A": 3, "B": 2}


def test_max_sizes_are_respected_and_the_rest_goes_elsewhere() -> None:
    # A fills to its max of 2, then the smallest open group takes the rest
    assert balance({"A": 1, "B": 3, "C": 6}, {"A": 2, "B": 10, "C": 10}, 4) == {"A": 1, "B": 3}
    # a group already at max size takes nothing
    assert balance({"A": 5, "B": 3}, {"A": 5, "B": 10}, 2) == {"B": 2}


def test_a_request_over_the_groups_room_is_capped() -> None:
    assert balance({"A": 1, "B": 3}, {"A": 2, "B": 4}, 10) == {"A": 1, "B": 1}
    assert balance({"A": 2, "B": 4}, {"A": 2, "B": 4}, 3) == {}
    assert balance({"A": 1}, {"A": 5}, 0) == {}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 10)), min_size=1, max_size=6),
       st.integers(0, 60))
def test_the_split_adds_what_fits_and_keeps_sizes_level(groups: list[tuple[int, int]],
                                                        new_nodes: int) -> None:
    sizes = {f"g{i}": size for i, (size, _) in enumerate(groups)}
    maxes = {f"g{i}": size + room for i, (size, room) in enumerate(groups)}
    added = balance(sizes, maxes, new_nodes)
    room = sum(max(maxes[g] - sizes[g], 0) for g in sizes)
    assert sum(added.values()) == min(new_nodes, room)
    final = {g: sizes[g] + added.get(g, 0) for g in sizes}
    assert all(count > 0 and final[g] <= maxes[g] for g, count in added.items())
    # smallest first: a grown group ends at most one above any group left with room
    still_open = [final[g] for g in sizes if final[g] < maxes[g]]
    for g in added:
        assert all(final[g] <= other + 1 for other in still_open)


# --- one scale-up, balanced ---------------------------------------------------------------


def candidate(group: str, target: int, max_size: int = 10, zone: str = "",
              **fields: Any) -> GroupCandidate:
    node = fields.pop("node", None) or template(group, zone or f"us-east-1{group[-1]}")
    return GroupCandidate(group, f"{group}-asg", node, target, max_size, target, **fields)


KEYS = {"a": "customer", "b": "customer", "c": "customer", "x": "customer"}


NO_TOTALS = ClusterTotals()
NO_LIMITS = ClusterLimits()


def planned(pending: list[PodRecord], groups: list[GroupCandidate],
            totals: ClusterTotals = NO_TOTALS, limits: ClusterLimits = NO_LIMITS) -> ScaleUpPlan:
    return plan_scale_up(pending, groups, totals, limits, ("least-waste",), ExpanderContext(),
                         random.Random(1), NOW)


def test_a_scale_up_is_split_as_the_worked_example() -> None:
    groups = [candidate("a", 1), candidate("b", 3), candidate("c", 6)]
    for count, split in ((1, {"a": 1}), (4, {"a": 3, "b": 1})):
        plan = planned(pods(count), groups)
        assert plan.option is not None and plan.option.node_count == count
        balanced = balance_scale_up(plan, groups, ClusterTotals(), ClusterLimits(), NOW,
                                    group_label_keys=KEYS)
        assert balanced.balanced_set[0] == plan.option.group
        assert sorted(balanced.balanced_set) == ["a", "b", "c"]
        assert dict(balanced.added) == split
        sizes = {"a": 1, "b": 3, "c": 6}
        assert dict(balanced.new_target_sizes) == {g: sizes[g] + n for g, n in split.items()}
        assert balanced.unhelped == ()


def test_without_the_group_label_ignored_nothing_is_similar() -> None:
    groups = [candidate("a", 1), candidate("b", 3)]
    plan = planned(pods(2), groups)
    assert plan.option is not None
    alone = balance_scale_up(plan, groups, ClusterTotals(), ClusterLimits(), NOW)
    assert alone.similar == () and dict(alone.added) == {plan.option.group: 2}
    assert alone.new_target_sizes == BalancedScaleUp.alone(plan).new_target_sizes
    assert all("labels differ: customer" in why for _, why in alone.left_out)


def test_pods_that_select_one_group_are_not_spread_to_the_others() -> None:
    groups = [candidate("a", 1), candidate("b", 3), candidate("c", 6)]
    plan = planned(pods(4, node_selector={"customer": "c"}), groups)
    assert plan.option is not None and plan.option.group == "c"
    balanced = balance_scale_up(plan, groups, ClusterTotals(), ClusterLimits(), NOW,
                                group_label_keys=KEYS)
    assert dict(balanced.added) == {"c": 4}
    assert dict(balanced.left_out) == {
        "a": "cannot hold every pending pod the chosen group can hold",
        "b": "cannot hold every pending pod the chosen group can hold"}


def test_groups_not_ready_to_scale_up_are_left_out() -> None:
    groups = [candidate("a", 1, backed_off_until=NOW + 60), candidate("b", 3, max_size=3),
              candidate("c", 6), candidate("x", 0, node=template("x", cpu=4000))]
    plan = planned(pods(2), groups[2:3])
    balanced = balance_scale_up(plan, groups, ClusterTotals(), ClusterLimits(), NOW,
                                group_label_keys=KEYS)
    assert dict(balanced.added) == {"c": 2}
    why = dict(balanced.left_out)
    assert why["a"].startswith("backed off")
    assert why["b"] == "at max size 3"
    assert why["x"] == "CPU capacity 2000m != 4000m"  # the chosen group's first
    # the step's own reasons (a held scale lock) leave a group out too
    free = [candidate("a", 1), candidate("c", 6)]
    locked = balance_scale_up(planned(pods(2), free[1:]), free, ClusterTotals(),
                              ClusterLimits(), NOW, group_label_keys=KEYS,
                              unavailable={"a": "scale lock held"})
    assert dict(locked.left_out) == {"a": "scale lock held"} and dict(locked.added) == {"c": 2}


def test_the_estimate_counts_the_room_of_every_similar_group() -> None:
    # each group can take 2 more nodes: alone, c's estimate stops at 2; together they take 6
    groups = [candidate("a", 1, max_size=3), candidate("b", 1, max_size=3),
              candidate("c", 1, max_size=3)]
    plan = planned(pods(6), groups)
    assert plan.option is not None and plan.option.node_count == 2
    balanced = balance_scale_up(plan, groups, ClusterTotals(), ClusterLimits(), NOW,
                                group_label_keys=KEYS)
    assert dict(balanced.added) == {"a": 2, "b": 2, "c": 2}
    assert len(balanced.option.pods) == 6 and balanced.unhelped == ()


def test_cluster_limits_cap_the_balanced_count() -> None:
    groups = [candidate("a", 1), candidate("b", 1), candidate("c", 1)]
    totals = ClusterTotals(node_count=3, cores=6, memory_bytes=24 * GiB)
    limits = ClusterLimits(max_nodes_total=7)
    plan = planned(pods(6), groups, totals, limits)
    balanced = balance_scale_up(plan, groups, totals, limits, NOW, group_label_keys=KEYS)
    assert balanced.node_count == 4 and len(balanced.unhelped) == 2
    cores = ClusterLimits(max_cores=6 + 2 * 3)  # room for three 2-CPU nodes
    plan = planned(pods(6), groups, totals, cores)
    assert balance_scale_up(plan, groups, totals, cores, NOW,
                            group_label_keys=KEYS).node_count == 3


# --- the step: several groups, each under its own scale lock ------------------------------


class StubKube:
    """Leases in memory; the step reads and writes group states through these two calls."""

    def __init__(self) -> None:
        self.states: dict[str, GroupState] = {}

    def read_state(self, namespace: str, name: str) -> GroupState:
        return self.states.get(name, GroupState())

    def write_state(self, namespace: str, name: str, state: GroupState,
                    now: float) -> GroupState:
        self.states[name] = state
        return state

    def read_config_map(self, namespace: str, name: str) -> None:
        return None


class StubCloud:
    def __init__(self, failing: set[str]) -> None:
        self.failing = failing
        self.desired: dict[str, int] = {}

    def set_desired_capacity(self, asg: AutoScalingGroup, target: int) -> int:
        if asg.name in self.failing:
            raise RuntimeError(f"throttled on {asg.name}")
        self.desired[asg.name] = target
        return target


def _cluster() -> tuple[list[NodeGroupConfig], list[NodeRecord], list[PodRecord],
                        dict[str, AutoScalingGroup]]:
    """Groups a, b, c (one per zone) with one full m5.large each, and three pods waiting."""
    groups, nodes, running = [], [], []
    asgs = {}
    for name in "abc":
        zone = f"us-east-1{name}"
        groups.append(make_group(name=name, label_value=name, min_nodes=0,
                                 cloud_provider_group_name=f"{name}-asg"))
        instance = AsgInstance(f"i-{name}", zone)
        nodes.append(NodeRecord(name=f"node-{name}", labels={"customer": name, ZONE: zone},
                                created_unix_seconds=NOW - 3600, cpu_allocatable_milli=1900,
                                memory_allocatable_bytes=7 * GiB,
                                provider_id=instance.provider_id))
        running.append(pod(f"run-{name}", node_name=f"node-{name}", phase="Running",
                           unschedulable=False))
        asgs[f"{name}-asg"] = AutoScalingGroup(f"{name}-asg", 0, 10, 1, (instance,))
    return groups, nodes, running + pods(3), asgs


def _step(failing: set[str]) -> tuple[Any, StubKube, StubCloud]:
    groups, nodes, all_pods, asgs = _cluster()
    kube, cloud = StubKube(), StubCloud(failing)
    adapters = Adapters(cast(Any, kube), cast(Any, cloud))
    config = ClusterAutoscalerConfig(enabled=True, balance_similar_node_groups=True,
                                     random_seed=1)
    group_nodes = {node.labels["customer"]: [node] for node in nodes}
    outcome = scale_up_unschedulable(run_plain, adapters, live_reads(run_plain, adapters), config,
                                     groups, all_pods, nodes, group_nodes, asgs, {}, {}, NOW)
    return outcome, kube, cloud


def test_the_step_grows_every_balanced_group_under_its_own_lock() -> None:
    outcome, kube, cloud = _step(set())
    assert dict(outcome.asg_desired_set) == {"a": 2, "b": 2, "c": 2}
    assert cloud.desired == {"a-asg": 2, "b-asg": 2, "c-asg": 2}
    for name in "abc":
        assert kube.states[lease_name(name)].lock.held(NOW, 120)
        [note] = [n for n in outcome.notes[name] if "balanced" in n]
        others = ", ".join(g for g in outcome.balanced.balanced_set if g != name)
        assert f"+1 of 3 node(s), balanced with {others}" in note


def test_one_groups_cloud_failure_releases_its_lock_and_not_the_others() -> None:
    outcome, kube, _ = _step({"b-asg"})
    assert dict(outcome.asg_desired_set) == {"a": 2, "c": 2}
    assert not kube.states[lease_name("b")].lock.is_locked  # released again
    assert kube.states[lease_name("a")].lock.held(NOW, 120)
    assert kube.states[lease_name("c")].lock.held(NOW, 120)
    assert any("failed: throttled on b-asg" in note for note in outcome.notes["b"])


def test_when_every_group_fails_the_step_fails_with_no_lock_left() -> None:
    with pytest.raises(RuntimeError, match="throttled"):
        _step({"a-asg", "b-asg", "c-asg"})


def test_a_similar_group_under_its_scale_lock_is_left_out_of_the_split() -> None:
    groups, nodes, all_pods, asgs = _cluster()
    kube, cloud = StubKube(), StubCloud(set())
    adapters = Adapters(cast(Any, kube), cast(Any, cloud))
    kube.states[lease_name("b")] = replace(GroupState(), lock=GroupState().lock.lock(1, NOW - 30))
    config = ClusterAutoscalerConfig.model_validate({
        "enabled": True, "balance_similar_node_groups": True, "expander": "priority",
        "priorities": {10: ["^a-asg$"]}})
    group_nodes = {node.labels["customer"]: [node] for node in nodes}
    outcome = scale_up_unschedulable(run_plain, adapters, live_reads(run_plain, adapters), config,
                                     groups, all_pods, nodes, group_nodes, asgs, {}, {}, NOW)
    assert outcome.balanced is not None and outcome.balanced.chosen == "a"
    assert ("b", "scale lock held") in outcome.balanced.left_out
    assert dict(outcome.asg_desired_set) == {"a": 3, "c": 2}  # 3 nodes over a and c only
    # the chosen group's own lock makes the whole scale-up wait, as without balancing
    kube.states[lease_name("a")] = kube.states[lease_name("b")]
    cloud.desired.clear()
    waiting = scale_up_unschedulable(run_plain, adapters, live_reads(run_plain, adapters), config,
                                     groups, all_pods, nodes, group_nodes, asgs, {}, {}, NOW)
    assert dict(waiting.asg_desired_set) == {} and cloud.desired == {}
    assert "scale-up for unschedulable pods waits: scale lock held" in (waiting.notes or {})["a"]


def test_without_balancing_the_chosen_group_takes_every_node() -> None:
    groups, nodes, all_pods, asgs = _cluster()
    kube, cloud = StubKube(), StubCloud(set())
    adapters = Adapters(cast(Any, kube), cast(Any, cloud))
    config = ClusterAutoscalerConfig(enabled=True, random_seed=1)
    group_nodes = {node.labels["customer"]: [node] for node in nodes}
    outcome = scale_up_unschedulable(run_plain, adapters, live_reads(run_plain, adapters), config,
                                     groups, all_pods, nodes, group_nodes, asgs, {}, {}, NOW)
    [(group, desired)] = outcome.asg_desired_set.items()
    assert desired == 4 and outcome.balanced is None
    assert any(note.startswith("scale-up for 3 unschedulable pod(s): +3 node(s), ASG desired 4")
               for note in (outcome.notes or {})[group])


def test_replicas_under_hostname_anti_affinity_are_split_one_node_each() -> None:
    """Four small replicas that must not share a node: the balanced estimate runs the
    scheduler's filters on the snapshot too, so four nodes are split among the groups
    (by requests alone one node would hold them all)."""
    anti = PodPlacement(pod_anti_affinity=orjson.dumps({
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "web"}},
            "topologyKey": "kubernetes.io/hostname"}]}))
    replicas = pods(4, cpu=100, labels={"app": "web"}, placement=anti)
    groups = [candidate("a", 1), candidate("b", 1)]
    snapshot = FilterSnapshot([], [])
    plan = plan_scale_up(replicas, groups, NO_TOTALS, NO_LIMITS, ("least-waste",),
                         ExpanderContext(), random.Random(1), NOW, snapshot=snapshot)
    assert plan.option is not None and plan.option.node_count == 4
    balanced = balance_scale_up(plan, groups, NO_TOTALS, NO_LIMITS, NOW,
                                group_label_keys=KEYS, snapshot=snapshot)
    assert dict(balanced.added) == {"a": 2, "b": 2}
    assert balance_scale_up(plan, groups, NO_TOTALS, NO_LIMITS, NOW,
                            group_label_keys=KEYS).option.node_count == 1
