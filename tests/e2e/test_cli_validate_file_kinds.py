"""`elevator validate` on what it would pass and `plan` would then explain (issue 42 item 6): two
groups on one label, a `default` group with a label, and a file that is not a node-group file."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tests.builders import group_dict
from tests.e2e.test_cli import EXAMPLES, elevator, write_config


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


def test_two_groups_on_one_label_are_warned_about(tmp_path: Path) -> None:
    config = write_config(tmp_path / "ng.yaml", group_dict(name="a"),
                          group_dict(name="b", cloud_provider_group_name="b-asg"),
                          group_dict(name="c", label_value="other"))
    result = elevator("validate", config)
    assert result.returncode == 0, result.stderr
    assert warnings_of(result.stderr) == [
        f"warning: {config}: node_groups[1] (b): selects nodes by customer=batch, as "
        "node_groups[0] (a) does: both groups count the same nodes and pending pods: each "
        "scales its own ASG for them"]
    assert result.stdout.strip().endswith("3 node groups, valid")


def test_a_default_group_says_its_label_picks_only_nodes(tmp_path: Path) -> None:
    config = write_config(tmp_path / "ng.yaml", group_dict(name="default"),
                          group_dict(name="svc", label_value="svc"))
    result = elevator("validate", config)
    assert result.returncode == 0, result.stderr
    [warning] = warnings_of(result.stderr)
    assert warning.startswith(f"warning: {config}: node_groups[0] (default): named `default`: "
                              "Escalator counts in it the pods with no nodeSelector and no "
                              "affinity, not the pods that select customer=batch")
    assert "customer=batch picks only its nodes" in warning


def test_a_scenario_file_is_named_as_one_in_one_error(tmp_path: Path) -> None:
    scenario = shutil.copy(EXAMPLES / "scenario.yaml", tmp_path / "scenario.yaml")
    result = elevator("validate", scenario)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert warnings_of(result.stderr) == []
    assert "did you mean" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"{scenario}: this looks like a scenario file for `elevator simulate`" in line
    assert "not a node-group file" in line
    assert line.endswith(f"the node-group file it names is {tmp_path / 'scenario-nodegroups.yaml'}")


def test_a_pod_autoscaler_file_and_a_manifest_are_named(tmp_path: Path) -> None:
    result = elevator("validate", EXAMPLES / "pod-autoscalers.yaml")
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "this looks like a pod-autoscaler file for `elevator pods plan`" in line
    assert line.endswith("not a node-group file: check it with `elevator pods validate`")
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment",
                                        "metadata": {"name": "web"}, "spec": {}}))
    result = elevator("validate", manifest)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.endswith('this looks like a Kubernetes manifest (a Deployment), not a '
                         "node-group file: a node-group file is YAML or JSON with `node_groups:`")
