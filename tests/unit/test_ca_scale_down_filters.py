"""CA's scale-down simulation ("can this node's pods move?", §1.3 condition 2) runs the
scheduler's filters for pods with pod anti-affinity, spreading or host ports: room is not
enough when the only other node already runs a replica the pod must not share a node with."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kube_elevator.tasks.cluster_autoscaler.drain import pods_on_nodes
from kube_elevator.tasks.cluster_autoscaler.unneeded import RemovalSimulation
from kube_elevator.tasks.core.api_objects import OBJECT_DECODER
from kube_elevator.tasks.core.records import NodeRecord, PodRecord, pod_record

HOSTNAME = "kubernetes.io/hostname"


def node(name: str) -> NodeRecord:
    return NodeRecord(name=name, labels={HOSTNAME: name}, created_unix_seconds=0.0,
                      cpu_allocatable_milli=4000, memory_allocatable_bytes=16 * 2**30)


def replica(name: str, on: str, spec: dict[str, Any]) -> PodRecord:
    body = {"nodeName": on, "containers": [{"name": "c", "resources": {"requests": {
        "cpu": "100m", "memory": "64Mi"}}}], **spec}
    containers = body["containers"]
    if "ports" in spec:
        containers[0]["ports"] = body.pop("ports")
    obj = {"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                             "name": "web", "uid": "u", "controller": True}]},
           "spec": body, "status": {"phase": "Running"}}
    return pod_record(OBJECT_DECODER.decode(orjson.dumps(obj)))


ANTI = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME}]}}}
PORT = {"ports": [{"containerPort": 80, "hostPort": 8080}]}
SPREAD = {"topologySpreadConstraints": [{
    "maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "web"}}}]}


@pytest.mark.parametrize(("spec", "drainable"), [
    ({}, True), (ANTI, False), (PORT, False), (SPREAD, False)],
    ids=["requests only", "hostname anti-affinity", "host port", "hostname spreading"])
def test_a_replica_moves_only_where_the_scheduler_would_take_it(spec: dict[str, Any],
                                                                drainable: bool) -> None:
    """Node a and node b run a replica each, node c runs nothing: with anti-affinity, a host
    port or hostname spreading (maxSkew 1: the emptied node a stays a domain of 0, as in
    CA's simulator, which keeps the removed node in its snapshot) a's replica may go to c
    only."""
    nodes = [node("a"), node("b")]
    pods = [replica("web-a", "a", spec), replica("web-b", "b", spec)]
    verdict = RemovalSimulation(nodes, pods_on_nodes(pods)).check(nodes[0])
    assert verdict.drainable is drainable, verdict.reason
    if not drainable:
        assert "fits on no other node" in verdict.reason
    with_c = [*nodes, node("c")]
    assert RemovalSimulation(with_c, pods_on_nodes(pods)).check(with_c[0]).drainable


def test_a_removal_counts_for_the_next_check() -> None:
    """Once a's replica is simulated onto c, b's replica finds no node (c holds one now)."""
    nodes = [node("a"), node("b"), node("c")]
    pods = [replica("web-a", "a", ANTI), replica("web-b", "b", ANTI)]
    simulation = RemovalSimulation(nodes, pods_on_nodes(pods))
    first = simulation.check(nodes[0])
    assert first.drainable
    simulation.remove(nodes[0], first)
    second = simulation.check(nodes[1])
    assert not second.drainable and "web-b" in second.reason
