"""Scale-up from unschedulable pods: templates, the estimator, CA's expanders, limits, back-off."""

from __future__ import annotations

import math
import random
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_elevator.tasks.cluster_autoscaler.backoff import (
    ProvisioningState,
    check_provisioning,
    record_failure,
    record_success,
)
from kube_elevator.tasks.cluster_autoscaler.estimator import (
    estimate_nodes,
    filter_out_schedulable,
    fits_empty_template,
    free_slots,
    unschedulable_pods,
    upcoming_slots,
)
from kube_elevator.tasks.cluster_autoscaler.expanders import (
    EXPANDERS,
    ExpanderContext,
    ScaleUpOption,
    choose,
    expander_context,
    least_nodes,
    least_waste,
    most_pods,
    preferred_node_cpu_milli,
    price,
    price_score,
    priorities_from_configmap,
    priority,
    random_expander,
    waste_score,
)
from kube_elevator.tasks.cluster_autoscaler.limits import (
    ClusterLimits,
    ClusterTotals,
    cluster_limits,
    cluster_totals,
    exceeded_limit,
    nodes_within_limits,
)
from kube_elevator.tasks.cluster_autoscaler.scale_up_plan import GroupCandidate, plan_scale_up
from kube_elevator.tasks.cluster_autoscaler.templates import (
    TemplateNode,
    template_for_group,
    template_from_asg,
    template_from_node,
)
from kube_elevator.tasks.core.api_objects import (
    OBJECT_DECODER,
    MatchExpression,
    NodeSelectorTerm,
    Taint,
    Toleration,
)
from kube_elevator.tasks.core.records import AsgInstance, AsgTemplateSource, NodeRecord, PodRecord
from kube_elevator.tasks.core.scheduling import fits_constraints
from kube_elevator.tasks.node_group_file import parse_node_groups
from tests.builders import GiB, MiB, pending_pod, plain_node

NOW = 1_800_000_000.0
MINUTE = 60.0


pod = pending_pod


def pods(count: int, cpu: int = 500, memory: int = 256 * MiB, prefix: str = "p",
         **fields: Any) -> list[PodRecord]:
    return [pod(f"{prefix}{index}", cpu, memory, **fields) for index in range(count)]


def template(group: str = "g", cpu: int = 2000, memory: int = 8 * GiB,
             instance_type: str = "m5.large", labels: dict[str, str] | None = None,
             taints: tuple[Taint, ...] = (), **fields: Any) -> TemplateNode:
    return TemplateNode(
        group=group, asg_name=fields.pop("asg_name", f"{group}-asg"), instance_type=instance_type,
        labels=labels or {}, taints=taints,
        cpu_capacity_milli=fields.pop("cpu_capacity", cpu),
        memory_capacity_bytes=fields.pop("memory_capacity", memory),
        cpu_allocatable_milli=cpu, memory_allocatable_bytes=memory, **fields)


def option(group: str, node_count: int, pod_list: list[PodRecord],
           node: TemplateNode | None = None, asg_name: str | None = None) -> ScaleUpOption:
    node = node or template(group)
    return ScaleUpOption(group, asg_name or node.asg_name, node_count, tuple(pod_list), node)


def node(name: str, cpu: int = 2000, memory: int = 8 * GiB, **fields: Any) -> NodeRecord:
    return plain_node(name, cpu, memory, labels=fields.pop("labels", {"group": "g"}), **fields)


CONTEXT = ExpanderContext()


# --- pending pods ------------------------------------------------------------------------


def test_only_unbound_unschedulable_non_daemonset_pods_are_pending() -> None:
    waiting = pod("waiting")
    assert unschedulable_pods([
        waiting,
        pod("bound", node_name="n1"),
        pod("not-yet-tried", unschedulable=False),
        pod("daemon", owned_by_daemonset=True),
    ]) == [waiting]


def test_pods_ca_leaves_to_the_scheduler_are_not_pending_for_a_scale_up() -> None:
    """CA's pod-list processors: a pod being deleted, one below the expendable priority cutoff
    (-10), and one nominated to a node that exists (it preempts lower-priority pods there) ask
    for no node; a nomination to a node that is gone is ignored."""
    live = node("n1")
    keep = [pod("waiting"), pod("at-cutoff", priority=-10),
            pod("nominated-to-a-gone-node", nominated_node="gone")]
    left_out = [pod("deleted", deleting_since_unix_seconds=1.0),
                pod("expendable", priority=-11), pod("preempting", nominated_node="n1")]
    assert unschedulable_pods([*keep, *left_out], [live]) == keep
    # The nominated pod's room is taken on its node, as in CA's snapshot.
    [slot] = free_slots([live], [pod("preempting", 1500, nominated_node="n1")])
    assert (slot.cpu_milli, slot.pods) == (500, 109)


# --- template nodes ----------------------------------------------------------------------

TAGS = {
    "k8s.io/cluster-autoscaler/node-template/label/workload": "gpu-batch",
    "k8s.io/cluster-autoscaler/node-template/label/kubernetes.io/arch": "arm64",
    "k8s.io/cluster-autoscaler/node-template/taint/dedicated": "batch:NoSchedule",
    "k8s.io/cluster-autoscaler/node-template/taint/spot": "true:PreferNoSchedule",
    "k8s.io/cluster-autoscaler/node-template/taint/broken": "no-effect",
    "k8s.io/cluster-autoscaler/node-template/taint/wrong": "x:Sometimes",
    "Name": "batch",
}


