"""`elevator plan` on objects from real clusters this project did not build.

The corpus is public `kubectl get -o json` dumps kept byte for byte in `../shared/real_dumps`
(beside the clone, as CI lays it out, or `$ELEVATOR_REAL_DUMPS`; each dump's SOURCE.txt names
its repository, commit and licence): nothing taken from another repository is committed to this
one (issue 42 item 10), and a test whose dump is absent skips, saying where it looked.

Every expected value below is worked out by hand from the dump, with the arithmetic in a comment:
which pods a group selects (Escalator §5.1: DaemonSet pods never; the `default` group takes pods
with no nodeSelector and no affinity that are not static; other groups take pods whose
nodeSelector, or a required node-affinity `In` expression, names the group's label), each pod's
request as kube-scheduler's PodRequests counts it (Escalator §5.3: max(sum of containers, largest
init container) + overhead; restartable init containers, "native sidecars", add to the sum), the
allocatable of untainted nodes, the percentages, and the decision (§5.6, §5.8, §7.1). The Cluster
Autoscaler's removal rules (CA §1.3, §1.4; `cluster_autoscaler.enabled`) are checked on the dumps'
DaemonSet, mirror, static, kube-system, custom-controller and local-storage pods.

Dumps with pods only get SYNTHETIC Nodes named after the pods' `spec.nodeName`, built here
(`synthetic_nodes`) as ../shared/real_dumps/README.md describes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.deadlines import scaled
from kube_elevator.fakes.snapshots import node_json
from tests.builders import group_dict

MiB = 2**20
KiB = 2**10
REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("ELEVATOR_REAL_DUMPS", REPO.parent / "shared" / "real_dumps"))
NOW = "2026-01-01T00:00:00Z"
# The README's synthetic node: allocatable cpu "3920m", memory "15359396Ki".
SYNTHETIC_CPU_MILLI = 3920
SYNTHETIC_MEMORY_BYTES = 15359396 * KiB


# --- helpers ----------------------------------------------------------------------------------


def shared_dump(name: str) -> Path:
    """A dump kept beside the repository, never in it: skip when absent."""
    folder = SHARED / name
    if not folder.is_dir():
        pytest.skip(f"real dump {name!r} absent: {folder} is not there (the real dumps live "
                    "beside the clone in ../shared/real_dumps, or $ELEVATOR_REAL_DUMPS)")
    return folder


def dump_files(name: str) -> list[Path]:
    """A dump's nodes.json and pods.json (skip when the dump is absent)."""
    folder = shared_dump(name)
    return [folder / "nodes.json", folder / "pods.json"]


def elevator(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kube_elevator.flows.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=scaled(120), check=False, cwd=REPO)


def write_config(path: Path, groups: Sequence[Mapping[str, Any]],
                 cluster_autoscaler: bool = False) -> Path:
    document: dict[str, Any] = {"node_groups": [group_dict(**group) for group in groups]}
    if cluster_autoscaler:
        document["cluster_autoscaler"] = {"enabled": True}
    path.write_text(yaml.safe_dump(document))
    return path


def plan(tmp_path: Path, groups: Sequence[Mapping[str, Any]], clusters: Iterable[Path],
         cluster_autoscaler: bool = False) -> dict[str, dict[str, Any]]:
    """`elevator plan --format json` as a user runs it; the plans by group name."""
    config = write_config(tmp_path / "nodegroups.yaml", groups, cluster_autoscaler)
    arguments: list[str | Path] = ["plan", "--nodegroups", config, "--now", NOW,
                                   "--format", "json"]
    for cluster in clusters:
        arguments += ["--cluster", cluster]
    result = elevator(*arguments)
    assert result.returncode == 0, result.stderr
    return {group["name"]: group for group in json.loads(result.stdout)["node_groups"]}


def write_list(path: Path, items: Sequence[Mapping[str, Any]], kind: str = "List") -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": kind, "items": list(items)}))
    return path


def items_of(path: Path) -> list[dict[str, Any]]:
    document = json.loads(path.read_bytes())
    return document if isinstance(document, list) else document["items"]


def synthetic_nodes(pods: Sequence[Mapping[str, Any]], pools: Mapping[str, str]
                    ) -> list[dict[str, Any]]:
    """One Node per `spec.nodeName`, in name order and created a minute apart (so the first
    name is the oldest), labelled synthetic-pool=<pool> (default "workers") plus the
    nodeSelector pairs of the pods bound there, with the README's allocatable."""
    labels: dict[str, dict[str, str]] = {}
    for pod in pods:
        name = pod["spec"].get("nodeName")
        if name:
            labels.setdefault(name, {}).update(pod["spec"].get("nodeSelector") or {})
    base = 1_700_000_000.0
    return [node_json(name, {**selectors, "synthetic-pool": pools.get(name, "workers")},
                      base + index * 60, SYNTHETIC_CPU_MILLI, SYNTHETIC_MEMORY_BYTES,
                      f"aws:///us-east-1a/i-{name}")
            for index, (name, selectors) in enumerate(sorted(labels.items()))]


