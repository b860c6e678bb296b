"""The simulator end to end: scenarios run the real tick over HTTP on a simulated clock."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.deadlines import scaled
from kube_elevator.fakes.scenario import load_scenario
from kube_elevator.flows.simulation import simulate
from kube_elevator.tasks.core.errors import InputError
from tests.builders import group_dict

TICK = 60
BOOT = 90
GROUP = group_dict(min_nodes=1, max_nodes=20, soft_delete_grace_period="1m",
                   hard_delete_grace_period="10m", scale_up_cool_down_period="2m",
                   slow_node_removal_rate=1, fast_node_removal_rate=2)


def write_scenario(tmp_path: Path, **overrides: Any) -> Path:
    scenario: dict[str, Any] = {
        "tick_interval": f"{TICK}s", "step": "10s", "duration": "30m",
        "nodegroups": {"node_groups": [GROUP]},
        "asgs": [{"name": "batch-asg", "min": 1, "max": 20, "desired": 2,
                  "instance_type": "m5.large", "node_labels": {"customer": "batch"},
                  "boot_delay": f"{BOOT}s"}],
        "workload": [{"name": "burst", "at": "1m", "count": 40, "cpu": "500m",
                      "memory": "256Mi", "duration": "10m",
                      "node_selector": {"customer": "batch"}}],
    }
    scenario.update(overrides)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


@pytest.fixture(scope="module")
def burst(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = write_scenario(tmp_path_factory.mktemp("burst"))
    return simulate(load_scenario(path)).to_json() | {"path": str(path)}


def batch(tick: dict[str, Any]) -> dict[str, Any]:
    return dict(tick["node_groups"]["batch"])


def test_burst_scales_up_within_one_tick_and_binds_every_pod_in_time(
        burst: dict[str, Any]) -> None:
    first_after_burst = next(t for t in burst["ticks"] if t["t"] >= 60)
    assert batch(first_after_burst)["asg_desired"] > 2
    assert batch(first_after_burst)["delta"] > 0
    summary = burst["summary"]
    assert summary["pods_total"] == 40 and summary["pods_completed"] == 40
    assert summary["max_pending_seconds"] <= 2 * TICK + BOOT


def test_after_the_jobs_nodes_are_tainted_at_the_configured_rates_then_removed(
        burst: dict[str, Any]) -> None:
    lines = [batch(t) for t in burst["ticks"]]
    peak = max(line["nodes"] for line in lines)
    assert peak >= 14  # 40 pods of 500m, three to a 1900m node
    for before, after in itertools.pairwise(lines):
        newly_tainted = (before["untainted"] - after["untainted"])
        assert newly_tainted <= GROUP["fast_node_removal_rate"]
    assert lines[-1]["nodes"] == GROUP["min_nodes"] == lines[-1]["asg_desired"]


def test_safety_holds_at_every_tick(burst: dict[str, Any]) -> None:
    for tick in burst["ticks"]:
        line = batch(tick)
        assert line["asg_desired"] <= 20
        assert line["untainted"] >= GROUP["min_nodes"]
    assert burst["summary"]["premature_terminations"] == 0
    assert burst["summary"]["evictions"] == 0


def test_the_same_scenario_gives_identical_json(burst: dict[str, Any]) -> None:
    again = simulate(load_scenario(burst["path"])).to_json()
    assert json.dumps(again, sort_keys=True) == json.dumps(
        {"ticks": burst["ticks"], "summary": burst["summary"]}, sort_keys=True)


@pytest.mark.usefixtures("prefect_server")
def test_prefect_flow_runs_make_the_same_decisions(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, duration="8m")
    plain = simulate(load_scenario(path)).to_json()
    with_prefect = simulate(load_scenario(path), prefect=True).to_json()
    assert with_prefect == plain


def test_csv_trace_drives_the_named_group(tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_text(
        "arrival_s,cpu,memory,duration_s,node_group\n"
        + "".join(f"{30 + i},900m,1Gi,300,batch\n" for i in range(8)))
    path = write_scenario(tmp_path, workload=[], trace="trace.csv", duration="12m")
    result = simulate(load_scenario(path)).to_json()
    assert result["summary"]["pods_total"] == 8
    assert result["summary"]["pods_completed"] == 8
    assert max(batch(t)["asg_desired"] for t in result["ticks"]) > 2


def test_bad_scenarios_name_the_file_the_key_path_and_the_rule(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, tick_interval="soon", asgs=[{
        "name": "batch-asg", "min": 3, "max": 2, "desired": 2, "instance_type": "m9.huge"}],
        workload=[{"at": "1m", "count": 0, "cpu": "lots", "memory": "1Gi"}])
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    problems = "\n".join(caught.value.problems)
    assert f"{path}: tick_interval: invalid duration 'soon'" in problems
    assert f"{path}: asgs[0].instance_type: unknown instance type 'm9.huge'" in problems
    assert f"{path}: workload[0].count: Input should be greater than or equal to 1" in problems
    assert f"{path}: workload[0].cpu: malformed quantity 'lots'" in problems
    (tmp_path / "bad.csv").write_text("arrival_s,cpu,memory,duration_s,node_group\n"
                                      "10,1,1Gi,5,nowhere\nx,1,1Gi,5,batch\n")
    with pytest.raises(InputError) as caught:
        load_scenario(write_scenario(tmp_path, workload=[], trace="bad.csv"))
    assert caught.value.problems == [
        f"{tmp_path / 'bad.csv'}: line 2: node_group 'nowhere' is not in the node-group config",
        f"{tmp_path / 'bad.csv'}: line 3: arrival_s: Input should be a valid number, unable to "
        "parse string as a number"]


def test_simulate_command_prints_json_and_writes_the_plot(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, duration="5m")
    plot = tmp_path / "run.png"
    result = subprocess.run([sys.executable, "-m", "kube_elevator.flows.cli", "simulate", str(path),
                             "--format", "json", "--plot", str(plot)],
                            capture_output=True, text=True, timeout=scaled(300), check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    document = json.loads(result.stdout)
    assert set(document["summary"]) >= {
        "node_seconds", "pending_pod_seconds", "max_pending_seconds", "pods_completed",
        "pods_total", "scale_ups", "scale_downs", "max_nodes"}
    assert set(document["ticks"][0]["node_groups"]["batch"]) >= {
        "nodes", "untainted", "tainted", "asg_desired", "pending_pods", "running_pods",
        "cpu_percent", "mem_percent", "delta"}
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = subprocess.run([sys.executable, "-m", "kube_elevator.flows.cli", "simulate",
                          str(tmp_path / "missing.yaml")],
                         capture_output=True, text=True, timeout=scaled(60), check=False)
    assert bad.returncode == 2 and "cannot read file" in bad.stderr
    assert "Traceback" not in bad.stderr
