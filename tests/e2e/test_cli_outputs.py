"""What `elevator tune` and `elevator simulate` refuse before their work (which may take hours)
rather than after it, and what they say along the way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmarks.deadlines import scaled

EXAMPLES = Path(__file__).resolve().parents[2] / "deployments" / "examples"


def elevator(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kube_elevator.flows.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=scaled(300), check=False)


def scenario_with(tmp_path: Path, **group_changes: object) -> Path:
    """The example scenario, its first node group changed."""
    groups = yaml.safe_load((EXAMPLES / "scenario-nodegroups.yaml").read_text())
    groups["node_groups"][0].update(group_changes)
    (tmp_path / "groups.yaml").write_text(yaml.safe_dump(groups))
    scenario = yaml.safe_load((EXAMPLES / "scenario.yaml").read_text())
    scenario["nodegroups"] = "groups.yaml"
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


@pytest.mark.parametrize(("options", "error"), [
    (["--plot", "front.txt"], "--plot: front.txt: give a file name ending .png, .svg or .pdf"),
    (["--plot", "front"], "--plot: front: give a file name ending .png, .svg or .pdf"),
    (["--output", "/dev/full"], "--output: /dev/full is not a regular file; give a file name"),
    (["--max-pending", ""], "--max-pending: '' is not a Go duration (like 60s)"),
])
def test_tune_refuses_before_the_search(tmp_path: Path, options: list[str], error: str) -> None:
    done = elevator("tune", EXAMPLES / "scenario.yaml", "--trials", "2", *options)
    assert done.returncode == 2 and done.stderr.startswith(f"error: {error}")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_tune_refuses_least_loaded_in_one_line_without_a_flow_run(tmp_path: Path) -> None:
    """least_loaded reads the load watcher over HTTP, which the fast simulation has not: a
    line before the search, not a Prefect traceback from the first trial."""
    path = scenario_with(tmp_path, scale_down_selection="least_loaded")
    done = elevator("tune", path, "--trials", "2")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: {path}: nodegroups.node_groups[0].scale_down_selection: tuning runs the fast "
        "simulation, which selects oldest first only (least_loaded reads the load watcher over "
        "HTTP)\n")


def test_simulate_says_a_node_group_key_it_does_not_know(tmp_path: Path) -> None:
    """A typo (`scale_up_threshhold_percent`) is ignored as Escalator ignores it, but said, as
    `elevator validate` says it."""
    path = scenario_with(tmp_path, scale_up_threshhold_percent=10)
    done = elevator("simulate", path, "--fast", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert "warning:" in done.stderr and "scale_up_threshhold_percent" in done.stderr


def test_simulate_refuses_a_plot_name_before_the_run(tmp_path: Path) -> None:
    done = elevator("simulate", EXAMPLES / "scenario.yaml", "--fast", "--plot", tmp_path)
    assert done.returncode == 2
    assert done.stderr == f"error: --plot: {tmp_path} is a directory; give a file name\n"
