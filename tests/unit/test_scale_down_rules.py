"""Scale-down blockers (CA §1.4): each rule, its reason, and pods that never block."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kube_elevator.tasks.cluster_autoscaler.drainability import (
    DrainOptions,
    Outcome,
    below_threshold,
    blocked_reasons,
    drainable_nodes,
    node_drainability,
    node_utilization,
    pod_verdict,
)
from kube_elevator.tasks.core.api_objects import (
    OBJECT_DECODER,
    LocalVolume,
    MatchExpression,
    NodeSelectorTerm,
    Toleration,
)
from kube_elevator.tasks.core.pdb import PodDisruptionBudget, pdb_from_api, remaining_pdbs
from kube_elevator.tasks.core.records import NodeRecord, PodRecord, node_record, pod_record
from kube_elevator.tasks.core.selectors import label_selector
from tests.builders import GiB, MiB, plain_node


def pod(name: str = "web-1", namespace: str = "shop", **fields: Any) -> PodRecord:
    fields.setdefault("controller_kind", "ReplicaSet")
    fields.setdefault("labels", {"app": name.rsplit("-", 1)[0]})
    return PodRecord(name=name, namespace=namespace, node_name=fields.pop("node_name", "n1"),
                     phase=fields.pop("phase", "Running"),
                     cpu_request_milli=fields.pop("cpu", 100),
                     memory_request_bytes=fields.pop("memory", 100 * MiB), scheduled=True,
                     **fields)


def node(name: str = "n1", **fields: Any) -> NodeRecord:
    return plain_node(name, fields.pop("cpu", 2000), fields.pop("memory", 8 * GiB), **fields)


def pdb(name: str = "web", namespace: str = "shop", allowed: int = 1,
        labels: dict[str, str] | None = None) -> PodDisruptionBudget:
    return PodDisruptionBudget(namespace, name, label_selector(labels or {"app": "web"}), allowed)


def reason(pod_record_: PodRecord, pdbs: list[PodDisruptionBudget] | None = None) -> str:
    return node_drainability(node(), [pod_record_], pdbs or []).reason


# --- each blocker ---------------------------------------------------------------------------


def test_a_replicated_pod_moves() -> None:
    result = node_drainability(node(), [pod()])
    assert result.drainable and result.reason == ""
    assert [p.name for p in result.to_evict] == ["web-1"]


def test_not_safe_to_evict_annotation_blocks() -> None:
    assert reason(pod("x", namespace="jobs", safe_to_evict="false")) == \
        'pod jobs/x has cluster-autoscaler.kubernetes.io/safe-to-evict: "false"'


def test_kube_system_pod_without_pdb_blocks_and_with_one_moves() -> None:
    dns = pod("coredns-1", namespace="kube-system", labels={"k8s-app": "kube-dns"})
    assert reason(dns) == "pod kube-system/coredns-1 is a kube-system pod without a " \
                          "PodDisruptionBudget"
    budget = PodDisruptionBudget("kube-system", "coredns",
                                 label_selector({"k8s-app": "kube-dns"}), 1)
    assert node_drainability(node(), [dns], [budget]).drainable
    # A PDB of another namespace does not count.
    other = PodDisruptionBudget("shop", "coredns", label_selector({"k8s-app": "kube-dns"}), 1)
    assert not node_drainability(node(), [dns], [other]).drainable
    assert node_drainability(node(), [dns], [],
                             DrainOptions(skip_nodes_with_system_pods=False)).drainable


def test_pod_without_controller_blocks() -> None:
    assert reason(pod("bare", controller_kind="")) == \
        "pod shop/bare has no controller: it would not be re-created elsewhere"


def test_a_pod_stuck_terminating_or_expendable_never_blocks() -> None:
    """CA's long-terminating rule: deleted longer ago than its grace period + 30 s, a pod is
    skipped (and not counted in utilization); before that it is judged as any pod. Pods below
    the expendable priority cutoff (-10) never block: they go with the node."""
    deleted = pod("bare", controller_kind="", cpu=1800, deleting_since_unix_seconds=1000.0,
                  termination_grace_seconds=60)
    assert node_drainability(node(), [deleted], now=1090.0).blocking_pod == deleted
    assert node_utilization(node(cpu=2000), [deleted], now=1090.0) == pytest.approx(0.9)
    assert pod_verdict(deleted, now=1090.5).outcome is Outcome.IGNORE
    assert node_drainability(node(), [deleted], now=1090.5).drainable
    assert node_utilization(node(cpu=2000), [deleted], now=1090.5) == 0.0
    assert pod_verdict(pod("bare", controller_kind="", priority=-11)).outcome is Outcome.IGNORE
    assert pod_verdict(pod("bare", controller_kind="", priority=-10)).outcome is Outcome.BLOCK


def test_pod_of_a_custom_controller_blocks_unless_allowed() -> None:
    custom = pod("cr-1", controller_kind="Rollout")
    assert reason(custom) == ("pod shop/cr-1 is controlled by a Rollout, not a ReplicaSet, "
                              "ReplicationController, StatefulSet or Job")
    assert node_drainability(node(), [custom], [], DrainOptions(
        skip_nodes_with_custom_controller_pods=False)).drainable
    for kind in ("ReplicaSet", "ReplicationController", "StatefulSet", "Job"):
        assert node_drainability(node(), [pod(controller_kind=kind)]).drainable


def test_local_storage_blocks_hostpath_and_disk_emptydir() -> None:
    host = pod("db-0", local_volumes=(LocalVolume("data", "hostPath"),))
    assert reason(host) == 'pod shop/db-0 has local storage (hostPath volume "data")'
    scratch = pod("cache-0", local_volumes=(LocalVolume("scratch", "emptyDir"),
                                            LocalVolume("tmp", "emptyDir")))
    assert reason(scratch) == ('pod shop/cache-0 has local storage (emptyDir volume "scratch", '
                               'emptyDir volume "tmp")')
    assert node_drainability(node(), [host], [], DrainOptions(
        skip_nodes_with_local_storage=False)).drainable


def test_local_volumes_listed_as_safe_do_not_block_but_every_one_must_be() -> None:
    volumes = (LocalVolume("scratch", "emptyDir"), LocalVolume("tmp", "emptyDir"))
    assert node_drainability(node(), [pod(local_volumes=volumes,
                                          safe_to_evict_local_volumes=("scratch", "tmp"))]
                             ).drainable
    assert reason(pod("c-1", local_volumes=volumes, safe_to_evict_local_volumes=("scratch",))) \
        == 'pod shop/c-1 has local storage (emptyDir volume "tmp")'


def test_pdb_that_allows_no_disruption_blocks() -> None:
    assert reason(pod(), [pdb(allowed=0)]) == ("pod shop/web-1 is covered by PodDisruptionBudget "
                                               "shop/web, which allows no disruption now")


def test_pdb_must_allow_every_pod_of_the_node_it_covers() -> None:
    pods = [pod("web-1"), pod("web-2"), pod("web-3")]
    assert node_drainability(node(), pods, [pdb(allowed=3)]).drainable
    result = node_drainability(node(), pods, [pdb(allowed=2)])
    assert not result.drainable
    assert result.reason == ("PodDisruptionBudget shop/web allows 2 disruption(s) but 3 of its "
                             "pods run on this node (pod shop/web-3 could not be evicted)")
    assert result.blocking_pod is pods[2]


def test_scale_down_disabled_node_is_kept() -> None:
    result = node_drainability(node(scale_down_disabled=True), [])
    assert not result.drainable
    assert result.reason == 'node has cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"'


# --- what does not block --------------------------------------------------------------------


def test_daemonset_and_mirror_pods_never_block() -> None:
    daemon = pod("fluentd-x", namespace="kube-system", controller_kind="DaemonSet",
                 owned_by_daemonset=True, local_volumes=(LocalVolume("varlog", "hostPath"),))
    mirror = pod("kube-proxy-n1", namespace="kube-system", controller_kind="", mirror=True,
                 safe_to_evict="false", local_volumes=(LocalVolume("kubeconfig", "hostPath"),))
    static = pod("etcd-n1", namespace="kube-system", controller_kind="", static=True)
    result = node_drainability(node(), [daemon, mirror, static, pod()])
    assert result.drainable
    assert [p.name for p in result.daemonset_pods] == ["fluentd-x"]
    assert [p.name for p in result.to_evict] == ["web-1"]  # mirror pods are left to the kubelet
    assert pod_verdict(mirror).outcome is Outcome.IGNORE
    assert pod_verdict(daemon).outcome is Outcome.DAEMONSET


def test_safe_to_evict_true_overrides_controller_system_and_storage_blocks() -> None:
    special = pod("special", namespace="kube-system", controller_kind="", safe_to_evict="true",
                  local_volumes=(LocalVolume("data", "hostPath"),))
    assert node_drainability(node(), [special]).drainable


def test_finished_pods_do_not_block() -> None:
    done = pod("job-x", controller_kind="", phase="Succeeded", safe_to_evict="false")
    assert node_drainability(node(), [done]).drainable


def test_empty_node_is_drainable() -> None:
    assert node_drainability(node(), []).drainable


def test_the_first_blocking_pod_gives_the_reason() -> None:
    result = node_drainability(node(), [pod(), pod("bare", controller_kind=""),
                                        pod("x", safe_to_evict="false")])
    assert result.reason.startswith("pod shop/bare")
    assert result.blocking_pod is not None and result.blocking_pod.name == "bare"


# --- several nodes and budgets ---------------------------------------------------------------


def test_nodes_drained_together_share_the_pdb_budget() -> None:
    pods_by_node = {"n1": [pod("web-1", node_name="n1")], "n2": [pod("web-2", node_name="n2")],
                    "n3": [pod("other-1", node_name="n3")]}
    results = drainable_nodes([node("n1"), node("n2"), node("n3")], pods_by_node,
                              [pdb(allowed=1)])
    assert [r.drainable for r in results] == [True, False, True]
    assert blocked_reasons(results) == {
        "n2": "pod shop/web-2 is covered by PodDisruptionBudget shop/web, which allows no "
              "disruption now"}


def test_remaining_pdbs_subtract_the_evicted_pods() -> None:
    budgets = [pdb(allowed=3), pdb("db", allowed=1, labels={"app": "db"})]
    left = remaining_pdbs(budgets, [pod("web-1"), pod("web-2"), pod("cache-1")])
    assert [b.disruptions_allowed for b in left] == [1, 1]


def test_label_selectors() -> None:
    labels = {"app": "web", "tier": "front"}
    assert label_selector({}).matches(labels)  # empty selects everything
    assert label_selector({"app": "web"}, [("tier", "In", ("front", "back")),
                                           ("canary", "DoesNotExist", ())]).matches(labels)
    assert not label_selector({"app": "web"}, [("tier", "NotIn", ("front",))]
                             ).matches(labels)
    assert not PodDisruptionBudget("shop", "none", None, 5).selects(pod())  # nil selects nothing


def test_pdb_from_the_api() -> None:
    budget = pdb_from_api({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"minAvailable": 2, "selector": {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "Exists"}]}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2},
    })
    assert budget == PodDisruptionBudget("shop", "web", label_selector(
        {"app": "web"}, [("tier", "Exists", ())]), 0)
    assert pdb_from_api({"metadata": {"name": "x", "namespace": "y"}, "spec": {}}).selector is None
    with pytest.raises(ValueError, match=r"PodDisruptionBudget y/x: status\.disruptionsAllowed"):
        pdb_from_api({"metadata": {"name": "x", "namespace": "y"},
                      "status": {"disruptionsAllowed": "1"}})
    with pytest.raises(ValueError, match="matchExpressions entries need a key"):
        pdb_from_api({"metadata": {"name": "x", "namespace": "y"},
                      "spec": {"selector": {"matchExpressions": [{"operator": "In"}]}}})


# --- utilization ----------------------------------------------------------------------------


def test_utilization_is_the_larger_share_and_counts_daemonsets() -> None:
    on_node = [pod(cpu=500, memory=1 * GiB), pod("ds", owned_by_daemonset=True, cpu=100,
                                                 memory=3 * GiB),
               pod("done", phase="Succeeded", cpu=1000, memory=0)]
    assert node_utilization(node(cpu=2000, memory=8 * GiB), on_node) == pytest.approx(0.5)
    assert not below_threshold(node(cpu=2000, memory=8 * GiB), on_node, 0.5)
    assert below_threshold(node(cpu=2000, memory=8 * GiB), on_node[:1], 0.5)


# --- the fields, decoded from API JSON ------------------------------------------------------


def decoded_pod(metadata: dict[str, Any], spec: dict[str, Any] | None = None) -> PodRecord:
    return pod_record(OBJECT_DECODER.decode(orjson.dumps({
        "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", **metadata},
        "spec": spec or {"containers": []}, "status": {"phase": "Running"}})))


def test_pod_fields_for_the_rules_decode_from_api_json() -> None:
    record = decoded_pod(
        {"labels": {"app": "web"},
         "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
                         "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes":
                             "scratch, tmp",
                         "kubectl.kubernetes.io/last-applied-configuration": "{\"big\": 1}"},
         "ownerReferences": [{"kind": "Workflow", "name": "w"},
                             {"kind": "ReplicaSet", "name": "web-1", "controller": True}]},
        {"containers": [], "volumes": [
            {"name": "data", "hostPath": {"path": "/data"}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "shm", "emptyDir": {"medium": "Memory"}},
            {"name": "token", "projected": {"sources": []}},
            {"name": "config", "configMap": {"name": "c"}}]})
    assert record.labels == {"app": "web"}
    assert record.safe_to_evict == "false"
    # Split on commas only, as CA's getNonBlockingVolumes: " tmp" names no volume.
    assert record.safe_to_evict_local_volumes == ("scratch", " tmp")
    assert record.controller_kind == "ReplicaSet"
    assert record.local_volumes == (LocalVolume("data", "hostPath"),
                                    LocalVolume("scratch", "emptyDir"))
    assert not record.mirror


def test_mirror_pods_and_bare_pods_decode() -> None:
    mirror = decoded_pod({"annotations": {"kubernetes.io/config.mirror": "abc",
                                          "kubernetes.io/config.source": "file"},
                          "ownerReferences": [{"kind": "Node", "name": "n1", "controller": True}]})
    assert mirror.mirror and mirror.static
    bare = decoded_pod({"annotations": None, "ownerReferences": [{"kind": "ReplicaSet"}]})
    assert bare.controller_kind == "" and bare.safe_to_evict == "" and bare.labels == {}


def test_node_annotation_and_capacity_decode() -> None:
    record = node_record(OBJECT_DECODER.decode(orjson.dumps({
        "kind": "Node",
        "metadata": {"name": "n1", "annotations": {
            "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true",
            "atlassian.com/no-delete": "yes"}},
        "status": {"allocatable": {"cpu": "1900m", "memory": "7Gi"},
                   "capacity": {"cpu": "2", "memory": "8Gi"}}})))
    assert record.scale_down_disabled and record.no_delete
    assert (record.cpu_capacity_milli, record.memory_capacity_bytes) == (2000, 8 * GiB)
    assert not node_record(OBJECT_DECODER.decode(orjson.dumps({
        "kind": "Node", "metadata": {"name": "n2", "annotations": {
            "cluster-autoscaler.kubernetes.io/scale-down-disabled": "false"}}}))
    ).scale_down_disabled


def test_lease_annotations_still_read_whole() -> None:
    raw = OBJECT_DECODER.decode(orjson.dumps({
        "kind": "Lease", "metadata": {"name": "elevator-g", "annotations": {
            "elevator.io/scale-locked": "true", "other": "x"}}}))
    assert raw.metadata.annotations == {"elevator.io/scale-locked": "true", "other": "x"}
    assert OBJECT_DECODER.decode(b'{"kind": "Lease"}').metadata.annotations is None


def test_pod_record_fills_every_field_in_order() -> None:
    # pod_record builds PodRecord positionally for speed: a whole-record comparison against a
    # keyword-built record catches a field added out of order.
    record = decoded_pod(
        {"uid": "u-1", "labels": {"app": "web"},
         "annotations": {"kubernetes.io/config.source": "file",
                         "kubernetes.io/config.mirror": "m",
                         "cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
                         "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "v"},
         "ownerReferences": [{"kind": "DaemonSet", "controller": True}]},
        {"nodeName": "n1", "nodeSelector": {"disk": "ssd"},
         "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
             "nodeSelectorTerms": [{"matchExpressions": [
                 {"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
         "tolerations": [{"key": "k", "operator": "Exists"}],
         "containers": [{"resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}],
         "volumes": [{"name": "v", "emptyDir": {}}]})
    assert record == PodRecord(
        name="p", namespace="ns", node_name="n1", phase="Running", cpu_request_milli=250,
        memory_request_bytes=64 * MiB, owned_by_daemonset=True, static=True,
        node_selector={"disk": "ssd"},
        required_node_terms=(NodeSelectorTerm((MatchExpression("zone", "In", ("a",)),)),),
        has_affinity=True, scheduled=False, unschedulable=False,
        tolerations=(Toleration("k", "Exists"),), uid="u-1", labels={"app": "web"},
        controller_kind="DaemonSet", mirror=True, safe_to_evict="true",
        safe_to_evict_local_volumes=("v",), local_volumes=(LocalVolume("v", "emptyDir"),))


def _decoded_pod(annotations: dict[str, str], owner_kind: str) -> PodRecord:
    """A pod as the API serves it: an operator's DaemonSet-like controller (a custom kind)."""
    return pod_record(OBJECT_DECODER.decode(orjson.dumps({
        "kind": "Pod", "metadata": {
            "name": "nvidia-device-plugin-x", "namespace": "gpu-operator",
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "apps.example.com/v1", "kind": owner_kind,
                                 "name": "plugin", "uid": "u", "controller": True}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {
            "requests": {"cpu": "10m"}}}]},
        "status": {"phase": "Running"}})))


