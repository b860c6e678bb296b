"""User text is printed as it is (audit items 3 and 9).

File paths, group names, unknown keys and the values quoted in error lines are the user's: rich
must not read them as markup (`[/x]` crashed the CLI with a MarkupError traceback, `[bold]x`
vanished) nor as emoji codes (`ba:x:tch` became `ba❌tch`). And a time option's error names
that option (`--start`, `--end`), not `--now`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kube_elevator.flows.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "deployments" / "examples"

MARKUP_NAMES = ["[/x]", "[bold red]x[/bold red]", "ba:x:tch"]


def elevator(*args: str | Path) -> tuple[int, str]:
    """The CLI in-process, as tests/e2e/test_fuzz_inputs.py runs it: (exit code, output)."""
    result = CliRunner().invoke(app, [str(arg) for arg in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback for {args}: {result.output}") from result.exception
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def example_groups() -> dict[str, Any]:
    document = yaml.safe_load((EXAMPLES / "nodegroups.yaml").read_text())
    assert isinstance(document, dict)
    return document


def write_groups(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def named(tmp_path: Path, name: str) -> Path:
    """The shipped example with its first group renamed `name`."""
    document = example_groups()
    document["node_groups"][0]["name"] = name
    return write_groups(tmp_path / "nodegroups.yaml", document)


@pytest.mark.parametrize("key", ["[/foo]", "[bold red]boom", "[link=x]k:x:"])
def test_an_unknown_key_is_warned_about_as_it_is(tmp_path: Path, key: str) -> None:
    document = example_groups()
    document[key] = 1
    path = write_groups(tmp_path / "nodegroups.yaml", document)
    for command in (["validate", path], ["plan", "--nodegroups", path, "--empty-cluster"]):
        code, output = elevator(*command)
        assert code == 0, output
        assert f"warning: {path}: {key}: unknown top-level key, ignored" in output, output


@pytest.mark.parametrize("name", MARKUP_NAMES)
def test_validate_prints_a_group_name_as_it_is(tmp_path: Path, name: str) -> None:
    path = named(tmp_path, name)
    code, output = elevator("validate", path)
    assert code == 0, output
    assert f"\n{name}: customer=batch → ASG batch-asg, nodes 1..30" in f"\n{output}", output
    assert f"{path}: 2 node groups, valid" in output


@pytest.mark.parametrize("name", MARKUP_NAMES)
def test_plan_table_shows_a_group_name_as_it_is(tmp_path: Path, name: str) -> None:
    path = named(tmp_path, name)
    code, output = elevator("plan", "--nodegroups", path, "--empty-cluster")
    assert code == 0, output
    assert f"│ {name} " in output, output
    assert "❌" not in output


def test_plan_table_keeps_the_dry_mark(tmp_path: Path) -> None:
    path = named(tmp_path, "[/x]")
    code, output = elevator("plan", "--nodegroups", path, "--dry-mode", "--empty-cluster")
    assert code == 0, output
    assert "│ [/x] (dry) " in output, output


def test_an_error_line_quotes_a_group_name_as_it_is(tmp_path: Path) -> None:
    document = example_groups()
    document["node_groups"][0].update(name="ba:x:tch", min_nodes=40)  # above max_nodes
    path = write_groups(tmp_path / "nodegroups.yaml", document)
    for command in (["validate", path], ["plan", "--nodegroups", path, "--empty-cluster"]):
        code, output = elevator(*command)
        assert code == 2, output
        assert f"error: {path}: node_groups[0] (ba:x:tch): " in output, output
        assert "❌" not in output


def test_a_path_with_brackets_is_printed_as_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "dir[" / "x]:x:"
    try:
        folder.mkdir(parents=True)
    except OSError:
        pytest.skip("the filesystem takes no such directory name")
    path = write_groups(folder / "nodegroups.yaml", example_groups())
    code, output = elevator("validate", path)
    assert code == 0, output
    assert f"{path}: 2 node groups, valid" in output, output
    code, output = elevator("validate", folder / "missing.yaml")
    assert code == 2, output
    assert f"error: {folder / 'missing.yaml'}: " in output, output


@pytest.mark.parametrize(("start", "end", "named_option"), [
    ("nan", "3600", "--start"),
    ("yesterday", "3600", "--start"),
    ("0", "inf", "--end"),
    ("0", "1e18", "--end"),
])
def test_from_prometheus_names_the_bad_time_option(tmp_path: Path, start: str, end: str,
                                                   named_option: str) -> None:
    code, output = elevator(
        "scenario", "from-prometheus", "--url", "http://127.0.0.1:1", "--start", start,
        "--end", end, "--nodegroups", EXAMPLES / "nodegroups.yaml", "--output", tmp_path)
    assert code == 2, output
    bad = start if named_option == "--start" else end
    assert output.startswith(f"error: {named_option}: {bad!r} "), output
    assert "--now" not in output



def test_simulate_tick_lines_show_group_names_as_they_are(tmp_path: Path) -> None:
    pytest.importorskip("moto")  # the `sim` extra
    scenario = yaml.safe_load((EXAMPLES / "scenario.yaml").read_text())
    groups = yaml.safe_load((EXAMPLES / "scenario-nodegroups.yaml").read_text())
    groups["node_groups"][0]["name"] = "[/x]"
    groups["node_groups"][1]["name"] = "ba:x:tch"
    scenario.update(nodegroups=groups, duration="2m")
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    code, output = elevator("simulate", path, "--fast")
    assert code == 0, output
    assert "s  [/x]: " in output and " | ba:x:tch: " in output, output


def test_validate_names_the_value_the_rule_and_the_key_meant(tmp_path: Path) -> None:
    """Issue 34 item 6 (README's example): a bad duration names its value, the rule and an
    example, once, without a second error about the same key; the unknown-key warning stays
    beside the errors and suggests the key meant."""
    document = example_groups()
    services = document["node_groups"][1]
    services["soft_delete_grace_period"] = "90x"
    services["scale_up_cooldown_period"] = services.pop("scale_up_cool_down_period")
    path = write_groups(tmp_path / "nodegroups.yaml", document)
    code, output = elevator("validate", path)
    assert code == 2, output
    where = f"{path}: node_groups[1] (services)"
    assert output.splitlines() == [
        f"warning: {where}.scale_up_cooldown_period: unknown key, ignored (as Escalator does); "
        "did you mean `scale_up_cool_down_period`?",
        f'error: {where}: soft_delete_grace_period: "90x": not a duration; use a number and '
        "a unit, e.g. 30s, 5m, 1h30m",
        f"error: {where}: scale_up_cool_down_period must not be empty: give a duration, e.g. "
        "30s, 5m, 1h30m"]
    misspelt = write_groups(tmp_path / "misspelt.yaml",
                            {"nodegroups": example_groups()["node_groups"]})
    code, output = elevator("validate", misspelt)
    assert code == 2 and output.splitlines() == [
        f"warning: {misspelt}: nodegroups: unknown top-level key, ignored; did you mean "
        "`node_groups`?",
        f"error: {misspelt}: node_groups: missing: no node groups defined"], output


def test_simulate_tick_lines_say_when_min_nodes_holds_a_removal() -> None:
    """`make demo`'s last lines said `batch: 1 node ... delta -2` tick after tick, as if nodes
    were going: at min_nodes the line says the removal is held."""
    pytest.importorskip("moto")  # the `sim` extra
    code, output = elevator("simulate", EXAMPLES / "scenario.yaml", "--fast")
    assert code == 0, output
    last = [line for line in output.splitlines() if line.startswith("t=  1800s")]
    assert last and ("batch: 1 node (1 untainted, 0 tainted) ASG 1, 0 pending, 0 running, "
                     "cpu 0%, delta -2 (held at min_nodes 1) | services:") in last[0], output
    assert "delta +0 (held" not in output


def test_simulate_tick_lines_give_each_groups_reason_as_run_does() -> None:
    """Issue 42: a tick line said what each group did but not why; under it now, a line per
    group with the decision's reason (and its notes), as `run --once` prints them."""
    pytest.importorskip("moto")  # the `sim` extra
    code, output = elevator("simulate", EXAMPLES / "scenario.yaml", "--fast")
    assert code == 0, output
    lines = output.splitlines()
    first = next(index for index, line in enumerate(lines) if line.startswith("t=   120s"))
    assert lines[first + 1] == ("  batch: usage 1052.6% is above scale_up_threshold 70%: scale "
                                "up by 15; untaint 1, ask the cloud for 14"), output
    assert lines[first + 2] == "  services: usage 51.3% is within thresholds (40%..75%)", output


def test_simulate_tick_lines_carry_the_cluster_autoscalers_notes() -> None:
    """Issue 42 item 8: the Cluster Autoscaler's scale-down said what it did only in the
    summary; each tick line now carries its notes, under the group they are about, as `run`'s
    tick lines do (the shipped CA scenario: web-asg-004 unneeded, tainted, then drained)."""
    pytest.importorskip("moto")  # the `sim` extra
    code, output = elevator("simulate", EXAMPLES / "scenario-cluster-autoscaler.yaml", "--fast")
    assert code == 0, output
    lines = output.splitlines()

    def under(tick: str) -> list[str]:
        start = next(index for index, line in enumerate(lines) if line.startswith(tick))
        end = next(index for index in range(start + 1, len(lines))
                   if not lines[index].startswith("  "))
        return lines[start + 1:end]

    tainted = under("t=   540s")
    assert tainted[0].startswith("  web: usage 51.3% is within thresholds"), output
    assert tainted[1] == ("  note: scale-down: web-asg-004 unneeded for 300s (utilization 16%, "
                          "threshold 0.5): tainted for removal"), output
    assert tainted[2].startswith("  big: "), output  # the note sits under its own group
    drained = under("t=   660s")
    assert "  note: draining web-asg-004: evicting 1 pod(s); terminated once empty" in drained
