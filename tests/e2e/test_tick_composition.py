"""One tick composition (DESIGN.md §3): the live path and `elevator plan` decide alike.

The same cluster is fed to the live tick (the real `kubernetes` client over HTTP against the
fake API, boto3 against moto) and, as its `kubectl get nodes,pods,leases -A -o json` dump and
`aws autoscaling describe-auto-scaling-groups` output, to `elevator plan`. Finished Job pods
(Succeeded, Failed) stay in the dump as they do on a real batch cluster; the live list leaves
them out server-side, and the composition drops them for every source.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from typer.testing import CliRunner

from benchmarks.deadlines import scaled
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.autoscale import live_tick
from kube_elevator.flows.cli import app
from kube_elevator.tasks.adapters.cloud import AsgClient
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.core.step import run_plain
from kube_elevator.tasks.node_group_file import load_node_groups
from kube_elevator.tasks.steps.node_groups import Adapters
from tests.builders import api_node, api_pod, group_dict
from tests.tools import needs_kubectl

T0 = 1_800_000_000.0
MiB = 2**20
ASG = "composition-asg"


def _pod(name: str, cpu: str, node: str | None, phase: str,
         owner_kind: str = "ReplicaSet") -> dict[str, Any]:
    return api_pod(name, "jobs", cpu=cpu, memory="100Mi", node=node or "", phase=phase,
                   owner_kind=owner_kind, node_selector={"customer": "batch"})


@pytest.fixture
def batch_cluster(fake_aws: FakeAws, fake_kube: FakeKubeApi, tmp_path: Path) -> Path:
    """10 nodes of 1 CPU; 11 CPUs of live requests (110%), and two finished 64-CPU Job pods."""
    fake_aws.create_asg(ASG, 1, 40, 10)
    nodes = []
    for index, instance in enumerate(fake_aws.instances(ASG)):
        node = node_for_instance(instance, {"customer": "batch"}, 1000, 4000 * MiB,
                                 T0 - 3600 + index * 60)
        fake_kube.create("nodes", node)
        nodes.append(node["metadata"]["name"])
    for index, node in enumerate(nodes):  # 10 running pods of 1 CPU: every node full
        fake_kube.create("pods", _pod(f"web-{index}", "1", node, "Running"), namespace="jobs")
    fake_kube.create("pods", _pod("waiting", "1", None, "Pending"), namespace="jobs")
    fake_kube.create("pods", _pod("done", "64", nodes[0], "Succeeded", "Job"), namespace="jobs")
    fake_kube.create("pods", _pod("crashed", "64", nodes[1], "Failed", "Job"), namespace="jobs")
    config = tmp_path / "nodegroups.yaml"
    config.write_text(yaml.safe_dump({"node_groups": [group_dict(
        cloud_provider_group_name=ASG, max_nodes=40)]}))
    return config


def _kubectl_dump(kube: FakeKubeApi, tmp_path: Path) -> bytes:
    """`kubectl get nodes,pods,leases -A -o json`: kubectl itself when installed, else the same
    List built from the API's answers (a machine with only Python and make)."""
    kubeconfig = kube.write_kubeconfig(tmp_path / "dump-kubeconfig")
    if shutil.which("kubectl"):
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"),
             "get", "nodes,pods,leases", "-A", "-o", "json"],
            capture_output=True, timeout=scaled(60), check=True)
        return done.stdout
    return _client_dump(kubeconfig)


def _client_dump(kubeconfig: Path) -> bytes:
    """The List kubectl prints, from the official client's raw answers: kubectl adds each item's
    kind and apiVersion. Sent as kubernetes 37's generated methods send a request
    (`param_serialize`, then `call_api`: tasks/adapters/kube_calls.py)."""
    api = KubeClient.from_config(kubeconfig).core.api_client
    items = []
    for path, kind, api_version in (("/api/v1/nodes", "Node", "v1"),
                                    ("/api/v1/pods", "Pod", "v1"),
                                    ("/apis/coordination.k8s.io/v1/leases", "Lease",
                                     "coordination.k8s.io/v1")):
        request = api.param_serialize(method="GET", resource_path=path,
                                      header_params={"Accept": "application/json"},
                                      auth_settings=["BearerToken"])
        answer = api.call_api(*request)
        answer.read()
        assert answer.status == 200, (path, answer.data)
        items += [{"kind": kind, "apiVersion": api_version, **item}
                  for item in orjson.loads(answer.data)["items"]]
    return orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items})


