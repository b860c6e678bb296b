"""`elevator validate` and `elevator plan` as a user runs them: a real process, exit codes, output."""

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
from kube_elevator.fakes.snapshots import SyntheticGroup, asg_description, synthetic_items, write_list
from tests.builders import group_dict

EXAMPLES = Path(__file__).resolve().parents[2] / "deployments" / "examples"


def elevator(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kube_elevator.flows.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=scaled(120), check=False)


def write_config(path: Path, *groups: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump({"node_groups": list(groups)}))
    return path


def test_validate_prints_a_line_per_group(tmp_path: Path) -> None:
    config = write_config(tmp_path / "ng.yaml", group_dict(),
                          group_dict(name="svc", label_value="svc", min_nodes=0, max_nodes=0))
    result = elevator("validate", config)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("batch: customer=batch → ASG batch-asg, nodes 1..10")
    assert lines[1].startswith("svc: customer=svc → ASG batch-asg, min/max from the ASG")
    assert lines[2].endswith("2 node groups, valid")


def test_validate_reports_every_problem_and_exits_2(tmp_path: Path) -> None:
    config = write_config(tmp_path / "ng.yaml", group_dict(name="a", label_key=""),
                          group_dict(name="b", soft_delete_grace_period="1h"))
    result = elevator("validate", config)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{config}: node_groups[0] (a): label_key cannot be empty" in result.stderr
    assert (f"{config}: node_groups[1] (b): soft_delete_grace_period (1h) must be less than "
            "hard_delete_grace_period (10m)") in result.stderr


