"""The Cluster Autoscaler's binpacking estimator table (cluster-autoscaler/estimator/
binpacking_estimator_test.go TestBinpackingEstimate), ported: the same template node, pods,
the live "oldnode" in another zone that triggers the spreading constraints, and the expected
node and pod counts, run through `estimate_nodes` with a `FilterSnapshot` of that cluster.

Each parametrize id is the upstream case's name. BuildTestPod's memory is in bytes, makeNode's
in MiB (so "oldnode", 100m and 100 MiB, takes 20m pods). The fastpath case is upstream's
"simple resource-based binpacking" with fast-path packing on, which must give the same counts.
A last table checks the issue's case: ten replicas with required hostname anti-affinity ask
for ten nodes at once.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kube_elevator.tasks.cluster_autoscaler.estimator import estimate_nodes, filter_out_schedulable
from kube_elevator.tasks.cluster_autoscaler.scheduling import FilterSnapshot
from kube_elevator.tasks.cluster_autoscaler.templates import TemplateNode
from kube_elevator.tasks.core.api_objects import OBJECT_DECODER
from kube_elevator.tasks.core.records import NodeRecord, PodRecord, pod_record

MIB = 1024 * 1024
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def estimatee(cpu: int, memory: int, *, host_port: int = 0, max_skew: int = 0,
              key: str = "", min_domains: int = 1, name: str = "estimatee") -> PodRecord:
    """BuildTestPod("estimatee", cpu, memory, WithNamespace("universe"),
    WithLabels(app: estimatee), [WithHostPort], [WithMaxSkew])."""
    container: dict[str, Any] = {"name": "c", "resources": {"requests": {
        "cpu": f"{cpu}m", "memory": str(memory)}}}
    if host_port:
        container["ports"] = [{"hostPort": host_port}]
    spec: dict[str, Any] = {"containers": [container]}
    if max_skew:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "estimatee"}},
            "minDomains": min_domains}]
    obj = {"metadata": {"name": name, "namespace": "universe", "labels": {"app": "estimatee"}},
           "spec": spec, "status": {"phase": "Pending", "conditions": [
               {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
    return pod_record(OBJECT_DECODER.decode(orjson.dumps(obj)))


def group(pod: PodRecord, count: int) -> list[PodRecord]:
    """makePodEquivalenceGroup: `count` copies of the pod."""
    return [pod] * count


def make_template(millicores: int, memory_mib: int, pods: int = 10) -> TemplateNode:
    """makeNode(cpu, mem, 10, "template", "zone-mars")."""
    return TemplateNode(
        group="g", asg_name="g-asg", instance_type="test",
        labels={HOSTNAME: "template", ZONE: "zone-mars"}, taints=(),
        cpu_capacity_milli=millicores, memory_capacity_bytes=memory_mib * MIB,
        cpu_allocatable_milli=millicores, memory_allocatable_bytes=memory_mib * MIB,
        max_pods=pods)


def old_node() -> NodeRecord:
    """makeNode(100, 100, 10, "oldnode", "zone-jupiter")."""
    return NodeRecord(name="oldnode", labels={HOSTNAME: "oldnode", ZONE: "zone-jupiter"},
                      created_unix_seconds=0.0, cpu_allocatable_milli=100,
                      memory_allocatable_bytes=100 * MIB, pods_allocatable=10)


HIGH_RESOURCE = group(estimatee(500, 1000), 10)
CASES = [
    ("simple resource-based binpacking", 350 * 3 - 50, 2 * 1000,
     group(estimatee(350, 1000), 10), 0, 5, 10),
    ("pods-per-node bound binpacking", 10000, 20000, group(estimatee(10, 100), 20), 0, 2, 20),
    ("hostport conflict forces pod-per-node", 1000, 5000,
     group(estimatee(200, 1000, host_port=5555), 8), 0, 8, 8),
    ("limiter cuts binpacking", 1000, 5000, group(estimatee(500, 1000), 20), 5, 5, 10),
    ("decreasing ordered pods are processed first", 1000, 5000,
     [*group(estimatee(50, 1000), 10), *HIGH_RESOURCE], 5, 5, 10),
    ("hostname topology spreading with maxSkew=2 forces 2 pods/node", 1000, 5000,
     group(estimatee(200, 200, max_skew=2, key=HOSTNAME), 8), 0, 4, 8),
    ("zonal topology spreading with maxSkew=2 only allows 2 pods to schedule", 1000, 5000,
     group(estimatee(20, 100, max_skew=2, key=ZONE), 8), 0, 1, 2),
    ("hostname topology spreading with maxSkew=1 with a large scaleup handles scheduling pods "
     "retroactively", 1000, 5000,
     group(estimatee(20, 100, max_skew=1, key=HOSTNAME, min_domains=3), 12), 0, 3, 12),
    ("fastpath - simple resource-based binpacking", 350 * 3 - 50, 2 * 1000,
     group(estimatee(350, 1000), 10), 0, 5, 10),
]


@pytest.mark.parametrize(("millicores", "memory", "pods", "max_nodes", "nodes", "placed"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_binpacking_estimate(millicores: int, memory: int, pods: list[PodRecord],
                            max_nodes: int, nodes: int, placed: int) -> None:
    snapshot = FilterSnapshot([old_node()], [])
    estimate = estimate_nodes(pods, make_template(millicores, memory), max_nodes or 1000,
                              snapshot)
    assert (estimate.node_count, len(estimate.pods)) == (nodes, placed)
    assert snapshot.names() == ["oldnode"]  # the snapshot is left as it was
    assert not snapshot.node("oldnode").pods


def test_decreasing_ordered_pods_are_processed_first_takes_the_big_pods() -> None:
    """The same case's expectProcessedPods: the ten 500m pods, not the 50m ones."""
    small = group(estimatee(50, 1000, name="small"), 10)
    estimate = estimate_nodes([*small, *HIGH_RESOURCE], make_template(1000, 5000), 5,
                              FilterSnapshot([old_node()], []))
    assert [pod.cpu_request_milli for pod in estimate.pods] == [500] * 10