def extract_lists(markdown: str, kinds: Sequence[str]) -> list[dict[str, Any]]:
    """The `...List` documents of a `kubectl cluster-info dump` pasted into Markdown (as the
    dump's SOURCE.txt says: json.JSONDecoder.raw_decode from every "{"), keeping `kinds`."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    index = 0
    while (start := markdown.find("{", index)) >= 0:
        try:
            document, end = decoder.raw_decode(markdown, start)
        except ValueError:
            index = start + 1
            continue
        if isinstance(document, dict) and str(document.get("kind", "")).endswith("List"):
            if document["kind"] in kinds:
                found.append(document)
            index = end
        else:
            index = start + 1
    return found


def group(name: str, label_key: str, label_value: str, **overrides: Any) -> dict[str, Any]:
    return {"name": name, "label_key": label_key, "label_value": label_value,
            "cloud_provider_group_name": f"{name}-asg", **overrides}


# --- honeycomb-eks (Apache-2.0, committed) ------------------------------------------------------

HONEYCOMB_GROUPS = [
    group("default", "eks.amazonaws.com/nodegroup", "custom-1"),
    group("metallb", "beta.kubernetes.io/os", "linux", min_nodes=0),
]


def test_escalator_foreign_taints_leave_nodes_untainted_and_selector_no_node_has_scales_from_zero(
        tmp_path: Path) -> None:
    """Escalator §5.1, §5.2, §5.4, §5.6 (atlassian/escalator pkg/controller, pkg/k8s):
    only the atlassian.com/escalator taints classify a node, and a group with pods but no
    nodes scales up from zero by one node when no node capacity was ever cached."""
    plans = plan(tmp_path, HONEYCOMB_GROUPS,
                 dump_files("honeycomb-eks"))
    default = plans["default"]
    # 11 pods: 5 DaemonSet (speaker, seashell, honeycomb-agent, kube-proxy, calico-node) never
    # count; metallb's controller has a nodeSelector, so it is not `default`'s; the other 5
    # (nginx default backend, grafana, kuard, phpmyadmin, nginx controller) request nothing,
    # grafana's init container included.
    assert default["pods"] == 5
    assert (default["cpu_request_milli"], default["mem_request_bytes"]) == (0, 0)
    # Both nodes carry type=hound:NoSchedule, which is not Escalator's: both untainted.
    # 2 x 7910m = 15820m; 2 x 31127824Ki = 62255648Ki = 63749783552 bytes.
    assert default["nodes"] == {"total": 2, "untainted": 2, "tainted": 0, "force_tainted": 0,
                                "cordoned": 0}
    assert default["cpu_capacity_milli"] == 15820
    assert default["mem_capacity_bytes"] == 62255648 * KiB == 63749783552
    # 0% < taint_lower 10% => -fast (2); 2 - 2 < min_nodes 1 => taint 1, the oldest; both
    # nodes were created at 01:46:51, so listing order decides: duckboat-01.
    assert (default["cpu_percent"], default["mem_percent"], default["delta"]) == (0.0, 0.0, -2)
    assert default["actions"]["taint"] == ["duckboat-01"]

    metallb = plans["metallb"]
    # controller-5c9894b5cd-r66xh: nodeSelector beta.kubernetes.io/os=linux, 100m / 100Mi; no
    # node has that label: 0 nodes, so capacity 0 with 0 untainted => scale from zero; no node
    # capacity cached => delta 1 (§5.6); the ASG (from the config: 0..10, desired 0) gets +1.
    assert metallb["pods"] == 1
    assert (metallb["cpu_request_milli"], metallb["mem_request_bytes"]) == (100, 100 * MiB)
    assert metallb["nodes"]["total"] == 0
    assert metallb["cpu_percent"] is None and metallb["mem_percent"] is None
    assert metallb["delta"] == 1
    assert metallb["actions"]["cloud_increase"] == 1 and metallb["actions"]["asg_desired"] == 1


def test_ca_counts_the_pods_an_eks_node_admits_not_the_kubelet_default() -> None:
    """An EKS node admits as many pods as its network interfaces give addresses
    (status.allocatable.pods: 58 on these m6gd.2xlarge), not the kubelet's default 110; the
    scheduler says "Too many pods" beyond it. CA's free room, its templates from a live node and
    its removal simulation read the node's own number."""
    from kube_elevator.tasks.cluster_autoscaler.estimator import filter_out_schedulable, free_slots
    from kube_elevator.tasks.cluster_autoscaler.templates import template_from_node
    from kube_elevator.tasks.core.decode import load_cluster_files
    from tests.builders import make_pod, pending_pod

    snapshot = load_cluster_files(dump_files("honeycomb-eks"))
    busy = next(node for node in snapshot.nodes if node.name == "duckboat-01")
    assert busy.max_pods == 58
    assert template_from_node("default", "asg", busy).max_pods == 58
    [slot] = free_slots([busy], snapshot.pods)
    assert slot.pods == 58 - 11  # its 11 pods, DaemonSets included
    filler = [make_pod(f"filler-{index}", cpu=1, memory=1, node="duckboat-01")
              for index in range(47)]
    [full] = free_slots([busy], [*snapshot.pods, *filler])
    assert full.pods == 0 and full.cpu_milli > 7000  # room for CPU and memory, none for a pod
    remaining, fitted = filter_out_schedulable([pending_pod("tiny", cpu=10, memory=1)], [full])
    assert [pod.name for pod in remaining] == ["tiny"] and not fitted


