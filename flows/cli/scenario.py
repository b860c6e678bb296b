"""`elevator scenario from-prometheus`: a trace scenario from a real cluster's history."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import console, parse_now, reports_input_errors
from flows.cli.services import http_url
from tasks.core.errors import InputError

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
    instance_type: Annotated[str, typer.Option(help="The ASGs' instance type.")] = "m5.large",
) -> None:
    """Build a trace scenario from kube-state-metrics series: last week's workload, replayed."""
    from fakes.scenario import MAX_SECONDS
    from fakes.scenario_import import BadAnswer, read_trace, write_scenario
    from tasks.adapters.prometheus import MetricUnavailable, PrometheusMetrics
    from tasks.core.instance_types import INSTANCE_TYPES
    from tasks.node_group_file import load_node_groups

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
        rows, at_start = read_trace(prometheus, since, until, config.node_groups)
    except (MetricUnavailable, BadAnswer) as error:
        raise InputError([f"--url: {error}"]) from None
    if not rows:
        raise InputError([f"--url: no pod of the node groups in {nodegroups} ran between "
                          f"{start} and {end} (kube_pod_created, kube_pod_info and "
                          "kube_node_labels are kube-state-metrics' series)"])
    try:
        path = write_scenario(directory, nodegroups, config.node_groups, rows, at_start,
                              until - since, instance_type)
    except OSError as error:  # nothing of this run is left, and what was there stays
        raise InputError([f"--output: cannot write scenario.yaml and trace.csv in "
                          f"{directory}: {error.strerror or error}"]) from None
    console.print(f"{path}: {len(rows)} pods over {until - since:.0f}s "
                  f"({', '.join(f'{g}: {n} nodes at the start' for g, n in at_start.items())})",
                  highlight=False, markup=False, soft_wrap=True)


app.command("from-prometheus")(reports_input_errors(from_prometheus))


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="scenario")