def anti_affine(name: str, node: str = "") -> PodRecord:
    """An `app=web` replica with required anti-affinity to `app=web` on the hostname."""
    obj = {"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
           "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {
               "requests": {"cpu": "100m", "memory": "64Mi"}}}],
               "affinity": {"podAntiAffinity": {
                   "requiredDuringSchedulingIgnoredDuringExecution": [{
                       "labelSelector": {"matchLabels": {"app": "web"}},
                       "topologyKey": HOSTNAME}]}}},
           "status": {"phase": "Running" if node else "Pending"}}
    return pod_record(OBJECT_DECODER.decode(orjson.dumps(obj)))


def test_ten_replicas_with_hostname_anti_affinity_ask_for_ten_nodes() -> None:
    """Issue 37's case: one 4-CPU node runs a replica; ten more pending (100m each) fit no live
    node (anti-affinity) and ask for ten copies of the template at once."""
    live = NodeRecord(name="web-1", labels={HOSTNAME: "web-1"}, created_unix_seconds=0.0,
                      cpu_allocatable_milli=4000, memory_allocatable_bytes=16 * 1024 * MIB)
    running = anti_affine("web-0", "web-1")
    pending = [anti_affine(f"web-{index}") for index in range(1, 11)]
    snapshot = FilterSnapshot([live], [running])
    from kube_elevator.tasks.cluster_autoscaler.estimator import free_slots
    still, fitted = filter_out_schedulable(pending, free_slots([live], [running]), snapshot)
    assert (len(still), fitted) == (10, [])
    estimate = estimate_nodes(still, make_template(4000, 16 * 1024), 1000, snapshot)
    assert estimate.node_count == 10
    assert [len(on) for on in estimate.nodes] == [1] * 10
    # without the snapshot the requests alone would pack them on one node
    assert estimate_nodes(still, make_template(4000, 16 * 1024), 1000).node_count == 1