def test_ca_local_storage_blocks_node_and_next_oldest_empty_node_is_taken(tmp_path: Path) -> None:
    """CA drainability rule `localstorage` (kubernetes/autoscaler
    cluster-autoscaler/simulator/drainability/rules/localstorage): an emptyDir not in memory
    blocks the node (--skip-nodes-with-local-storage, default true); Escalator's pick is then
    replaced by the next node in its order."""
    plans = plan(tmp_path, HONEYCOMB_GROUPS[:1],
                 dump_files("honeycomb-eks"), cluster_autoscaler=True)
    default = plans["default"]
    # Escalator picks duckboat-01 (see above). Its pods in listing order: speaker, seashell
    # (DaemonSet), nginx default backend, metallb controller (ReplicaSets outside kube-system:
    # evictable), honeycomb-agent (DaemonSet), then grafana, whose emptyDir volumes
    # sc-dashboard-volume and sc-datasources-volume block. duckboat-02 runs no pod: taken.
    assert default["actions"]["taint"] == ["duckboat-02"]
    assert default["notes"] == [
        "scale-down skipped duckboat-01: pod olly/grafana-7db5dff8ff-vwrnf has local storage "
        '(emptyDir volume "sc-dashboard-volume", emptyDir volume "sc-datasources-volume")']


# --- minikube-graph (Apache-2.0, committed) -----------------------------------------------------



def test_escalator_default_group_skips_mirror_daemonset_and_affinity_pods(tmp_path: Path) -> None:
    """Escalator §5.1 (atlassian/escalator pkg/k8s/util.go and the default-group filter): the
    `default` group drops DaemonSet pods, static pods (kubernetes.io/config.source "file") and
    pods with a nodeSelector or any affinity; a labelled group takes nodeSelector matches."""
    plans = plan(tmp_path, [group("default", "minikube.k8s.io/primary", "true"),
                            group("linux", "kubernetes.io/os", "linux")],
                 dump_files("minikube-graph"))
    default = plans["default"]
    # 30 pods - 3 DaemonSet (my-daemonset, kube-proxy, kube-ebpf) - 4 static (etcd, apiserver,
    # controller-manager, scheduler) - 3 apisix-etcd (podAntiAffinity) - coredns (nodeSelector)
    # = 19, the 2 Pending apisix pods included. Requests: nebula graphd x2, metad x1,
    # storaged x4 at 1m / 20Mi = 7m / 140Mi; hostpath-provisioner 100m / 128Mi; the operator's
    # 2 pods at 1m + 100m / 100Mi + 20Mi = 202m / 240Mi; the other 10 request nothing.
    # CPU 7 + 100 + 202 = 309m; memory 140 + 128 + 240 = 508Mi.
    assert default["pods"] == 19
    assert (default["cpu_request_milli"], default["mem_request_bytes"]) == (309, 508 * MiB)
    # One node: allocatable cpu "72" = 72000m, memory 197942672Ki.
    assert default["cpu_capacity_milli"] == 72000
    assert default["mem_capacity_bytes"] == 197942672 * KiB
    # 309 / 72000 = 0.429%; 508Mi / 197942672Ki = 520192 / 197942672 = 0.263%.
    assert default["cpu_percent"] == pytest.approx(309 / 72000 * 100)
    assert default["mem_percent"] == pytest.approx(520192 / 197942672 * 100)
    # < 10% => -fast (2); 1 untainted - 2 < min_nodes 1 => taint 1 - 1 = 0 nodes.
    assert default["delta"] == -2 and default["actions"]["taint"] == []

    linux = plans["linux"]
    # nodeSelector kubernetes.io/os=linux: coredns (100m / 70Mi) and kube-proxy (DaemonSet).
    assert linux["pods"] == 1
    assert (linux["cpu_request_milli"], linux["mem_request_bytes"]) == (100, 70 * MiB)


