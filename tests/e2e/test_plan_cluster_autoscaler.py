"""`elevator plan` from files decides the Cluster Autoscaler's scale-up as the live tick does
(README: plan "decides exactly as `elevator run` would"): the pods the scheduler gave up on get
their scale-up line in the group's notes, and nothing but the files is read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from benchmarks.deadlines import scaled
from tests.builders import api_node, api_pod, group_dict

NOW = 1795262400.0  # 2026-11-21T12:00:00Z


def unschedulable(name: str, cpu: str) -> dict[str, Any]:
    """A pod without a nodeSelector, which no Escalator group counts: only CA can help it."""
    pod = api_pod(name, "jobs", cpu=cpu, memory="100Mi", phase="Pending")
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                    "reason": "Unschedulable"}]
    return pod


def plan_notes(tmp_path: Path, **cluster_autoscaler: Any) -> list[str]:
    config = tmp_path / "ng.yaml"
    config.write_text(yaml.safe_dump({
        "node_groups": [group_dict()],
        "cluster_autoscaler": {"enabled": True, **cluster_autoscaler}}))
    cluster = tmp_path / "cluster.json"
    cluster.write_bytes(orjson.dumps({"kind": "List", "items": [
        api_node("batch-node-0"),  # 1 CPU: half taken, between the taint and scale-up lines
        api_pod("web-0", cpu="500m", memory="100Mi", node="batch-node-0",
                node_selector={"customer": "batch"}, scheduled=True),
        unschedulable("job-0", "800m")]}))
    plan = run_plan(config, cluster)
    # Escalator does nothing; CA's node for the pod is in the plan's numbers (issue 42 item 9).
    assert (plan["delta"], plan["actions"]["cloud_increase"], plan["actions"]["asg_desired"]) \
        == (1, 1, 2)
    return list(plan["notes"])


def run_plan(config: Path, cluster: Path, output: str = "json") -> dict[str, Any]:
    """`elevator plan --format json` on the files: its one group's plan (with `output`
    "table", the table as {"table": text})."""
    done = subprocess.run([sys.executable, "-m", "kube_elevator.flows.cli", "plan", "--nodegroups",
                           str(config), "--cluster", str(cluster), "--now", str(NOW),
                           "--format", output],
                          capture_output=True, text=True, timeout=scaled(120), check=False)
    assert done.returncode == 0, done.stderr
    if output != "json":
        return {"table": done.stdout}
    (plan,) = json.loads(done.stdout)["node_groups"]
    return dict(plan)


def test_plan_shows_the_scale_up_for_the_pods_the_scheduler_gave_up_on(
        tmp_path: Path) -> None:
    notes = plan_notes(tmp_path)
    assert [note for note in notes if "unschedulable" in note] == [
        "scale-up for 1 unschedulable pod(s): +1 node(s), ASG desired 2 "
        "(expanders least-waste: batch)"]


@pytest.mark.parametrize(("priorities", "where"), [
    (None, "kube-system/cluster-autoscaler-priority-expander"),  # CA's default name
    ("tools/priorities", "tools/priorities")])
def test_plan_says_it_reads_no_priority_configmap(tmp_path: Path, priorities: str | None,
                                                  where: str) -> None:
    notes = plan_notes(tmp_path, expander="priority",
                       **({"priorities": priorities} if priorities else {}))
    assert (f"ConfigMap {where} is not read from files: the priority expander passes every "
            "option on") in notes
    assert any(note.startswith("scale-up for 1 unschedulable pod(s): +1 node(s), ASG desired 2")
               for note in notes)


def web_replica(name: str, node: str = "") -> dict[str, Any]:
    """An `app=web` replica (100m) with required anti-affinity to the others on the hostname;
    pending ones carry the scheduler's verdict."""
    pod = api_pod(name, cpu="100m", memory="100Mi", node=node, labels={"app": "web"},
                  phase="Running" if node else "Pending", scheduled=bool(node))
    pod["spec"]["affinity"] = {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "web"}},
            "topologyKey": "kubernetes.io/hostname"}]}}
    if not node:
        pod["status"]["conditions"] = [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity "
                       "rules."}]
    return pod


def test_plan_adds_a_node_per_replica_under_hostname_anti_affinity(tmp_path: Path) -> None:
    """Issue 37's case: a 4-CPU node runs one `app=web` replica, ten more are pending under
    required hostname anti-affinity; the estimator runs the scheduler's filters, so one
    round asks for ten nodes (it asked for none: their requests fit the live node)."""
    config = tmp_path / "ng.yaml"
    config.write_text(yaml.safe_dump({
        "node_groups": [group_dict(max_nodes=20)],
        "cluster_autoscaler": {"enabled": True}}))
    node = api_node("batch-node-0", cpu="4", memory="16Gi")
    node["metadata"]["labels"]["kubernetes.io/hostname"] = "batch-node-0"
    cluster = tmp_path / "cluster.json"
    cluster.write_bytes(orjson.dumps({"kind": "List", "items": [
        node, web_replica("web-0", "batch-node-0"),
        *(web_replica(f"web-{index}") for index in range(1, 11))]}))
    plan = run_plan(config, cluster)
    assert [note for note in plan["notes"] if "unschedulable" in note] == [
        "scale-up for 10 unschedulable pod(s): +10 node(s), ASG desired 11 "
        "(expanders least-waste: batch)"]
    # Issue 42 item 9: the actions carry CA's scale-up as numbers, the note beside them.
    assert (plan["delta"], plan["actions"]["cloud_increase"], plan["actions"]["asg_desired"]) \
        == (10, 10, 11)
    table = run_plan(config, cluster, "table")["table"]
    row = next(line for line in table.splitlines() if line.lstrip("│ |").startswith("batch"))
    assert "+10" in row and "nothing" not in row, table
