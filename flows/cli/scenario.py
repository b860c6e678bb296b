"""`elevator scenario from-prometheus`: a trace scenario from a real cluster's history."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kube_elevator.flows.cli.common import console, parse_now, reports_input_errors
from kube_elevator.flows.cli.services import http_url
from kube_elevator.tasks.core.errors import InputError

app = typer.Typer(help="Scenarios for elevator simulate and elevator tune.",
                  no_args_is_help=True)

DAY_SECONDS = 86_400


def _output_directory(output: Path) -> Path:
    """--output as a directory (made when written), or InputError: checked before Prometheus
    is asked, so a run that cannot write costs no queries."""
    folder = output
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        named = "" if folder == output else f" ({folder} is not)"
        raise InputError([f"--output: {output} is not a directory{named}; --output names the "
                          "directory for scenario.yaml and trace.csv"])
    return output


def from_prometheus(
    url: Annotated[str, typer.Option(help="Prometheus URL (kube-state-metrics scraped there).")],
    start: Annotated[str, typer.Option(help="The window's start: ISO 8601 or Unix seconds.")],
    end: Annotated[str, typer.Option(help="The window's end: ISO 8601 or Unix seconds.")],
    nodegroups: Annotated[Path, typer.Option(help="The Escalator node-group file to tune.")],
    output: Annotated[Path, typer.Option(help="Directory for scenario.yaml and trace.csv.")] =
        Path("scenario-from-prometheus"),
    instance_type: Annotated[str, typer.Option(help=(
        "The instance type of a group whose nodes kube-state-metrics gave neither an instance "
        "type label nor an allocatable for."))] = "m5.large",
) -> None:
    """Build a trace scenario from kube-state-metrics series: last week's workload, replayed."""
    from kube_elevator.fakes.scenario import MAX_SECONDS
    from kube_elevator.fakes.scenario_import import BadAnswer, NodeLabelsMissing, read_history
    from kube_elevator.fakes.scenario_import_files import write_scenario
    from kube_elevator.fakes.scenario_import_nodes import (
        allowlist_flag,
        ksm_label_name,
        missing_labels_problem,
    )
    from kube_elevator.tasks.adapters.prometheus import MetricUnavailable, PrometheusMetrics
    from kube_elevator.tasks.core.instance_types import INSTANCE_TYPES
    from kube_elevator.tasks.node_group_file import load_node_groups

    # Every option is checked before Prometheus is asked (house rule: bad input, exit 2).
    since, until = parse_now(start, "--start"), parse_now(end, "--end")
    if until <= since:
        raise InputError([f"--end: {end!r} must come after --start {start!r}"])
    if until - since > MAX_SECONDS:
        raise InputError([f"--end: the window from --start {start!r} to --end {end!r} is "
                          f"{(until - since) / DAY_SECONDS:,.1f} days; a scenario lasts at most "
                          f"{MAX_SECONDS / DAY_SECONDS:.0f} days"])
    if instance_type not in INSTANCE_TYPES:
        raise InputError([f"--instance-type: unknown instance type {instance_type!r}; known: "
                          f"{', '.join(sorted(INSTANCE_TYPES))}"])
    directory = _output_directory(output)
    config = load_node_groups(nodegroups)
    prometheus = PrometheusMetrics(http_url(url, "--url"))
    try:
        history = read_history(prometheus, since, until, config.node_groups, instance_type)
    except (MetricUnavailable, BadAnswer) as error:
        raise InputError([f"--url: {error}"]) from None
    except NodeLabelsMissing as missing:
        problem = missing_labels_problem(missing.keys, missing.label_names_seen,
                                         f"between {start} and {end}")
        raise InputError([f"--url: {problem}"]) from None
    if not history.rows:
        raise InputError([f"--url: no pod of the node groups in {nodegroups} ran between "
                          f"{start} and {end}, DaemonSet pods aside (kube_pod_created, "
                          "kube_pod_info and kube_node_labels are kube-state-metrics' series)"])
    try:
        path = write_scenario(directory, nodegroups, config.node_groups, history,
                              until - since)
    except OSError as error:  # nothing of this run is left, and what was there stays
        raise InputError([f"--output: cannot write scenario.yaml and trace.csv in "
                          f"{directory}: {error.strerror or error}"]) from None
    lines = [f"{path}: {len(history.rows)} pods over {until - since:.0f}s"]
    for name, seen in history.groups.items():
        pods = seen.per_node_pods
        each_node = (f"; on each node {len(pods)} DaemonSet pod{'s' * (len(pods) != 1)} "
                     f"({', '.join(pod.name for pod in pods)}): "
                     f"{sum(pod.cpu_milli for pod in pods)}m CPU, "
                     f"{sum(pod.memory_bytes for pod in pods) / 2**20:.0f} MiB") if pods else ""
        nodes = f"{seen.nodes_at_start} node{'s' * (seen.nodes_at_start != 1)}"
        unlabelled = (f"; no node carried {ksm_label_name(seen.unlabelled_key)} (if "
                      "kube-state-metrics does not export it: "
                      f"{allowlist_flag([seen.unlabelled_key])})") if seen.unlabelled_key else ""
        lines.append(f"  {name}: {nodes} at the start{unlabelled}; "
                     f"{seen.node_type.instance_type} {seen.node_type.source}{each_node}")
    console.print("\n".join(lines), highlight=False, markup=False, soft_wrap=True)


app.command("from-prometheus")(reports_input_errors(from_prometheus))


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="scenario")