def test_template_from_asg_tags_and_instance_type() -> None:
    made = template_from_asg("batch", AsgTemplateSource("batch-asg", "m5.xlarge", TAGS,
                                                        ("us-east-1b", "us-east-1c")))
    assert (made.cpu_capacity_milli, made.memory_capacity_bytes) == (4000, 16 * GiB)
    # CA: allocatable = capacity for a template built from tags.
    assert (made.cpu_allocatable_milli, made.memory_allocatable_bytes) == (4000, 16 * GiB)
    assert made.max_pods == 110
    assert made.labels["workload"] == "gpu-batch"
    assert made.labels["kubernetes.io/arch"] == "arm64"  # a tag overrides the generic label
    assert made.labels["node.kubernetes.io/instance-type"] == "m5.xlarge"
    assert made.labels["topology.kubernetes.io/zone"] == "us-east-1b"  # the first AZ
    assert made.labels["topology.kubernetes.io/region"] == "us-east-1"
    assert set(made.taints) == {Taint("dedicated", "batch", "NoSchedule"),
                                Taint("spot", "true", "PreferNoSchedule")}
    assert made.source == "asg tags"


def test_resource_tags_override_the_instance_type() -> None:
    made = template_from_asg("g", AsgTemplateSource("g-asg", "m5.large", {
        "k8s.io/cluster-autoscaler/node-template/resources/cpu": "1500m",
        "k8s.io/cluster-autoscaler/node-template/resources/memory": "6Gi",
        "k8s.io/cluster-autoscaler/node-template/resources/pods": "58",
        "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu": "1",
    }), reserved_cpu_milli=100, reserved_memory_bytes=512 * MiB)
    assert (made.cpu_capacity_milli, made.memory_capacity_bytes) == (1500, 6 * GiB)
    assert (made.cpu_allocatable_milli, made.memory_allocatable_bytes) == (1400, 6 * GiB - 512 * MiB)
    assert made.max_pods == 58
    assert made.gpu_count == 1 and made.has_gpu
    assert made.extended_allocatable == (("nvidia.com/gpu", 1),)


def test_unknown_instance_type_needs_resource_tags() -> None:
    with pytest.raises(ValueError, match=r"instance type 'x9\.huge' is unknown"):
        template_from_asg("g", AsgTemplateSource("g-asg", "x9.huge"))
    made = template_from_asg("g", AsgTemplateSource("g-asg", "x9.huge", {
        "k8s.io/cluster-autoscaler/node-template/resources/cpu": "96",
        "k8s.io/cluster-autoscaler/node-template/resources/memory": "384Gi"}))
    assert made.cpu_capacity_milli == 96_000


def test_malformed_resource_tag_is_named() -> None:
    with pytest.raises(ValueError, match="resources/cpu = 'lots' is not a quantity"):
        template_from_asg("g", AsgTemplateSource("g-asg", "m5.large", {
            "k8s.io/cluster-autoscaler/node-template/resources/cpu": "lots"}))


def test_template_from_a_live_node_carries_its_daemons_not_its_state() -> None:
    live = node("g-001", cpu=1900, memory=7 * GiB, cpu_capacity_milli=2000,
                memory_capacity_bytes=8 * GiB,
                labels={"group": "g", "kubernetes.io/hostname": "g-001"},
                taints=(Taint("dedicated", "g", "NoSchedule"),
                        Taint("atlassian.com/escalator", "123", "NoSchedule"),
                        Taint("node.kubernetes.io/not-ready", "", "NoExecute")))
    on_node = [pod("ds", 100, 50 * MiB, node_name="g-001", owned_by_daemonset=True),
               pod("static", 200, 100 * MiB, node_name="g-001", static=True),
               pod("app", 1000, 1 * GiB, node_name="g-001")]
    made = template_from_node("g", "g-asg", live, on_node, "m5.large")
    assert made.taints == (Taint("dedicated", "g", "NoSchedule"),)
    assert made.labels["kubernetes.io/hostname"] == "template-node-for-g"
    assert (made.cpu_capacity_milli, made.cpu_allocatable_milli) == (2000, 1900)
    assert (made.daemon_cpu_milli, made.daemon_memory_bytes, made.daemon_pods) == (300, 150 * MiB, 2)
    assert made.free_cpu_milli == 1600
    assert made.source == "node g-001"


def test_group_template_prefers_the_oldest_good_live_node_then_the_asg() -> None:
    source = AsgTemplateSource("g-asg", "m5.large")
    nodes = [node("young", created=20.0), node("old", created=10.0),
             node("cordoned", created=1.0, unschedulable=True),
             node("not-ready", created=2.0, ready=False),
             node("leaving", created=3.0, taints=(Taint("atlassian.com/escalator", "1", "NoSchedule"),))]
    assert template_for_group("g", "g-asg", nodes, {}, source).source == "node old"  # type: ignore[union-attr]
    assert template_for_group("g", "g-asg", nodes[2:], {}, source).source == "asg tags"  # type: ignore[union-attr]
    assert template_for_group("g", "g-asg", [], {}, None) is None


