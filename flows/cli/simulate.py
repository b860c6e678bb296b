"""The fake cluster as a service, and a scenario on the simulated clock."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import orjson
import typer
from rich.table import Table

from kube_elevator.flows.cli.common import (
    DeprecatedOutputOption,
    OutputFormat,
    chosen_format,
    console,
    describe_failure,
    errors,
    note_lines,
    print_warnings,
    reports_input_errors,
    require_extra,
    wait_for_stop_signal,
)
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.output_files import unplottable
from kube_elevator.tasks.core.words import counted

if TYPE_CHECKING:
    from kube_elevator.fakes.harness.cluster import FakeCluster


class SchedulerProfile(StrEnum):
    """The scheduler profiles a simulation can place pods with (tasks/scheduler/profiles.py)."""

    default = "default"
    most_allocated = "most-allocated"
    first_fit = "first-fit"


# moto's server mode (`FakeAws`, a process's fake AWS on a port): moto[server] brings flask and
# flask_cors beside moto; a venv with moto alone is told to install the extra, not shown moto's
# import error.
MOTO_SERVER_MODULES = ("moto", "flask", "flask_cors")
STEP_SECONDS = 1.0  # how often `fake-cluster --scenario` steps the simulated cluster


@reports_input_errors
def fake_cluster(
    kube_port: Annotated[int, typer.Option(help="Port of the fake Kubernetes API (0: any).")] = 0,
    aws_port: Annotated[int, typer.Option(help="Port of the moto server (0: any).")] = 0,
    kubeconfig_out: Annotated[Path, typer.Option(
        help="Where to write the kubeconfig.")] = Path("fake-kubeconfig.yaml"),
    scenario: Annotated[Path | None, typer.Option(
        help="A scenario file (as `simulate` reads): start with its ASGs and their Nodes, join "
        "a Node for each new instance after the ASG's boot_delay, drop the Nodes of "
        "terminated ones, and bind pending pods with the scheduler model; on the wall "
        "clock. Its workload (waves, trace) is not played.")] = None,
    disable_admission_plugins: Annotated[str, typer.Option(
        help="Admission plugins to turn off, comma-separated, as kube-apiserver's flag: "
        "ServiceAccount, DefaultTolerationSeconds, Priority (Kubernetes' integration tests "
        "run with ServiceAccount off).")] = "",
) -> None:
    """Start the fake Kubernetes API and moto on 127.0.0.1 until Ctrl-C or SIGTERM.

    AWS is reached through a fault proxy in front of moto. Both take faults over HTTP at the
    printed `/_faults` URLs (see fakes/faults.py): POST a rule, GET them, DELETE them all.
    Without --scenario the cluster starts empty and nothing joins or schedules by itself.
    """
    require_extra("sim", *MOTO_SERVER_MODULES)
    from kube_elevator.fakes.aws import FakeAws
    from kube_elevator.fakes.aws_faults import AwsFaultProxy
    from kube_elevator.fakes.harness.cluster import FakeCluster
    from kube_elevator.fakes.kube_api.admission import PLUGINS
    from kube_elevator.fakes.kube_api.server import FakeKubeApi
    from kube_elevator.fakes.scenario import load_scenario
    from kube_elevator.tasks.scheduler.profiles import DEFAULT_PROFILE

    disabled = [name.strip() for name in disable_admission_plugins.split(",") if name.strip()]
    if unknown := [name for name in disabled if name not in PLUGINS]:
        raise InputError([f"--disable-admission-plugins: unknown admission plugin "
                          f"{unknown[0]!r}: the fake has {', '.join(PLUGINS)}"])
    loaded = load_scenario(scenario) if scenario is not None else None  # bad input: before
    stop = wait_for_stop_signal()                                       # anything starts
    profile, seed = ((loaded.scenario.scheduler.profile, loaded.scenario.seed)
                     if loaded is not None else (DEFAULT_PROFILE, 1))
    with FakeKubeApi(port=kube_port, disable_admission_plugins=disabled) as kube, \
            FakeAws(port=aws_port) as aws, \
            AwsFaultProxy(aws.endpoint_url) as proxy, \
            FakeCluster(kube=kube, aws=aws, scheduler_profile=profile, seed=seed) as cluster:
        if loaded is not None:
            for asg in loaded.scenario.asgs:
                cluster.add_asg(asg, loaded.config.node_groups)
        # The one file this command writes in the user's folder (the cluster's own kubeconfig
        # stays in its temporary folder), named absolutely: the export works from any folder.
        path = kube.write_kubeconfig(kubeconfig_out).resolve()
        exports = {**aws.env(), "AWS_ENDPOINT_URL": proxy.url}
        # Plain lines (the kubeconfig path is the user's, the exports are shell text): no markup.
        console.print(f"Kubernetes API: {kube.url}", highlight=False, markup=False)
        console.print(f"moto (AWS):     {proxy.url} (a fault proxy to {aws.endpoint_url})",
                      highlight=False, markup=False)
        console.print(f"kubeconfig:     {path}", highlight=False, markup=False, soft_wrap=True)
        console.print("export " + " ".join(f"{key}={value}" for key, value in exports.items()),
                      highlight=False, markup=False, soft_wrap=True)
        console.print(f"export KUBECONFIG={path}", highlight=False, markup=False, soft_wrap=True)
        console.print(f"Kubernetes faults: {kube.faults_url}", highlight=False, markup=False)
        console.print(f"AWS faults:        {proxy.faults_url}", highlight=False, markup=False)
        if loaded is not None:
            console.print(f"scenario:       {len(loaded.scenario.asgs)} ASGs, "
                          f"{len(cluster.nodes())} Nodes; new instances join as Nodes",
                          highlight=False, markup=False)
        sys.stdout.flush()
        _serve_world(cluster if loaded is not None else None, stop)
    console.print("stopped", highlight=False)


def _serve_world(cluster: FakeCluster | None, stop: threading.Event) -> None:
    """Until `stop`: step the simulated cluster on the wall clock every STEP_SECONDS."""
    if cluster is None:
        stop.wait()
        return
    last = time.monotonic()
    while not stop.wait(STEP_SECONDS):
        now = time.monotonic()
        try:
            cluster.advance(now - last)
        except Exception as error:  # what a user did by hand must not end the cluster
            errors.print(f"simulated cluster: step failed: {describe_failure(error)}",
                         highlight=False, markup=False)
        last = now


@reports_input_errors
def simulate(
    scenario: Annotated[Path, typer.Argument(help="Scenario file (YAML).")],
    output_format: Annotated[OutputFormat, typer.Option(
        "--format",
        help="table: a line per tick as it goes, then the summary; json: the whole run.")] =
        OutputFormat.table,
    plot: Annotated[Path | None, typer.Option(help=(
        "Draw the run into this file; its suffix names the format: .png, .svg, .pdf (or "
        "another matplotlib writes)."))] = None,
    prefect: Annotated[bool, typer.Option(
        "--prefect", help="Run each tick as a real Prefect flow run.")] = False,
    fast: Annotated[bool, typer.Option(
        "--fast", help="The in-memory world instead of the fake API server and moto: the same "
        "tick and tick records, far quicker; not with load-aware placement or --prefect.")]
        = False,
    profile: Annotated[SchedulerProfile | None, typer.Option(
        help="The scheduler profile to place pods with, in place of the scenario's "
        "`scheduler.profile` (default: kube-scheduler's default profile).")] = None,
    output: DeprecatedOutputOption = None,
) -> None:
    """Simulate a workload on the fake cluster with the real tick, on a simulated clock."""
    output_format = chosen_format(output_format, output)  # `--format`, as `tune` spells it
    # A flow run a tick: Prefect's per-task INFO lines would drown the table.
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    # the faithful mode serves moto on a port; the fast one reads no AWS at all
    require_extra("sim", *(() if fast else MOTO_SERVER_MODULES),
                  *(["matplotlib"] if plot is not None else []))
    from kube_elevator.fakes.scenario import load_scenario, with_profile
    from kube_elevator.flows.simulation import simulate as run_simulation

    if plot is not None and (problem := unplottable(plot, "--plot")):
        raise InputError([problem])  # before the run, which may take minutes
    loaded = with_profile(load_scenario(scenario), profile.value if profile else None)
    print_warnings(loaded.config)
    total = loaded.scenario.duration
    minimums = {group.name: group.min_nodes for group in loaded.config.node_groups}
    progress = Progress(TextColumn("simulated"), BarColumn(),
                        TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
                        TimeRemainingColumn(), console=errors, transient=True)

    def show_tick(record: dict[str, object]) -> None:
        if output_format is OutputFormat.table:
            # group names are the scenario's: a plain line, no markup
            progress.console.print(tick_line(record, minimums), highlight=False, markup=False,
                                   soft_wrap=True)

    if prefect:
        from kube_elevator.tasks.adapters.prefect_server import use_local_server

        use_local_server()  # without PREFECT_API_URL: the shared one, or one line why not
    with progress:
        bar = progress.add_task("simulate", total=total)
        result = run_simulation(loaded, prefect=prefect, on_tick=show_tick,
                                on_step=lambda offset: progress.update(bar, completed=offset),
                                mode="memory" if fast else "http")
    document = result.to_json()
    if output_format is OutputFormat.json:
        sys.stdout.buffer.write(orjson.dumps(document) + b"\n")
        sys.stdout.flush()
    else:
        console.print(summary_table(document["summary"]))
    if plot is not None:
        from kube_elevator.fakes.plot import plot_simulation

        written = plot_simulation(document, plot)
        (errors if output_format is OutputFormat.json else console).print(
            f"plot written to {written}", highlight=False, markup=False, soft_wrap=True)


def tick_line(record: dict[str, object], min_nodes: Mapping[str, int] | None = None) -> str:
    """`t=  120s batch: 2 nodes (2 untainted, 0 tainted) ASG 12, 37 pending ...`, then a line
    per group with its reason (and its notes, `  note: ...`); a removal
    that `min_nodes` holds back says so (the delta alone, repeated tick after tick, read as if
    nodes were going)."""
    parts = []
    groups = record["node_groups"]
    assert isinstance(groups, dict)
    for name, line in groups.items():
        cpu = "from 0" if line["cpu_percent"] is None else f"{line['cpu_percent']:.0f}%"
        floor = (min_nodes or {}).get(name, 0)
        held = (f" (held at min_nodes {floor})"
                if line["delta"] < 0 and floor > 0 and line["untainted"] <= floor else "")
        parts.append(f"{name}: {counted(line['nodes'], 'node')} ({line['untainted']} untainted, "
                     f"{line['tainted']} tainted) ASG {line['asg_desired']}, "
                     f"{line['pending_pods']} pending, {line['running_pods']} running, "
                     f"cpu {cpu}, delta {line['delta']:+d}{held}")
    # Under it, each group's reason and notes, as `run`'s tick lines give them (issue 42).
    why = "".join(f"\n  {name}: {line['reason']}" + note_lines(line)
                  for name, line in groups.items() if line.get("reason") or line.get("notes"))
    return f"t={record['t']:>6.0f}s  " + " | ".join(parts) + why


def summary_table(summary: dict[str, object]) -> Table:
    table = Table(title="simulation summary")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        table.add_row(key.replace("_", " "), str(value))
    if "scheduler_profile" in summary:
        from kube_elevator.tasks.scheduler.profiles import KUBERNETES_VERSION

        profile = summary["scheduler_profile"]
        # first-fit is the simulator's older placement, not a profile kube-scheduler has.
        table.caption = (f"pods placed first-fit: on the oldest node that passes the "
                         f"kube-scheduler {KUBERNETES_VERSION} model's filters"
                         if profile == "first-fit" else
                         f"pods placed by the {profile} profile of the kube-scheduler "
                         f"{KUBERNETES_VERSION} model")
    return table


def register(app: typer.Typer) -> None:
    app.command("fake-cluster")(fake_cluster)
    app.command("simulate")(simulate)
