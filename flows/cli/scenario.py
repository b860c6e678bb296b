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
    from fakes.scenario import load_scenario
    from fakes.scenario_import import read_trace, write_scenario
    from tasks.adapters.prometheus import MetricUnavailable, PrometheusMetrics
    from tasks.escalator.config import load_node_groups

    since, until = parse_now(start, "--start"), parse_now(end, "--end")
    if until <= since:
        raise InputError([f"--end: {end!r} must come after --start {start!r}"])
    config = load_node_groups(nodegroups)
    prometheus = PrometheusMetrics(http_url(url, "--url"))
    try:
        rows, at_start = read_trace(prometheus, since, until, config.node_groups)
    except MetricUnavailable as error:
        raise InputError([f"--url: {error}"]) from None
    if not rows:
        raise InputError([f"--url: no pod of the node groups in {nodegroups} ran between "
                          f"{start} and {end} (kube_pod_created, kube_pod_info and "
                          "kube_node_labels are kube-state-metrics' series)"])
    path = write_scenario(output, nodegroups, config.node_groups, rows, at_start,
                          until - since, instance_type)
    load_scenario(path)  # what we wrote reads back as a valid scenario
    console.print(f"{path}: {len(rows)} pods over {until - since:.0f}s "
                  f"({', '.join(f'{g}: {n} nodes at the start' for g, n in at_start.items())})",
                  highlight=False, markup=False, soft_wrap=True)


app.command("from-prometheus")(reports_input_errors(from_prometheus))


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="scenario")