# --- the estimator -------------------------------------------------------------------------


def test_estimate_counts_nodes_by_first_fit_decreasing() -> None:
    # Two 1.5-CPU pods and two 0.5-CPU pods on 2-CPU nodes: 1.5+0.5 twice = 2 nodes (first fit
    # in arrival order would need 3: 0.5+0.5, 1.5, 1.5).
    pending = [pod("s1", 500), pod("s2", 500), pod("b1", 1500), pod("b2", 1500)]
    estimate = estimate_nodes(pending, template(cpu=2000), max_nodes=10)
    assert estimate.node_count == 2
    assert [[p.name for p in placed] for placed in estimate.nodes] == [["b1", "s1"], ["b2", "s2"]]


def test_memory_and_pod_count_bound_a_node_too() -> None:
    assert estimate_nodes(pods(4, cpu=100, memory=3 * GiB), template(memory=8 * GiB), 10
                          ).node_count == 2
    assert estimate_nodes(pods(7, cpu=10, memory=MiB), template(max_pods=3), 10).node_count == 3


def test_daemon_overhead_reduces_room_on_each_new_node() -> None:
    busy = template(cpu=2000, daemon_cpu_milli=600, daemon_pods=1)
    assert estimate_nodes(pods(2, cpu=700), busy, 10).node_count == 1
    assert estimate_nodes(pods(3, cpu=700), busy, 10).node_count == 2


def test_pods_that_fit_no_copy_are_not_helped() -> None:
    estimate = estimate_nodes([pod("huge", cpu=6000), pod("ok")], template(cpu=2000), 10)
    assert [p.name for p in estimate.pods] == ["ok"]
    assert estimate.node_count == 1


def test_node_limit_stops_adding_nodes_but_fills_the_counted_ones() -> None:
    pending = [pod("a", 1500), pod("b", 1500), pod("c", 1500), pod("small", 400)]
    estimate = estimate_nodes(pending, template(cpu=2000), max_nodes=2)
    assert estimate.node_count == 2
    assert sorted(p.name for p in estimate.pods) == ["a", "b", "small"]
    assert estimate_nodes(pending, template(), max_nodes=0).node_count == 0


def test_taints_need_tolerations() -> None:
    tainted = template(taints=(Taint("dedicated", "batch", "NoSchedule"),))
    plain = pod("plain")
    tolerant = pod("tolerant", tolerations=(Toleration("dedicated", "Equal", "batch", "NoSchedule"),))
    exists = pod("exists", tolerations=(Toleration("", "Exists"),))
    wrong_value = pod("wrong", tolerations=(Toleration("dedicated", "Equal", "web", "NoSchedule"),))
    helped = estimate_nodes([plain, tolerant, exists, wrong_value], tainted, 10).pods
    assert sorted(p.name for p in helped) == ["exists", "tolerant"]
    # PreferNoSchedule does not keep a pod off.
    soft = template(taints=(Taint("spot", "true", "PreferNoSchedule"),))
    assert estimate_nodes([plain], soft, 10).node_count == 1


def test_node_selector_and_required_affinity_pick_the_template() -> None:
    gpu = template(labels={"workload": "gpu", "zone": "a"})
    selector = pod("selector", node_selector={"workload": "gpu"})
    elsewhere = pod("elsewhere", node_selector={"workload": "web"})
    affinity = pod("affinity", required_node_terms=(NodeSelectorTerm((
        MatchExpression("zone", "In", ("a", "b")), MatchExpression("spot", "DoesNotExist")),),))
    not_in = pod("not-in", required_node_terms=(NodeSelectorTerm((
        MatchExpression("zone", "NotIn", ("a",)),),),))
    helped = estimate_nodes([selector, elsewhere, affinity, not_in], gpu, 10).pods
    assert sorted(p.name for p in helped) == ["affinity", "selector"]


def test_match_fields_and_empty_terms_follow_the_scheduler() -> None:
    """A term's matchFields (metadata.name) must hold too; an empty term matches no node
    (k8s NodeSelectorTerm: "A null or empty node selector term matches no objects"); Gt and Lt
    compare as Go's ParseInt reads the label, so "1_0" or an over-int64 number is no number."""
    from kube_elevator.tasks.core.records import pod_record
    from kube_elevator.tasks.core.scheduling import fits_constraints
    from tests.builders import api_pod

    def decoded(terms: list[dict[str, Any]]) -> PodRecord:
        raw = api_pod("pinned")
        raw["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                    {"nodeSelectorTerms": terms}}}
        return pod_record(OBJECT_DECODER.decode(orjson.dumps(raw)))

    a, b = node("a", labels={"size": "10"}), node("b", labels={"size": "1_0"})
    pinned = decoded([{"matchFields": [{"key": "metadata.name", "operator": "In",
                                        "values": ["a"]}]}])
    assert (fits_constraints(pinned, a), fits_constraints(pinned, b)) == (True, False)
    assert not fits_constraints(pinned, template())  # the template is no node named "a"
    assert not any(fits_constraints(decoded([{}]), n) for n in (a, b))
    bigger = decoded([{"matchExpressions": [{"key": "size", "operator": "Gt", "values": ["5"]}]}])
    assert (fits_constraints(bigger, a), fits_constraints(bigger, b)) == (True, False)
    huge = node("c", labels={"size": str(2**63)})
    assert not fits_constraints(bigger, huge)


pod_sizes = st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 10 * GiB),
                               st.booleans()), max_size=40)


