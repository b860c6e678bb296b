"""The node-group commands: validate a file, plan a tick from snapshots, run ticks live."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.table import Table
from rich.text import Text

from kube_elevator.flows.cli.common import (
    DeprecatedOutputOption,
    FormatOption,
    OutputFormat,
    chosen_format,
    console,
    note_lines,
    one_line,
    parse_now,
    print_warnings,
    reports_input_errors,
    run_cycle,
    run_until_stopped,
)
from kube_elevator.flows.cli.liveness import (
    Liveness,
    elector_for,
    run_ticks_alive,
    with_liveness_options,
)
from kube_elevator.tasks.core.collector import gc_paused
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.lease_state import DEFAULT_LEASE_NAMESPACE
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.escalator.plan import ScalePlan
from kube_elevator.tasks.node_group_file import load_node_groups


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
            f"{group.scale_up_cool_down_period}" + _one_shot(group)
            + (", dry mode" if group.dry_mode else ""),
            highlight=False, markup=False, soft_wrap=True)
    console.print(f"{file}: {len(config.node_groups)} node groups, valid", highlight=False,
                  markup=False, soft_wrap=True)


def _one_shot(group: NodeGroupConfig) -> str:
    """How a group with a launch template scales up (Escalator's one-shot, flows/fleet.py)."""
    options = group.aws
    if not options.one_shot:
        return ""
    types = ", ".join(options.instance_type_overrides) or "the template's type"
    return (f", scale-up: EC2 Fleet of {options.launch_template_id} version "
            f"{options.launch_template_version or '(default)'} ({options.lifecycle or 'on-demand'}"
            f"; {types}), ready within {options.fleet_instance_ready_seconds:g}s")


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
        # Cells as Text, never markup: group and node names, reasons and errors quote the
        # user's files and the cluster (a group named `[/x]` is printed as it is).
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
        reason = Text()
        if plan.error:
            reason.append(plan.error, style="red").append(": ")
        reason.append(plan.reason)
        if plan.locked:
            reason.append(" ").append("(locked)", style="dim")
        for note in plan.notes:
            reason.append("\n").append(note, style="yellow")
        name = Text(plan.name)
        if plan.dry_mode:
            name.append(" ").append("(dry)", style="dim")
        nodes = plan.nodes
        table.add_row(
            name, str(plan.pods),
            f"{nodes.total} ({nodes.untainted}/{nodes.tainted}/{nodes.force_tainted}/"
            f"{nodes.cordoned})",
            _percent(plan.cpu_percent), _percent(plan.mem_percent), f"{plan.delta:+d}",
            Text("\n".join(actions) or "nothing"), reason)
    return table


def print_plans(now: float, plans: Sequence[ScalePlan], output: OutputFormat) -> None:
    if output is OutputFormat.json:
        sys.stdout.buffer.write(orjson.dumps(plans_document(now, plans),
                                             option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()
    else:
        console.print(plans_table(now, plans))


def check_snapshot_given(cluster: Sequence[Path], empty_cluster: bool) -> None:
    """A plan without a snapshot is a plan on nothing: only when the user says so."""
    if cluster and empty_cluster:
        raise InputError(["--empty-cluster: plans on no nodes and no pods; it cannot go with "
                          "--cluster"])
    if not cluster and not empty_cluster:
        raise InputError(["--cluster: give the snapshot to plan on (kubectl get nodes,pods,"
                          "leases,poddisruptionbudgets -A -o json > cluster.json; --cluster "
                          "cluster.json), or --empty-cluster to plan on a cluster with no nodes "
                          "and no pods"])


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
    output_format: FormatOption = OutputFormat.table,
    output: DeprecatedOutputOption = None,
    lease_namespace: Annotated[str, typer.Option(
        help="Namespace of the elevator-<group> Leases in the snapshot.")] =
        DEFAULT_LEASE_NAMESPACE,
    dry_mode: Annotated[bool, typer.Option(
        "--dry-mode", help="Force Escalator's dry mode for every group.")] = False,
    empty_cluster: Annotated[bool, typer.Option(
        "--empty-cluster", help="Plan on a cluster with no nodes and no pods, on purpose "
                                "(without it, a plan needs --cluster).")] = False,
) -> None:
    """What one tick would do, and why, without touching anything."""
    output_format = chosen_format(output_format, output)
    moment = parse_now(now)
    config = load_node_groups(nodegroups)
    print_warnings(config)
    check_snapshot_given(cluster, empty_cluster)
    from kube_elevator.flows.plan import plan as plan_files

    plans = plan_files(config, cluster, moment, asg, lease_namespace, dry_mode)
    print_plans(moment, plans, output_format)


@reports_input_errors
@with_liveness_options(leader_elect=False)
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
    output_format: FormatOption = OutputFormat.table,
    output: DeprecatedOutputOption = None,
    *, liveness: Liveness,
) -> None:
    """Run the autoscale flow against a cluster, as Prefect flow runs (ephemeral server by default).

    With --once, the exit status is 1 when the tick or any node group failed (a line each on
    stderr), 2 on bad input. The health endpoint (with /metrics) and leader election are the
    loop's (without --once). AWS endpoint and region come from boto3's usual settings
    (AWS_ENDPOINT_URL, AWS_DEFAULT_REGION), so the same command drives moto.
    """
    output_format = chosen_format(output_format, output)
    from kube_elevator.tasks.core.duration import positive_duration_option
    from kube_elevator.tasks.core.lease_state import lease_name

    config = load_node_groups(nodegroups)  # bad input fails here, before any flow run
    period = positive_duration_option(interval, "--interval")
    liveness.check_lease_name([lease_name(group.name) for group in config.node_groups])
    if not once:
        liveness.warn_if_ticks_outlast(period)
    from kube_elevator.tasks.adapters.kube import KubeClient

    kube = KubeClient.from_config(kubeconfig)  # so does a kubeconfig the client cannot use
    from kube_elevator.flows.crash_detection import ensure_crash_detection, heartbeat_environment

    heartbeat_environment()
    from kube_elevator.tasks.adapters.prefect_server import use_local_server

    # without PREFECT_API_URL: the shared local server for --once, a loop's own server else;
    # started (or found) now, or one line why not
    use_local_server("shared" if once else "own")
    with gc_paused():  # module loading (tasks/core/collector.py)
        ensure_crash_detection()  # a tick whose process dies ends Crashed on the server
        from kube_elevator.flows.autoscale import autoscale
        from kube_elevator.flows.run_state import run_here

    def cycle() -> list[dict[str, Any]]:
        return run_here(lambda: autoscale(nodegroups=str(nodegroups), dry_run=dry_run,
                                          lease_namespace=lease_namespace,
                                          kubeconfig=str(kubeconfig) if kubeconfig else None,
                                          return_state=True)).results()

    def line(result: dict[str, Any]) -> str:
        return (f"{result['name']}: {result['status']} (delta {result['delta']:+d}) "
                f"{result['reason']}" + note_lines(result))

    if once:
        run_until_stopped(cycle, line, output_format, once, period, failed_groups)
    else:
        _run_ticks(lambda: not run_cycle(cycle, line, output_format, False, failed_groups), period,
                   liveness, kube.api, lease_namespace)


def _run_ticks(tick: Callable[[], bool], period: float, liveness: Liveness, api_client: Any,
               lease_namespace: str) -> None:
    """`run --interval`: a tick every `period` through the ticker (under leader election, while
    this process leads), with the health endpoint, until SIGTERM or SIGINT."""
    from kube_elevator.flows.cli.common import say_as

    run_ticks_alive(tick, period, liveness,
                    elector_for(liveness, api_client, lease_namespace, say_as("run")))


def failed_groups(results: Sequence[dict[str, Any]]) -> list[str]:
    """A line for each node group whose tick failed (`run --once` then exits 1)."""
    return [f"node group {result.get('name')}: failed: "
            f"{one_line(str(result.get('message') or result.get('reason') or ''))}"
            for result in results if result.get("status") == "failed"]


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
    app.command("plan")(plan)
    app.command("run")(run)
