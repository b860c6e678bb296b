"""`elevator scenario from-kubectl`: a scenario's workload shapes from a cluster snapshot
(`kubectl get pods,nodes,pv,pvc -A -o json`), issue 37 item 3.

The snapshot is built here in the shapes the API server serves (a Deployment's pods owned by
their ReplicaSet with the pod-template-hash label, a StatefulSet's pods with their claims bound
to zonal volumes, DaemonSet pods, a finished Job, a control-plane node of no group), and the
scenario it gives is loaded and simulated as `elevator simulate` would.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kube_elevator.fakes.scenario import load_scenario
from kube_elevator.fakes.scenario_constraints import zonal_volume_objects
from kube_elevator.fakes.scenario_import_kubectl import deployment_of_replicaset
from kube_elevator.flows.cli import app
from kube_elevator.flows.simulation import simulate
from tests.builders import api_node, api_pod, group_dict

ANTI_AFFINITY = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
    "labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
SPREAD = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
          "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}


def _node(name: str, zone: str, pool: str = "web") -> dict[str, Any]:
    node = api_node(name, cpu="1930m", memory="7Gi", labels={
        "pool": pool, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": zone})
    node["apiVersion"] = "v1"
    return node


def _owned(pod: dict[str, Any], kind: str, owner: str) -> dict[str, Any]:
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind,
                                          "name": owner, "uid": f"uid-{owner}",
                                          "controller": True}]
    return pod


def _web(index: int, node: str) -> dict[str, Any]:
    pod = _owned(api_pod(f"web-7c9d6b5f48-{index:05d}", "shop", cpu="250m", memory="256Mi",
                         node=node, labels={"app": "web", "tier": "front",
                                            "pod-template-hash": "7c9d6b5f48"}),
                 "ReplicaSet", "web-7c9d6b5f48")
    pod["spec"]["affinity"] = copy.deepcopy(ANTI_AFFINITY)
    pod["spec"]["topologySpreadConstraints"] = [dict(SPREAD)]
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 8443, "hostPort": 8443,
                                              "protocol": "TCP"}, {"containerPort": 9090}]
    # an init container asking more than the app: kube-scheduler counts the larger
    pod["spec"]["initContainers"] = [{"name": "migrate", "image": "i", "resources": {
        "requests": {"cpu": "500m", "memory": "64Mi"}}}]
    pod["spec"]["priority"] = 1000
    return pod


def _db(index: int, node: str, zone: str) -> list[dict[str, Any]]:
    pod = _owned(api_pod(f"db-{index}", "shop", cpu="1", memory="2Gi", node=node, labels={
        "app": "db", "statefulset.kubernetes.io/pod-name": f"db-{index}"}),
        "StatefulSet", "db")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {
        "claimName": f"data-db-{index}"}}]
    pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "db",
                                   "effect": "NoSchedule"}]
    return [pod, *zonal_volume_objects(f"data-db-{index}", "shop", zone)]


def snapshot_items() -> list[dict[str, Any]]:
    """Nodes in two zones (and a control-plane node of no group), and their pods."""
    items: list[dict[str, Any]] = [
        _node("ip-10-0-1-1", "us-east-1a"), _node("ip-10-0-1-2", "us-east-1a"),
        _node("ip-10-0-2-1", "us-east-1b"), _node("control", "us-east-1a", pool="system")]
    items += [_web(0, "ip-10-0-1-1"), _web(1, "ip-10-0-2-1"), _web(2, "ip-10-0-1-2"),
              _web(3, "")]  # one pending: no node is left without a replica
    items += _db(0, "ip-10-0-1-2", "us-east-1a") + _db(1, "ip-10-0-2-1", "us-east-1b")
    for node in ("ip-10-0-1-1", "ip-10-0-1-2", "ip-10-0-2-1", "control"):
        items.append(_owned(api_pod(f"kube-proxy-{node}", "kube-system", cpu="100m",
                                    memory="128Mi", node=node), "DaemonSet", "kube-proxy"))
    items.append(_owned(api_pod("report-x1", "shop", cpu="2", memory="1Gi", node="ip-10-0-1-1",
                                phase="Succeeded"), "Job", "report"))
    items.append(_owned(api_pod("etcd-control", "kube-system", cpu="100m", node="control"),
                        "Node", "control"))
    return items


NODEGROUPS = {"node_groups": [group_dict(name="web", label_key="pool", label_value="web",
                                         cloud_provider_group_name="web-asg", min_nodes=1,
                                         max_nodes=8)]}


def _write(tmp_path: Path, items: list[dict[str, Any]], name: str = "cluster.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def _run(tmp_path: Path, *snapshots: Path) -> Any:
    nodegroups = tmp_path / "nodegroups.yaml"
    nodegroups.write_text(yaml.safe_dump(NODEGROUPS))
    arguments = ["scenario", "from-kubectl", "--nodegroups", str(nodegroups),
                 "--output", str(tmp_path / "out"), "--duration", "10m"]
    for snapshot in snapshots:
        arguments += ["--snapshot", str(snapshot)]
    return CliRunner().invoke(app, arguments)


def test_owners_become_waves_with_what_their_pods_say_about_placement(tmp_path: Path) -> None:
    result = _run(tmp_path, _write(tmp_path, snapshot_items()))
    assert result.exit_code == 0, result.output
    loaded = load_scenario(tmp_path / "out" / "scenario.yaml")
    (asg,) = loaded.scenario.asgs
    assert (asg.desired, asg.instance_type, asg.availability_zone) == (3, "m5.large",
                                                                       "us-east-1a")
    assert asg.node_labels == {"pool": "web", "kubernetes.io/os": "linux"}
    assert [(d.name, d.cpu, d.memory) for d in asg.daemonsets] == [
        ("kube-proxy", "100m", "128Mi")]
    waves = {wave.name: wave for wave in loaded.scenario.workload}
    assert sorted(waves) == ["db-us-east-1a", "db-us-east-1b", "web"]
    web = waves["web"]
    # Quantities as Kubernetes writes them (issue 42 item 7), not byte strings.
    assert (web.count, web.cpu, web.memory, web.priority) == (4, "500m", "256Mi", 1000)
    written = yaml.safe_load((tmp_path / "out" / "scenario.yaml").read_text())
    assert {(w["cpu"], w["memory"]) for w in written["workload"]} == {("500m", "256Mi"),
                                                                      ("1", "2Gi")}
    # The node-group file relative to the scenario's folder, so the two move together.
    assert written["nodegroups"] == "../nodegroups.yaml"
    assert web.labels == {"tier": "front", "pod-template-hash": "7c9d6b5f48"}
    assert web.affinity is not None and web.affinity.as_api_object() == ANTI_AFFINITY
    assert [c.as_api_object() for c in web.topology_spread_constraints] == [SPREAD]
    assert [p.as_api_object() for p in web.ports] == [{"containerPort": 8443,
                                                       "hostPort": 8443}]
    db_a, db_b = waves["db-us-east-1a"], waves["db-us-east-1b"]
    assert (db_a.count, db_a.volume_zone) == (1, "us-east-1a")
    assert [t.model_dump() for t in db_a.tolerations] == [
        {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]
    # the pod-name label is each pod's own; app=db, which selectors may name, is kept
    assert db_a.labels == {"app": "db"}
    # the finished Job, the control-plane node's pods: left out, and said so
    assert "1 pod(s) in phase Succeeded or Failed left out" in result.output
    assert "2 pod(s) on nodes of no node group left out" in result.output
    # us-east-1b is a zone no ASG launches in: the volume's zone is dropped, and said so
    assert "StatefulSet shop/db: its volumes are in us-east-1b" in result.output
    assert db_b.volume_zone is None
    summary = simulate(loaded, mode="memory").summary
    assert summary["pods_total"] == 6


def test_a_file_per_kind_reads_as_one_list(tmp_path: Path) -> None:
    """`kubectl get nodes -o json` and `kubectl get pods -A -o json` in files of their own
    (typed lists whose items leave out their kind) give what one List gives."""
    items = snapshot_items()
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_kind.setdefault(item["kind"], []).append({k: v for k, v in item.items()
                                                     if k != "kind"})
    paths = []
    for kind, members in by_kind.items():
        path = tmp_path / f"{kind}.json"
        path.write_text(json.dumps({"kind": f"{kind}List", "items": members}))
        paths.append(path)
    result = _run(tmp_path, *paths)
    assert result.exit_code == 0, result.output
    split = (tmp_path / "out" / "scenario.yaml").read_text()
    result = _run(tmp_path, _write(tmp_path, items))
    assert (tmp_path / "out" / "scenario.yaml").read_text() == split


@pytest.mark.parametrize(("change", "where"), [
    (lambda items: items[4]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"][0].pop("topologyKey"),
     "items[4]: Pod shop/web-7c9d6b5f48-00000 spec.affinity.podAntiAffinity."
     "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Field required"),
    (lambda items: items[5]["spec"]["topologySpreadConstraints"][0].update(
        whenUnsatisfiable="Never"),
     "items[5]: Pod shop/web-7c9d6b5f48-00001 spec.topologySpreadConstraints[0]."
     "whenUnsatisfiable: Input should be 'DoNotSchedule' or 'ScheduleAnyway'"),
    (lambda items: items[4]["spec"]["containers"][0]["ports"][0].update(hostPort=70000),
     "items[4]: Pod shop/web-7c9d6b5f48-00000 spec.containers[0].ports[0].hostPort: Input "
     "should be less than or equal to 65535"),
    (lambda items: items[4]["spec"]["containers"][0]["resources"]["requests"].update(
        cpu="lots"), "items[4]: Pod shop/web-7c9d6b5f48-00000"),
    (lambda items: items.append(copy.deepcopy(items[4])),
     "items[20]: Pod shop/web-7c9d6b5f48-00000 is listed twice (also at "),
    (lambda items: items[6]["spec"].update(topologySpreadConstraints={"maxSkew": 1}),
     "items[6]: Pod shop/web-7c9d6b5f48-00002 spec.topologySpreadConstraints: must be a list"),
    (lambda items: items[9]["metadata"].update(labels=5),
     "items[9]: PersistentVolume pv-shop-data-db-0 metadata.labels: Expected `object | null`, "
     "got `int`"),
    (lambda items: items[10]["spec"].update(volumeName=["pv"]),
     "items[10]: PersistentVolumeClaim shop/data-db-0 spec.volumeName: Expected `str`, got "
     "`array`"),
], ids=["topology-key", "when-unsatisfiable", "host-port", "bad-quantity", "listed-twice",
        "spreading-not-a-list", "volume-labels", "claim-volume-name"])
def test_bad_input_is_one_line_naming_file_item_path_and_rule(tmp_path: Path, change: Any,
                                                              where: str) -> None:
    items = snapshot_items()
    change(items)
    path = _write(tmp_path, items)
    result = _run(tmp_path, path)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.output.startswith(f"error: {path}: {where}"), result.output
    assert not (tmp_path / "out").exists()


def test_a_document_that_is_no_list_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(snapshot_items()[4]))
    result = _run(tmp_path, path)
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {path}: kind: expected a Kubernetes List")


@pytest.mark.parametrize(("replicaset", "deployment"), [
    ("web-7c9d6b5f48", "web"), ("api-v2-5d8f7c9b6d", "api-v2"), ("canary", "canary"),
    ("web-1", "web-1")])
def test_a_replicasets_deployment_from_its_name(replicaset: str, deployment: str) -> None:
    """kube-state-metrics names a pod's ReplicaSet, not its Deployment: the name less a
    pod-template-hash (rand.SafeEncodeString's alphabet, no vowels)."""
    assert deployment_of_replicaset(replicaset) == deployment


def test_a_real_clusters_pods_become_waves(tmp_path: Path) -> None:
    """gemyang-init (../shared/real_dumps, MIT): 47 pods of ReplicaSets and StatefulSets, 27 with
    pod anti-affinity, Istio init containers, on nodes named after their `spec.nodeName`
    (synthetic, as test_real_objects.py builds them). Every owner is a wave of its pods but
    the master's; the zookeeper StatefulSets keep `app: zookeeper`, the label their
    selectors name, though their waves are named after them."""
    from tests.contract.test_real_objects import items_of, shared_dump, synthetic_nodes, write_list

    pods_file = shared_dump("gemyang-init") / "pods.json"
    pods = items_of(pods_file)
    nodes = write_list(tmp_path / "nodes.json", synthetic_nodes(
        pods, {"chungguangy-thornton-master1": "master"}))
    nodegroups = tmp_path / "nodegroups.yaml"
    nodegroups.write_text(yaml.safe_dump({"node_groups": [group_dict(
        name="workers", label_key="synthetic-pool", label_value="workers",
        cloud_provider_group_name="workers-asg", min_nodes=1, max_nodes=10)]}))
    result = CliRunner().invoke(app, [
        "scenario", "from-kubectl", "--nodegroups", str(nodegroups), "--output",
        str(tmp_path / "out"), "--snapshot", str(pods_file), "--snapshot", str(nodes)])
    assert result.exit_code == 0, result.output
    loaded = load_scenario(tmp_path / "out" / "scenario.yaml")
    waves = {wave.name: wave for wave in loaded.scenario.workload}
    on_master = sum(1 for pod in pods
                    if pod["spec"].get("nodeName") == "chungguangy-thornton-master1")
    assert sum(wave.count for wave in waves.values()) == len(pods) - on_master == 45
    apart = [pod for pod in pods if (pod["spec"].get("affinity") or {}).get("podAntiAffinity")
             and pod["spec"].get("nodeName") != "chungguangy-thornton-master1"]
    assert sum(wave.count for wave in waves.values()
               if wave.affinity is not None and wave.affinity.pod_anti_affinity) == len(apart)
    assert waves["zoo"].labels["app"] == waves["pzoo"].labels["app"] == "zookeeper"
    assert (waves["zoo"].count, waves["pzoo"].count) == (2, 3)


def test_identical_bare_pods_are_one_wave(tmp_path: Path) -> None:
    """Ten identical bare pods (no owner) are one wave of ten, not ten waves (issue 42 item 7);
    a bare pod that asks for more, or tolerates a taint, or is in another namespace, is not
    identical and keeps a wave of its own. Their owners all map to their wave."""
    items = [_node("ip-10-0-1-1", "us-east-1a"), _node("ip-10-0-1-2", "us-east-1a")]
    items += [api_pod(f"worker-{index}", "batch", cpu="250m", memory="256Mi", owner_kind=None,
                      node="ip-10-0-1-1" if index < 4 else "", labels={"app": "worker"})
              for index in range(10)]
    bigger = api_pod("worker-big", "batch", cpu="500m", memory="256Mi", owner_kind=None,
                     labels={"app": "worker"})
    tolerant = api_pod("worker-tolerant", "batch", cpu="250m", memory="256Mi", owner_kind=None,
                       labels={"app": "worker"})
    tolerant["spec"]["tolerations"] = [{"key": "spot", "operator": "Exists"}]
    elsewhere = api_pod("worker-0", "other", cpu="250m", memory="256Mi", owner_kind=None,
                        labels={"app": "worker"})
    items += [bigger, tolerant, elsewhere]
    result = _run(tmp_path, _write(tmp_path, items))
    assert result.exit_code == 0, result.output
    waves = load_scenario(tmp_path / "out" / "scenario.yaml").scenario.workload
    assert sorted((wave.count, wave.cpu, len(wave.tolerations)) for wave in waves) == [
        (1, "250m", 0), (1, "250m", 1), (1, "500m", 0), (10, "250m", 0)]
    assert len({wave.name for wave in waves}) == 4
