"""Extended resources (GPUs, hugepages, `example.com/foo`) count wherever CA counts them.

Issue 13, item 2: a pod requesting `nvidia.com/gpu: 1` "fitted" a CPU-only m5.xlarge, so
least-waste could pick the CPU group and, once a CPU node had room, the pod counted as placed
and no GPU node was ever asked for. Upstream sources followed (kubernetes/autoscaler,
cluster-autoscaler/): `cloudprovider/aws/aws_manager.go` (buildNodeFromTemplate,
extractAllocatableResourcesFromAsg), `cloudprovider/aws/ec2_instance_types.go` (GPU counts),
`processors/nodegroupset/compare_nodegroups.go` (IsCloudProviderNodeInfoSimilar),
`expander/price/price.go` and the pricing model's PodPrice; and kube-scheduler's
NodeResourcesFit, which CA's simulator runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.fakes.scenario import load_scenario
from kube_elevator.flows.simulation import simulate
from kube_elevator.tasks.cluster_autoscaler.balancing import difference, similar
from kube_elevator.tasks.cluster_autoscaler.estimator import (
    estimate_nodes,
    filter_out_schedulable,
    fits_empty_template,
    free_slots,
    upcoming_slots,
)
from kube_elevator.tasks.cluster_autoscaler.expanders import (
    ExpanderContext,
    ScaleUpOption,
    pod_price,
    price_score,
)
from kube_elevator.tasks.cluster_autoscaler.templates import (
    TemplateNode,
    template_from_asg,
    template_from_node,
)
from kube_elevator.tasks.cluster_autoscaler.unneeded import RemovalSimulation
from kube_elevator.tasks.core.api_objects import OBJECT_DECODER
from kube_elevator.tasks.core.records import AsgTemplateSource, NodeRecord, PodRecord, node_record
from tests.builders import GiB, MiB, pending_pod, plain_node
from tests.e2e.test_cluster_autoscaler_e2e import asg as scenario_asg
from tests.e2e.test_cluster_autoscaler_e2e import ca_group, write
from tests.e2e.test_cluster_autoscaler_live import (
    JOBS,
    T0,
    adapters_for,
    ca_config,
    desired,
    group,
    prefix,
    run_tick,
    scale_up_notes,
)

GPU = "nvidia.com/gpu"
TAG = "k8s.io/cluster-autoscaler/node-template/resources/"
ONE_GPU = ((GPU, 1),)


def pod(name: str, cpu: int = 1000, memory: int = GiB, extended: tuple[tuple[str, int], ...] = (),
        **fields: Any) -> PodRecord:
    return pending_pod(name, cpu, memory, extended, **fields)


def gpu_pod(name: str, gpus: int = 1, **fields: Any) -> PodRecord:
    return pod(name, extended=((GPU, gpus),), **fields)


def node(name: str, cpu: int = 4000, memory: int = 16 * GiB,
         extended: tuple[tuple[str, int], ...] = (), **fields: Any) -> NodeRecord:
    return plain_node(name, cpu, memory, extended=extended, **fields)


def asg_template(group_name: str, instance_type: str,
                 tags: dict[str, str] | None = None) -> TemplateNode:
    return template_from_asg(group_name, AsgTemplateSource(f"{group_name}-asg", instance_type,
                                                           tags or {}, ("us-east-1a",)))


# --- records --------------------------------------------------------------------------------


def test_node_record_reads_every_allocatable_resource() -> None:
    """A node's status.allocatable / capacity: every resource besides cpu, memory and pods
    (device plugins' GPUs, hugepages, ephemeral-storage); a zero amount is none."""
    raw = OBJECT_DECODER.decode(orjson.dumps({
        "kind": "Node", "metadata": {"name": "gpu-1"},
        "status": {
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "58", GPU: "1",
                            "ephemeral-storage": "100Gi", "hugepages-2Mi": "0",
                            "hugepages-1Gi": "2Gi"},
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58", GPU: "1",
                         "ephemeral-storage": "120Gi", "hugepages-2Mi": "0",
                         "hugepages-1Gi": "2Gi"}}}))
    made = node_record(raw)
    assert made.extended_allocatable == (("ephemeral-storage", 100 * GiB), ("hugepages-1Gi", 2 * GiB),
                                         (GPU, 1))
    assert made.extended_capacity == (("ephemeral-storage", 120 * GiB), ("hugepages-1Gi", 2 * GiB),
                                      (GPU, 1))