@settings(max_examples=150, deadline=None)
@given(sizes=pod_sizes, cpu=st.integers(1, 4000), memory=st.integers(1, 8 * GiB),
       max_pods=st.integers(1, 8), cap=st.integers(0, 12))
def test_estimator_never_overfills_or_exceeds_the_cap(
        sizes: list[tuple[int, int, bool]], cpu: int, memory: int, max_pods: int, cap: int) -> None:
    tainted = template(cpu=cpu, memory=memory, max_pods=max_pods,
                       taints=(Taint("dedicated", "x", "NoSchedule"),))
    pending = [pod(f"p{i}", c, m, tolerations=(Toleration("dedicated", "Exists"),) if t else ())
               for i, (c, m, t) in enumerate(sizes)]
    estimate = estimate_nodes(pending, tainted, cap)
    assert estimate.node_count <= cap
    assert estimate.node_count == len(estimate.nodes)
    names = [p.name for p in estimate.pods]
    assert len(names) == len(set(names))  # no pod placed twice
    for placed in estimate.nodes:
        assert placed  # no empty node counted
        assert sum(p.cpu_request_milli for p in placed) <= cpu
        assert sum(p.memory_request_bytes for p in placed) <= memory
        assert len(placed) <= max_pods
        assert all(fits_constraints(p, tainted) for p in placed)
    # Every pod left out either cannot fit a fresh copy or met the cap.
    left_out = [p for p in pending if p.name not in set(names)]
    assert all(not fits_empty_template(p, tainted) or estimate.node_count == cap for p in left_out)


def test_pods_for_upcoming_or_free_room_do_not_ask_for_another_node() -> None:
    booting = upcoming_slots(template(cpu=2000), 1)
    pending = [pod("a", 1500), pod("b", 1500)]
    remaining, fitted = filter_out_schedulable(pending, booting)
    assert [p.name for p in fitted] == ["a"] and [p.name for p in remaining] == ["b"]
    live = [node("n1", cpu=2000)]
    bound = [pod("r", 1000, node_name="n1", unschedulable=False)]
    slots = free_slots(live, bound)
    assert (slots[0].cpu_milli, slots[0].pods) == (1000, 109)
    remaining, fitted = filter_out_schedulable([pod("c", 1200), pod("d", 900)], slots)
    assert [p.name for p in fitted] == ["d"]


# --- the expanders -------------------------------------------------------------------------


def test_random_picks_one_option_reproducibly_with_a_seed() -> None:
    options = [option(name, 1, [pod()]) for name in "abcde"]
    first = random_expander(options, CONTEXT, random.Random(7))
    assert len(first) == 1
    assert random_expander(options, CONTEXT, random.Random(7)) == first
    picked = {random_expander(options, CONTEXT, random.Random(seed))[0].group for seed in range(50)}
    assert picked == set("abcde")
    assert random_expander([], CONTEXT, random.Random(1)) == []


def test_most_pods_keeps_every_option_scheduling_the_most_pods() -> None:
    a = option("a", 3, pods(4))
    b = option("b", 1, pods(2))
    c = option("c", 2, pods(4))
    assert most_pods([a, b, c], CONTEXT, random.Random(0)) == [a, c]


def test_least_waste_adds_idle_cpu_and_memory_fractions_on_capacity() -> None:
    # 2 pods of 1 CPU / 2 GiB: on one 2-CPU/8-GiB node waste = 0 + 0.5; on one 4-CPU/8-GiB node
    # waste = 0.5 + 0.5; on two 2-CPU/4-GiB nodes (capacity) waste = 0.5 + 0.5.
    two = pods(2, cpu=1000, memory=2 * GiB)
    small = option("small", 1, two, template("small", cpu=1900, memory=7 * GiB,
                                             cpu_capacity=2000, memory_capacity=8 * GiB))
    big = option("big", 1, two, template("big", cpu=4000, memory=8 * GiB))
    pair = option("pair", 2, two, template("pair", cpu=2000, memory=4 * GiB))
    assert waste_score(small) == pytest.approx(0.5)  # capacity, not allocatable
    assert waste_score(big) == pytest.approx(1.0)
    assert waste_score(pair) == pytest.approx(1.0)
    assert least_waste([big, small, pair], CONTEXT, random.Random(0)) == [small]
    assert least_waste([big, pair], CONTEXT, random.Random(0)) == [big, pair]  # a tie passes on


def test_least_nodes_keeps_the_fewest_and_skips_zero() -> None:
    a, b, c, zero = (option("a", 2, pods(1)), option("b", 1, pods(1)), option("c", 1, pods(1)),
                     option("zero", 0, []))
    assert least_nodes([a, b, zero, c], CONTEXT, random.Random(0)) == [b, c]


def test_preferred_node_grows_with_the_cluster() -> None:
    assert [preferred_node_cpu_milli(n) for n in (0, 2, 3, 6, 7, 20, 21, 60, 61, 200, 201)] == [
        1000, 1000, 2000, 2000, 4000, 4000, 8000, 8000, 16000, 16000, 32000]