def test_ca_bare_pod_blocks_node(tmp_path: Path) -> None:
    """CA drainability rule `replicacount`/not-replicated (kubernetes/autoscaler
    cluster-autoscaler/utils/drain): a pod no controller owns would not come back: the node
    stays."""
    plans = plan(tmp_path, [group("default", "minikube.k8s.io/primary", "true", min_nodes=0)],
                 dump_files("minikube-graph"), cluster_autoscaler=True)
    default = plans["default"]
    # min_nodes 0: fast removal taints the only node. Its pods in listing order: 3 cert-manager
    # pods, apisix, apisix-dashboard, 3 apisix-etcd, apisix-ingress-controller (all replicated,
    # outside kube-system), then default/dnsutils, which has no ownerReference.
    assert default["actions"]["taint"] == []
    assert default["notes"] == [
        "scale-down skipped minikube: pod default/dnsutils has no controller: it would not be "
        "re-created elsewhere",
        "scale-down: 0 of 1 node(s) can be removed"]


def test_ca_mirror_and_daemonset_pods_do_not_block_scale_down(tmp_path: Path) -> None:
    """CA drainability rules `mirror` and `daemonset` (kubernetes/autoscaler
    cluster-autoscaler/simulator/drainability/rules): a mirror pod belongs to its kubelet and a
    DaemonSet pod to its node; neither keeps a node. The dump's own objects, filtered here to
    the 4 mirror pods (ownerReference kind Node) and 3 DaemonSet pods bound to minikube."""
    pods = [pod for pod in items_of(shared_dump("minikube-graph") / "pods.json")
            if any(owner["kind"] in ("Node", "DaemonSet")
                   for owner in pod["metadata"].get("ownerReferences", []))]
    assert len(pods) == 7
    node_owned = write_list(tmp_path / "node-owned-pods.json", pods)
    plans = plan(tmp_path, [group("default", "minikube.k8s.io/primary", "true", min_nodes=0)],
                 [shared_dump("minikube-graph") / "nodes.json", node_owned], cluster_autoscaler=True)
    # No pod of `default`: 0% => taint the node; nothing on it blocks.
    assert plans["default"]["pods"] == 0
    assert plans["default"]["actions"]["taint"] == ["minikube"]
    assert plans["default"]["notes"] == []


# --- gemyang-init (MIT, committed; synthetic nodes) ---------------------------------------------



def test_escalator_init_containers_take_the_max_not_the_sum(tmp_path: Path) -> None:
    """Escalator §5.3 / kube-scheduler PodRequests (k8s.io/component-helpers/resource): an
    init container (not restartable) counts as max(sum of containers, itself). Istio's
    istio-init asks 100m / 128Mi beside an istio-proxy container asking the same, so it never
    wins the max; podAntiAffinity pods belong to no group (not `default`)."""
    pods = items_of(shared_dump("gemyang-init") / "pods.json")
    nodes = write_list(tmp_path / "nodes.json",
                       synthetic_nodes(pods, {"chungguangy-thornton-master1": "master"}))
    plans = plan(tmp_path, [group("default", "synthetic-pool", "workers")],
                 [nodes, shared_dump("gemyang-init") / "pods.json"])
    default = plans["default"]
    # 47 pods - 27 with podAntiAffinity = 20 (adp-messages-viewer runs on master1: it still
    # counts, Escalator sums pods wherever they run). Per pod (cpu m / memory Mi):
    #   admin-workspaces-widgets 100/160 (32 + proxy 128; istio-init 100/128 loses)
    #   adp-messages-viewer 0/0; kafdrop 1/128; kafka-0..2 3 x 150/572 = 450/1716
    #   nats-0..2 0/0; nats-box 100/128; pzoo-0..2 3 x 100/100 = 300/300
    #   realtime-reporting 100/160; realtime-reporting-api-service 100/384 (256 + 128)
    #   topic-operator 200/292; virtual-uwf-auth-service 100/128
    #   workspaces-uwf-content-service 100/160; zoo-0..1 2 x 100/100 = 200/200
    # CPU 100+1+450+100+300+100+100+200+100+100+200 = 1751m;
    # memory 160+128+1716+128+300+160+384+292+128+160+200 = 3756Mi.
    assert default["pods"] == 20
    assert (default["cpu_request_milli"], default["mem_request_bytes"]) == (1751, 3756 * MiB)
    # minion1 and minion2: 2 x 3920m = 7840m, 2 x 15359396Ki.
    assert default["cpu_capacity_milli"] == 7840
    assert default["mem_capacity_bytes"] == 2 * SYNTHETIC_MEMORY_BYTES
    # 1751 / 7840 = 22.33%; 3756Mi / 30718792Ki = 12.52%: 10 <= 22.33 < 40 => -slow (1);
    # taint the oldest untainted: minion1 (built a minute before minion2).
    assert default["cpu_percent"] == pytest.approx(1751 / 7840 * 100)
    assert default["mem_percent"] == pytest.approx(3756 * 1024 / (2 * 15359396) * 100)
    assert default["delta"] == -1
    assert default["actions"]["taint"] == ["chungguangy-thornton-minion1"]


# --- oke-amsterdam (no licence: ../shared) ------------------------------------------------------

