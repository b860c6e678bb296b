"""A tick that a minimum or MaxSize holds back says so (issue 34 item 6).

A group held at `min_nodes` printed `acted (delta -2) ... fast removal of 2` though nothing was
tainted (only its Lease was written), and the next identical tick said "nothing to do"; a dry
run at the ASG's MaxSize said "scale up by 6". The live tick runs here with the real clients on
the fake API and moto, and `plan` on a snapshot at MaxSize.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.autoscale import live_tick
from kube_elevator.flows.cli import app
from kube_elevator.tasks.adapters.cloud import AsgClient
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.core.step import run_plain
from kube_elevator.tasks.steps.node_groups import Adapters
from kube_elevator.tasks.steps.report import outcome_line
from tests.builders import api_node, api_pod, group_dict, make_group

T0 = 1_800_000_000.0
MiB = 2**20


def test_a_group_held_at_min_nodes_says_so_and_did_nothing(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    fake_aws.create_asg("held-asg", 1, 10, 3)
    for index, instance in enumerate(fake_aws.instances("held-asg")):
        fake_kube.create("nodes", node_for_instance(instance, {"customer": "batch"}, 1000,
                                                    4000 * MiB, T0 - 3600 + index))
    group = make_group(min_nodes=3, cloud_provider_group_name="held-asg")
    adapters = Adapters(KubeClient.from_config(kubeconfig),
                        AsgClient(fake_aws.client("autoscaling"), fake_aws.client("ec2")))
    for minute in range(2):  # the first tick writes the Lease (node capacity), the second not
        [result] = live_tick(run_plain, adapters, [group], T0 + 60 * minute)
        assert result.status == "nothing to do", (minute, result.status)
        assert (result.plan.delta, result.plan.taint) == (-2, ())
        assert result.plan.reason == ("usage 0.0% is below taint_lower 10%: fast removal of 2; "
                                      "held at min_nodes 3: nothing tainted")
        assert outcome_line([result]) == \
            "nothing: batch 0% (held at min_nodes 3: nothing tainted)"
    tainted = [node["metadata"]["name"] for node in fake_kube.list("nodes")
               if (node.get("spec") or {}).get("taints")]
    assert tainted == []


def test_plan_at_max_size_says_there_is_no_scale_up(tmp_path: Path) -> None:
    nodes = [api_node(f"n{index}", labels={"customer": "batch"}) for index in range(2)]
    pods = [api_pod(f"p{index}", cpu="1", node="n0", node_selector={"customer": "batch"})
            for index in range(5)]
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "apiVersion": "v1", **node} for node in nodes] + [
        {"kind": "Pod", "apiVersion": "v1", **pod} for pod in pods]}))
    config = tmp_path / "nodegroups.yaml"
    config.write_text(yaml.safe_dump({"node_groups": [group_dict(max_nodes=2)]}))
    result = CliRunner().invoke(app, ["plan", "--nodegroups", str(config), "--cluster",
                                      str(cluster), "--now", str(T0), "--format", "json"])
    assert result.exit_code == 0, result.output
    [plan] = json.loads(result.stdout)["node_groups"]
    # 5 CPUs on 2 nodes of 1 CPU: 250%, Escalator's delta ceil(2 * 180 / 70) = 6.
    assert plan["delta"] == 6 and plan["actions"]["cloud_increase"] == 0
    assert plan["reason"] == ("usage 250.0% is above scale_up_threshold 70%: scale up by 6; "
                              "at MaxSize 2: no scale-up")
