"""`elevator plan` at cluster scale: 150,000 pods, 5,000 nodes, 10 groups, against orjson.loads."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
import yaml

from kube_elevator.fakes.snapshots import SyntheticGroup, asg_description, synthetic_items, write_list

DATA = Path(__file__).parent / "data"
NOW = 1795262400.0


def groups(pods: int, nodes: int, count: int = 10) -> list[SyntheticGroup]:
    return [SyntheticGroup(f"group{index}", "customer", f"group{index}", f"asg-{index}",
                           nodes=nodes // count, pods=pods // count) for index in range(count)]


def node_groups_yaml(synthetic: list[SyntheticGroup]) -> dict[str, object]:
    return {"node_groups": [{
        "name": group.name, "label_key": group.label_key, "label_value": group.label_value,
        "cloud_provider_group_name": group.asg_name, "min_nodes": 1, "max_nodes": 10_000,
        "taint_upper_capacity_threshold_percent": 40,
        "taint_lower_capacity_threshold_percent": 10, "scale_up_threshold_percent": 70,
        "slow_node_removal_rate": 1, "fast_node_removal_rate": 2,
        "soft_delete_grace_period": "1m", "hard_delete_grace_period": "10m",
        "scale_up_cool_down_period": "2m"} for group in synthetic]}


@dataclass(frozen=True)
class Snapshot:
    cluster: Path
    config: Path
    asgs: Path
    size_bytes: int


def make_snapshot(pods: int, nodes: int) -> Snapshot:
    """Generate (once, cached under benchmarks/data/) a snapshot of this size."""
    DATA.mkdir(exist_ok=True)
    synthetic = groups(pods, nodes)
    cluster = DATA / f"cluster-{pods}.json"
    config = DATA / f"nodegroups-{pods}.yaml"
    asgs = DATA / f"asgs-{pods}.json"
    if not cluster.exists():
        write_list(str(cluster), synthetic_items(synthetic, NOW))
        config.write_text(yaml.safe_dump(node_groups_yaml(synthetic)))
        asgs.write_bytes(orjson.dumps(asg_description(synthetic)))
    return Snapshot(cluster, config, asgs, cluster.stat().st_size)


def orjson_floor_seconds(path: Path, repeats: int = 3) -> float:
    """The floor for reading the file: read + orjson.loads with the GC off, best of N."""
    best = float("inf")
    for _ in range(repeats):
        gc.disable()
        try:
            start = time.perf_counter()
            document = orjson.loads(path.read_bytes())
            best = min(best, time.perf_counter() - start)
            del document
        finally:
            gc.enable()
    return best


# A lean launcher forks the measured process: a child's ru_maxrss starts from its parent's
# high-water mark, so forking from this (large) benchmark process would overstate it.
_LAUNCHER = """
import json, os, subprocess, sys, time
start = time.perf_counter()
process = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
_, status, usage = os.wait4(process.pid, 0)
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "rss_mb": usage.ru_maxrss / 1024,
                  "code": os.waitstatus_to_exitcode(status),
                  "stderr": process.stderr.read().decode()[-2000:]}))
"""


def run_plan(snapshot: Snapshot) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of `elevator plan --output json` in a fresh process."""
    command = [sys.executable, "-m", "kube_elevator.flows.cli", "plan", "--nodegroups", str(snapshot.config),
               "--cluster", str(snapshot.cluster), "--asg", str(snapshot.asgs),
               "--now", str(NOW), "--output", "json"]
    result = subprocess.run([sys.executable, "-c", _LAUNCHER, *command], capture_output=True,
                            text=True, check=True)
    measured = json.loads(result.stdout)
    if measured["code"] != 0:
        raise RuntimeError(f"elevator plan failed: {measured['stderr']}")
    return float(measured["seconds"]), float(measured["rss_mb"])


def plan_in_process_seconds(snapshot: Snapshot) -> float:
    """Plan time without interpreter start-up: what one tick costs inside a worker."""
    from kube_elevator.flows.tick import tick
    from kube_elevator.tasks.core.decode import load_asg_file, load_cluster_files
    from kube_elevator.tasks.core.step import run_plain
    from kube_elevator.tasks.node_group_file import load_node_groups
    from kube_elevator.tasks.steps.source import SnapshotSource

    start = time.perf_counter()
    config = load_node_groups(snapshot.config)
    cluster = load_cluster_files([snapshot.cluster])
    asgs = load_asg_file(snapshot.asgs)
    source = SnapshotSource(config.node_groups, cluster.pods, cluster.nodes, asgs)
    tick(run_plain, source, None, config.node_groups, NOW)
    return time.perf_counter() - start
