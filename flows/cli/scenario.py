"""`elevator scenario from-prometheus`: a trace scenario from a real cluster's history;
`elevator scenario from-kubectl`: a scenario's workload shapes from a cluster snapshot."""

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


def _check_instance_type(instance_type: str) -> None:
    """--instance-type names a type the simulator knows, or InputError."""
    from kube_elevator.tasks.core.instance_types import INSTANCE_TYPES

    if instance_type not in INSTANCE_TYPES:
        raise InputError([f"--instance-type: unknown instance type {instance_type!r}; known: "
                          f"{', '.join(sorted(INSTANCE_TYPES))}"])


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
    shapes: Annotated[list[Path] | None, typer.Option(help=(
        "A snapshot (kubectl get pods,nodes,pv,pvc -A -o json; repeat for a file per kind) "
        "whose owners' labels, affinity, spreading, host ports, priority and volume zones "
        "the trace's pods of those owners take."))] = None,
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
    from kube_elevator.tasks.node_group_file import load_node_groups

    # Every option is checked before Prometheus is asked (house rule: bad input, exit 2).
    since, until = parse_now(start, "--start"), parse_now(end, "--end")
    if until <= since:
        raise InputError([f"--end: {end!r} must come after --start {start!r}"])
    if until - since > MAX_SECONDS:
        raise InputError([f"--end: the window from --start {start!r} to --end {end!r} is "
                          f"{(until - since) / DAY_SECONDS:,.1f} days; a scenario lasts at most "
                          f"{MAX_SECONDS / DAY_SECONDS:.0f} days"])
    _check_instance_type(instance_type)
    directory = _output_directory(output)
    config = load_node_groups(nodegroups)
    snapshot = None
    if shapes:
        from kube_elevator.fakes.scenario_import_kubectl import read_snapshot

        snapshot = read_snapshot(shapes)  # read and checked before Prometheus is asked
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
    shaped = None
    if snapshot is not None:
        from kube_elevator.fakes.scenario_import_trace_shapes import trace_shapes

        shaped = trace_shapes(snapshot, config.node_groups, history.rows)
        history.rows = shaped.rows
    try:
        path = write_scenario(directory, nodegroups, config.node_groups, history,
                              until - since, shaped.shapes if shaped else None,
                              shaped.zones if shaped else None)
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
    if shaped is not None:
        with_shape = sum(1 for row in history.rows if row.shape)
        lines.append(f"  shapes: {with_shape} of {len(history.rows)} pods take their owner's "
                     f"shape ({len(shaped.shapes)} shapes from {', '.join(map(str, shapes or []))})")
        lines += [f"  note: {note}" for note in shaped.notes]
    console.print("\n".join(lines), highlight=False, markup=False, soft_wrap=True)


app.command("from-prometheus")(reports_input_errors(from_prometheus))


def from_kubectl(
    snapshot: Annotated[list[Path], typer.Option(help=(
        "kubectl get pods,nodes,pv,pvc -A -o json (JSON or YAML); repeat for a file per "
        "kind."))],
    nodegroups: Annotated[Path, typer.Option(help="The Escalator node-group file to tune.")],
    output: Annotated[Path, typer.Option(help="Directory for scenario.yaml.")] =
        Path("scenario-from-kubectl"),
    duration: Annotated[str, typer.Option(help="How long the simulation runs (Go syntax).")] =
        "1h",
    instance_type: Annotated[str, typer.Option(help=(
        "The instance type of a group whose nodes say neither an instance type label nor "
        "an allocatable the simulator can match."))] = "m5.large",
) -> None:
    """Build a scenario from a cluster snapshot: each owner's pods a wave (requests, labels,
    affinity, spreading, host ports, priority, zonal volumes), each node group an ASG."""
    import yaml
    from pydantic import ValidationError

    from kube_elevator.fakes.scenario import MAX_SECONDS, Scenario, scenario_problems
    from kube_elevator.fakes.scenario_import_files import nodegroups_from
    from kube_elevator.fakes.scenario_import_kubectl import (
        group_zones,
        read_groups,
        read_shapes,
        read_snapshot,
        scenario_document,
    )
    from kube_elevator.tasks.core.duration import parse_go_duration
    from kube_elevator.tasks.core.output_files import write_atomically
    from kube_elevator.tasks.node_group_file import load_node_groups

    try:
        seconds = parse_go_duration(duration)
    except ValueError as error:
        raise InputError([f"--duration: {error}"]) from None
    if not 0 < seconds <= MAX_SECONDS:
        raise InputError([f"--duration: {duration!r} must be more than 0 and at most "
                          f"{MAX_SECONDS / DAY_SECONDS:.0f} days"])
    _check_instance_type(instance_type)
    directory = _output_directory(output)
    config = load_node_groups(nodegroups)
    read = read_snapshot(snapshot)
    shapes = read_shapes(read, config.node_groups,
                         set(group_zones(read, config.node_groups).values()))
    nodes = read_groups(read, config.node_groups, instance_type, shapes.per_node)
    if not shapes.waves:
        raise InputError([f"--snapshot: no pod of the node groups in {nodegroups} is in "
                          f"{', '.join(map(str, snapshot))} (DaemonSet and static pods aside)"])
    document = scenario_document(nodegroups, config.node_groups, shapes, nodes, seconds)
    document["nodegroups"] = nodegroups_from(directory, nodegroups)
    path = directory / "scenario.yaml"
    try:
        Scenario.model_validate(document)
    except ValidationError as error:
        raise InputError(scenario_problems(error, str(path))) from None
    directory.mkdir(parents=True, exist_ok=True)
    write_atomically(path, ("# From a cluster snapshot (elevator scenario from-kubectl).\n"
                            + yaml.safe_dump(document, sort_keys=False)).encode(), "--output")
    pods = sum(wave["count"] for wave in shapes.waves)
    lines = [f"{path}: {len(shapes.waves)} waves, {pods} pods"]
    for name, seen in nodes.items():
        each_node = shapes.per_node.get(name, ())
        per_node = (f"; on each node {len(each_node)} DaemonSet pod"
                    f"{'s' * (len(each_node) != 1)}") if each_node else ""
        lines.append(f"  {name}: {seen.count} node{'s' * (seen.count != 1)} in {seen.zone}; "
                     f"{seen.node_type.instance_type} {seen.node_type.source}{per_node}")
    lines += [f"  note: {note}" for seen in nodes.values() for note in seen.notes]
    lines += [f"  note: {note}" for note in shapes.notes]
    console.print("\n".join(lines), highlight=False, markup=False, soft_wrap=True)


app.command("from-kubectl")(reports_input_errors(from_kubectl))


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="scenario")