def test_price_score_is_cas_formula() -> None:
    context = ExpanderContext(prices={"m5.large": 0.096}, cluster_node_count=10)
    node_type = template("a", cpu=2000, memory=8 * GiB, instance_type="m5.large")
    helped = pods(3, cpu=500, memory=1 * GiB)
    chosen = option("a", 2, helped, node_type)
    cpu_price, memory_price = 0.111 * 0.5 / 2, 0.111 * 0.5 / 8
    pods_price = 3 * (0.5 * cpu_price + 1 * memory_price)
    stabilization = 0.5 * cpu_price + (500 * MiB / GiB) * memory_price
    ratio = (2 * 0.096 + stabilization) / (pods_price + stabilization)
    unfitness = max(4000 / 2000, 2000 / 4000)  # preferred 4 CPU at 10 nodes
    suppressed = (unfitness - 1) * (1 - math.tanh((2 - 1) / 15)) + 1
    assert price_score(chosen, context) == pytest.approx(suppressed * ratio)


def test_price_prefers_the_cheaper_fit_and_drops_unpriced_options() -> None:
    context = ExpanderContext(prices={"m5.large": 0.096, "m5.xlarge": 0.25, "c5.large": 0.085},
                              cluster_node_count=5)
    helped = pods(2, cpu=900, memory=1 * GiB)
    m5 = option("m5", 1, helped, template("m5", instance_type="m5.large"))
    c5 = option("c5", 1, helped, template("c5", memory=4 * GiB, instance_type="c5.large"))
    big = option("big", 1, helped, template("big", cpu=4000, memory=16 * GiB,
                                            instance_type="m5.xlarge"))
    unpriced = option("r5", 1, helped, template("r5", instance_type="r5.large"))
    assert price([m5, big, c5, unpriced], context, random.Random(0)) == [c5]
    assert price([unpriced], context, random.Random(0)) == []


def test_gpu_groups_are_made_unattractive_to_price() -> None:
    context = ExpanderContext(prices={"m5.large": 0.096, "g4dn.xlarge": 0.05})
    helped = [pod("p", cpu=500, memory=256 * MiB)]
    gpu = option("gpu", 1, helped, template("gpu", instance_type="g4dn.xlarge",
                                            extended_capacity=(("nvidia.com/gpu", 1),)))
    labelled = option("labelled", 1, helped, template(
        "labelled", instance_type="g4dn.xlarge", labels={"k8s.amazonaws.com/accelerator": "t4"}))
    plain = option("plain", 1, helped, template("plain", instance_type="m5.large"))
    assert price([gpu, labelled, plain], context, random.Random(0)) == [plain]
    cpu_price, memory_price = context.pod_cpu_price_per_hour, context.pod_memory_gib_price_per_hour
    stabilization = 0.5 * cpu_price + 500 / 1024 * memory_price
    pod_price = 0.5 * cpu_price + 0.25 * memory_price
    # Unfitness fixed at 1000 whatever the node size.
    assert price_score(gpu, context) == pytest.approx(
        1000 * (0.05 + stabilization) / (pod_price + stabilization))


def test_priority_keeps_the_highest_matching_priority() -> None:
    context = ExpanderContext(priorities={
        50: ["^spot-.*"], 10: ["on-demand"], 1: [".*"], -5: ["never"]})
    spot_a = option("a", 1, pods(1), asg_name="spot-a")
    spot_b = option("b", 1, pods(1), asg_name="spot-b")
    on_demand = option("c", 1, pods(1), asg_name="eks-on-demand-c")  # regexes are unanchored
    other = option("d", 1, pods(1), asg_name="misc")
    rng = random.Random(0)
    assert priority([on_demand, spot_a, other, spot_b], context, rng) == [spot_a, spot_b]
    assert priority([on_demand, other], context, rng) == [on_demand]
    assert priority([other], context, rng) == [other]
    unmatched = ExpanderContext(priorities={10: ["nothing-matches"]})
    assert priority([spot_a, other], unmatched, rng) == [spot_a, other]  # no match: all pass on
    negative = ExpanderContext(priorities={-5: ["spot"], -10: [".*"]})
    assert priority([spot_a, other], negative, rng) == [spot_a]


def test_priorities_from_the_ca_configmap() -> None:
    data = {"priorities": "10:\n  - .*t2\\.large.*\n  - .*t3\\.large.*\n50:\n  - .*spot.*\n"}
    assert priorities_from_configmap(data) == {10: (".*t2\\.large.*", ".*t3\\.large.*"),
                                               50: (".*spot.*",)}
    with pytest.raises(ValueError, match="no 'priorities' key"):
        priorities_from_configmap({"other": "x"})
    with pytest.raises(ValueError, match="is empty"):
        priorities_from_configmap({"priorities": " "})
    with pytest.raises(ValueError, match="does not compile"):
        priorities_from_configmap({"priorities": "10:\n  - '('\n"})


