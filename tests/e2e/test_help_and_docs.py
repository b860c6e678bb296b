"""What a newcomer reads first says what works (issue 34 item 8).

Every command's `--help` ends with an example that is a real command line (its options parse,
its shipped files exist); `--plot` says the formats it writes; the README's `--profile`
example runs a scenario where the profile changes the run; docs/architecture.md stands on
its own in a fresh clone.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main
from typer.testing import CliRunner

from kube_elevator.flows.cli import app

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[tuple[str, click.Command]]:
    """Every command and group of `elevator`, the root included, by its path."""
    found: list[tuple[str, click.Command]] = []

    def walk(command: click.Command, path: str) -> None:
        found.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


COMMANDS = _commands()


def _help(path: str) -> str:
    # wide, so an example is one line (rich reads COLUMNS when it builds the help's console)
    result = CliRunner().invoke(app, [*path.split(), "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return result.output


def _examples(text: str) -> list[str]:
    """The command lines under `Example:` in a help text."""
    lines = [line.strip(" │") for line in text.splitlines()]
    start = next((index for index, line in enumerate(lines)
                  if line.strip() in ("Example:", "Examples:")), len(lines))
    return [line.strip() for line in lines[start + 1:] if line.strip().startswith("elevator ")]


def test_the_cli_has_the_commands_the_readme_names() -> None:
    paths = {path for path, _ in COMMANDS}
    assert {"validate", "plan", "run", "simulate", "tune", "serve", "watch", "fake-cluster",
            "load-watcher", "scheduler-extender", "scenario from-prometheus", "pods plan",
            "pods run"} <= paths


@pytest.mark.parametrize(("path", "command"), COMMANDS,
                         ids=[path or "elevator" for path, _ in COMMANDS])
def test_every_help_ends_with_an_example_that_is_a_real_command_line(
        path: str, command: click.Command) -> None:
    examples = _examples(_help(path))
    assert examples, f"`elevator {path} --help` shows no example"
    for example in examples:
        words = shlex.split(example)[1:]
        # The example runs its own command (a group's, one of its commands).
        assert " ".join(words).startswith(path), example
        target, context = typer.main.get_command(app), None
        while hasattr(target, "commands") and words and words[0] in target.commands:
            target = target.commands[words.pop(0)]
        context = target.make_context("elevator", list(words), resilient_parsing=False)
        assert context is not None  # the options exist and their values parse
        for word in words:
            if word.startswith("deployments/"):
                assert (ROOT / word).is_file(), f"{example}: {word} is not in the repository"


@pytest.mark.parametrize("path", ["simulate", "tune"])
def test_plot_help_names_the_formats_by_suffix(path: str) -> None:
    text = " ".join(_help(path).replace("│", " ").split())
    assert "PNG" not in text
    assert re.search(r"--plot .*suffix names the format: \.png, \.svg, \.pdf", text), text


def test_simulate_spells_its_output_format_as_tune_does(tmp_path: Path) -> None:
    """`--format` on both; `simulate --output` still works, unlisted."""
    assert "--format" in _help("simulate") and "--format" in _help("tune")
    assert "--output" not in _help("simulate")
    scenario = ROOT / "deployments" / "examples" / "scenario.yaml"
    runs = [CliRunner().invoke(app, ["simulate", str(scenario), "--fast", spelling, "json"])
            for spelling in ("--format", "--output")]
    assert [run.exit_code for run in runs] == [0, 0], runs[0].output[-2000:]
    assert json.loads(runs[0].stdout) == json.loads(runs[1].stdout)


EXAMPLES = ROOT / "deployments" / "examples"
PLANS = {
    "plan": ["plan", "--nodegroups", str(EXAMPLES / "nodegroups.yaml"), "--cluster",
             str(EXAMPLES / "cluster.json"), "--asg", str(EXAMPLES / "asgs.json"),
             "--now", "2026-11-21T12:00:00Z"],
    "pods plan": ["pods", "plan", "--cluster", str(EXAMPLES / "pod-autoscalers.yaml"),
                  "--metrics", str(EXAMPLES / "pod-metrics.json"),
                  "--now", "2026-11-21T12:00:00Z"],
}


@pytest.mark.parametrize("path", ["plan", "run", "pods plan", "pods run", "pods validate",
                                  "simulate"])
def test_every_output_format_is_spelled_format(path: str) -> None:
    """Issue 42: `--format` for the format everywhere; `--output` no longer listed."""
    text = _help(path)
    assert "--format" in text and "--output" not in text, text


@pytest.mark.parametrize("path", sorted(PLANS))
def test_the_old_output_spelling_still_works_with_a_warning(path: str) -> None:
    new, old = (CliRunner().invoke(app, [*PLANS[path], spelling, "json"])
                for spelling in ("--format", "--output"))
    assert (new.exit_code, old.exit_code) == (0, 0), old.output[-2000:]
    assert json.loads(new.stdout) == json.loads(old.stdout)
    assert "--output is deprecated" not in new.stderr
    assert "warning: --output is deprecated for the output format: use --format json" in \
        " ".join(old.stderr.split())


def _fast_ticks(scenario: Path, *options: str) -> list[Any]:
    result = CliRunner().invoke(app, ["simulate", str(scenario), "--fast", "--format", "json",
                                      *options])
    assert result.exit_code == 0, result.output[-2000:]
    ticks: list[Any] = json.loads(result.stdout)["ticks"]
    return ticks


def test_the_readmes_profile_example_runs_a_scenario_the_profile_changes() -> None:
    readme = (ROOT / "README.md").read_text()
    [line] = [line for line in readme.splitlines()
              if line.startswith("elevator simulate") and "--profile" in line]
    words = shlex.split(line.split("#")[0])
    scenario = ROOT / words[2]
    profile = words[words.index("--profile") + 1]
    assert _fast_ticks(scenario, "--profile", profile) != _fast_ticks(scenario,
                                                                      "--profile", "default")


def test_architecture_doc_cites_nothing_outside_the_repository() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert "DESIGN.md" not in text and "../" not in text and "/work/" not in text
    for path in re.findall(r"`((?:flows|tasks|fakes|tests|deployments|docs|benchmarks)/"
                           r"[\w./-]+)`", text):
        assert (ROOT / path).exists() or (ROOT / path.rstrip("/")).exists() or \
            any(ROOT.glob(path + "*")), f"docs/architecture.md cites {path}, not in the repo"


def _legends_clear_of_the_axes(figure: Any) -> None:
    """No legend box overlaps a panel's plotting area (rendered, in display pixels)."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    legends = [*figure.legends, *(axis.get_legend() for axis in figure.axes
                                  if axis.get_legend() is not None)]
    assert legends
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for axis in figure.axes:
            assert not box.overlaps(axis.get_window_extent(renderer)), axis.get_title()


def test_plot_legends_cover_no_data() -> None:
    """The simulation's legend sat inside each panel, over the lines; tune's over the trials."""
    import matplotlib.pyplot as plt

    from kube_elevator.fakes.plot import front_figure, simulation_figure
    from kube_elevator.flows.tune import Evaluation, TuneResult
    from tests.builders import make_group

    scenario = ROOT / "deployments" / "examples" / "scenario.yaml"
    document = {"ticks": _fast_ticks(scenario), "summary": {}}
    figure = simulation_figure(document)
    _legends_clear_of_the_axes(figure)
    plt.close(figure)
    trials = [({"batch": {"slow_node_removal_rate": index}},
               Evaluation(1000.0 + 50 * index, 900.0 - 40 * index, (60.0,), (0,)), index % 3 > 0)
              for index in range(20)]
    figure = front_figure(TuneResult((make_group(),), trials=trials, chosen=trials[4][0]))
    _legends_clear_of_the_axes(figure)
    plt.close(figure)