@needs_kubectl
def test_the_dump_without_kubectl_lists_what_kubectl_lists(fake_kube: FakeKubeApi,
                                                           tmp_path: Path) -> None:
    """The fallback of a machine without kubectl (README, "Two commands") dumps the objects
    kubectl dumps, so the test above proves the same thing there."""
    for index in range(4):
        fake_kube.create("nodes", api_node(f"n{index}", labels={"customer": "batch"}))
        fake_kube.create("pods", _pod(f"web-{index}", "1", f"n{index}", "Running"),
                         namespace="jobs")
    fake_kube.create("pods", _pod("waiting", "1", None, "Pending"), namespace="jobs")
    fake_kube.create("pods", _pod("done", "64", "n0", "Succeeded", "Job"), namespace="jobs")
    fake_kube.create("leases", {"metadata": {"name": "elevator-batch"},
                                "spec": {"holderIdentity": "elevator"}},
                     namespace="kube-system")
    dumped = json.loads(_kubectl_dump(fake_kube, tmp_path))
    built = json.loads(_client_dump(fake_kube.write_kubeconfig(tmp_path / "client-kubeconfig")))

    def by_name(dump: dict[str, Any]) -> dict[tuple[str, str, str], Any]:
        """Each item by kind, namespace and name; managedFields aside (kubectl hides them)."""
        return {(item["kind"], item["metadata"].get("namespace", ""), item["metadata"]["name"]):
                {**item, "metadata": {key: value for key, value in item["metadata"].items()
                                      if key != "managedFields"}}
                for item in dump["items"]}

    made = {*(("Node", "", f"n{index}") for index in range(4)),
            *(("Pod", "jobs", name) for name in ("web-0", "web-3", "waiting", "done")),
            ("Lease", "kube-system", "elevator-batch")}
    assert made <= set(by_name(dumped))
    assert by_name(built) == by_name(dumped)
    assert {key: value for key, value in built.items() if key != "items"} == {
        key: value for key, value in dumped.items() if key not in ("items", "metadata")}


def test_plan_on_the_dump_decides_as_the_live_tick(batch_cluster: Path, fake_aws: FakeAws,
                                                   fake_kube: FakeKubeApi, kubeconfig: Path,
                                                   tmp_path: Path) -> None:
    config = load_node_groups(batch_cluster)
    adapters = Adapters(KubeClient.from_config(kubeconfig),
                        AsgClient(fake_aws.client("autoscaling"), fake_aws.client("ec2")))
    [live] = live_tick(run_plain, adapters, config.node_groups, T0, dry_run=True)

    dump = tmp_path / "cluster.json"
    dump.write_bytes(_kubectl_dump(fake_kube, tmp_path))
    phases = {item["metadata"]["name"]: item["status"]["phase"]
              for item in json.loads(dump.read_bytes())["items"] if item["kind"] == "Pod"}
    assert phases["done"] == "Succeeded" and phases["crashed"] == "Failed"  # in the dump
    described = fake_aws.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[ASG])
    asgs = tmp_path / "asgs.json"
    asgs.write_text(json.dumps(described, default=str))
    result = CliRunner().invoke(app, [
        "plan", "--nodegroups", str(batch_cluster), "--cluster", str(dump), "--asg", str(asgs),
        "--now", str(T0), "--format", "json"])
    assert result.exit_code == 0, result.output
    [planned] = json.loads(result.stdout)["node_groups"]

    # 11 active pods of 1 CPU on 10 nodes of 1 CPU: 110%, not (11 + 128) / 10 = 1390%.
    assert live.plan.cpu_percent == pytest.approx(110.0)
    assert live.plan.pods == 11
    # Escalator §5: delta = ceil(10 * 110 / 70) - 10 = 6.
    assert live.plan.delta == 6
    assert planned == live.plan.to_json()


def test_plan_drops_terminal_pods_whatever_the_source(tmp_path: Path) -> None:
    """Escalator §4: Succeeded and Failed pods never count, in files as in the live list."""
    nodes = [{"kind": "Node", "apiVersion": "v1", "metadata": {
        "name": f"n{index}", "labels": {"customer": "batch"},
        "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"allocatable": {"cpu": "1", "memory": "4000Mi"},
                   "conditions": [{"type": "Ready", "status": "True"}]}} for index in range(2)]
    pods = [{"kind": "Pod", "apiVersion": "v1", **_pod(name, cpu, "n0", phase)}
            for name, cpu, phase in (("a", "500m", "Running"), ("b", "64", "Succeeded"),
                                     ("c", "64", "Failed"), ("d", "500m", "Pending"))]
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(json.dumps({"kind": "List", "items": [*nodes, *pods]}))
    config = tmp_path / "nodegroups.yaml"
    config.write_text(yaml.safe_dump({"node_groups": [group_dict()]}))
    result = CliRunner().invoke(app, ["plan", "--nodegroups", str(config), "--cluster",
                                      str(snapshot), "--now", str(T0), "--format", "json"])
    assert result.exit_code == 0, result.output
    [plan] = json.loads(result.stdout)["node_groups"]
    assert plan["pods"] == 2  # a and d
    assert plan["cpu_percent"] == pytest.approx(50.0)  # 1000m of 2000m