OKE_GROUPS = [group("weblogic", "usage", "weblogic"), group("jenkins", "usage", "jenkins")]


def oke_files() -> list[Path]:
    folder = shared_dump("oke-amsterdam")
    return [folder / "nodes.json", *sorted(folder.glob("*_pods.json"))]


def test_escalator_two_pools_by_node_selector_on_oke(tmp_path: Path) -> None:
    """Escalator §5.1, §5.2, §7.1, §7.5 on an Oracle OKE cluster's cluster-info dump."""
    plans = plan(tmp_path, OKE_GROUPS, oke_files())
    weblogic, jenkins = plans["weblogic"], plans["jenkins"]
    # usage=weblogic: the 3 pods of the WebLogic `Domain` (nodeSelector usage=weblogic, no
    # requests); nodes 10.0.4.3 and 10.0.4.5, 2 CPU and 15013440Ki each.
    assert weblogic["pods"] == 3
    assert (weblogic["cpu_request_milli"], weblogic["mem_request_bytes"]) == (0, 0)
    assert weblogic["cpu_capacity_milli"] == 4000
    assert weblogic["mem_capacity_bytes"] == (15013440 + 15013440) * KiB
    # 0% => -fast (2); 2 - 2 < min 1 => taint 1: the oldest, 10.0.4.5 (19:03:50, vs 19:03:57).
    assert weblogic["delta"] == -2 and weblogic["actions"]["taint"] == ["10.0.4.5"]
    # usage=jenkins: jenkins-deployment (no requests); nodes 10.0.4.2 (15013460Ki, 19:01:47)
    # and 10.0.4.4 (15013468Ki, 19:01:53).
    assert jenkins["pods"] == 1
    assert jenkins["mem_capacity_bytes"] == (15013460 + 15013468) * KiB
    assert jenkins["delta"] == -2 and jenkins["actions"]["taint"] == ["10.0.4.2"]


def test_ca_custom_controller_and_kube_system_pods_block_nodes_on_oke(tmp_path: Path) -> None:
    """CA drainability (kubernetes/autoscaler cluster-autoscaler/utils/drain, rules
    `replicated` with --skip-nodes-with-custom-controller-pods and `system` with
    --skip-nodes-with-system-pods, both default true): a pod controlled by a custom resource
    (WebLogic `Domain`) and a kube-system pod without a PodDisruptionBudget keep their nodes."""
    plans = plan(tmp_path, OKE_GROUPS, oke_files(), cluster_autoscaler=True)
    # Files in name order: ingress-nginx, jenkins-ns, kube-system, ..., wls-domain-ns. On
    # 10.0.4.5 the 4 kube-system pods are DaemonSet pods; then managed-server1 (Domain) blocks.
    # 10.0.4.3: the 2 ingress controllers are evictable, then the admin server blocks.
    domain = ("is controlled by a Domain, not a ReplicaSet, ReplicationController, "
              "StatefulSet or Job")
    assert plans["weblogic"]["actions"]["taint"] == []
    assert plans["weblogic"]["notes"] == [
        f"scale-down skipped 10.0.4.5: pod wls-domain-ns/okewls-wls-managed-server1 {domain}",
        f"scale-down skipped 10.0.4.3: pod wls-domain-ns/okewls-wls-adminserver {domain}",
        "scale-down: 0 of 1 node(s) can be removed"]
    # 10.0.4.2: coredns-...-g7g5g (kube-system, ReplicaSet, no PDB) is its first pod.
    # 10.0.4.4: jenkins-deployment is evictable, then coredns-...-5fxd2 blocks.
    system = "is a kube-system pod without a PodDisruptionBudget"
    assert plans["jenkins"]["actions"]["taint"] == []
    assert plans["jenkins"]["notes"] == [
        f"scale-down skipped 10.0.4.2: pod kube-system/coredns-5cc56c886f-g7g5g {system}",
        f"scale-down skipped 10.0.4.4: pod kube-system/coredns-5cc56c886f-5fxd2 {system}",
        "scale-down: 0 of 1 node(s) can be removed"]


# --- eks-ecommerce (no licence: ../shared; a cluster-info dump inside Markdown) -----------------


def eks_cluster(tmp_path: Path) -> Path:
    markdown = (shared_dump("eks-ecommerce") / "cluster-info.md").read_text()
    documents = extract_lists(markdown, ("NodeList", "PodList"))
    nodes = [item for document in documents if document["kind"] == "NodeList"
             for item in document["items"]]
    pods = [item for document in documents if document["kind"] == "PodList"
            for item in document["items"] or ()]
    assert (len(nodes), len(pods)) == (2, 6)
    return write_list(tmp_path / "eks.json", [{"kind": "Node", **node} for node in nodes]
                      + [{"kind": "Pod", **pod} for pod in pods])


