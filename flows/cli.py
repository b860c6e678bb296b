"""`elevator`: the command line. Bad input prints every problem and exits 2, never a traceback."""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tasks.collect import load_asg_file, load_cluster_files
from tasks.config import LoadedConfig, load_node_groups
from tasks.decide import ScalePlan
from tasks.errors import InputError
from tasks.lock import DEFAULT_LEASE_NAMESPACE

app = typer.Typer(
    help="kube-elevator: Escalator's node-group autoscaling (and more) as Prefect flows.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
# Piped output (CI logs, files) gets room for the reason column instead of rich's 80 columns.
console = Console(width=None if sys.stdout.isatty() else 160)
errors = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

INPUT_ERROR_EXIT = 2
P = ParamSpec("P")
R = TypeVar("R")


def reports_input_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn InputError into its problem lines on stderr and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except InputError as error:
            for problem in error.problems:
                # escaped: a key path such as `clusters[c]` is no rich markup tag
                errors.print(f"[red]error:[/red] {escape(problem)}", highlight=False,
                             markup=True, soft_wrap=True)
            raise typer.Exit(INPUT_ERROR_EXIT) from None

    return wrapper


class OutputFormat(StrEnum):
    table = "table"
    json = "json"


# --now's range: the times a datetime can show (years 1 to 9999), so the table can print it.
_EARLIEST_SECONDS = datetime(1, 1, 2, tzinfo=UTC).timestamp()
_LATEST_SECONDS = datetime(9999, 12, 30, tzinfo=UTC).timestamp()


def parse_now(text: str | None) -> float:
    """`--now`: ISO 8601 or Unix seconds; default the current time."""
    if text is None:
        return datetime.now(UTC).timestamp()
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InputError([f"--now: {text!r} is neither ISO 8601 nor Unix seconds"]) \
                from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        seconds = moment.timestamp()
    if not _EARLIEST_SECONDS <= seconds <= _LATEST_SECONDS:  # also NaN and infinities
        raise InputError([f"--now: {text!r} is not a time between the years 1 and 9999"])
    return seconds


def print_warnings(config: LoadedConfig) -> None:
    for warning in config.warnings:
        errors.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)


@app.command()
@reports_input_errors
def validate(
    file: Annotated[Path, typer.Argument(help="Escalator node-group file (YAML or JSON).")],
) -> None:
    """Check a node-group file: a line per group when valid, every problem when not."""
    config = load_node_groups(file)
    print_warnings(config)
    for group in config.node_groups:
        min_max = ("min/max from the ASG" if group.auto_discover_min_max
                   else f"nodes {group.min_nodes}..{group.max_nodes}")
        console.print(
            f"{group.name}: {group.label_key}={group.label_value} → ASG "
            f"{group.cloud_provider_group_name}, {min_max}, thresholds "
            f"{group.taint_lower_capacity_threshold_percent}/"
            f"{group.taint_upper_capacity_threshold_percent}/"
            f"{group.scale_up_threshold_percent}%, removal "
            f"{group.slow_node_removal_rate}/{group.fast_node_removal_rate}, grace "
            f"{group.soft_delete_grace_period}/{group.hard_delete_grace_period}, cool-down "
            f"{group.scale_up_cool_down_period}" + (", dry mode" if group.dry_mode else ""),
            highlight=False, soft_wrap=True)
    console.print(f"{file}: {len(config.node_groups)} node groups, valid", highlight=False)


def plans_document(now: float, plans: Sequence[ScalePlan]) -> dict[str, object]:
    return {"now": now, "node_groups": [plan.to_json() for plan in plans]}


def _percent(value: float | None) -> str:
    return "from 0" if value is None else f"{value:.1f}%"


def plans_table(now: float, plans: Sequence[ScalePlan]) -> Table:
    moment = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    table = Table(title=f"What one tick would do at {moment}", show_lines=True,
                  caption="nodes: total (untainted/tainted/force-tainted/cordoned)")
    for column in ("group", "pods", "nodes", "cpu", "memory", "delta", "actions"):
        table.add_column(column, overflow="fold", no_wrap=column != "actions")
    table.add_column("reason", overflow="fold", ratio=1)
    for plan in plans:
        actions = []
        if plan.untaint:
            actions.append(f"untaint {', '.join(plan.untaint)}")
        if plan.cloud_increase:
            actions.append(f"ASG +{plan.cloud_increase}")
        if plan.taint:
            actions.append(f"taint {', '.join(plan.taint)}")
        if plan.delete:
            actions.append(f"delete {', '.join(plan.delete)}")
        if plan.asg_desired != plan.asg_desired_before:
            actions.append(f"ASG desired {plan.asg_desired_before} → {plan.asg_desired}")
        reason = plan.reason
        if plan.error:
            reason = f"[red]{plan.error}[/red]: {reason}"
        if plan.locked:
            reason += " [dim](locked)[/dim]"
        for note in plan.notes:
            reason += f"\n[yellow]{note}[/yellow]"
        nodes = plan.nodes
        table.add_row(
            plan.name + (" [dim](dry)[/dim]" if plan.dry_mode else ""), str(plan.pods),
            f"{nodes.total} ({nodes.untainted}/{nodes.tainted}/{nodes.force_tainted}/"
            f"{nodes.cordoned})",
            _percent(plan.cpu_percent), _percent(plan.mem_percent), f"{plan.delta:+d}",
            "\n".join(actions) or "nothing", reason)
    return table


