"""Issue 34 item 5, `elevator plan` as a user runs it: every "nothing to do" says why. A plan
with no snapshot is an error unless the cluster is empty on purpose; a snapshot whose pods match
no group says so; a group named `default` says which pods select its labels, which it never
takes (Escalator's rule). In the table and in JSON alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import yaml
from typer.testing import CliRunner

from benchmarks.event_latency import BurstCluster
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.cli import app
from tests.builders import api_node, api_pod, group_dict
from tests.e2e.test_cli import elevator

NOW = "2026-11-21T12:00:00Z"


def files(tmp_path: Path, groups: list[dict[str, Any]], items: list[dict[str, Any]]
          ) -> tuple[Path, Path]:
    config = tmp_path / "nodegroups.yaml"
    config.write_text(yaml.safe_dump({"node_groups": groups}))
    cluster = tmp_path / "cluster.json"
    cluster.write_bytes(orjson.dumps({"kind": "List", "items": items}))
    return config, cluster


def plan_notes(config: Path, cluster: Path) -> tuple[dict[str, list[str]], str]:
    """Each group's notes in the JSON output, and the table's text."""
    arguments = ["plan", "--nodegroups", str(config), "--cluster", str(cluster), "--now", NOW]
    found = CliRunner().invoke(app, [*arguments, "--format", "json"])
    assert found.exit_code == 0, found.output
    notes = {group["name"]: group["notes"] for group in json.loads(found.stdout)["node_groups"]}
    table = CliRunner().invoke(app, arguments, env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    return notes, " ".join(line.strip("│ ") for line in table.stdout.splitlines())


def test_a_plan_without_a_snapshot_is_an_error_unless_the_cluster_is_empty_on_purpose(
        tmp_path: Path) -> None:
    config, cluster = files(tmp_path, [group_dict()], [])
    result = elevator("plan", "--nodegroups", config)
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    assert result.stderr.replace("\n", "") == (
        "error: --cluster: give the snapshot to plan on (kubectl get nodes,pods,leases,"
        "poddisruptionbudgets -A -o json > cluster.json; --cluster cluster.json), or "
        "--empty-cluster to plan on a cluster with no nodes and no pods")
    empty = CliRunner().invoke(app, ["plan", "--nodegroups", str(config), "--empty-cluster",
                                     "--format", "json"])
    assert empty.exit_code == 0, empty.output
    assert [group["name"] for group in json.loads(empty.stdout)["node_groups"]] == ["batch"]
    both = CliRunner().invoke(app, ["plan", "--nodegroups", str(config), "--empty-cluster",
                                    "--cluster", str(cluster)])
    assert both.exit_code == 2
    assert "error: --empty-cluster: plans on no nodes and no pods; it cannot go with --cluster" \
        in both.stderr.replace("\n", "")


def test_a_snapshot_whose_pods_match_no_group_says_so(tmp_path: Path) -> None:
    config, cluster = files(tmp_path, [group_dict()], [
        api_node("n1", labels={"customer": "batch"}),
        *(api_pod(f"web-{i}", "shop", cpu="100m", node_selector={"customer": "web"})
          for i in range(7))])
    notes, table = plan_notes(config, cluster)
    expected = ("none of the 7 pods matches a node group: a pod belongs to a group by a "
                "nodeSelector or a required In node affinity on the group's "
                "label_key=label_value (batch: customer=batch): shop/web-0, shop/web-1, "
                "shop/web-2, shop/web-3, shop/web-4 and 2 more")
    assert notes == {"batch": [expected]}
    assert "none of the 7 pods matches a node group" in table

    # One pod that matches: the others belong elsewhere, and nothing is said.
    config, cluster = files(tmp_path, [group_dict()], [
        api_node("n1", labels={"customer": "batch"}),
        api_pod("job-0", cpu="100m", node_selector={"customer": "batch"}),
        api_pod("web-0", "shop", cpu="100m", node_selector={"customer": "web"})])
    assert plan_notes(config, cluster)[0] == {"batch": []}


def test_a_group_named_default_says_which_pods_select_its_labels(tmp_path: Path) -> None:
    groups = [group_dict(name="default", label_key="pool", label_value="default")]
    config, cluster = files(tmp_path, groups, [
        api_node("n1", labels={"pool": "default"}),
        api_pod("free-0", cpu="100m"),  # no selector: the default group's
        api_pod("pinned-0", cpu="100m", node_selector={"pool": "default"}),
        api_pod("pinned-1", cpu="100m", node_selector={"pool": "default"})])
    notes, table = plan_notes(config, cluster)
    assert notes == {"default": [
        "2 pods select this group's labels (pool=default) but a group named default takes "
        "only pods without a selector (Escalator's rule), and no other group takes them: "
        "default/pinned-0, default/pinned-1"]}
    assert "2 pods select this group's labels (pool=default)" in table


def test_a_live_tick_prints_the_note_under_its_group(
        prefect_server: None, fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path) -> None:
    """`run --once`: the tick's line for each group, and under it the note (in JSON, the
    group's `notes`, as `plan` prints them)."""
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path, nodes=1)
    for index in range(3):
        fake_kube.create("pods", api_pod(f"web-{index}", "shop", cpu="100m",
                                         node_selector={"customer": "web"}), namespace="shop")
    arguments = ["run", "--nodegroups", str(cluster.nodegroups), "--kubeconfig",
                 str(cluster.kubeconfig), "--once", "--dry-run"]
    note = ("none of the 3 pods matches a node group: a pod belongs to a group by a "
            "nodeSelector or a required In node affinity on the group's label_key=label_value "
            "(batch: customer=batch): shop/web-0, shop/web-1, shop/web-2")
    text = CliRunner().invoke(app, arguments)
    assert text.exit_code == 0, text.output
    assert f"\n  note: {note}" in text.stdout, text.stdout
