"""The simulator with a one-shot group (issue 30): both modes run its fleets, alike.

Over HTTP the fleets are moto's (the ASG gets the node group's launch template and the zone's
default subnet); in memory `fakes.memory_asg`'s. Either way the attached instances join as
Nodes after their boot delay, as instances the ASG launches itself do, so the run matches the
same scenario scaled up with SetDesiredCapacity, tick for tick.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.scenario import load_scenario
from kube_elevator.flows.simulation import simulate

GROUP: dict[str, Any] = {
    "name": "batch", "label_key": "customer", "label_value": "batch",
    "cloud_provider_group_name": "fleet-sim-asg", "min_nodes": 1, "max_nodes": 10,
    "taint_upper_capacity_threshold_percent": 40, "taint_lower_capacity_threshold_percent": 10,
    "scale_up_threshold_percent": 70, "slow_node_removal_rate": 1, "fast_node_removal_rate": 2,
    "soft_delete_grace_period": "1m", "hard_delete_grace_period": "10m",
    "scale_up_cool_down_period": "2m",
}
FLEET = {"launch_template_id": "lt-0fleet0sim0", "launch_template_version": "1",
         "instance_type_overrides": ["m5.large"], "resource_tagging": True}


def scenario(tmp_path: Path, one_shot: bool) -> Path:
    path = tmp_path / f"scenario-{'fleet' if one_shot else 'asg'}.yaml"
    path.write_text(yaml.safe_dump({
        "seed": 3, "tick_interval": "1m", "step": "10s", "duration": "16m",
        "nodegroups": {"node_groups": [{**GROUP, **({"aws": FLEET} if one_shot else {})}]},
        "asgs": [{"name": "fleet-sim-asg", "min": 1, "max": 10, "desired": 2,
                  "node_labels": {"customer": "batch"}, "boot_delay": "90s"}],
        "workload": [{"name": "burst", "at": "1m", "count": 20, "cpu": "500m",
                      "memory": "256Mi", "duration": "6m",
                      "node_selector": {"customer": "batch"}}]}))
    return path


def test_a_fleet_group_simulates_alike_in_both_modes_and_as_an_asg_scale_up(
        tmp_path: Path, fake_aws: FakeAws) -> None:
    fleet = load_scenario(scenario(tmp_path, one_shot=True))
    over_http = simulate(fleet)
    # What the HTTP run left in moto (the simulation reset it first): its fleets' instances,
    # every one still running in the ASG or terminated by a scale-down, none outside.
    ec2 = fake_aws.client("ec2")
    tagged = [i for r in ec2.describe_instances(Filters=[
        {"Name": "tag:elevator.io/fleet-asg", "Values": ["fleet-sim-asg"]}])["Reservations"]
        for i in r["Instances"]]
    members = {i["InstanceId"] for i in fake_aws.instances("fleet-sim-asg")}
    assert tagged, "no fleet ran"
    assert all(i["InstanceId"] in members for i in tagged if i["State"]["Name"] == "running")
    in_memory = simulate(fleet, mode="memory")
    assert in_memory.ticks == over_http.ticks
    assert in_memory.summary == over_http.summary
    assert in_memory.terminations == over_http.terminations
    assert over_http.summary["scale_ups"] >= 1 and over_http.summary["scale_downs"] >= 1
    # The fleet's instances join after the boot delay (90 s: two ticks on), as the ASG's do.
    lines = [record["node_groups"]["batch"] for record in over_http.ticks]
    grown = next(index for index, line in enumerate(lines) if line["asg_desired"] > 2)
    assert lines[grown]["nodes"] == lines[grown + 1]["nodes"] == 2
    assert lines[grown + 2]["nodes"] == lines[grown]["asg_desired"]
    as_asg = simulate(load_scenario(scenario(tmp_path, one_shot=False)), mode="memory")
    assert as_asg.ticks == in_memory.ticks and as_asg.summary == in_memory.summary
