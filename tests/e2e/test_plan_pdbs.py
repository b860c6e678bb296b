"""Snapshots carry PodDisruptionBudgets, so `elevator plan` with `scale_down.drain` can name the
budget that keeps a node, as the live tick does; a malformed budget is bad input like any other."""

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
from kube_elevator.tasks.core.decode import load_cluster_files
from kube_elevator.tasks.core.errors import InputError
from tests.builders import api_node, api_pod, group_dict

NOW = 1795262400.0  # 2026-11-21T12:00:00Z
DOOMED, KEPT = "batch-node-0", "batch-node-1"


def elevator(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kube_elevator.flows.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=scaled(120), check=False)


def node(name: str, tainted_at: float | None = None) -> dict[str, Any]:
    return api_node(name, tainted_at=tainted_at)


def pod(name: str, node_name: str) -> dict[str, Any]:
    return api_pod(name, "web", cpu="250m", memory="100Mi", node=node_name,
                   labels={"app": "web"}, node_selector={"customer": "batch"}, scheduled=True)


def pdb(allowed: Any = 0, **spec: Any) -> dict[str, Any]:
    """A budget as `kubectl get pdb -o json` prints it (the disruption controller's status)."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}, **spec},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 2,
                       "desiredHealthy": 2, "expectedPods": 2}}


def cluster(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    """Two nodes of group batch: DOOMED tainted 20 minutes ago (past the hard grace, so
    Escalator would terminate it) with pod web-0; KEPT with web-1."""
    return [node(DOOMED, tainted_at=NOW - 1200), node(KEPT),
            pod("web-0", DOOMED), pod("web-1", KEPT), *extra]


def write_list(path: Path, items: list[dict[str, Any]], kind: str = "List") -> Path:
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": kind, "items": items}))
    return path


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "ng.yaml"
    path.write_text(yaml.safe_dump({
        "node_groups": [group_dict()],
        "cluster_autoscaler": {"enabled": True, "scale_down": {"drain": True}}}))
    return path


def plan_json(config: Path, *clusters: Path) -> dict[str, Any]:
    args: list[str | Path] = ["plan", "--nodegroups", config, "--now", str(NOW),
                              "--format", "json"]
    for path in clusters:
        args += ["--cluster", path]
    result = elevator(*args)
    assert result.returncode == 0, result.stderr
    (plan,) = json.loads(result.stdout)["node_groups"]
    return dict(plan)


def test_plan_keeps_the_node_a_pdb_at_its_limit_protects_and_names_the_pdb(
        tmp_path: Path) -> None:
    config = write_config(tmp_path)
    blocked = plan_json(config, write_list(tmp_path / "blocked.json", cluster(pdb(allowed=0))))
    assert DOOMED not in blocked["actions"]["delete"]
    assert any(note.startswith(f"scale-down skipped {DOOMED}:")
               and "PodDisruptionBudget web/web" in note and "pod web/web-0" in note
               for note in blocked["notes"]), blocked["notes"]

    # The same cluster whose budget allows a disruption: the node is drained instead.
    allowed = plan_json(config, write_list(tmp_path / "allowed.json", cluster(pdb(allowed=1))))
    assert any(note.startswith(f"draining {DOOMED}: evicting 1 pod(s)")
               for note in allowed["notes"]), allowed["notes"]
    assert not any("PodDisruptionBudget" in note for note in allowed["notes"])


def test_plan_reads_budgets_from_a_separate_pdb_list_file_and_shows_them_in_the_table(
        tmp_path: Path) -> None:
    # `kubectl get pdb -A -o json`: a PodDisruptionBudgetList whose items carry no kind.
    budget = pdb(allowed=0)
    del budget["kind"], budget["apiVersion"]
    budgets = write_list(tmp_path / "pdbs.json", [budget], kind="PodDisruptionBudgetList")
    pods_and_nodes = write_list(tmp_path / "cluster.json", cluster())
    config = write_config(tmp_path)
    plan = plan_json(config, pods_and_nodes, budgets)
    assert any("PodDisruptionBudget web/web" in note for note in plan["notes"])
    table = elevator("plan", "--nodegroups", config, "--cluster", pods_and_nodes,
                     "--cluster", budgets, "--now", str(NOW))
    assert table.returncode == 0, table.stderr
    assert "PodDisruptionBudget web/web" in table.stdout.replace("\n", "")


def test_plan_reports_a_malformed_pdb_with_file_path_and_rule_and_exits_2(
        tmp_path: Path) -> None:
    config = write_config(tmp_path)
    cases = [
        (pdb(allowed="none"), "status.disruptionsAllowed: Expected `int | null`, got `str`"),
        (pdb(selector={"matchLabels": {"app": 7}}),
         "spec.selector.matchLabels.app: Expected `str`, got `int`"),
    ]
    for index, (budget, message) in enumerate(cases):
        snapshot = write_list(tmp_path / f"bad{index}.json", cluster(budget))
        result = elevator("plan", "--nodegroups", config, "--cluster", snapshot,
                          "--now", str(NOW))
        assert result.returncode == 2, result.stdout
        assert "Traceback" not in result.stderr
        assert (f"{snapshot}: items[4]: PodDisruptionBudget web/web {message}"
                in result.stderr.replace("\n", "")), result.stderr


# --- the decoder, in process ----------------------------------------------------------------


def test_snapshot_budgets_are_decoded_with_their_selector_and_allowance(tmp_path: Path) -> None:
    expressions = {"matchExpressions": [{"key": "tier", "operator": "In",
                                         "values": ["front"]}]}
    no_status = pdb(selector=expressions)
    del no_status["status"]
    no_selector = pdb(allowed=3)
    no_selector["metadata"] = {"name": "none", "namespace": "web"}
    del no_selector["spec"]["selector"]
    snapshot = load_cluster_files([write_list(tmp_path / "c.json",
                                              cluster(pdb(allowed=1), no_status, no_selector))])
    web, front, none = snapshot.pdbs
    pods = {p.name: p for p in snapshot.pods}
    assert (web.namespace, web.name, web.disruptions_allowed) == ("web", "web", 1)
    assert web.selects(pods["web-0"])
    # no status yet (no disruption controller has counted): no disruption allowed
    assert front.disruptions_allowed == 0 and not front.selects(pods["web-0"])
    # policy/v1: an absent selector selects no pod
    assert none.disruptions_allowed == 3 and not none.selects(pods["web-0"])


@pytest.mark.parametrize(("budget", "problem"), [
    (pdb(selector="app=web"), "spec.selector: Expected `object | null`, got `str`"),
    (pdb(selector={"matchExpressions": [{"key": "app", "operator": "Like",
                                         "values": ["web"]}]}),
     "spec.selector.matchExpressions[0].operator: Invalid enum value 'Like'"),
    (pdb(selector={"matchExpressions": [{"operator": "Exists"}]}),
     "spec.selector.matchExpressions[0]: Object missing required field `key`"),
    (pdb(selector={"matchExpressions": [{"key": "app", "operator": "In"}]}),
     "spec.selector.matchExpressions[0].values: must be non-empty for operator In"),
    (pdb(selector={"matchExpressions": [{"key": "app", "operator": "Exists",
                                         "values": ["web"]}]}),
     "spec.selector.matchExpressions[0].values: must be empty for operator Exists"),
    (pdb(selector={"matchExpressions": [{"key": "app", "operator": "In", "values": "web"}]}),
     "spec.selector.matchExpressions[0].values: Expected `array | null`, got `str`"),
    (pdb(allowed=True), "status.disruptionsAllowed: Expected `int | null`, got `bool`"),
    (pdb(allowed=-1), "status.disruptionsAllowed: Expected `int` >= 0"),
])
def test_a_malformed_budget_names_the_file_item_field_and_rule(
        tmp_path: Path, budget: dict[str, Any], problem: str) -> None:
    path = write_list(tmp_path / "c.json", cluster(budget))
    with pytest.raises(InputError) as raised:
        load_cluster_files([path])
    assert raised.value.problems == [f"{path}: items[4]: PodDisruptionBudget web/web {problem}"]


def test_a_budget_needs_a_name_and_a_namespace(tmp_path: Path) -> None:
    nameless, unnamespaced = pdb(), pdb()
    nameless["metadata"] = {"namespace": "web"}
    unnamespaced["metadata"] = {"name": "web"}
    for budget, problem in [
        (nameless, "PodDisruptionBudget web/<no name> metadata.name: "
                   "a PodDisruptionBudget needs a name"),
        (unnamespaced, "PodDisruptionBudget web metadata.namespace: "
                       "a PodDisruptionBudget is namespaced: it needs a namespace"),
    ]:
        path = write_list(tmp_path / "c.json", [budget])
        with pytest.raises(InputError) as raised:
            load_cluster_files([path])
        assert raised.value.problems == [f"{path}: items[0]: {problem}"]


def test_a_force_tainted_node_holding_a_pod_escalator_does_not_count_is_drained(
        tmp_path: Path) -> None:
    """Escalator deletes a force-tainted node its group's pods have left (§7.4), though a pod
    no group counts may still run there; with `drain` the node is drained first, and the
    reason says so rather than "delete 1"."""
    forced = node("batch-node-2")
    forced["spec"]["taints"] = [{"key": "atlassian.com/escalator-force", "effect": "NoSchedule"}]
    stray = api_pod("stray-0", "tools", cpu="100m", memory="10Mi", node="batch-node-2",
                    scheduled=True)  # no nodeSelector: no group counts it
    config = write_config(tmp_path)
    plan = plan_json(config, write_list(tmp_path / "c.json", [node(KEPT), forced, stray]))
    assert plan["actions"]["delete"] == []
    assert "draining batch-node-2: evicting 1 pod(s); terminated once empty" in plan["notes"]
    assert "drain 1 before deleting" in plan["reason"] and "delete 1" not in plan["reason"]