def test_chain_passes_ties_on_and_stops_at_a_single_survivor() -> None:
    context = ExpanderContext(priorities={20: ["spot"], 1: [".*"]})
    two = pods(2, cpu=1000, memory=2 * GiB)
    spot_small = option("spot-small", 1, two, template("spot-small"), asg_name="spot-small")
    spot_big = option("spot-big", 1, two, template("spot-big", cpu=4000, memory=16 * GiB),
                      asg_name="spot-big")
    on_demand = option("od", 1, two, template("od"), asg_name="od")
    choice = choose([on_demand, spot_big, spot_small], ["priority", "least-waste"], context,
                    random.Random(0))
    assert choice.option is spot_small
    assert choice.trace == (("priority", ("spot-big", "spot-small")),
                            ("least-waste", ("spot-small",)))
    # A single survivor wins at once: least-waste is never asked.
    only = choose([on_demand, spot_small], ["priority", "least-waste"],
                  ExpanderContext(priorities={20: ["spot"]}), random.Random(0))
    assert only.trace == (("priority", ("spot-small",)),)


def test_ties_left_at_the_end_are_broken_at_random_with_the_seed() -> None:
    options = [option(name, 1, pods(1)) for name in ("a", "b", "c")]
    picks = {choose(options, ["least-nodes"], CONTEXT, random.Random(seed)).option.group  # type: ignore[union-attr]
             for seed in range(40)}
    assert picks == {"a", "b", "c"}
    first = choose(options, ["least-nodes"], CONTEXT, random.Random(3))
    assert first == choose(options, ["least-nodes"], CONTEXT, random.Random(3))
    assert first.trace[-1][0] == "random"


def test_chain_with_nothing_left_chooses_nothing() -> None:
    unpriced = option("a", 1, pods(1))
    assert choose([unpriced], ["price", "least-waste"], CONTEXT, random.Random(0)).option is None
    assert choose([], ["least-waste"], CONTEXT, random.Random(0)).option is None


def test_every_documented_expander_is_registered() -> None:
    assert set(EXPANDERS) == {"random", "most-pods", "least-waste", "least-nodes", "price",
                              "priority"}


# --- limits ---------------------------------------------------------------------------------


def test_totals_count_live_capacity_and_upcoming_nodes() -> None:
    live = [node("a", cpu=1900, memory=7 * GiB, cpu_capacity_milli=2000,
                 memory_capacity_bytes=8 * GiB), node("b", cpu=3500, memory=16 * GiB)]
    totals = cluster_totals(live, [(template(cpu=4000, memory=16 * GiB), 2)])
    assert totals == ClusterTotals(4, 2 + 4 + 8, 8 * GiB + 16 * GiB + 32 * GiB)


def test_limits_cap_the_node_count() -> None:
    big = template(cpu=4000, memory=16 * GiB)
    totals = ClusterTotals(node_count=8, cores=30, memory_bytes=100 * GiB)
    assert nodes_within_limits(big, 5, totals, ClusterLimits()) == 5
    assert nodes_within_limits(big, 5, totals, ClusterLimits(max_nodes_total=10)) == 2
    assert nodes_within_limits(big, 5, totals, ClusterLimits(max_cores=42)) == 3
    assert nodes_within_limits(big, 5, totals, ClusterLimits(max_memory_bytes=140 * GiB)) == 2
    assert nodes_within_limits(big, 5, totals, ClusterLimits(max_nodes_total=8)) == 0
    assert exceeded_limit(big, totals, ClusterLimits(max_nodes_total=8)) == \
        "max_nodes_total 8 reached"
    assert exceeded_limit(big, totals, ClusterLimits(max_cores=33)) == \
        "cores_total max 33 would be exceeded"
    assert exceeded_limit(big, totals, ClusterLimits(max_memory_bytes=110 * GiB)) == \
        "memory_total max 110 GiB would be exceeded"
    assert exceeded_limit(big, totals, ClusterLimits()) is None


@settings(max_examples=200, deadline=None)
@given(count=st.integers(0, 2000), nodes=st.integers(0, 500), cores=st.integers(0, 5000),
       memory_gib=st.integers(0, 20000), max_nodes=st.integers(0, 600),
       max_cores=st.integers(0, 6000), max_memory_gib=st.integers(0, 25000),
       cpu=st.integers(1, 64000), memory=st.integers(1, 256 * GiB))
def test_capped_count_never_breaks_a_limit(count: int, nodes: int, cores: int, memory_gib: int,
                                           max_nodes: int, max_cores: int, max_memory_gib: int,
                                           cpu: int, memory: int) -> None:
    node_type = template(cpu=cpu, memory=memory)
    totals = ClusterTotals(nodes, cores, memory_gib * GiB)
    limits = ClusterLimits(max_nodes, max_cores, max_memory_gib * GiB)
    allowed = nodes_within_limits(node_type, count, totals, limits)
    assert 0 <= allowed <= count
    if allowed:
        assert max_nodes == 0 or nodes + allowed <= max_nodes
        assert cores + allowed * math.ceil(cpu / 1000) <= max_cores
        assert memory_gib * GiB + allowed * memory <= max_memory_gib * GiB