def test_escalator_required_node_affinity_in_selects_pods_on_eks(tmp_path: Path) -> None:
    """Escalator §5.1 (atlassian/escalator pkg/k8s/util.go): a required node-affinity
    expression `key In [..., value]` on the group's label selects the pod."""
    plans = plan(tmp_path, [group("linux", "kubernetes.io/os", "linux")], [eks_cluster(tmp_path)])
    linux = plans["linux"]
    # coredns x2: affinity kubernetes.io/os In [linux], 100m / 70Mi each; aws-node and
    # kube-proxy are DaemonSet pods. Nodes: 2 t3.small, 1930m and 1471840Ki each.
    assert linux["pods"] == 2
    assert (linux["cpu_request_milli"], linux["mem_request_bytes"]) == (200, 140 * MiB)
    assert linux["cpu_capacity_milli"] == 3860
    assert linux["mem_capacity_bytes"] == 2 * 1471840 * KiB
    # 200 / 3860 = 5.18%; 143360Ki / 2943680Ki = 4.87% => < 10% => -fast (2); taint 1, the
    # oldest; both were created at 20:02:19, so listing order: ip-10-0-10-170.
    assert linux["cpu_percent"] == pytest.approx(200 / 3860 * 100)
    assert linux["mem_percent"] == pytest.approx(143360 / 2943680 * 100)
    assert linux["delta"] == -2
    assert linux["actions"]["taint"] == ["ip-10-0-10-170.ec2.internal"]


def test_ca_kube_system_pod_blocks_and_daemonset_only_node_is_taken_on_eks(
        tmp_path: Path) -> None:
    """CA drainability rules `system` and `daemonset` (kubernetes/autoscaler
    cluster-autoscaler/simulator/drainability/rules)."""
    plans = plan(tmp_path, [group("linux", "kubernetes.io/os", "linux")],
                 [eks_cluster(tmp_path)], cluster_autoscaler=True)
    # ip-10-0-10-170 runs coredns-789f8477df-knmwr (kube-system, no PDB): kept.
    # ip-10-0-20-143 runs only aws-node and kube-proxy (DaemonSet pods): taken instead.
    assert plans["linux"]["actions"]["taint"] == ["ip-10-0-20-143.ec2.internal"]
    assert plans["linux"]["notes"] == [
        "scale-down skipped ip-10-0-10-170.ec2.internal: pod kube-system/coredns-789f8477df-knmwr "
        "is a kube-system pod without a PodDisruptionBudget"]


# --- aks-arena (no licence: ../shared) ----------------------------------------------------------

AKS_GROUP = group("linux", "beta.kubernetes.io/os", "linux")


def aks_files() -> list[Path]:
    folder = shared_dump("aks-arena")
    return [folder / "nodes.json", folder / "kube-system_pods.json", folder / "default_pods.json"]


def test_escalator_slow_removal_stops_at_min_nodes_on_aks(tmp_path: Path) -> None:
    """Escalator §5.8 and §7.1 (scale_down_taint clamps to untainted - min_nodes)."""
    plans = plan(tmp_path, [AKS_GROUP], aks_files())
    linux = plans["linux"]
    # nodeSelector beta.kubernetes.io/os=linux, not DaemonSet (kube-proxy, omsagent are): 8
    # pods: coredns x2 100m/70Mi, coredns-autoscaler 20m/10Mi, dashboard-metrics-scraper
    # 100m/50Mi, kubernetes-dashboard 100m/50Mi, metrics-server 44m/55Mi, omsagent-rs
    # 150m/250Mi, tunnelfront 10m/64Mi: 624m and 619Mi.
    assert linux["pods"] == 8
    assert (linux["cpu_request_milli"], linux["mem_request_bytes"]) == (624, 619 * MiB)
    # One node, 1900m and 4668352Ki: 624 / 1900 = 32.84%, 633856Ki / 4668352Ki = 13.58%:
    # 10 <= 32.84 < 40 => -slow (1); 1 - 1 < min_nodes 1 => taint 0 nodes.
    assert linux["cpu_percent"] == pytest.approx(624 / 1900 * 100)
    assert linux["mem_percent"] == pytest.approx(619 * 1024 / 4668352 * 100)
    assert linux["delta"] == -1 and linux["actions"]["taint"] == []