# --- templates ------------------------------------------------------------------------------


@pytest.mark.parametrize(("instance_type", "gpus"), [
    ("g4dn.xlarge", 1), ("g4dn.12xlarge", 4), ("p3.2xlarge", 1), ("p3.8xlarge", 4),
    ("p4d.24xlarge", 8), ("g5.48xlarge", 8), ("m5.xlarge", 0),
])
def test_ca_aws_template_gpus_from_instance_type(instance_type: str, gpus: int) -> None:
    """CA buildNodeFromTemplate: capacity[nvidia.com/gpu] = the instance type's GPU count
    (ec2_instance_types.go); allocatable = capacity."""
    made = asg_template("g", instance_type)
    assert made.gpu_count == gpus
    assert made.extended_allocatable == (((GPU, gpus),) if gpus else ())
    assert made.has_gpu == (gpus > 0)


def test_ca_aws_template_resources_tag() -> None:
    """CA extractAllocatableResourcesFromAsg: every `node-template/resources/<name>` tag sets
    that resource's capacity, over the instance type's (any name, extended ones included)."""
    made = asg_template("g", "g4dn.xlarge", {
        TAG + GPU: "2", TAG + "aws.amazon.com/neuron": "1", TAG + "vpc.amazonaws.com/pod-eni": "9",
        TAG + "hugepages-2Mi": "512Mi", TAG + "example.com/foo": "3"})
    assert made.extended_capacity == (
        ("aws.amazon.com/neuron", 1), ("example.com/foo", 3), ("hugepages-2Mi", 512 * MiB),
        (GPU, 2), ("vpc.amazonaws.com/pod-eni", 9))
    assert made.extended_allocatable == made.extended_capacity
    # A CPU instance type becomes a GPU template by its tag.
    tagged = asg_template("g", "m5.xlarge", {TAG + GPU: "1"})
    assert tagged.gpu_count == 1 and fits_empty_template(gpu_pod("p"), tagged)


def test_ca_template_from_node_copies_extended_resources_less_daemonsets() -> None:
    """CA's template NodeInfo from a live node: its allocatable, with the DaemonSet pods'
    requests already taken (a DaemonSet using the GPU leaves none for pending pods)."""
    live = node("gpu-1", extended=ONE_GPU)
    daemon = gpu_pod("dcgm", node_name="gpu-1", owned_by_daemonset=True)
    made = template_from_node("g", "g-asg", live, [daemon])
    assert made.extended_allocatable == ONE_GPU and made.gpu_count == 1
    assert made.free_extended == {GPU: 0}
    assert not fits_empty_template(gpu_pod("p"), made)
    assert fits_empty_template(gpu_pod("p"), template_from_node("g", "g-asg", live))


# --- fit and binpacking -------------------------------------------------------------------


def test_ca_binpacking_counts_extended_resources() -> None:
    """CA's binpacking estimator runs the scheduler's NodeResourcesFit on template copies: a
    GPU pod needs a node with a free GPU, so 3 one-GPU pods need 3 g4dn.xlarge (CPU and
    memory alone would fit them on one) and fit no m5.xlarge at all."""
    pending = [gpu_pod(f"train-{index}") for index in range(3)]
    gpu = asg_template("gpu", "g4dn.xlarge")
    estimate = estimate_nodes(pending, gpu, 10)
    assert estimate.node_count == 3
    assert [len(on_node) for on_node in estimate.nodes] == [1, 1, 1]
    assert estimate_nodes(pending, asg_template("cpu", "m5.xlarge"), 10).node_count == 0
    # Two GPUs per pod on a 4-GPU node: two pods a node.
    assert estimate_nodes([gpu_pod(f"p{i}", 2) for i in range(3)],
                          asg_template("big", "g4dn.12xlarge"), 10).node_count == 2
    # A pod without extended requests still packs by CPU and memory only.
    assert estimate_nodes([pod("web", 1000)] * 3, gpu, 10).node_count == 1