def print_plans(now: float, plans: Sequence[ScalePlan], output: OutputFormat) -> None:
    if output is OutputFormat.json:
        sys.stdout.buffer.write(orjson.dumps(plans_document(now, plans),
                                             option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()
    else:
        console.print(plans_table(now, plans))


@app.command()
@reports_input_errors
def plan(
    nodegroups: Annotated[Path, typer.Option(help="Escalator node-group file.")],
    cluster: Annotated[list[Path], typer.Option(
        help="`kubectl get nodes,pods,leases,poddisruptionbudgets -A -o json` output "
             "(repeatable; the budgets are optional).")] = [],  # noqa: B006
    asg: Annotated[Path | None, typer.Option(
        help="`aws autoscaling describe-auto-scaling-groups` output. Without it each ASG is "
             "MinSize=min_nodes, MaxSize=max_nodes, desired=the group's node count.")] = None,
    now: Annotated[str | None, typer.Option(
        help="The tick's time: ISO 8601 or Unix seconds (default: now).")] = None,
    output: Annotated[OutputFormat, typer.Option(help="table or json.")] = OutputFormat.table,
    lease_namespace: Annotated[str, typer.Option(
        help="Namespace of the elevator-<group> Leases in the snapshot.")] =
        DEFAULT_LEASE_NAMESPACE,
    dry_mode: Annotated[bool, typer.Option(
        "--dry-mode", help="Force Escalator's dry mode for every group.")] = False,
) -> None:
    """What one tick would do, and why, without touching anything."""
    moment = parse_now(now)
    config = load_node_groups(nodegroups)
    print_warnings(config)
    snapshot = load_cluster_files(cluster)
    asgs = load_asg_file(asg) if asg is not None else None
    from flows.tick import run_plain, tick
    from tasks.source import SnapshotSource

    groups = [group.model_copy(update={"dry_mode": True}) if dry_mode else group
              for group in config.node_groups]
    source = SnapshotSource(groups, snapshot.pods, snapshot.nodes, asgs, snapshot.states,
                            snapshot.pdbs, lease_namespace)
    # The live tick's composition with nothing to act through: the same reads (terminal pods
    # dropped), the same decision and, with `cluster_autoscaler.enabled`, CA's removal rules
    # with the snapshot's PodDisruptionBudgets; the notes say why a node is kept.
    results = tick(run_plain, source, None, groups, moment,
                   cluster_autoscaler=config.cluster_autoscaler)
    plans = [result.plan for result in results]
    print_plans(moment, plans, output)


def wait_for_stop_signal() -> threading.Event:
    """An event set by SIGTERM or SIGINT, so loops stop cleanly between ticks."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop


@app.command()
@reports_input_errors
def run(
    nodegroups: Annotated[Path, typer.Option(help="Escalator node-group file.")],
    kubeconfig: Annotated[Path | None, typer.Option(
        help="kubeconfig file (default: in-cluster config, else ~/.kube/config).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Decide and report; change nothing.")] = False,
    once: Annotated[bool, typer.Option("--once", help="One tick, then exit.")] = False,
    interval: Annotated[str, typer.Option(help="Time between ticks (Go duration).")] = "60s",
    lease_namespace: Annotated[str, typer.Option(
        help="Namespace of the elevator-<group> Leases.")] = DEFAULT_LEASE_NAMESPACE,
    output: Annotated[OutputFormat, typer.Option(help="table or json.")] = OutputFormat.table,
) -> None:
    """Run the autoscale flow against a cluster, as Prefect flow runs (ephemeral server by default).

    With --once, the exit status is 1 when the tick or any node group failed (a line each on
    stderr), 2 on bad input. AWS endpoint and region come from boto3's usual settings (AWS_ENDPOINT_URL,
    AWS_DEFAULT_REGION), so the same command drives moto.
    """
    from tasks.config import positive_duration_option

    load_node_groups(nodegroups)  # bad input fails here, before any flow run
    period = positive_duration_option(interval, "--interval")
    from tasks.kube import KubeClient

    KubeClient.from_config(kubeconfig)  # so does a kubeconfig the client cannot use
    from flows.crash_detection import ensure_crash_detection, heartbeat_environment

    heartbeat_environment()
    ensure_crash_detection()  # a tick whose process dies ends Crashed on the server
    from flows.autoscale import autoscale

    run_until_stopped(
        lambda: autoscale(nodegroups=str(nodegroups), dry_run=dry_run,
                          lease_namespace=lease_namespace,
                          kubeconfig=str(kubeconfig) if kubeconfig else None),
        lambda result: f"{result['name']}: {result['status']} (delta {result['delta']:+d}) "
                       f"{result['reason']}",
        output, once, period, failed_groups)


def one_line(text: str, limit: int = 400) -> str:
    """An error message on one line: a Kubernetes ApiException's text carries the response
    headers and body on lines of their own; the headers say nothing to an operator."""
    kept = [line for line in text.splitlines()
            if not line.startswith("HTTP response headers:")]
    flat = " ".join(" ".join(kept).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def describe_failure(error: BaseException) -> str:
    """`Type: message` on one line; a Kubernetes error by its status and `Status` message."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(error, ApiException):
        try:
            message = str(orjson.loads(error.body or b"{}").get("message") or "")
        except (orjson.JSONDecodeError, AttributeError):
            message = ""
        text = f"the Kubernetes API answered {error.status} {error.reason or ''}".rstrip()
        return f"{type(error).__name__}: {text}" + (f": {one_line(message)}" if message else "")
    return f"{type(error).__name__}: {one_line(str(error))}"


def failed_groups(results: Sequence[dict[str, Any]]) -> list[str]:
    """A line for each node group whose tick failed (`run --once` then exits 1)."""
    return [f"node group {result.get('name')}: failed: "
            f"{one_line(str(result.get('message') or result.get('reason') or ''))}"
            for result in results if result.get("status") == "failed"]


class _WithoutTraceback(logging.Formatter):
    """A console formatter that prints a log record's message but not its traceback."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            return self.inner.format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def console_logs_without_tracebacks() -> None:
    """Prefect logs a failed task or flow run with its traceback; on the console the error
    line says it all (house rule: no traceback), the Prefect server's run logs keep it."""
    loggers = [logging.getLogger(), *(logger for logger in logging.root.manager.loggerDict
                                      .values() if isinstance(logger, logging.Logger))]
    consoles = (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream in consoles \
                    and not isinstance(handler.formatter, _WithoutTraceback):
                handler.setFormatter(_WithoutTraceback(handler.formatter))


def run_until_stopped(cycle: Callable[[], list[dict[str, Any]]],
                      line: Callable[[dict[str, Any]], str], output: OutputFormat, once: bool,
                      period: float,
                      failures: Callable[[Sequence[dict[str, Any]]], list[str]] | None = None,
                      ) -> None:
    """`run`'s loop: a cycle every `period` seconds until SIGTERM/SIGINT, each result printed
    as a JSON line or as `line` says.

    A cycle that fails, or whose results `failures` finds failed, is reported on stderr, one
    line each and no traceback; with `once` the command then exits 1 (bad input: 2), otherwise
    the loop goes on to the next cycle.
    """
    stop = wait_for_stop_signal()
    console_logs_without_tracebacks()
    while not stop.is_set():
        try:
            results = cycle()
        except InputError as error:
            if once:
                raise
            problems = error.problems
        except Exception as error:  # a failed cycle is reported, never a traceback
            problems = [f"the tick failed: {describe_failure(error)}"]
        else:
            if output is OutputFormat.json:
                sys.stdout.buffer.write(orjson.dumps(results) + b"\n")
                sys.stdout.flush()
            else:
                for result in results:
                    console.print(line(result), highlight=False, markup=False, soft_wrap=True)
            problems = failures(results) if failures is not None else []
        for problem in problems:
            errors.print(f"[red]error:[/red] {escape(problem)}", highlight=False, markup=True,
                         soft_wrap=True)
        if once:
            if problems:
                raise typer.Exit(1)
            break
        stop.wait(period)


@app.command("fake-cluster")
def fake_cluster(
    kube_port: Annotated[int, typer.Option(help="Port of the fake Kubernetes API (0: any).")] = 0,
    aws_port: Annotated[int, typer.Option(help="Port of the moto server (0: any).")] = 0,
    kubeconfig_out: Annotated[Path, typer.Option(
        help="Where to write the kubeconfig.")] = Path("fake-kubeconfig.yaml"),
) -> None:
    """Start the fake Kubernetes API and moto on 127.0.0.1 until Ctrl-C or SIGTERM.

    AWS is reached through a fault proxy in front of moto. Both take faults over HTTP at the
    printed `/_faults` URLs (see fakes/faults.py): POST a rule, GET them, DELETE them all.
    """
    from fakes.aws import FakeAws
    from fakes.aws_faults import AwsFaultProxy
    from fakes.kube_api import FakeKubeApi

    stop = wait_for_stop_signal()
    with FakeKubeApi(port=kube_port) as kube, FakeAws(port=aws_port) as aws, \
            AwsFaultProxy(aws.endpoint_url) as proxy:
        path = kube.write_kubeconfig(kubeconfig_out)
        exports = {**aws.env(), "AWS_ENDPOINT_URL": proxy.url}
        console.print(f"Kubernetes API: {kube.url}", highlight=False)
        console.print(f"moto (AWS):     {proxy.url} (a fault proxy to {aws.endpoint_url})",
                      highlight=False)
        console.print(f"kubeconfig:     {path}", highlight=False)
        console.print("export " + " ".join(f"{key}={value}" for key, value in exports.items()),
                      highlight=False, soft_wrap=True)
        console.print(f"export KUBECONFIG={path}", highlight=False)
        console.print(f"Kubernetes faults: {kube.faults_url}", highlight=False)
        console.print(f"AWS faults:        {proxy.faults_url}", highlight=False)
        sys.stdout.flush()
        stop.wait()
    console.print("stopped", highlight=False)


@app.command()
@reports_input_errors
def simulate(
    scenario: Annotated[Path, typer.Argument(help="Scenario file (YAML).")],
    output: Annotated[OutputFormat, typer.Option(
        help="table: a line per tick as it goes, then the summary; json: the whole run.")] =
        OutputFormat.table,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG of the run here.")] = None,
    prefect: Annotated[bool, typer.Option(
        "--prefect", help="Run each tick as a real Prefect flow run.")] = False,
    fast: Annotated[bool, typer.Option(
        "--fast", help="The in-memory world instead of the fake API server and moto: the same "
        "tick and tick records, far quicker; first-fit placement only, not with --prefect.")]
        = False,
) -> None:
    """Simulate a workload on the fake cluster with the real tick, on a simulated clock."""
    # A flow run a tick: Prefect's per-task INFO lines would drown the table.
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from fakes.scenario import load_scenario
    from fakes.simulation import simulate as run_simulation

    loaded = load_scenario(scenario)
    total = loaded.scenario.duration
    progress = Progress(TextColumn("simulated"), BarColumn(),
                        TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
                        TimeRemainingColumn(), console=errors, transient=True)

    def show_tick(record: dict[str, object]) -> None:
        if output is OutputFormat.table:
            progress.console.print(tick_line(record), highlight=False, soft_wrap=True)

    with progress:
        bar = progress.add_task("simulate", total=total)
        result = run_simulation(loaded, prefect=prefect, on_tick=show_tick,
                                on_step=lambda offset: progress.update(bar, completed=offset),
                                mode="memory" if fast else "http")
    document = result.to_json()
    if output is OutputFormat.json:
        sys.stdout.buffer.write(orjson.dumps(document) + b"\n")
        sys.stdout.flush()
    else:
        console.print(summary_table(document["summary"]))
    if plot is not None:
        from fakes.plot import plot_simulation

        written = plot_simulation(document, plot)
        (errors if output is OutputFormat.json else console).print(
            f"plot written to {written}", highlight=False)


def tick_line(record: dict[str, object]) -> str:
    """`t=  120s batch: 2 nodes (2 untainted, 0 tainted) ASG 12, 37 pending ...`."""
    parts = []
    groups = record["node_groups"]
    assert isinstance(groups, dict)
    for name, line in groups.items():
        cpu = "from 0" if line["cpu_percent"] is None else f"{line['cpu_percent']:.0f}%"
        parts.append(f"{name}: {line['nodes']} nodes ({line['untainted']} untainted, "
                     f"{line['tainted']} tainted) ASG {line['asg_desired']}, "
                     f"{line['pending_pods']} pending, {line['running_pods']} running, "
                     f"cpu {cpu}, delta {line['delta']:+d}")
    return f"t={record['t']:>6.0f}s  " + " | ".join(parts)


def summary_table(summary: dict[str, object]) -> Table:
    table = Table(title="simulation summary")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        table.add_row(key.replace("_", " "), str(value))
    return table


def main() -> None:
    # An ephemeral Prefect server started by this process has no use for telemetry, whose
    # writes race the run recorder on SQLite ("database is locked" tracebacks).
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # Its services' own errors (SQLite "database is locked" under load, retried by the server)
    # would print tracebacks among the command's lines; a server of one's own logs as it likes.
    os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "CRITICAL")
    app()


def _register_services() -> None:
    """Sub-commands that live in their own modules (imported lazily by each command)."""
    from flows import load_services, pods_cli, serve, watch

    serve.register(app)
    watch.register(app)
    load_services.register(app)
    pods_cli.register(app)


_register_services()


if __name__ == "__main__":
    main()