def test_ca_pdb_lifts_only_the_kube_system_rule_on_aks(tmp_path: Path) -> None:
    """CA drainability rules `system` then `localstorage` (kubernetes/autoscaler
    cluster-autoscaler/utils/drain): a kube-system pod blocks unless a PodDisruptionBudget
    covers it, and the rules after it still apply. The budget is built here (the dump has
    none): policy/v1, k8s-app=kube-dns, disruptionsAllowed 2."""
    node_name = "aks-nodepool1-28869405-vmss000000"
    aks = group("linux", "beta.kubernetes.io/os", "linux", min_nodes=0)
    plans = plan(tmp_path, [aks], aks_files(), cluster_autoscaler=True)
    # min_nodes 0: -1 taints the only node; its first pod, coredns-698c77c5d7-7nnxw, blocks.
    assert plans["linux"]["actions"]["taint"] == []
    assert plans["linux"]["notes"] == [
        f"scale-down skipped {node_name}: pod kube-system/coredns-698c77c5d7-7nnxw is a "
        "kube-system pod without a PodDisruptionBudget",
        "scale-down: 0 of 1 node(s) can be removed"]

    budget = write_list(tmp_path / "pdb.json", [{
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"namespace": "kube-system", "name": "coredns"},
        "spec": {"selector": {"matchLabels": {"k8s-app": "kube-dns"}}, "maxUnavailable": 2},
        "status": {"disruptionsAllowed": 2}}])
    plans = plan(tmp_path, [aks], [*aks_files(), budget], cluster_autoscaler=True)
    # The budget lifts the kube-system rule for coredns; CA's next rule, local storage, then
    # finds coredns' emptyDir volume "tmp" (not in memory): it blocks the node still.
    assert plans["linux"]["notes"][0] == (
        f"scale-down skipped {node_name}: pod kube-system/coredns-698c77c5d7-7nnxw has local "
        'storage (emptyDir volume "tmp")')


# --- describecluster (no licence, 1.5 MB: ../shared; synthetic nodes) ---------------------------


def describecluster(tmp_path: Path) -> tuple[Path, Path]:
    pods = shared_dump("describecluster") / "pods.json"
    nodes = synthetic_nodes(items_of(pods), {"epm-master": "master"})
    assert [node["metadata"]["name"] for node in nodes] == [
        "epm-master", "epm-node1", "epm-node2", "epm-node3"]
    return write_list(tmp_path / "nodes.json", nodes), pods


# 158 pods - 9 DaemonSet - 4 static - 3 with a nodeSelector and not DaemonSet (2 with
# beta.kubernetes.io/os=linux, 1 instance=prod) - nifi-56885fd96b-4jhmz (Failed, Evicted, no
# requests) = 140 pods for `default`. Requests by namespace (cpu m / memory Mi):
#   dashboard 1: 500/1024; efk 1: 100/0; frontend 25: 0/0; kafka 10: 200/512;
#   keycloak 1: 1000/4096; kube-system 1: 0/0; kubernetes-dashboard 2: 0/0; nifi 1: 0/0;
#   object-model 34: 3400/19968; proxy 1: 0/0; redis 1: 0/0; reporting 1: 500/512;
#   spark 2: 3000/8192; tsds 4: 800/4096; udl 15: 3400/16384; zps 14: 0/0; zqa 26: 0/0
# CPU 12900m; memory 54784Mi = 57445187584 bytes.
DESCRIBECLUSTER_CPU_MILLI = 12900
DESCRIBECLUSTER_MEMORY_BYTES = 54784 * MiB


def test_escalator_scale_up_on_describecluster(tmp_path: Path) -> None:
    """Escalator §5.4 and §5.6 (calcScaleUpDelta) on a 158-pod kubeadm cluster."""
    nodes, pods = describecluster(tmp_path)
    plans = plan(tmp_path, [group("default", "synthetic-pool", "workers")], [nodes, pods])
    default = plans["default"]
    assert (default["cpu_request_milli"], default["mem_request_bytes"]) == (
        DESCRIBECLUSTER_CPU_MILLI, DESCRIBECLUSTER_MEMORY_BYTES)
    # epm-node1..3: 3 x 3920m = 11760m; 3 x 15359396Ki = 46078188Ki.
    assert default["cpu_capacity_milli"] == 11760
    assert default["mem_capacity_bytes"] == 3 * SYNTHETIC_MEMORY_BYTES
    # cpu 12900 / 11760 = 109.69%; memory 56098816Ki / 46078188Ki = 121.75%;
    # delta = max(ceil(3 x (109.69 - 70) / 70), ceil(3 x (121.75 - 70) / 70))
    #       = max(ceil(1.70), ceil(2.22)) = 3; ASG 3 -> 6 (max_nodes 10).
    assert default["cpu_percent"] == pytest.approx(12900 / 11760 * 100)
    assert default["mem_percent"] == pytest.approx(54784 * 1024 / (3 * 15359396) * 100)
    assert default["delta"] == 3
    assert default["actions"]["cloud_increase"] == 3 and default["actions"]["asg_desired"] == 6


def test_escalator_failed_pods_are_not_counted(tmp_path: Path) -> None:
    """Escalator §4 (atlassian/escalator cmd/main.go, the pod informer's field selector
    status.phase!=Succeeded,status.phase!=Failed): a Failed (Evicted) pod in a
    `kubectl get pods -A -o json` dump is not one of the group's pods."""
    nodes, pods = describecluster(tmp_path)
    plans = plan(tmp_path, [group("default", "synthetic-pool", "workers")], [nodes, pods])
    # 140, not 141: nifi-56885fd96b-4jhmz is Failed (see the count above).
    assert plans["default"]["pods"] == 140