def test_ca_filter_out_schedulable_counts_extended_resources() -> None:
    """CA places pending pods on existing and upcoming nodes first (FilterOutSchedulable):
    a CPU node with room does not take a GPU pod, a GPU node whose GPU is in use does not
    either, an upcoming GPU node does."""
    cpu_node, gpu_node = node("cpu-1"), node("gpu-1", extended=ONE_GPU)
    training = gpu_pod("train")
    still, fitted = filter_out_schedulable([training], free_slots([cpu_node], []))
    assert (still, fitted) == ([training], [])
    busy = gpu_pod("busy", node_name="gpu-1", unschedulable=False, phase="Running")
    still, _ = filter_out_schedulable([training], free_slots([cpu_node, gpu_node], [busy]))
    assert still == [training]
    _, fitted = filter_out_schedulable([training], free_slots([gpu_node], []))
    assert fitted == [training]
    _, fitted = filter_out_schedulable(
        [training], upcoming_slots(asg_template("gpu", "g4dn.xlarge"), 1))
    assert fitted == [training]
    # One free GPU, two pods: the second stays pending.
    still, fitted = filter_out_schedulable([training, gpu_pod("second")],
                                           free_slots([gpu_node], []))
    assert [p.name for p in still] == ["second"]


def test_ca_scale_down_simulation_counts_extended_resources() -> None:
    """CA's scale-down simulator (the scheduler's filters again): a GPU pod can only move to
    another node with a free GPU."""
    gpu_a, cpu_b = node("gpu-a", extended=ONE_GPU), node("cpu-b")
    on_a = gpu_pod("train", node_name="gpu-a", unschedulable=False, phase="Running",
                   controller_kind="ReplicaSet")
    simulation = RemovalSimulation([gpu_a, cpu_b], {"gpu-a": [on_a]})
    verdict = simulation.check(gpu_a)
    assert not verdict.drainable and "fits on no other node" in verdict.reason
    gpu_c = node("gpu-c", extended=ONE_GPU)
    simulation = RemovalSimulation([gpu_a, cpu_b, gpu_c], {"gpu-a": [on_a]})
    verdict = simulation.check(gpu_a)
    assert verdict.drainable
    simulation.remove(gpu_a, verdict)
    assert simulation.rooms["gpu-c"].extended == {GPU: 0}  # the moved pod took the GPU


def test_ca_gpu_node_utilization_is_its_gpus_against_the_gpu_threshold() -> None:
    """CA utilization.Calculate: a GPU node is as used as its GPUs are, whatever its CPU; its
    unneeded check compares that with --scale-down-gpu-utilization-threshold."""
    from kube_elevator.tasks.cluster_autoscaler.config import ScaleDownOptions
    from kube_elevator.tasks.cluster_autoscaler.drainability import node_utilization
    from kube_elevator.tasks.cluster_autoscaler.unneeded import threshold_of

    two_gpus = node("gpu-a", extended=((GPU, 2),))
    cpu_heavy = pod("etl", 3000, node_name="gpu-a", unschedulable=False, phase="Running")
    assert node_utilization(two_gpus, [cpu_heavy]) == 0.0  # 75 % of its CPU, no GPU asked
    trainer = gpu_pod("train", node_name="gpu-a", unschedulable=False, phase="Running")
    assert node_utilization(two_gpus, [cpu_heavy, trainer]) == 0.5
    assert node_utilization(node("cpu-b"), [cpu_heavy]) == 0.75
    options = ScaleDownOptions(utilization_threshold=0.6, gpu_utilization_threshold=0.3)
    assert (threshold_of(two_gpus, options), threshold_of(node("cpu-b"), options)) == (0.3, 0.6)


