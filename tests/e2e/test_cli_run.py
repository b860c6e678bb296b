"""`elevator fake-cluster` and `elevator run --once` as separate processes, as a user runs them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import boto3
import yaml
from kubernetes import client, config

from benchmarks.deadlines import scaled
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.tasks.adapters.prefect_server import RECORD_NAME, alive, stop_shared_server
from tests.builders import group_dict

MiB = 2**20


def test_fake_cluster_and_run_once_scale_up_from_another_process(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig.yaml"
    home = tmp_path / "prefect-home"
    home.mkdir()
    server = subprocess.Popen(
        [sys.executable, "-m", "kube_elevator.flows.cli", "fake-cluster",
         "--kubeconfig-out", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        lines = [server.stdout.readline() for _ in range(5)]  # blocks until it prints them
        exports = dict(re.findall(r"(\w+)=(\S+)", lines[3]))
        assert exports["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")
        assert lines[0].startswith("Kubernetes API: http://127.0.0.1:")

        # The user's view: boto3 and the kubernetes client, configured as printed.
        autoscaling = boto3.client("autoscaling", endpoint_url=exports["AWS_ENDPOINT_URL"],
                                   region_name=exports["AWS_DEFAULT_REGION"],
                                   aws_access_key_id=exports["AWS_ACCESS_KEY_ID"],
                                   aws_secret_access_key=exports["AWS_SECRET_ACCESS_KEY"])
        ec2 = boto3.client("ec2", endpoint_url=exports["AWS_ENDPOINT_URL"],
                           region_name=exports["AWS_DEFAULT_REGION"],
                           aws_access_key_id=exports["AWS_ACCESS_KEY_ID"],
                           aws_secret_access_key=exports["AWS_SECRET_ACCESS_KEY"])
        ec2.create_launch_template(LaunchTemplateName="lt-batch", LaunchTemplateData={
            "ImageId": "ami-12c6146b", "InstanceType": "m5.large"})
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName="batch-asg", MinSize=1, MaxSize=10, DesiredCapacity=2,
            LaunchTemplate={"LaunchTemplateName": "lt-batch"}, AvailabilityZones=["us-east-1a"])
        instances = autoscaling.describe_auto_scaling_groups(
            AutoScalingGroupNames=["batch-asg"])["AutoScalingGroups"][0]["Instances"]
        api = config.new_client_from_config(str(kubeconfig))
        core = client.CoreV1Api(api)
        for index, instance in enumerate(instances):
            core.create_node(node_for_instance(instance, {"customer": "batch"}, 1000,
                                               4000 * MiB, 1_800_000_000 + index))
        for index in range(10):
            core.create_namespaced_pod("jobs", {
                "metadata": {"name": f"job-{index}"},
                "spec": {"nodeSelector": {"customer": "batch"}, "containers": [
                    {"name": "c", "image": "busybox",
                     "resources": {"requests": {"cpu": "500m", "memory": "100Mi"}}}]}})

        nodegroups = tmp_path / "nodegroups.yaml"
        nodegroups.write_text(yaml.safe_dump({"node_groups": [group_dict()]}))
        env = {**os.environ, **exports, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
               "PREFECT_HOME": str(home)}
        env.pop("PREFECT_API_URL", None)
        tick = subprocess.run(
            [sys.executable, "-m", "kube_elevator.flows.cli", "run", "--nodegroups", str(nodegroups),
             "--kubeconfig", str(kubeconfig), "--once", "--format", "json"],
            capture_output=True, text=True, env=env, timeout=scaled(300), check=False)
        assert tick.returncode == 0, tick.stderr[-3000:]
        (result,) = json.loads(tick.stdout.strip().splitlines()[-1])
        assert result["status"] == "acted" and result["done"]["asg_desired_set"] == 8
        desired = autoscaling.describe_auto_scaling_groups(
            AutoScalingGroupNames=["batch-asg"])["AutoScalingGroups"][0]["DesiredCapacity"]
        assert desired == 8
        # Issue 40: the first command started the local server its PREFECT_HOME shares; a
        # second command finds it (the same process) instead of starting one more.
        first = (home / RECORD_NAME).read_text()
        again = subprocess.run(
            [sys.executable, "-m", "kube_elevator.flows.cli", "run", "--nodegroups", str(nodegroups),
             "--kubeconfig", str(kubeconfig), "--once", "--dry-run", "--format", "json"],
            capture_output=True, text=True, env=env, timeout=scaled(300), check=False)
        assert again.returncode == 0, again.stderr[-3000:]
        assert (home / RECORD_NAME).read_text() == first
        assert alive(json.loads(first)["pid"])
    finally:
        stop_shared_server(home)
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=scaled(30))
    assert code == 0
    assert server.stdout is not None and "stopped" in server.stdout.read()


def test_run_rejects_bad_input_without_traceback(tmp_path: Path) -> None:
    nodegroups = tmp_path / "ng.yaml"
    nodegroups.write_text(yaml.safe_dump({"node_groups": [group_dict(name="")]}))
    result = subprocess.run(
        [sys.executable, "-m", "kube_elevator.flows.cli", "run", "--nodegroups", str(nodegroups), "--once"],
        capture_output=True, text=True, timeout=scaled(60), check=False)
    assert result.returncode == 2
    assert "node_groups[0]: name cannot be empty" in result.stderr
    assert "Traceback" not in result.stderr