def test_limits_and_context_from_the_config_section() -> None:
    config = parse_node_groups({"node_groups": [], "cluster_autoscaler": {
        "max_nodes_total": 20, "cores_total": "0:64", "memory_total": "0:256",
        "prices": {"m5.large": 0.1}, "priorities": {5: ["a"]},
        "pod_prices": {"cpu_per_hour": 0.03}}}, "f").cluster_autoscaler
    assert cluster_limits(config) == ClusterLimits(20, 64, 256 * GiB)
    context = expander_context(config, cluster_node_count=7)
    assert context.prices == {"m5.large": 0.1}
    assert context.priorities == {5: ("a",)}
    assert context.pod_cpu_price_per_hour == 0.03
    assert context.cluster_node_count == 7
    assert expander_context(config, 7, {1: [".*"]}).priorities == {1: [".*"]}


# --- the plan -------------------------------------------------------------------------------


def candidate(group: str, node_type: TemplateNode | None, target: int = 1, max_size: int = 10,
              **fields: Any) -> GroupCandidate:
    return GroupCandidate(group, f"{group}-asg", node_type, target, max_size,
                          fields.pop("registered", target), **fields)


def test_a_six_cpu_pod_gets_a_node_from_the_group_that_can_hold_it() -> None:
    big_pod = pod("needs-6", cpu=6000, memory=4 * GiB)
    default = candidate("default", template("default", cpu=2000, memory=8 * GiB), target=3)
    large = candidate("large", template("large", cpu=8000, memory=32 * GiB,
                                        instance_type="m5.2xlarge"), target=0, registered=0)
    plan = plan_scale_up([big_pod], [default, large], ClusterTotals(3, 6, 24 * GiB),
                         ClusterLimits(), ["least-waste"], CONTEXT, random.Random(0), NOW)
    assert plan.option is not None
    assert (plan.option.group, plan.option.node_count, plan.new_target_size) == ("large", 1, 1)
    assert plan.skipped == (("default", "no pending pod fits its template node"),)
    assert plan.unhelped == ()


def test_three_groups_chosen_as_the_chain_says() -> None:
    pending = pods(4, cpu=1000, memory=2 * GiB)
    groups = [candidate("spot", template("spot", instance_type="m5.large")),
              candidate("on-demand", template("on-demand", instance_type="m5.large")),
              candidate("big", template("big", cpu=8000, memory=32 * GiB,
                                        instance_type="m5.2xlarge"))]
    context = ExpanderContext(prices={"m5.large": 0.096, "m5.2xlarge": 0.384},
                              priorities={10: ["^spot"], 5: ["^on-demand", "^big"]})
    rng = random.Random(0)
    by_priority = plan_scale_up(pending, groups, ClusterTotals(), ClusterLimits(),
                                ["priority", "least-waste"], context, rng, NOW)
    assert by_priority.option.group == "spot"  # type: ignore[union-attr]
    # Once spot is backed off, priority keeps on-demand and big; price picks on-demand.
    groups[0] = candidate("spot", template("spot"), backed_off_until=NOW + 60)
    fallback = plan_scale_up(pending, groups, ClusterTotals(), ClusterLimits(),
                             ["priority", "price"], context, rng, NOW)
    assert fallback.option.group == "on-demand"  # type: ignore[union-attr]
    assert fallback.skipped[0][0] == "spot" and "backed off" in fallback.skipped[0][1]
    assert fallback.trace[0] == ("priority", ("big", "on-demand"))


def test_pods_waiting_for_a_booting_node_ask_for_nothing_more() -> None:
    booting = candidate("g", template("g", cpu=2000), target=2, registered=1)
    plan = plan_scale_up([pod("a", 1500)], [booting], ClusterTotals(), ClusterLimits(),
                         ["least-waste"], CONTEXT, random.Random(0), NOW)
    assert plan.option is None and plan.pending == ()


def test_group_at_max_size_or_without_template_is_skipped() -> None:
    plan = plan_scale_up([pod()], [candidate("full", template("full"), target=3, max_size=3),
                                   candidate("blank", None)],
                         ClusterTotals(), ClusterLimits(), ["least-waste"], CONTEXT,
                         random.Random(0), NOW)
    assert plan.option is None
    assert dict(plan.skipped) == {"full": "at max size 3",
                                  "blank": "no template node (no live node, no ASG template)"}
    assert len(plan.unhelped) == 1


def test_group_headroom_and_limits_cap_the_chosen_count() -> None:
    pending = pods(10, cpu=1500)
    headroom = plan_scale_up(pending, [candidate("g", template("g"), target=7, max_size=10)],
                             ClusterTotals(7, 14, 56 * GiB), ClusterLimits(), ["least-nodes"],
                             CONTEXT, random.Random(0), NOW)
    assert headroom.option.node_count == 3 and headroom.new_target_size == 10  # type: ignore[union-attr]
    assert len(headroom.unhelped) == 7
    cores = plan_scale_up(pending, [candidate("g", template("g"), target=7, max_size=100)],
                          ClusterTotals(7, 14, 56 * GiB), ClusterLimits(max_cores=20),
                          ["least-nodes"], CONTEXT, random.Random(0), NOW)
    assert cores.capped_from == 10
    assert cores.option.node_count == 3 and len(cores.option.pods) == 3  # type: ignore[union-attr]
    total = plan_scale_up(pending, [candidate("g", template("g"), target=7, max_size=100)],
                          ClusterTotals(7, 14, 56 * GiB), ClusterLimits(max_nodes_total=9),
                          ["least-nodes"], CONTEXT, random.Random(0), NOW)
    assert total.option.node_count == 2  # type: ignore[union-attr]
    full = plan_scale_up(pending, [candidate("g", template("g"), target=7, max_size=100)],
                         ClusterTotals(7, 14, 56 * GiB), ClusterLimits(max_cores=14),
                         ["least-nodes"], CONTEXT, random.Random(0), NOW)
    assert full.option is None
    assert full.skipped == (("g", "cores_total max 14 would be exceeded"),)


