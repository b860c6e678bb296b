"""CA's scale-down end to end on the simulator (spec §1.3): the real tick, the fake API, moto.

Unneeded nodes go after `unneeded_time`, not within `delay_after_add` of a scale-up; occupied
ones only with `drain` (their pods evicted and re-created elsewhere); and Escalator's own
scale-down never takes a node whose pod fits nowhere else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
from tests.e2e.test_cluster_autoscaler_e2e import asg, ca_group, huge_pod, write

WEB = {"customer": "web"}


def run(tmp_path: Path, workload: list[dict[str, Any]], scale_down: dict[str, Any],
        duration: str = "18m", extra_groups: int = 0) -> dict[str, Any]:
    groups = [ca_group("web", min_nodes=1, max_nodes=6, scale_up_threshold_percent=99)]
    asgs = [asg("web", "m5.large", 4)]
    if extra_groups:
        # Thresholds that hold one big node steady under the huge pod (78%).
        groups.append(ca_group("big", min_nodes=0, max_nodes=2, scale_up_threshold_percent=99,
                               taint_upper_capacity_threshold_percent=20))
        asgs.append(asg("big", "m5.2xlarge", 0))
    # The fragmented layouts below are first-fit's (the oldest node that fits takes each pod);
    # kube-scheduler's default profile spreads them and leaves no node this underused.
    path = write(tmp_path, groups, asgs, workload, {"enabled": True, "scale_down": scale_down},
                 duration, profile="first-fit")
    result: dict[str, Any] = simulate(load_scenario(path)).to_json()
    return result


def first_tick(result: dict[str, Any], group: str, field: str, value: int) -> float:
    return next(t["t"] for t in result["ticks"] if t["node_groups"][group][field] == value)


# Four 2-CPU nodes: three hold a 1.2-CPU service pod each; the fourth ends up holding only a
# 300m pod (the fillers that kept the others busy finish at 150 s). Escalator sees ~51% and
# does nothing; for CA the fourth node is unneeded from the tick at 180 s.
FRAGMENTED = [
    {"name": "long", "at": "0s", "count": 3, "cpu": "1200m", "memory": "256Mi",
     "node_selector": WEB},
    {"name": "short", "at": "0s", "count": 1, "cpu": "1200m", "memory": "256Mi",
     "duration": "60s", "node_selector": WEB},
    {"name": "filler", "at": "30s", "count": 3, "cpu": "700m", "memory": "128Mi",
     "duration": "120s", "node_selector": WEB},
    {"name": "small", "at": "40s", "count": 1, "cpu": "300m", "memory": "128Mi",
     "node_selector": WEB},
]


def test_an_underused_node_is_drained_and_removed_after_the_unneeded_time(tmp_path: Path) -> None:
    result = run(tmp_path, FRAGMENTED, {"drain": True})
    tainted_at = first_tick(result, "web", "tainted", 1)
    assert tainted_at == 180 + 600  # unneeded from 180 s, for unneeded_time 10m
    removed_at = first_tick(result, "web", "nodes", 3)
    assert tainted_at < removed_at <= tainted_at + 3 * 60  # soft grace, drain, then empty
    summary = result["summary"]
    assert summary["evictions"] == 1  # the small pod, re-created and bound elsewhere
    assert summary["premature_terminations"] == 0
    end = result["ticks"][-1]["node_groups"]["web"]
    assert end["nodes"] == 3 and end["pending_pods"] == 0 and end["running_pods"] == 4


def test_without_drain_an_occupied_unneeded_node_stays(tmp_path: Path) -> None:
    result = run(tmp_path, FRAGMENTED, {})
    assert all(t["node_groups"]["web"]["nodes"] == 4 for t in result["ticks"])
    assert result["summary"]["evictions"] == 0


def test_a_shorter_unneeded_time_and_a_higher_threshold_take_effect(tmp_path: Path) -> None:
    result = run(tmp_path, FRAGMENTED, {"drain": True, "unneeded_time": "3m"})
    assert first_tick(result, "web", "tainted", 1) == 180 + 180
    # At threshold 0.1 the 15% node is needed: nothing goes.
    result = run(tmp_path / "strict", FRAGMENTED, {"drain": True, "utilization_threshold": 0.1})
    assert all(t["node_groups"]["web"]["tainted"] == 0 for t in result["ticks"])


# One web node is empty from the start; at 0 s a pod only a "big" node can hold makes CA scale
# up the big group: the cluster's last scale-up.
EMPTY_NODE_AND_A_SCALE_UP = [
    {"name": "steady", "at": "0s", "count": 3, "cpu": "1500m", "memory": "256Mi",
     "node_selector": WEB},
    {"name": "huge", "at": "0s", "count": 1, "cpu": "6", "memory": "1Gi",
     "node_selector": {"customer": "big"}},
]


def test_removal_waits_delay_after_add_after_any_scale_up(tmp_path: Path) -> None:
    default = run(tmp_path, EMPTY_NODE_AND_A_SCALE_UP, {}, duration="20m", extra_groups=1)
    assert default["ticks"][0]["node_groups"]["big"]["asg_desired"] == 1
    assert first_tick(default, "web", "tainted", 1) == 600  # empty: no drain needed
    delayed = run(tmp_path / "delayed", EMPTY_NODE_AND_A_SCALE_UP,
                  {"delay_after_add": "15m"}, duration="20m", extra_groups=1)
    assert first_tick(delayed, "web", "tainted", 1) == 900
    assert first_tick(delayed, "web", "nodes", 3) > 900
    assert delayed["summary"]["premature_terminations"] == 0


def test_scale_down_can_be_turned_off(tmp_path: Path) -> None:
    result = run(tmp_path, EMPTY_NODE_AND_A_SCALE_UP, {"enabled": False}, duration="12m",
                 extra_groups=1)
    assert all(t["node_groups"]["web"]["nodes"] == 4 for t in result["ticks"])


def test_escalator_never_empties_the_node_a_big_pod_alone_can_use(tmp_path: Path) -> None:
    # The huge pod has no selector, so Escalator counts it in "default"; "big" sees no pods of
    # its own and wants to shrink to 0. Without drain, its taint would end in termination
    # after the hard grace period, and the pod would be pending again.
    result = huge_pod(tmp_path, {"enabled": True, "expander": "least-waste", "random_seed": 1},
                      duration="25m")
    joined = first_tick(result, "big", "nodes", 1)
    later = [t["node_groups"]["big"] for t in result["ticks"] if t["t"] >= joined]
    assert later and all(g["nodes"] == 1 and g["tainted"] == 0 for g in later)
    assert all(g["delta"] < 0 for g in later[1:])  # Escalator did want it gone
    assert result["summary"]["premature_terminations"] == 0
    assert result["ticks"][-1]["node_groups"]["default"]["pending_pods"] == 0


# --- a live tick against the fake API server and moto -------------------------------------

T0 = 1_800_000_000.0
MiB = 2**20


def test_unneeded_timers_live_in_the_lease_so_a_new_worker_keeps_counting(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path) -> None:
    name = f"sd-{tmp_path.name[-12:]}"
    fake_aws.create_asg(name, 1, 5, 3)
    instances = sorted(fake_aws.instances(name), key=lambda i: i["InstanceId"])
    nodes = [instance["InstanceId"] for instance in instances]
    for index, instance in enumerate(instances):
        fake_kube.create("nodes", node_for_instance(instance, {"customer": "batch"}, 1000,
                                                    4000 * MiB, T0 - 3600 + index * 60))
    for index, node in enumerate(nodes[:2]):  # the third node is empty
        fake_kube.create("pods", {
            "metadata": {"name": f"web-{index}", "namespace": "web",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "web", "uid": "u", "controller": True}]},
            "spec": {"nodeName": node, "nodeSelector": {"customer": "batch"},
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {
                         "cpu": "700m", "memory": "100Mi"}}}]},
            "status": {"phase": "Running"}}, namespace="web")
    # Escalator sees 1,400m of 3,000m (47%): between its thresholds, it does nothing.
    config = parse_node_groups({"node_groups": [group_dict(cloud_provider_group_name=name,
                                                           scale_up_threshold_percent=80)],
                                "cluster_autoscaler": {"enabled": True}}, "t.yaml")

    # A namespace a real server takes: a DNS label (tmp_path's name may hold '_').
    lease_namespace = "leases-" + "".join(c if c.isalnum() else "-"
                                          for c in tmp_path.name[-8:].lower()).strip("-")

    def one(now: float) -> GroupResult:
        # A new client every time: nothing carries over in memory between ticks.
        adapters = Adapters(KubeClient.from_config(kubeconfig),
                            AsgClient(fake_aws.client("autoscaling"), fake_aws.client("ec2")),
                            lease_namespace=lease_namespace)
        [result] = live_tick(run_plain, adapters, config.node_groups, now,
                        cluster_autoscaler=config.cluster_autoscaler)
        return result

    def unneeded() -> dict[str, str]:
        lease = fake_kube.get("leases", "elevator-batch", lease_namespace)
        raw = lease["metadata"]["annotations"].get("elevator.io/unneeded-since", "{}")
        return dict(json.loads(raw))

    empty = nodes[2]
    first = one(T0)
    assert first.done.tainted == ()
    assert unneeded() == {empty: "2027-01-15T08:00:00Z"}  # T0
    assert one(T0 + 540).done.tainted == ()
    assert unneeded() == {empty: "2027-01-15T08:00:00Z"}  # still counting from T0
    due = one(T0 + 600)
    assert due.done.tainted == (empty,) and due.status == "acted"
    assert any(f"{empty} unneeded for 600s" in note for note in due.plan.notes)
    taints = fake_kube.get("nodes", empty)["spec"]["taints"]
    assert [t["key"] for t in taints] == ["atlassian.com/escalator"]
    assert unneeded() == {}
    # The group's next ticks delete it once the soft grace period has passed.
    gone = one(T0 + 661)
    assert gone.done.deleted_nodes == (empty,)
    [group] = fake_aws.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[name])["AutoScalingGroups"]
    assert group["DesiredCapacity"] == 2


def test_the_shipped_example_scenario_shows_both_directions() -> None:
    example = Path(__file__).resolve().parents[2] / "deployments/examples/scenario-cluster-autoscaler.yaml"
    result: dict[str, Any] = simulate(load_scenario(example)).to_json()
    end = result["ticks"][-1]["node_groups"]
    assert end["big"]["nodes"] == 1 and end["big"]["running_pods"] == 1  # scale-up from zero
    assert end["web"]["nodes"] == 3 and end["web"]["pending_pods"] == 0  # the unneeded node
    assert result["summary"]["evictions"] == 1
    assert result["summary"]["premature_terminations"] == 0
