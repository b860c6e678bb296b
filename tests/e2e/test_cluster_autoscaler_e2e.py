"""Cluster Autoscaler ideas end to end (issue 8): the real tick on the simulator or the fakes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.fakes.scenario import load_scenario
from kube_elevator.flows.autoscale import live_tick
from kube_elevator.flows.simulation import simulate
from kube_elevator.tasks.adapters.cloud import AsgClient
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.core.step import run_plain
from kube_elevator.tasks.node_group_file import parse_node_groups
from kube_elevator.tasks.steps.node_groups import Adapters, GroupResult
from tests.builders import group_dict

TICK = 60


def ca_group(name: str, **overrides: Any) -> dict[str, Any]:
    return group_dict(name=name, label_key="customer", label_value=name,
                      cloud_provider_group_name=f"{name}-asg",
                      soft_delete_grace_period="1m", hard_delete_grace_period="10m",
                      scale_up_cool_down_period="2m", **overrides)


def write(tmp_path: Path, groups: list[dict[str, Any]], asgs: list[dict[str, Any]],
          workload: list[dict[str, Any]], ca: dict[str, Any], duration: str = "5m",
          profile: str = "default") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    scenario = {"tick_interval": f"{TICK}s", "step": "10s", "duration": duration,
                "nodegroups": {"node_groups": groups, "cluster_autoscaler": ca},
                "asgs": asgs, "workload": workload, "scheduler": {"profile": profile}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def asg(name: str, instance_type: str, desired: int, boot: str = "90s",
        **extra: Any) -> dict[str, Any]:
    return {"name": f"{name}-asg", "min": 0, "max": 5, "desired": desired,
            "instance_type": instance_type, "node_labels": {"customer": name},
            "boot_delay": boot, **extra}


def huge_pod(tmp_path: Path, ca: dict[str, Any], duration: str = "5m") -> dict[str, Any]:
    """default: three 2-CPU nodes at ~30% requests; big: 8-CPU nodes, none yet (scale from
    zero); at 30 s a 6-CPU pod with no selector arrives (Escalator counts it in "default")."""
    path = write(
        tmp_path,
        [ca_group("default", min_nodes=1, max_nodes=5), ca_group("big", min_nodes=0, max_nodes=5)],
        [asg("default", "m5.large", 3), asg("big", "m5.2xlarge", 0)],
        [{"name": "steady", "at": "0s", "count": 3, "cpu": "600m", "memory": "256Mi"},
         {"name": "huge", "at": "30s", "count": 1, "cpu": "6", "memory": "1Gi"}],
        ca, duration)
    result: dict[str, Any] = simulate(load_scenario(path)).to_json()
    return result


def test_a_pod_too_big_for_the_default_group_gets_a_node_of_the_group_that_holds_it(
        tmp_path: Path) -> None:
    result = huge_pod(tmp_path, {"enabled": True, "expander": "least-waste", "random_seed": 1,
                                 "scale_down": {"drain": True}})
    first = next(t for t in result["ticks"] if t["t"] >= 30)  # the first tick that sees it
    assert first["node_groups"]["big"]["asg_desired"] == 1
    end = result["ticks"][-1]["node_groups"]
    assert end["big"]["nodes"] == 1
    assert end["default"]["pending_pods"] == 0  # the huge pod runs, on the big node
    assert result["summary"]["premature_terminations"] == 0


def test_with_the_section_disabled_the_big_pod_waits(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [ca_group("default", min_nodes=1, max_nodes=5), ca_group("big", min_nodes=0, max_nodes=5)],
        [asg("default", "m5.large", 3), asg("big", "m5.2xlarge", 0)],
        [{"name": "huge", "at": "30s", "count": 1, "cpu": "6", "memory": "1Gi"}],
        {"enabled": False})
    result = simulate(load_scenario(path)).to_json()
    assert all(t["node_groups"]["big"]["asg_desired"] == 0 for t in result["ticks"])


# --- a live tick against the fake API server and moto -------------------------------------

T0 = 1_800_000_000.0
MiB = 2**20


def _pod(kube: FakeKubeApi, name: str, node: str) -> None:
    kube.create("pods", {
        "metadata": {"name": name, "namespace": "web", "labels": {"app": "web"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": "web-rs", "uid": "u1", "controller": True}]},
        "spec": {"nodeName": node, "nodeSelector": {"customer": "batch"},
                 "containers": [{"name": "c", "image": "pause", "resources": {"requests": {
                     "cpu": "250m", "memory": "100Mi"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "PodScheduled",
                                                       "status": "True"}]}}, namespace="web")


def test_a_node_whose_pod_a_pdb_protects_is_kept_until_the_pdb_allows_the_eviction(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path) -> None:
    name = f"pdb-{tmp_path.name[-12:]}"
    fake_aws.create_asg(name, 1, 5, 2)
    nodes = []
    for index, instance in enumerate(sorted(fake_aws.instances(name),
                                            key=lambda i: i["InstanceId"])):
        fake_kube.create("nodes", node_for_instance(instance, {"customer": "batch"}, 1000,
                                                    4000 * MiB, T0 - 3600 + index * 60))
        nodes.append(instance["InstanceId"])
    doomed, kept = nodes
    # Escalator tainted `doomed` 20 minutes ago: past the hard grace, it would terminate it.
    fake_kube.patch("nodes", doomed, {"spec": {"taints": [{
        "key": "atlassian.com/escalator", "value": str(int(T0 - 1200)), "effect": "NoSchedule"}]}})
    _pod(fake_kube, "web-0", doomed)
    _pod(fake_kube, "web-1", kept)
    fake_kube.create("poddisruptionbudgets", {
        "metadata": {"name": "web", "namespace": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}},
        namespace="web")
    config = parse_node_groups({"node_groups": [group_dict(cloud_provider_group_name=name)],
                                "cluster_autoscaler": {"enabled": True,
                                                       "scale_down": {"drain": True}}}, "t.yaml")
    adapters = Adapters(KubeClient.from_config(kubeconfig),
                        AsgClient(fake_aws.client("autoscaling"), fake_aws.client("ec2")))

    def one(now: float) -> GroupResult:
        [result] = live_tick(run_plain, adapters, config.node_groups, now,
                        cluster_autoscaler=config.cluster_autoscaler)
        return result

    blocked = one(T0)
    assert blocked.done.deleted_nodes == () and blocked.done.evicted == ()
    assert any(f"scale-down skipped {doomed}" in note and "web/web" in note
               for note in blocked.plan.notes)
    assert fake_kube.get("nodes", doomed) and fake_kube.get("pods", "web-0", "web")

    # The budget now allows one disruption: the pod is evicted, the node waits to be empty.
    fake_kube.patch("poddisruptionbudgets", "web", {"spec": {"minAvailable": 1}}, "web")
    draining = one(T0 + 60)
    assert draining.done.evicted == ("web/web-0",)
    assert draining.done.deleted_nodes == ()
    assert fake_kube.get("nodes", doomed)

    empty = one(T0 + 120)
    assert empty.done.deleted_nodes == (doomed,)
    assert fake_kube.get("pods", "web-1", "web")["spec"]["nodeName"] == kept


def _three_groups(tmp_path: Path, ca: dict[str, Any], boots: dict[str, str],
                  duration: str = "3m") -> dict[str, Any]:
    """Groups a, b, c with no nodes yet; one pod with no selector that any of them could hold
    (no group is named "default", so Escalator itself ignores the pod)."""
    types = {"a": "m5.xlarge", "b": "c5.xlarge", "c": "m5.2xlarge"}
    path = write(tmp_path, [ca_group(g, min_nodes=0, max_nodes=5) for g in types],
                 [asg(g, t, 0, boot=boots.get(g, "90s")) for g, t in types.items()],
                 [{"name": "job", "at": "30s", "count": 1, "cpu": "1", "memory": "1Gi"}],
                 ca, duration)
    return simulate(load_scenario(path)).to_json()


def _grown(result: dict[str, Any], t: float) -> list[str]:
    tick = next(line for line in result["ticks"] if line["t"] == t)
    return sorted(g for g, line in tick["node_groups"].items() if line["asg_desired"] > 0)


def test_the_chained_expander_picks_by_priority_then_price(tmp_path: Path) -> None:
    # (CA's price expander also penalises nodes far from the preferred size, 1 CPU here)
    prices = {"m5.xlarge": 0.192, "c5.xlarge": 0.17, "m5.2xlarge": 0.02}
    # c is cheapest but has the lowest priority; among a and b (priority 10) b is cheaper.
    ca = {"enabled": True, "expander": "priority,price", "prices": prices, "random_seed": 3,
          "priorities": {10: ["^a-asg$", "^b-asg$"], 1: ["^c-asg$"]}}
    assert _grown(_three_groups(tmp_path / "1", ca, {}), 60) == ["b"]
    # price alone: c wins (cheapest node for the pod, whatever the priorities say)
    assert _grown(_three_groups(tmp_path / "2", {**ca, "expander": "price"}, {}), 60) == ["c"]
    # priority alone ties a and b: the seeded random pick is one of them
    assert _grown(_three_groups(tmp_path / "3", {**ca, "expander": "priority"}, {}), 60) in (
        ["a"], ["b"])


def test_an_instance_that_never_registers_is_terminated_and_the_next_group_is_tried(
        tmp_path: Path) -> None:
    # b is preferred, but its instances take 20 minutes to boot: longer than the 3m allowed.
    # drain: Escalator sees group a without pods of its own; draining keeps the pod's node.
    ca = {"enabled": True, "expander": "priority", "max_node_provision_time": "3m",
          "scale_down": {"drain": True}, "random_seed": 1,
          "priorities": {10: ["^b-asg$"], 5: ["^a-asg$"], 1: ["^c-asg$"]}}
    result = _three_groups(tmp_path, ca, {"b": "20m"}, duration="10m")
    assert _grown(result, 60) == ["b"]
    by_t = {line["t"]: line["node_groups"] for line in result["ticks"]}
    gave_up = next(t for t in sorted(by_t) if t > 60 and by_t[t]["b"]["asg_desired"] == 0)
    # first seen unregistered the tick after the scale-up; given up once 3m have passed
    assert gave_up <= 60 + TICK + 180 + TICK
    # b is backed off: the next tick tries the next group by priority, a, whose node joins.
    assert by_t[gave_up + TICK]["a"]["asg_desired"] == 1
    assert by_t[max(by_t)]["a"]["nodes"] == 1 and by_t[max(by_t)]["b"]["nodes"] == 0
