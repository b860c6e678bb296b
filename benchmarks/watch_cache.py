"""Ticks from a watch cache at cluster scale: cold start, memory, and the steady tick.

The fake API server (N pods, N/30 nodes, 10 groups) and moto (10 ASGs) run in processes of
their own, as a real API server and AWS would; the measured process is the watching one: it
lists and watches into `ClusterCache`, then runs the `autoscale` flow against a PostgreSQL-backed
Prefect server (every task run recorded) with the cache installed, as `elevator watch` does.

- cold start: from `start()` to every kind listed, against the floor of reading the same pod
  pages' bytes;
- RSS of the watching process once synced;
- the steady tick: a dry-run `autoscale` flow run (median of 10 after 2 warm-ups), and the same
  tick without Prefect (`run_plain`) to show what the flow run adds.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3
import yaml

from benchmarks.collection import SERVER as KUBE_SERVER
from benchmarks.plan_scale import groups, node_groups_yaml
from benchmarks.prefect_overhead import postgres, prefect_server

ROOT = Path(__file__).resolve().parent.parent
RUNS = 10

WORKER = r"""
import json, statistics, sys, time
from pathlib import Path
kubeconfig, nodegroups, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])

def rss_mb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

from benchmarks.collection import read_bytes_only
from kube_elevator.tasks.adapters.kube import KubeClient
kube = KubeClient.from_config(kubeconfig)
floor = float("inf")
for _ in range(3):
    start = time.perf_counter(); read_bytes_only(kube); floor = min(floor, time.perf_counter() - start)
from kube_elevator.tasks.adapters.kube_cache import ClusterCache, install_process_cache
from kube_elevator.tasks.core.collector import collect_less_often
collect_less_often()  # as run_cached_ticks does for elevator watch and serve
before = rss_mb()
start = time.perf_counter()
cache = ClusterCache(kube.api).start()
assert cache.wait_synced(600)
cold = time.perf_counter() - start
synced_rss = rss_mb()
counts = cache.counts()
install_process_cache(cache, kubeconfig)
from kube_elevator.flows.autoscale import autoscale, live_tick, make_adapters
from kube_elevator.tasks.core.step import run_plain
from kube_elevator.tasks.node_group_file import load_node_groups
groups = load_node_groups(nodegroups).node_groups
adapters = make_adapters(kubeconfig, "kube-system", None)
plain = []
for index in range(runs):
    start = time.perf_counter()
    live_tick(run_plain, adapters, groups, 1_800_000_000 + index, dry_run=True, cache=cache)
    plain.append(time.perf_counter() - start)
flow = []
from kube_elevator.flows.prefect_compat import one_client_for_runs
with one_client_for_runs():  # as elevator watch runs its ticks
    for index in range(runs + 2):
        start = time.perf_counter()
        autoscale(nodegroups=nodegroups, kubeconfig=kubeconfig, dry_run=True)
        if index >= 2:
            flow.append(time.perf_counter() - start)
cache.stop()
print(json.dumps({"floor": floor, "cold": cold, "rss_before": before, "rss": synced_rss,
                  "rss_peak": rss_mb(), "counts": counts, "plain": statistics.median(plain),
                  "flow": statistics.median(flow)}))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def moto_server() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                                str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, url
        except OSError:
            if time.monotonic() > deadline:
                process.terminate()
                raise
            time.sleep(0.2)  # moto is starting: poll with a deadline


def measure_size(pods: int, api_url: str, runs: int = RUNS) -> dict[str, Any]:
    nodes = pods // 30
    scratch = Path(tempfile.mkdtemp(prefix="elevator-watch-cache-"))
    kubeconfig = scratch / "kubeconfig"
    nodegroups = scratch / "nodegroups.yaml"
    synthetic = groups(pods, nodes)
    nodegroups.write_text(yaml.safe_dump(node_groups_yaml(synthetic)))
    kube = subprocess.Popen([sys.executable, "-c", KUBE_SERVER, str(pods), str(nodes),
                             str(kubeconfig)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    moto, moto_url = moto_server()
    aws_env = {"AWS_ENDPOINT_URL": moto_url, "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    try:
        autoscaling = boto3.client("autoscaling", endpoint_url=moto_url, region_name="us-east-1",
                                   aws_access_key_id="testing", aws_secret_access_key="testing")
        ec2 = boto3.client("ec2", endpoint_url=moto_url, region_name="us-east-1",
                           aws_access_key_id="testing", aws_secret_access_key="testing")
        template = ec2.create_launch_template(LaunchTemplateName="bench", LaunchTemplateData={
            "ImageId": "ami-12c6146b", "InstanceType": "m5.large"})
        for group in synthetic:
            autoscaling.create_auto_scaling_group(
                AutoScalingGroupName=group.asg_name, MinSize=0, MaxSize=10_000,
                DesiredCapacity=min(group.nodes, 50), AvailabilityZones=["us-east-1a"],
                LaunchTemplate={"LaunchTemplateId": template["LaunchTemplate"]["LaunchTemplateId"]})
        assert kube.stdout is not None
        if kube.stdout.readline().strip() != "ready":
            raise RuntimeError("the fake API server did not start")
        env = {**os.environ, **aws_env, "PREFECT_API_URL": api_url,
               "PREFECT_LOGGING_LEVEL": "WARNING", "ELEVATOR_PREFECT_ENGINE_FIX": "1",
               "PREFECT_HOME": tempfile.mkdtemp(prefix="elevator-prefect-client-")}
        done = subprocess.run([sys.executable, "-c", WORKER, str(kubeconfig), str(nodegroups),
                               str(runs)], env=env, capture_output=True, text=True, cwd=ROOT,
                              timeout=1800, check=False)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-3000:])
        measured: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        measured["pods"], measured["nodes"] = pods, nodes
        return measured
    finally:
        if kube.stdin is not None:
            kube.stdin.close()
        kube.wait(timeout=120)
        moto.terminate()
        moto.wait(timeout=30)


def measure(sizes: tuple[int, ...] = (10_000, 50_000, 150_000)) -> list[dict[str, Any]]:
    with postgres() as database, prefect_server(database) as api_url:
        return [measure_size(pods, api_url) for pods in sizes]


if __name__ == "__main__":
    sizes = tuple(int(size) for size in sys.argv[1:]) or (10_000, 50_000, 150_000)
    for row in measure(sizes):
        print(json.dumps(row))