@pytest.mark.parametrize(("annotations", "owner_kind", "daemonset"), [
    ({"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}, "CustomDaemonSet", True),
    ({"cluster-autoscaler.kubernetes.io/daemonset-pod": "false"}, "CustomDaemonSet", False),
    ({"cluster-autoscaler.kubernetes.io/daemonset-pod": "True"}, "CustomDaemonSet", False),
    ({}, "CustomDaemonSet", False),
    ({}, "DaemonSet", True),
], ids=["annotation-true", "annotation-false", "annotation-not-exactly-true", "no-annotation",
        "owner-daemonset"])
def test_ca_is_daemonset_pod_annotation(annotations: dict[str, str], owner_kind: str,
                                        daemonset: bool) -> None:
    """CA utils/pod `IsDaemonSetPod`: a DaemonSet's pod, or any pod annotated
    `cluster-autoscaler.kubernetes.io/daemonset-pod: "true"` whatever its owner's kind (CA
    compares the value with "true" exactly). Such a pod never blocks scale-down."""
    record = _decoded_pod(annotations, owner_kind)
    assert record.is_daemonset_pod is daemonset
    verdict = pod_verdict(record, options=DrainOptions(skip_nodes_with_custom_controller_pods=True))
    if daemonset:
        assert verdict.outcome is Outcome.DAEMONSET
    else:
        assert verdict.outcome is Outcome.BLOCK
        assert "controlled by a CustomDaemonSet" in verdict.reason
    # Escalator's own pod filter keeps reading the owner only (its PodIsDaemonSet).
    assert record.owned_by_daemonset is (owner_kind == "DaemonSet")


def test_a_node_without_allocatable_offers_its_capacity() -> None:
    """The API server defaults status.allocatable to status.capacity (SetDefaults_NodeStatus);
    a hand-made snapshot that leaves it out gets the same, not an idle node of size 0."""
    def decoded(status: dict[str, Any]) -> NodeRecord:
        return node_record(OBJECT_DECODER.decode(orjson.dumps(
            {"kind": "Node", "metadata": {"name": "n1"}, "status": status})))

    capacity = {"cpu": "4", "memory": "8Gi", "pods": "58"}
    bare = decoded({"capacity": capacity})
    assert (bare.cpu_allocatable_milli, bare.memory_allocatable_bytes, bare.max_pods) == \
        (4000, 8 * GiB, 58)
    assert node_utilization(bare, [pod(cpu=3000)]) == pytest.approx(0.75)
    reported = decoded({"capacity": capacity, "allocatable": {"cpu": "3900m"}})
    assert (reported.cpu_allocatable_milli, reported.memory_allocatable_bytes) == (3900, 0)