def test_ca_kube_system_controller_blocks_master_and_static_pods_do_not(tmp_path: Path) -> None:
    """CA drainability rules `mirror`/static and `system` (kubernetes/autoscaler
    cluster-autoscaler/simulator/drainability/rules) on describecluster's control-plane node."""
    nodes, pods = describecluster(tmp_path)
    plans = plan(tmp_path, [group("master", "synthetic-pool", "master", min_nodes=0)],
                 [nodes, pods], cluster_autoscaler=True)
    master = plans["master"]
    # No pod selects synthetic-pool=master: 0% => -fast, min 0 => taint epm-master. Its pods in
    # listing order: calico-etcd (DaemonSet), then calico-kube-controllers (kube-system
    # ReplicaSet, no PDB), which blocks; the 4 static pods (no owner, config.source "file")
    # never do.
    assert master["pods"] == 0
    assert master["actions"]["taint"] == []
    scale_down = [note for note in master["notes"] if note.startswith("scale-down")]
    assert scale_down == [
        "scale-down skipped epm-master: pod kube-system/calico-kube-controllers-749c989f4d-6wxsv "
        "is a kube-system pod without a PodDisruptionBudget",
        "scale-down: 0 of 1 node(s) can be removed"]
    # The one group selects no workload pod: the plan says so rather than staying silent.
    assert [note.split(":")[0] for note in master["notes"] if note not in scale_down] == [
        "none of the 144 pods matches a node group"]

    node_owned = [pod for pod in items_of(pods) if pod["spec"].get("nodeName") == "epm-master"
                  and (not pod["metadata"].get("ownerReferences")
                       or pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet")]
    # The 4 static pods and the 3 DaemonSet pods (calico-etcd, calico-node, kube-proxy).
    assert len(node_owned) == 7
    only_node_owned = write_list(tmp_path / "node-owned.json", node_owned)
    plans = plan(tmp_path, [group("master", "synthetic-pool", "master", min_nodes=0)],
                 [nodes, only_node_owned], cluster_autoscaler=True)
    assert plans["master"]["actions"]["taint"] == ["epm-master"]
    assert plans["master"]["notes"] == []


# --- hkube-jobs (no licence: ../shared; a bare JSON array of pods; synthetic nodes) -------------


def test_escalator_bound_pending_job_pods_count_and_scale_up(tmp_path: Path) -> None:
    """Escalator §5.1, §5.3, §5.6: Pending pods count whether bound or not; one more node
    brings the group under its threshold."""
    array = shared_dump("hkube-jobs") / "pods.json"
    pods = items_of(array)
    # The file is a PodList's `.items` (no `kind` on the items): wrapped into a PodList here.
    wrapped = write_list(tmp_path / "pods.json", pods, kind="PodList")
    nodes = write_list(tmp_path / "nodes.json", synthetic_nodes(pods, {}))
    plans = plan(tmp_path, [group("default", "synthetic-pool", "workers", max_nodes=20),
                            group("core", "core", "true")], [nodes, wrapped])
    default = plans["default"]
    # 32 Job pods without selector (31 Pending but bound, 1 Running); each: worker (no
    # requests) + algorunner 1 CPU / 512Mi = 1000m / 512Mi: 32000m and 16384Mi.
    assert default["pods"] == 32
    assert (default["cpu_request_milli"], default["mem_request_bytes"]) == (32000, 16384 * MiB)
    # node1..node11: 11 x 3920m = 43120m; 11 x 15359396Ki.
    assert default["cpu_capacity_milli"] == 43120
    assert default["mem_capacity_bytes"] == 11 * SYNTHETIC_MEMORY_BYTES
    # 32000 / 43120 = 74.21% > 70 => ceil(11 x (74.21 - 70) / 70) = ceil(0.66) = 1
    # (memory 9.93% gives a negative need); ASG 11 -> 12.
    assert default["cpu_percent"] == pytest.approx(32000 / 43120 * 100)
    assert default["delta"] == 1
    assert default["actions"]["cloud_increase"] == 1 and default["actions"]["asg_desired"] == 12
    # core=true: algorithm-queue-eval-alg2 (no requests) on node7, which got the label.
    assert plans["core"]["pods"] == 1 and plans["core"]["nodes"]["total"] == 1


def test_plan_names_a_bare_json_array_as_not_a_list(tmp_path: Path) -> None:
    """Bad input is one error naming the file and the rule, exit 2 (STYLE: bad input): a bare
    array of pods is valid JSON, just not a Kubernetes List."""
    array = shared_dump("hkube-jobs") / "pods.json"
    config = write_config(tmp_path / "ng.yaml", [group("default", "synthetic-pool", "workers")])
    result = elevator("plan", "--nodegroups", config, "--cluster", array)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert str(array) in result.stderr
    assert "expected a Kubernetes List" in result.stderr.replace("\n", "")
