"""`elevator fake-cluster --scenario FILE` (issue 34 item 7): it starts with the scenario's ASGs and
their Nodes, and a new instance of a grown ASG joins as a Node after the boot delay, as a user
driving it by hand with boto3 and the official client sees it."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import boto3
import yaml
from kubernetes import client, config, watch

from benchmarks.deadlines import scaled
from tests.builders import group_dict

SCENARIO = {
    "duration": "10m",
    "nodegroups": {"node_groups": [group_dict()]},
    "asgs": [{"name": "batch-asg", "min": 1, "max": 5, "desired": 2,
              "node_labels": {"customer": "batch"}, "boot_delay": "1s",
              "daemonsets": [{"name": "kube-proxy", "cpu": "100m", "memory": "128Mi"}]}],
    "workload": [{"at": 0, "count": 1, "cpu": "100m", "memory": "64Mi"}],
}


def test_fake_cluster_starts_with_the_scenarios_nodes_and_joins_new_instances(
        tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    kubeconfig = tmp_path / "kubeconfig.yaml"
    server = subprocess.Popen(
        [sys.executable, "-m", "kube_elevator.flows.cli", "fake-cluster",
         "--kubeconfig-out", str(kubeconfig), "--scenario", str(scenario)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        lines = [server.stdout.readline() for _ in range(8)]  # blocks until it prints them
        assert lines[7].startswith("scenario:       1 ASGs, 2 Nodes"), lines
        exports = dict(re.findall(r"(\w+)=(\S+)", lines[3]))
        core = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
        nodes = core.list_node(label_selector="customer=batch")
        assert [node.metadata.name for node in nodes.items] == ["batch-asg-001", "batch-asg-002"]
        daemon_pods = core.list_namespaced_pod("kube-system").items
        assert sorted(pod.spec.node_name for pod in daemon_pods) == ["batch-asg-001",
                                                                     "batch-asg-002"]

        autoscaling = boto3.client("autoscaling", endpoint_url=exports["AWS_ENDPOINT_URL"],
                                   region_name=exports["AWS_DEFAULT_REGION"],
                                   aws_access_key_id=exports["AWS_ACCESS_KEY_ID"],
                                   aws_secret_access_key=exports["AWS_SECRET_ACCESS_KEY"])
        autoscaling.set_desired_capacity(AutoScalingGroupName="batch-asg", DesiredCapacity=3)
        joined = None
        for event in watch.Watch().stream(core.list_node, timeout_seconds=30,
                                          resource_version=nodes.metadata.resource_version):
            if event["type"] == "ADDED":
                joined = event["object"]
                break
        assert joined is not None, "no Node joined for the new instance within 30 s"
        assert joined.metadata.name == "batch-asg-003"
        assert joined.metadata.labels["customer"] == "batch"
        assert joined.spec.provider_id.startswith("aws:///us-east-1a/i-")

        # A pod created by hand is bound by the scheduler model (the scenario's waves are not
        # played: the cluster holds only what the user makes).
        core.create_namespaced_pod("default", {"metadata": {"name": "by-hand"}, "spec": {
            "nodeSelector": {"customer": "batch"},
            "containers": [{"name": "c", "image": "busybox"}]}})
        bound = None
        for event in watch.Watch().stream(core.list_namespaced_pod, "default",
                                          timeout_seconds=30):
            if event["object"].spec.node_name:
                bound = event["object"]
                break
        assert bound is not None and bound.spec.node_name.startswith("batch-asg-")
        assert len(core.list_pod_for_all_namespaces().items) == 4  # 3 DaemonSet pods + ours
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=scaled(30))
    assert code == 0, server.stderr.read() if server.stderr else ""


def test_fake_cluster_with_a_bad_scenario_says_where_and_starts_nothing(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({**SCENARIO, "asgs": [{**SCENARIO["asgs"][0],
                                                              "desired": 9}]}))
    done = subprocess.run(
        [sys.executable, "-m", "kube_elevator.flows.cli", "fake-cluster",
         "--kubeconfig-out", str(tmp_path / "kubeconfig.yaml"), "--scenario", str(scenario)],
        capture_output=True, text=True, timeout=scaled(120), check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert str(scenario) in done.stderr and "asgs[0]" in done.stderr
    assert "desired 9 must be within min 1 and max 5" in done.stderr


def test_fake_cluster_writes_only_the_kubeconfig_asked_and_exports_it_absolutely(
        tmp_path: Path) -> None:
    """Run as the docs say, from the user's folder with the default --kubeconfig-out: a file of
    the user's named `kubeconfig` stays as it was, nothing else appears, and the printed
    `export KUBECONFIG=` works from any folder (a relative path did not)."""
    mine = tmp_path / "kubeconfig"
    mine.write_text("my own cluster\n")
    server = subprocess.Popen(
        [sys.executable, "-m", "kube_elevator.flows.cli", "fake-cluster"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        lines = [server.stdout.readline() for _ in range(7)]  # blocks until it prints them
        exported = [line for line in lines if line.startswith("export KUBECONFIG=")]
        assert exported == [f"export KUBECONFIG={tmp_path.resolve() / 'fake-kubeconfig.yaml'}\n"]
        assert mine.read_text() == "my own cluster\n"
        assert sorted(path.name for path in tmp_path.iterdir()) == ["fake-kubeconfig.yaml",
                                                                     "kubeconfig"]
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=scaled(30))
    assert code == 0, server.stderr.read() if server.stderr else ""


def test_fake_cluster_refuses_an_admission_plugin_it_does_not_have(tmp_path: Path) -> None:
    """`--disable-admission-plugins` takes the names kube-apiserver's flag does, of the
    plugins the fake has; another is bad input: exit 2, the name and the ones there are."""
    done = subprocess.run(
        [sys.executable, "-m", "kube_elevator.flows.cli", "fake-cluster",
         "--kubeconfig-out", str(tmp_path / "kubeconfig.yaml"),
         "--disable-admission-plugins", "ServiceAccount,PodSecurity"],
        capture_output=True, text=True, timeout=scaled(120), check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert "unknown admission plugin 'PodSecurity'" in done.stderr
    assert "ServiceAccount, DefaultTolerationSeconds, Priority" in done.stderr
    assert not (tmp_path / "kubeconfig.yaml").exists()