# --- balancing ------------------------------------------------------------------------------


def test_ca_compare_nodegroups_gpu_not_similar() -> None:
    """CA IsCloudProviderNodeInfoSimilar: every capacity besides memory must match exactly, and
    allocatable and free every resource within tolerance: a GPU group is never similar to a
    CPU group, nor one with a different number of GPUs or of any extended resource."""
    def zone(template: TemplateNode, name: str) -> TemplateNode:
        labels = {**template.labels, "topology.kubernetes.io/zone": name}
        return TemplateNode(**{**template.__dict__, "labels": labels})

    cpu = asg_template("cpu", "g4dn.xlarge", {TAG + GPU: "0"})  # same vCPU and memory
    gpu_a = zone(asg_template("gpu", "g4dn.xlarge"), "us-east-1a")
    gpu_b = zone(asg_template("gpu", "g4dn.xlarge"), "us-east-1b")
    ignore = {"kubernetes.io/hostname", "topology.kubernetes.io/zone",
              "topology.kubernetes.io/region"}
    assert similar(gpu_a, gpu_b, ignored_labels=ignore)
    assert not similar(cpu, gpu_a, ignored_labels=ignore)
    assert difference(cpu, gpu_a, ignored_labels=ignore) == "GPU capacity 0 != 1"
    two = asg_template("gpu", "g4dn.xlarge", {TAG + GPU: "2"})
    assert not similar(two, gpu_a, ignored_labels=ignore)
    foo = asg_template("gpu", "g4dn.xlarge", {TAG + "example.com/foo": "1"})
    assert difference(foo, gpu_a, ignored_labels=ignore) == (
        "extended resource capacity {example.com/foo: 1, nvidia.com/gpu: 1} != "
        "{nvidia.com/gpu: 1}")
    # Free differs: a DaemonSet takes the GPU of one group's nodes.
    live = node("gpu-1", cpu=4000, memory=16 * GiB, extended=ONE_GPU)
    plain = template_from_node("gpu", "gpu-asg", live)
    used = template_from_node("gpu", "gpu-asg", live, [gpu_pod(
        "ds", node_name="gpu-1", owned_by_daemonset=True, cpu=0, memory=0)])
    assert difference(plain, used, ignored_labels=ignore) == (
        "free nvidia.com/gpu differs by more than 0.05 (1 vs 0)")


# --- the price expander ------------------------------------------------------------------------


def test_ca_price_expander_charges_gpus() -> None:
    """CA's pricing model charges a pod's GPUs (PodPrice = base + getAdditionalPrice per
    nvidia.com/gpu), so a GPU pod is worth its GPU node's price; GPU groups keep the fixed
    unfitness of 1000 (price.go gpuUnfitnessOverride)."""
    context = ExpanderContext(prices={"g4dn.xlarge": 0.526})
    assert pod_price(0, 0, context, gpus=2) == pytest.approx(1.4)
    template = asg_template("gpu", "g4dn.xlarge")
    with_gpu = ScaleUpOption("gpu", "gpu-asg", 1, (gpu_pod("train"),), template)
    without_gpu = ScaleUpOption("gpu", "gpu-asg", 1, (pod("train"),), template)
    charged, uncharged = price_score(with_gpu, context), price_score(without_gpu, context)
    assert charged is not None and uncharged is not None
    stabilization = pod_price(500, 500 * MiB, context)
    pod_cost = pod_price(1000, GiB, context)
    assert charged == pytest.approx(1000 * (0.526 + stabilization)
                                    / (pod_cost + 0.7 + stabilization))
    assert charged < uncharged


# --- end to end: the scenario ----------------------------------------------------------


def _gpu_pending_pod(kube: FakeKubeApi, name: str) -> None:
    kube.create("pods", {
        "metadata": {"name": name, "namespace": JOBS, "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u1",
             "controller": True}]},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {
            "cpu": "1", "memory": "2Gi", GPU: "1"}, "limits": {GPU: "1"}}}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}},
        namespace=JOBS)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("gpu_source", ["instance type", "template tag"])
