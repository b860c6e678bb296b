"""The situations where a differential against the real Escalator binary found us deciding
otherwise (issue 43), ported as ticks on the fake cluster: the real `kubernetes` client over HTTP
against the fake API, boto3 against moto, `live_tick` as the `autoscale` flow runs it, and one
file through `elevator run --once`. Each test names the Escalator lines it follows; the ASG's
desired capacity, the taints and the deletions are checked after each tick.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.deadlines import scaled
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.cluster import node_for_instance
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.autoscale import live_tick
from kube_elevator.tasks.adapters.cloud import AsgClient
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.core.step import run_plain
from kube_elevator.tasks.node_group_file import load_node_groups
from kube_elevator.tasks.steps.node_groups import Adapters, GroupResult
from tests.builders import api_pod, group_dict

T0 = 1_800_000_000.0
HOUR = 3600.0
MiB = 2**20
ESCALATOR = "atlassian.com/escalator"
FORCE = "atlassian.com/escalator-force"
SELECTOR = {"customer": "batch"}


class World:
    """One ASG on moto and its nodes on the fake API, named node-0, node-1, ... in instance
    order, and a node-group file for it."""

    def __init__(self, fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path,
                 tmp_path: Path, asg: tuple[int, int, int]) -> None:
        self.aws, self.kube, self.tmp_path = fake_aws, fake_kube, tmp_path
        self.asg = f"diff-{uuid.uuid4().hex[:8]}"
        fake_aws.create_asg(self.asg, *asg)
        self.instances = fake_aws.instances(self.asg)
        self.adapters = Adapters(KubeClient.from_config(kubeconfig),
                                 AsgClient(fake_aws.client("autoscaling"), fake_aws.client("ec2")))

    def node(self, index: int, cpu_milli: int, memory_bytes: int, created: float, *,
             tainted_at: float | None = None, force: bool = False, cordoned: bool = False,
             ) -> None:
        body = node_for_instance(self.instances[index], SELECTOR, cpu_milli, memory_bytes,
                                 created, name=f"node-{index}")
        taints = []
        if tainted_at is not None:
            taints.append({"key": ESCALATOR, "value": str(int(tainted_at)),
                           "effect": "NoSchedule"})
        if force:
            taints.append({"key": FORCE, "effect": "NoSchedule"})
        body["spec"].update({"taints": taints, "unschedulable": cordoned})
        self.kube.create("nodes", body)

    def pending(self, name: str, cpu: str, memory: str) -> None:
        self.kube.create("pods", api_pod(name, "jobs", cpu=cpu, memory=memory, phase="Pending",
                                         node_selector=SELECTOR), namespace="jobs")

    def config(self, **overrides: Any) -> Path:
        path = self.tmp_path / "nodegroups.yaml"
        path.write_text(yaml.safe_dump({"node_groups": [group_dict(
            cloud_provider_group_name=self.asg, **overrides)]}))
        return path

    def tick(self, config: Path, now: float) -> GroupResult:
        [result] = live_tick(run_plain, self.adapters, load_node_groups(config).node_groups,
                             now)
        assert result.status in ("acted", "nothing to do"), result.message
        return result

    def desired(self) -> int:
        return self.aws.client("autoscaling").describe_auto_scaling_groups(
            AutoScalingGroupNames=[self.asg])["AutoScalingGroups"][0]["DesiredCapacity"]

    def taints(self) -> dict[str, list[str]]:
        """Each node left and the keys of its taints."""
        return {node["metadata"]["name"]: [t["key"] for t in node["spec"].get("taints") or []]
                for node in self.kube.list("nodes")}


@pytest.fixture
def world_factory(fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path,
                  tmp_path: Path) -> Any:
    return lambda asg: World(fake_aws, fake_kube, kubeconfig, tmp_path, asg)


def test_the_taint_floor_is_min_nodes_and_the_asg_size_read_before_the_reap(
        world_factory: Any) -> None:
    """Two empty nodes, node-0 tainted 2.5 h ago (past hard_delete_grace_period 1h), min_nodes
    0, the ASG's MinSize 1, fast removal of 3. Escalator (scale_down.go ScaleDown, then
    scaleDownTaint against TargetSize() as RunOnce's Refresh read it, 2):

        Node node-0, aws:///us-east-1a/i-... ready to be deleted
        Reaper: There were 1 empty nodes deleted this round
        untainted nodes close to minimum (0). Adjusting taint amount to (1)
        Scaling Down: tainting 1 nodes
        Tainting node node-1

    The second tick: node-1 is past its soft grace and empty, but the ASG sits at its MinSize
    (aws.go DeleteNodes: `min sized reached, nodes will not be deleted`): it stays, tainted.
    """
    world = world_factory((1, 8, 2))
    world.node(0, 2000, 8000 * MiB, T0 - 5 * HOUR, tainted_at=T0 - 2.5 * HOUR)
    world.node(1, 2000, 8000 * MiB, T0 - 4 * HOUR)
    config = world.config(min_nodes=0, max_nodes=8, fast_node_removal_rate=3,
                          slow_node_removal_rate=1, hard_delete_grace_period="1h")

    first = world.tick(config, T0)
    assert first.plan.delta == -3
    assert first.plan.delete == ("node-0",) and first.plan.taint == ("node-1",)
    assert first.plan.limit == "held at min_nodes 0: taint 1 of 3"
    assert world.desired() == 1
    assert world.taints() == {"node-1": [ESCALATOR]}

    second = world.tick(config, T0 + 600)
    assert second.plan.delete == () and second.plan.taint == ()
    assert "min sized reached, nodes will not be deleted" in second.plan.notes
    assert world.desired() == 1
    assert world.taints() == {"node-1": [ESCALATOR]}


def test_a_force_delete_and_a_scale_up_in_one_tick_end_where_escalator_ends(
        world_factory: Any) -> None:
    """5 nodes, 2 cordoned, node-3 force-tainted and empty, 9 pending pods, CPU 102 % and
    memory 176 % of the 2 untainted nodes, max_node_age 30m, scale_on_starve. Escalator
    (controller.go scaleNodeGroup, then aws.go IncreaseSize):

        Setting scale to minimum of 1 to rotate out a node older than the max node age
        Delta: 3
        Node node-3, aws:///us-east-1a/i-... ready to be force deleted
        increasing cloud provider node group by 3

    and the ASG ends at 8: the termination takes it to 4, then SetDesiredCapacity(TargetSize()
    + 3) with TargetSize() the 5 that Refresh read before it. The next tick is inside the scale
    lock (scale_up_cool_down_period 5m): nothing more.
    """
    world = world_factory((1, 10, 5))
    memory = 10_000 * MiB
    for index in range(5):
        world.node(index, 2000, memory, T0 - 2 * HOUR + index * 60,
                   force=index == 3, cordoned=index in (1, 4))
    # 4,080m of 4,000m (102 %) and 35,200Mi of 20,000Mi (176 %).
    for index in range(9):
        world.pending(f"job-{index}", "480m" if index == 0 else "450m",
                      "4000Mi" if index == 0 else "3900Mi")
    config = world.config(min_nodes=2, max_nodes=10, scale_up_threshold_percent=80,
                          max_node_age="30m", scale_on_starve=True,
                          scale_up_cool_down_period="5m")

    first = world.tick(config, T0)
    assert first.plan.cpu_percent == pytest.approx(102.0)
    assert first.plan.mem_percent == pytest.approx(176.0)
    assert first.plan.delta == 3
    assert first.plan.delete == ("node-3",)
    assert first.plan.cloud_increase == 3 and first.plan.asg_desired == 8
    assert first.done.asg_desired_set == 8
    assert world.desired() == 8
    assert "node-3" not in world.taints()

    second = world.tick(config, T0 + 60)
    assert second.plan.lock_held_at_check and not second.plan.changes_anything
    assert world.desired() == 8


def test_a_rotation_that_reaps_a_force_tainted_node_adds_to_the_size_read_before(
        world_factory: Any) -> None:
    """Rotation alone: 7 nodes at min_nodes 6 untainted, the oldest past max_node_age, one
    force-tainted and empty; usage within the thresholds. Escalator:

        Setting scale to minimum of 1 to rotate out a node older than the max node age
        Delta: 1
        Node node-6, aws:///us-east-1a/i-... ready to be force deleted
        increasing cloud provider node group by 1

    ending at 8 (7 read, 6 after the termination, then 7 + 1). The next tick, past the
    cool-down, has 6 untainted nodes at min_nodes and no tainted one: it rotates again (the
    fake has no kubelet, so no new node joined)."""
    world = world_factory((1, 10, 7))
    for index in range(7):
        world.node(index, 2000, 8000 * MiB, T0 - 3 * HOUR + index * 60, force=index == 6)
    for index in range(6):  # 3,000m of 12,000m: 25 %, between taint_upper 20 and 70
        world.kube.create("pods", api_pod(f"web-{index}", "jobs", cpu="500m", memory="1Gi",
                                          node=f"node-{index}", node_selector=SELECTOR),
                          namespace="jobs")
    config = world.config(min_nodes=6, max_nodes=10, taint_upper_capacity_threshold_percent=20,
                          max_node_age="30m", scale_up_cool_down_period="2m")

    first = world.tick(config, T0)
    assert first.plan.delta == 1
    assert first.plan.delete == ("node-6",) and first.plan.cloud_increase == 1
    assert world.desired() == 8
    assert "node-6" not in world.taints()

    second = world.tick(config, T0 + 180)
    assert second.plan.delta == 1 and second.plan.delete == ()
    assert world.desired() == 9


def test_run_once_takes_a_zero_max_node_age_and_scales_on_starve(
        fake_aws: FakeAws, fake_kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path) -> None:
    """`max_node_age: "0s"`: Escalator's validMaxNodeAgeDuration takes it (ParseDuration
    reads it) and scaleOnMaxNodeAge reads it as off. 3 empty nodes of 4 CPUs, one pending pod
    of 4.5 CPUs, scale_on_starve. Escalator:

        Validating options: [PASS]
        Setting scale to minimum of 1 due to a starved pod
        increasing cloud provider node group by 1

    raising the ASG from 3 to 4. `validate` warns what the value does, and `run --once` runs."""
    world = World(fake_aws, fake_kube, kubeconfig, tmp_path, (1, 10, 3))
    for index in range(3):
        world.node(index, 4000, 16_000 * MiB, T0 - HOUR + index)
    world.pending("big", "4500m", "1Gi")
    config = world.config(min_nodes=1, max_nodes=10, max_node_age="0s", scale_on_starve=True)

    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_HOME": str(tmp_path / "prefect")}
    env.pop("PREFECT_API_URL", None)
    checked = subprocess.run(
        [sys.executable, "-m", "kube_elevator.flows.cli", "validate", str(config)],
        capture_output=True, text=True, env=env, timeout=scaled(120), check=False)
    assert checked.returncode == 0, checked.stderr
    assert ('max_node_age: "0s" is not positive: no node is rotated out, as Escalator reads it'
            in checked.stderr)

    ran = subprocess.run(
        [sys.executable, "-m", "kube_elevator.flows.cli", "run", "--nodegroups", str(config),
         "--kubeconfig", str(kubeconfig), "--once", "--format", "json"],
        capture_output=True, text=True, env=env, timeout=scaled(300), check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    (result,) = json.loads(ran.stdout.strip().splitlines()[-1])
    assert result["delta"] == 1 and result["actions"]["cloud_increase"] == 1
    assert world.desired() == 4
