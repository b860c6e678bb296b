"""kube-scheduler's NodePorts and VolumeZone filter tables (v1.35), ported from
nodeports/node_ports_test.go (TestNodePorts, TestFits) and volumezone/volume_zone_test.go
(TestSingleZone, TestMultiZone, TestWithBinding).

Each parametrize id is the upstream case's name; `passes` is upstream's nil Filter status.
Cases are run through `filter_nodes`, the one node carrying the existing pods; a PreFilter
Skip passes every node, and a PreFilter that fails (a claim VolumeZone cannot resolve) is the
reason in `SchedPod.volume_error`, checked too.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.scheduler.framework import filter_nodes
from kube_elevator.tasks.scheduler.objects import Volumes, sched_pod

READY = [{"type": "Ready", "status": "True"}]


def node(name: str = "m1", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
            "status": {"allocatable": {"pods": "110"}, "conditions": READY}}


def with_ports(name: str, host: str, *infos: str, sidecar: bool | None = None
               ) -> dict[str, Any]:
    """newPod(host, "UDP/127.0.0.1/8080", ...); `sidecar` puts the ports on an init
    container instead (restartPolicy Always when True)."""
    ports = []
    for info in infos:
        protocol, ip, port = info.split("/")
        ports.append({"hostIP": ip, "hostPort": int(port), "containerPort": int(port),
                      "protocol": protocol})
    spec: dict[str, Any] = {"containers": [{"name": "c", "ports": ports}]}
    if sidecar is not None:
        init: dict[str, Any] = {"name": "init", "ports": ports}
        if sidecar:
            init["restartPolicy"] = "Always"
        spec = {"containers": [], "initContainers": [init]}
    if host:
        spec["nodeName"] = host
    return {"kind": "Pod", "metadata": {"name": name}, "spec": spec}


PORT_CASES = [
    ("skip filter", {"kind": "Pod", "metadata": {"name": "p"}, "spec": {}}, [], True),
    ("other port", with_ports("p", "", "UDP/127.0.0.1/8080"), ["UDP/127.0.0.1/9090"], True),
    ("same udp port", with_ports("p", "", "UDP/127.0.0.1/8080"), ["UDP/127.0.0.1/8080"], False),
    ("same tcp port", with_ports("p", "", "TCP/127.0.0.1/8080"), ["TCP/127.0.0.1/8080"], False),
    ("different host ip", with_ports("p", "", "TCP/127.0.0.1/8080"), ["TCP/127.0.0.2/8080"],
     True),
    ("different protocol", with_ports("p", "", "UDP/127.0.0.1/8080"), ["TCP/127.0.0.1/8080"],
     True),
    ("second udp port conflict", with_ports("p", "", "UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"),
     ["UDP/127.0.0.1/8080"], False),
    ("first tcp port conflict", with_ports("p", "", "TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
     ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"], False),
    ("first tcp port conflict due to 0.0.0.0 hostIP", with_ports("p", "", "TCP/0.0.0.0/8001"),
     ["TCP/127.0.0.1/8001"], False),
    ("TCP hostPort conflict due to 0.0.0.0 hostIP",
     with_ports("p", "", "TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"), ["TCP/127.0.0.1/8001"],
     False),
    ("second tcp port conflict to 0.0.0.0 hostIP", with_ports("p", "", "TCP/127.0.0.1/8001"),
     ["TCP/0.0.0.0/8001"], False),
    ("second different protocol", with_ports("p", "", "UDP/127.0.0.1/8001"),
     ["TCP/0.0.0.0/8001"], True),
    ("UDP hostPort conflict due to 0.0.0.0 hostIP", with_ports("p", "", "UDP/127.0.0.1/8001"),
     ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"], False),
    ("non-sidecar initContainer using hostPort",
     with_ports("p", "", "TCP//8001", sidecar=False), ["TCP/0.0.0.0/8001"], True),
    ("TCP hostPort conflict from sidecar initContainer",
     with_ports("p", "", "TCP//8001", sidecar=True), ["TCP/0.0.0.0/8001"], False),
    # TestFits
    ("non-conflicting ports", with_ports("p", "", "TCP/127.0.0.1/80"), ["TCP/127.0.0.1/9090"],
     True),
    ("multiple non-conflicting ports",
     with_ports("p", "", "TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90",
                "TCP/127.0.1.1/100"),
     ["TCP/127.0.0.1/9090", "TCP/127.0.0.1/9191", "TCP/127.0.1.1/8080"], True),
    ("same ports on different protocols", with_ports("p", "", "TCP/127.0.0.1/80"),
     ["UDP/127.0.0.1/80"], True),
    ("conflicting ports", with_ports("p", "", "TCP/127.0.0.1/80"), ["TCP/127.0.0.1/80"], False),
    ("multiple ports, some conflicting",
     with_ports("p", "", "TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90",
                "TCP/127.0.1.1/100"),
     ["TCP/127.0.0.1/9090", "TCP/127.0.1.1/90", "TCP/127.0.1.1/8080"], False),
]


@pytest.mark.parametrize(("pod", "used", "passes"), [c[1:] for c in PORT_CASES],
                         ids=[c[0] for c in PORT_CASES])
def test_node_ports(pod: dict[str, Any], used: list[str], passes: bool) -> None:
    existing = [with_ports("p1", "m1", *used)] if used else []
    assert filter_nodes(pod, [node()], existing) == (["m1"] if passes else [])


BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


def pv(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"kind": "PersistentVolume", "metadata": {"name": name, "labels": labels}}


def pvc(name: str, volume: str = "", storage_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def with_claim(claim: str | None) -> dict[str, Any]:
    """createPodWithVolume("pod_1", claim); None: a pod without volume."""
    spec: dict[str, Any] = {"containers": []}
    if claim is not None:
        spec["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]
    return {"kind": "Pod", "metadata": {"name": "pod_1", "namespace": "default"}, "spec": spec}


SINGLE_ZONE_VOLUMES = [
    pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_3", {BETA_REGION: "us-west1"}),
    pv("Vol_Stable_1", {ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_Stable_3", {ZONE: "us-west1-a", REGION: "us-west1-a"}),
    pvc("PVC_1", "Vol_1"), pvc("PVC_2", "Vol_2"), pvc("PVC_3", "Vol_3"),
    pvc("PVC_4", "Vol_not_exist"), pvc("PVC_Stable_1", "Vol_Stable_1"),
    pvc("PVC_Stable_2", "Vol_Stable_2"), pvc("PVC_Stable_3", "Vol_Stable_3"),
]
USELESS = {"uselessLabel": "none"}
SINGLE_ZONE = [
    ("pod without volume", None, {BETA_ZONE: "us-west1-a"}, True),
    ("node without labels", "PVC_1", {}, True),
    ("beta zone label matched", "PVC_1", {BETA_ZONE: "us-west1-a", **USELESS}, True),
    ("beta region label matched", "PVC_2", {BETA_REGION: "us-west1", **USELESS}, True),
    ("beta region label doesn't match", "PVC_2", {BETA_REGION: "no_us-west1", **USELESS}, False),
    ("beta zone label doesn't match", "PVC_1", {BETA_ZONE: "no_us-west1-a", **USELESS}, False),
    ("zone label matched", "PVC_Stable_1", {ZONE: "us-west1-a", **USELESS}, True),
    ("region label matched", "PVC_Stable_2", {REGION: "us-west1", **USELESS}, True),
    ("region label doesn't match", "PVC_Stable_2", {REGION: "no_us-west1", **USELESS}, False),
    ("zone label doesn't match", "PVC_Stable_1", {ZONE: "no_us-west1-a", **USELESS}, False),
    ("pv with zone and region, node with only zone", "PVC_Stable_3", {ZONE: "us-west1-a"},
     False),
    ("pv with zone,node with beta zone", "PVC_Stable_1", {BETA_ZONE: "us-west1-a"}, False),
    ("pv with beta label,node with ga label, matched", "PVC_1", {ZONE: "us-west1-a"}, True),
    ("pv with beta label,node with ga label, don't match", "PVC_1", {ZONE: "us-west1-b"},
     False),
]

MULTI_ZONE_VOLUMES = [
    pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
    pv("Vol_3", {BETA_ZONE: "us-west1-c__us-west1-a"}),
    pv("Vol_Stable_1", {ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", {ZONE: "us-west1-c__us-west1-a"}),
    pvc("PVC_1", "Vol_1"), pvc("PVC_2", "Vol_2"), pvc("PVC_3", "Vol_3"),
    pvc("PVC_4", "Vol_not_exist"), pvc("PVC_Stable_1", "Vol_Stable_1"),
    pvc("PVC_Stable_2", "Vol_Stable_2"),
]
MULTI_ZONE = [
    ("node without labels", "PVC_3", {}, True),
    ("beta zone label matched", "PVC_3", {BETA_ZONE: "us-west1-a", **USELESS}, True),
    ("beta zone label doesn't match", "PVC_1", {BETA_ZONE: "us-west1-b", **USELESS}, False),
    ("zone label matched", "PVC_Stable_2", {ZONE: "us-west1-a", **USELESS}, True),
    ("zone label doesn't match", "PVC_Stable_1", {ZONE: "us-west1-b", **USELESS}, False),
]


@pytest.mark.parametrize(("claim", "labels", "passes"), [c[1:] for c in SINGLE_ZONE],
                         ids=[c[0] for c in SINGLE_ZONE])
def test_single_zone(claim: str | None, labels: dict[str, str], passes: bool) -> None:
    assert filter_nodes(with_claim(claim), [node("host1", labels)],
                        volumes=SINGLE_ZONE_VOLUMES) == (["host1"] if passes else [])


@pytest.mark.parametrize(("claim", "labels", "passes"), [c[1:] for c in MULTI_ZONE],
                         ids=[c[0] for c in MULTI_ZONE])
def test_multi_zone(claim: str, labels: dict[str, str], passes: bool) -> None:
    assert filter_nodes(with_claim(claim), [node("host1", labels)],
                        volumes=MULTI_ZONE_VOLUMES) == (["host1"] if passes else [])


BINDING_VOLUMES = [
    {"kind": "StorageClass", "metadata": {"name": "Class_Immediate"}},
    {"kind": "StorageClass", "metadata": {"name": "Class_Wait"},
     "volumeBindingMode": "WaitForFirstConsumer"},
    pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
    pvc("PVC_1", "Vol_1"), pvc("PVC_NoSC", storage_class="Class_0"), pvc("PVC_EmptySC"),
    pvc("PVC_WaitSC", storage_class="Class_Wait"),
    pvc("PVC_ImmediateSC", storage_class="Class_Immediate"),
]
WITH_BINDING = [
    ("label zone failure domain matched", "PVC_1", ""),
    ("unbound volume empty storage class", "PVC_EmptySC",
     "PersistentVolumeClaim had no pv name and storageClass name"),
    ("unbound volume no storage class", "PVC_NoSC",
     'storageclasses.storage.k8s.io "Class_0" not found'),
    ("unbound volume immediate binding mode", "PVC_ImmediateSC",
     'VolumeBindingMode not set for StorageClass "Class_Immediate"'),
    ("unbound volume wait binding mode", "PVC_WaitSC", ""),
]


@pytest.mark.parametrize(("claim", "reason"), [c[1:] for c in WITH_BINDING],
                         ids=[c[0] for c in WITH_BINDING])
def test_with_binding(claim: str, reason: str) -> None:
    pod = with_claim(claim)
    assert sched_pod(pod, volumes=Volumes(BINDING_VOLUMES)).volume_error == reason
    passing = filter_nodes(pod, [node("host1", {BETA_ZONE: "us-west1-a", **USELESS})],
                           volumes=BINDING_VOLUMES)
    assert passing == ([] if reason else ["host1"])