def test_plan_json_on_the_shipped_example() -> None:
    result = elevator("plan", "--nodegroups", EXAMPLES / "nodegroups.yaml",
                      "--cluster", EXAMPLES / "cluster.json", "--asg", EXAMPLES / "asgs.json",
                      "--now", "2026-11-21T12:00:00Z", "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["now"] == 1795262400.0
    batch, services = document["node_groups"]
    assert set(batch) >= {"name", "pods", "nodes", "cpu_request_milli", "mem_request_bytes",
                          "cpu_capacity_milli", "mem_capacity_bytes", "cpu_percent",
                          "mem_percent", "locked", "delta", "error", "reason", "actions"}
    # 30 pods of 500m on 2 untainted 4-CPU nodes: 187.5% => delta ceil(2 * 117.5/70) = 4,
    # untaint the tainted node first, then ask for 3 (ASG 3 -> 6, its MaxSize).
    assert batch["cpu_percent"] == 187.5 and batch["delta"] == 4
    assert batch["actions"] == {"untaint": ["batch-node-00000"], "taint": [], "delete": [],
                                "cloud_increase": 3, "asg_desired": 6}
    assert batch["locked"] is True
    # services: 20% => slow removal; the empty node tainted 10 minutes ago goes (soft grace 5m)
    assert services["delta"] == -1
    assert services["actions"]["taint"] == ["services-node-00001"]
    assert services["actions"]["delete"] == ["services-node-00000"]
    assert services["nodes"] == {"total": 5, "untainted": 4, "tainted": 1, "force_tainted": 0,
                                 "cordoned": 0}


def test_plan_table_shows_reasons() -> None:
    result = elevator("plan", "--nodegroups", EXAMPLES / "nodegroups.yaml",
                      "--cluster", EXAMPLES / "cluster.json", "--now", "1795262400")
    assert result.returncode == 0, result.stderr
    assert "scale_up_threshold" in result.stdout and "services" in result.stdout


def test_plan_without_asg_file_takes_min_max_from_config(tmp_path: Path) -> None:
    group = SyntheticGroup("batch", "customer", "batch", "batch-asg", nodes=2, pods=10,
                           pod_cpu_milli=800, node_cpu_milli=1000)
    cluster = tmp_path / "cluster.json"
    write_list(str(cluster), synthetic_items([group], 1795262400.0, pending_fraction=0))
    config = write_config(tmp_path / "ng.yaml", group_dict(max_nodes=5))
    result = elevator("plan", "--nodegroups", config, "--cluster", cluster, "--format", "json",
                      "--now", "1795262400")
    assert result.returncode == 0, result.stderr
    (plan,) = json.loads(result.stdout)["node_groups"]
    assert plan["cpu_percent"] == 400.0
    assert plan["actions"]["asg_desired"] == 5 and plan["actions"]["cloud_increase"] == 3


def test_plan_scale_from_zero_reports_null_percentages(tmp_path: Path) -> None:
    items = list(synthetic_items(
        [SyntheticGroup("batch", "customer", "batch", "batch-asg", nodes=1, pods=3,
                        tainted_nodes=1)], 1795262400.0, pending_fraction=1.0))
    cluster = tmp_path / "c.json"
    cluster.write_bytes(orjson.dumps({"kind": "List", "items": items}))
    config = write_config(tmp_path / "ng.yaml", group_dict(min_nodes=0, max_nodes=5))
    result = elevator("plan", "--nodegroups", config, "--cluster", cluster, "--format", "json")
    (plan,) = json.loads(result.stdout)["node_groups"]
    assert plan["cpu_percent"] is None and plan["mem_percent"] is None
    assert plan["delta"] >= 1 and plan["actions"]["untaint"] == ["batch-node-00000"]


def test_plan_bad_inputs_exit_2_without_traceback(tmp_path: Path) -> None:
    config = write_config(tmp_path / "ng.yaml", group_dict())
    broken = tmp_path / "broken.json"
    broken.write_text('{"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p"}, '
                      '"spec": {"containers": [{"resources": {"requests": '
                      '{"memory": "12 GB"}}}]}}]}')
    asgs = tmp_path / "asgs.json"
    asgs.write_text(json.dumps(asg_description([])))
    cases = [
        (["--cluster", tmp_path / "nope.json"], "nope.json: cannot read file"),
        (["--cluster", broken], "broken.json: items[0]: Pod p "
                                "spec.containers[0].resources.requests.memory: "
                                "malformed quantity '12 GB'"),
        (["--now", "yesterday"], "--now: 'yesterday' is neither ISO 8601 nor Unix seconds"),
    ]
    for extra, message in cases:
        result = elevator("plan", "--nodegroups", config, *extra)
        assert result.returncode == 2, (extra, result.stdout)
        assert message in result.stderr.replace("\n", "")
        assert "Traceback" not in result.stderr
    result = elevator("plan", "--nodegroups", config, "--empty-cluster", "--asg", asgs,
                      "--format", "json")
    (plan,) = json.loads(result.stdout)["node_groups"]
    assert plan["error"] == 'could not find node group "batch-asg" on cloud provider'


# --- optional dependencies: the `sim` extra -----------------------------------------------------

HIDING = """
import sys
for module in {modules!r}:
    sys.modules[module] = None  # as if `pip install kube-elevator` without the sim extra
from kube_elevator.flows.cli import main
sys.argv = ["elevator", *sys.argv[1:]]
main()
"""
WITHOUT_SIM = HIDING.format(modules=("moto", "matplotlib"))
# moto alone, without what its server mode needs (moto[server]'s flask)
WITHOUT_MOTO_SERVER = HIDING.format(modules=("flask",))


@pytest.mark.parametrize("hidden", [WITHOUT_SIM, WITHOUT_MOTO_SERVER], ids=["moto", "flask"])
@pytest.mark.parametrize("command", [
    ["simulate", str(EXAMPLES / "scenario.yaml")],
    ["fake-cluster"],
])
def test_without_the_sim_extra_a_simulation_says_what_to_install(command: list[str],
                                                                  hidden: str) -> None:
    result = subprocess.run([sys.executable, "-c", hidden, *command],
                            capture_output=True, text=True, timeout=scaled(120))
    assert result.returncode == 2, result.stderr[-2000:]
    assert "pip install 'kube-elevator[sim]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_fast_simulation_needs_no_sim_extra() -> None:
    """`--fast` plays AWS in memory: neither moto nor its server is asked for."""
    result = subprocess.run([sys.executable, "-c", WITHOUT_SIM, "simulate",
                             str(EXAMPLES / "scenario.yaml"), "--fast", "--format", "json"],
                            capture_output=True, text=True, timeout=scaled(120))
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["summary"]


def test_without_the_sim_extra_the_autoscaler_commands_work() -> None:
    result = subprocess.run([sys.executable, "-c", WITHOUT_SIM, "validate",
                             str(EXAMPLES / "nodegroups.yaml")],
                            capture_output=True, text=True, timeout=scaled(120))
    assert result.returncode == 0, result.stderr
    assert "2 node groups, valid" in result.stdout