def test_ca_gpu_pod_scales_up_the_gpu_group_live(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path, seed: int,
        gpu_source: str) -> None:
    """Issue 13: a GPU pod pending, a CPU group (m5.xlarge, one live node with room) and a GPU
    group at 0 (g4dn.xlarge, or m5.xlarge tagged `node-template/resources/nvidia.com/gpu`):
    with least-waste the GPU group is asked for, in every seed; once its node joins with the
    GPU allocatable the pod counts as placed and nothing more is asked for."""
    cpu_asg, gpu_asg = f"{prefix()}-cpu", f"{prefix()}-gpu"
    fake_aws.create_asg(cpu_asg, 1, 5, 1, instance_type="m5.xlarge")
    if gpu_source == "instance type":
        fake_aws.create_asg(gpu_asg, 0, 5, 0, instance_type="g4dn.xlarge")
    else:
        fake_aws.create_asg(gpu_asg, 0, 5, 0, instance_type="m5.xlarge",
                            tags={TAG + GPU: "1"})
    [cpu_instance] = fake_aws.instances(cpu_asg)
    fake_kube.create("nodes", node_for_instance(cpu_instance, {"customer": "cpu"}, 3900,
                                                15 * GiB, T0 - 3600))
    config = ca_config([group("cpu", cpu_asg, min_nodes=1), group("gpu", gpu_asg)],
                       expander="least-waste", random_seed=seed)
    adapters = adapters_for(kubeconfig, fake_aws)
    _gpu_pending_pod(fake_kube, "train-0")

    first = run_tick(adapters, config, T0)
    assert (desired(fake_aws, cpu_asg), desired(fake_aws, gpu_asg)) == (1, 1)
    assert scale_up_notes(first["gpu"]) == [
        "scale-up for 1 unschedulable pod(s): +1 node(s), ASG desired 1 "
        "(expanders least-waste: gpu)"]

    # The GPU node joins with the device plugin's nvidia.com/gpu; the pod is not bound yet.
    [gpu_instance] = fake_aws.instances(gpu_asg)
    fake_kube.create("nodes", node_for_instance(gpu_instance, {"customer": "gpu"}, 3900,
                                                15 * GiB, T0 + 120, extended={GPU: "1"}))
    second = run_tick(adapters, config, T0 + 180)
    assert (desired(fake_aws, cpu_asg), desired(fake_aws, gpu_asg)) == (1, 1)
    assert scale_up_notes(second["gpu"]) == scale_up_notes(second["cpu"]) == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ca_gpu_pod_runs_on_a_gpu_node_in_the_simulator(tmp_path: Path, seed: int) -> None:
    """The same scenario in the simulator: the GPU pod gets a g4dn.xlarge node and runs there;
    the CPU group, with room to spare, is never grown."""
    path = write(
        tmp_path,
        [ca_group("cpu", min_nodes=1, max_nodes=5), ca_group("gpu", min_nodes=0, max_nodes=5)],
        [scenario_asg("cpu", "m5.xlarge", 1), scenario_asg("gpu", "g4dn.xlarge", 0)],
        [{"name": "train", "at": "30s", "count": 1, "cpu": "1", "memory": "2Gi",
          "extended": {GPU: "1"}}],
        {"enabled": True, "expander": "least-waste", "random_seed": seed}, "5m")
    result: dict[str, Any] = simulate(load_scenario(path)).to_json()
    ticks = [line["node_groups"] for line in result["ticks"]]
    assert all(line["cpu"]["asg_desired"] == 1 for line in ticks)
    assert max(line["gpu"]["asg_desired"] for line in ticks) == 1
    assert ticks[-1]["gpu"]["nodes"] == 1
    # It waited for the GPU node to boot (90 s), not for a CPU node, then ran (arrived at 30 s,
    # the run ends at 300 s).
    assert 90 <= result["summary"]["max_pending_seconds"] < 240