# --- the provisioning back-off --------------------------------------------------------------


def test_backoff_starts_at_5_minutes_doubles_to_30_and_resets_after_3_hours() -> None:
    state = ProvisioningState()
    durations = []
    now = NOW
    for _ in range(6):
        state = record_failure(state, now)
        durations.append(state.backoff_seconds)
        assert state.backed_off(now) and not state.backed_off(now + state.backoff_seconds)
        now = state.backoff_until + 1  # fail again just after the back-off ended
    assert durations == [300, 600, 1200, 1800, 1800, 1800]
    # Failing again while still backed off does not double (concurrent failures).
    during = record_failure(record_failure(ProvisioningState(), NOW), NOW + 60)
    assert during.backoff_seconds == 300 and during.backoff_until == NOW + 60 + 300
    # Three hours after the last failure, the group starts over at 5 minutes.
    long_after = record_failure(state, state.last_failure + 3 * 3600 + 1)
    assert long_after.backoff_seconds == 300
    just_before = record_failure(state, state.last_failure + 3 * 3600 - 1)
    assert just_before.backoff_seconds == 1800


def test_success_clears_the_backoff() -> None:
    state = record_failure(ProvisioningState(), NOW)
    assert record_success(state) == ProvisioningState()


def instance(instance_id: str, state: str = "InService") -> AsgInstance:
    return AsgInstance(instance_id, "us-east-1a", state)


def provider(instance_id: str) -> str:
    return f"aws:///us-east-1a/{instance_id}"


def test_an_instance_that_never_registers_is_terminated_after_the_provision_time() -> None:
    instances = [instance("i-ok"), instance("i-stuck")]
    check = check_provisioning(ProvisioningState(), instances, {provider("i-ok")}, NOW)
    assert check.to_terminate == () and not check.failed
    assert check.state.unregistered_since == (("i-stuck", NOW),)
    at_limit = check_provisioning(check.state, instances, {provider("i-ok")}, NOW + 15 * MINUTE)
    assert at_limit.to_terminate == ()  # CA: strictly after since + max provision time
    late = check_provisioning(at_limit.state, instances, {provider("i-ok")}, NOW + 15 * MINUTE + 1)
    assert late.to_terminate == ("i-stuck",) and late.failed
    assert late.state.backed_off(NOW + 15 * MINUTE + 2)
    assert late.state.backoff_seconds == 300
    # Still listed next tick (terminating failed): terminate again, but back off only once.
    again = check_provisioning(late.state, instances, {provider("i-ok")}, NOW + 17 * MINUTE)
    assert again.to_terminate == ("i-stuck",) and not again.failed
    assert again.state.backoff_until == late.state.backoff_until
    # Gone from the ASG: forgotten, and its disappearance is no success.
    gone = check_provisioning(again.state, [instances[0], instance("i-stuck", "Terminating")],
                              {provider("i-ok")}, NOW + 18 * MINUTE)
    assert gone.to_terminate == () and not gone.succeeded
    assert gone.state.unregistered_since == () and gone.state.backed_off(NOW + 18 * MINUTE)


def test_a_scale_up_whose_nodes_all_register_clears_the_backoff() -> None:
    failed_before = record_failure(ProvisioningState(), NOW - 3600)
    booting = check_provisioning(failed_before, [instance("i-new")], set(), NOW)
    assert not booting.succeeded
    joined = check_provisioning(booting.state, [instance("i-new")], {provider("i-new")},
                                NOW + 120)
    assert joined.succeeded and joined.state == ProvisioningState()


def test_provisioning_state_round_trips_through_lease_annotations() -> None:
    state = ProvisioningState(backoff_seconds=600, backoff_until=NOW + 600.5, last_failure=NOW,
                              unregistered_since=(("i-a", NOW - 30), ("i-b", NOW - 10.25)),
                              timed_out=("i-a",))
    annotations = state.to_annotations()
    assert annotations["elevator.io/backoff-seconds"] == "600"
    assert annotations["elevator.io/last-failed-scale-up"] == "2027-01-15T08:00:00Z"
    assert ProvisioningState.from_annotations(annotations) == state
    assert ProvisioningState.from_annotations({}) == ProvisioningState()
    assert ProvisioningState.from_annotations(ProvisioningState().to_annotations()) == \
        ProvisioningState()


@pytest.mark.parametrize(("key", "value"), [
    ("elevator.io/backoff-until", "yesterday"),
    ("elevator.io/backoff-seconds", "five"),
    ("elevator.io/unregistered-instances", "[1, 2]"),
    ("elevator.io/timed-out-instances", "{}"),
])
def test_malformed_annotations_are_named(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"annotation {key}: cannot read"):
        ProvisioningState.from_annotations({key: value})
