"""`elevator tune`: the node-group settings that fit a workload, found before anything runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.table import Table

from kube_elevator.flows.cli.common import (
    OutputFormat,
    console,
    errors,
    print_warnings,
    reports_input_errors,
    require_extra,
)
from kube_elevator.tasks.core.duration import positive_duration_option
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.output_files import unplottable, unwritable
from kube_elevator.tasks.scheduler.profiles import PROFILE_NAMES, ProfileName


def tune(
    scenario: Annotated[Path, typer.Argument(help="Scenario file (YAML) whose workload to tune on.")],
    trials: Annotated[int, typer.Option(min=1, max=100_000, help="Settings to try.")] = 100,
    seeds: Annotated[int, typer.Option(min=1, max=100,
                                       help="Redrawn workloads each trial is judged on.")] = 8,
    held_out: Annotated[int, typer.Option(min=1, max=100, help=(
        "Workloads the search never sees, to judge the chosen setting against the file."))] = 5,
    max_pending: Annotated[str | None, typer.Option(help=(
        "The longest a pod may wait (Go duration); default: no longer than with the file "
        "as it is."))] = None,
    output: Annotated[Path, typer.Option(help="Where to write the tuned node-group file.")] =
        Path("tuned-nodegroups.yaml"),
    plot: Annotated[Path | None, typer.Option(help=(
        "Draw the Pareto front into this file; its suffix names the format: .png, .svg, .pdf "
        "(or another matplotlib writes)."))] = None,
    batch: Annotated[int, typer.Option(min=1, max=1000, help="Trials per task run.")] = 4,
    parallel: Annotated[int, typer.Option(min=1, max=1000, help="Task runs at once.")] = 2,
    dask: Annotated[str | None, typer.Option(help=(
        "Address of a Dask scheduler (tcp://host:8786): run the batches there."))] = None,
    seed: Annotated[int, typer.Option(min=0, max=2**32 - 1, help="The optimiser's seed.")] =
        0,
    profiles: Annotated[str | None, typer.Option(help=(
        "Scheduler profiles to judge every setting under, comma-separated (default, "
        "most-allocated, first-fit): a setting must stay within the limits under each, and "
        "its node-seconds are summed over them. Default: the scenario's profile."))] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format",
                                                        help="table or json.")] =
        OutputFormat.table,
) -> None:
    """Search each group's Escalator knobs on a scenario's workload; write the best file."""
    require_extra("tune", "optuna", *(["prefect_dask", "distributed"] if dask else []),
                  *(["matplotlib"] if plot else []))
    limit = positive_duration_option(max_pending, "--max-pending") \
        if max_pending is not None else 0.0
    judged = profile_option(profiles) if profiles is not None else None
    # Checked before the search, which may take hours: where the results go, and the cluster.
    problems = [problem for problem in (
        unwritable(output, "--output"), unplottable(plot, "--plot") if plot else "") if problem]
    if dask:
        problems.extend(unreachable_dask(dask))
    if problems:
        raise InputError(problems)
    from kube_elevator.fakes.scenario import load_scenario

    loaded = load_scenario(scenario)  # bad input fails here, before any flow run
    print_warnings(loaded.config)
    raise_fast_mode_problems(loaded)
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from kube_elevator.flows import tune as tuning

    with SearchProgress(trials) as shown:
        shown.phase("starting the flow run" + ("" if os.environ.get("PREFECT_API_URL")
                                               else " (and a temporary Prefect server)"))
        from kube_elevator.tasks.adapters.prefect_server import use_local_server

        use_local_server()  # without PREFECT_API_URL: the shared one, or one line why not
        tuning.progress, tuning.phase = shown.trials_done, shown.phase
        try:
            answer = tuning.tune_flow(
                scenario=str(scenario), trials=trials, batch=batch, parallel=parallel,
                seeds=seeds, held_out_seeds=held_out, max_pending_seconds=limit, seed=seed,
                dask_address=dask, profiles=judged)
        finally:
            tuning.progress = tuning.phase = None
    result: tuning.TuneResult = answer["result"]
    written = tuning.tuned_file(output, tuning.node_group_text(loaded), result)
    if plot is not None:
        from kube_elevator.fakes.plot import plot_front

        plot_front(result, plot)
    summary = result.summary()
    if output_format is OutputFormat.json:
        sys.stdout.buffer.write(orjson.dumps({**summary, "output": str(written)}) + b"\n")
        return
    console.print(front_table(result))
    console.print(held_out_table(result))
    if len(result.profiles) > 1:
        console.print(profiles_table(result))
    if result.unconstrained_held_out is not None:
        console.print(constraints_table(result))
    console.print(f"tuned node-group file: {written}" + (f"; plot: {plot}" if plot else ""),
                  highlight=False, markup=False)


class SearchProgress:
    """The search's progress on stderr, so stdout stays the result (`--format json`): a rich
    bar on a terminal, else a line per step and about every tenth of the trials
    (`tune: trials 3/8`), which a CI log or `2> file` keeps."""

    def __init__(self, total: int) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.total = total
        self.live = errors.is_terminal
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                            TextColumn("{task.completed:.0f}/{task.total:.0f} trials"),
                            TimeElapsedColumn(), console=errors, transient=True)
        self.task = self.bar.add_task("tune", total=total)
        self.said = -1  # the trials done at the last line said

    def __enter__(self) -> SearchProgress:
        if self.live:
            self.bar.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self.live:
            self.bar.stop()

    def phase(self, text: str) -> None:
        if self.live:
            self.bar.update(self.task, description=text)
        else:
            errors.print(f"tune: {text}", highlight=False, markup=False, soft_wrap=True)

    def trials_done(self, done: int) -> None:
        if self.live:
            self.bar.update(self.task, completed=done, description="searching")
        elif done == self.total or done - max(self.said, 0) >= max(self.total // 10, 1):
            self.said = done
            errors.print(f"tune: trials {done}/{self.total}", highlight=False, markup=False)


def raise_fast_mode_problems(loaded: Any) -> None:
    """Tuning runs the fast simulation: what needs the load watcher over HTTP is refused
    before the search, not by the first trial's flow run."""
    problems = []
    if loaded.scenario.placement != "first-fit":
        problems.append(f"{loaded.source}: placement: tuning runs the fast simulation, which "
                        "runs no load watcher for load-aware placement")
    for index, group in enumerate(loaded.config.node_groups):
        if group.scale_down_selection == "least_loaded":
            problems.append(
                f"{loaded.source}: nodegroups.node_groups[{index}].scale_down_selection: "
                "tuning runs the fast simulation, which selects oldest first only "
                "(least_loaded reads the load watcher over HTTP)")
    if problems:
        raise InputError(problems)


def profile_option(text: str) -> list[ProfileName]:
    """`--profiles default,most-allocated`: known names, each once, in the order given."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    known: dict[str, ProfileName] = {name: name for name in PROFILE_NAMES}
    unknown = [name for name in names if name not in known]
    if not names or unknown:
        raise InputError([f"--profiles: {', '.join(map(repr, unknown)) or 'nothing given'}: "
                          f"give scheduler profiles among {', '.join(PROFILE_NAMES)}, "
                          "comma-separated"])
    return list(dict.fromkeys(known[name] for name in names))


DASK_CONNECT_SECONDS = 5.0


def unreachable_dask(address: str) -> list[str]:
    """A malformed or unreachable scheduler address, found before the search starts."""
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        protocol, location = parse_address(address)
        host, port = parse_host_port(location)
    except ValueError as error:
        return [f"--dask: {address!r} is not a scheduler address (tcp://host:8786): {error}"]
    if protocol not in ("tcp", "tls"):
        return []  # inproc://, ucx://: nothing to dial here
    try:
        socket.create_connection((host, port), timeout=DASK_CONNECT_SECONDS).close()
    except OSError as error:
        return [f"--dask: cannot reach {address}: {error.strerror or error}"]
    return []


def front_table(result: Any) -> Table:
    table = Table(title=f"Pareto front of {result.tried} trials and the file as it is "
                        "(search seeds)")
    for column in ("node-seconds", "pending pod-seconds", "longest wait", "within limits"):
        table.add_column(column, justify="right")
    for index in result.front:
        _, evaluation, feasible = result.trials[index]
        table.add_row(f"{evaluation.node_seconds:.0f}", f"{evaluation.pending_pod_seconds:.0f}",
                      f"{evaluation.max_pending_seconds:.0f}s", "yes" if feasible else "no")
    return table


def held_out_table(result: Any) -> Table:
    profiles = ", ".join(result.profiles)
    runs = "each seed" if len(result.profiles) < 2 else "each profile and seed"
    table = Table(title=f"the file as it is vs tuned, on held-out seeds (scheduler profile "
                        f"{profiles})")
    for column in ("", "node-seconds", "pending pod-seconds", f"longest wait ({runs})",
                   "pods cut short"):
        table.add_column(column, justify="right")
    for name, evaluation in (("as it is", result.default_held_out),
                             ("tuned", result.tuned_held_out)):
        waits = " ".join(f"{wait:.0f}" for wait in evaluation.longest_waits)
        table.add_row(name, f"{evaluation.node_seconds:.0f}",
                      f"{evaluation.pending_pod_seconds:.0f}",
                      f"{evaluation.max_pending_seconds:.0f}s ({waits})",
                      str(sum(evaluation.pods_cut_short)))
    saved = result.summary()["node_seconds_saved"]
    if saved is not None:
        table.caption = f"node-seconds saved: {saved:.0%}" + (
            " (the tuned file used more on the held-out seeds: keep the file as it is, or "
            "tune again with more --seeds)" if saved < 0 else "")
    return table


def profiles_table(result: Any) -> Table:
    """The held-out figures under each scheduler profile the setting was judged under."""
    table = Table(title="held-out seeds per scheduler profile")
    for column in ("profile", "node-seconds (file -> tuned)", "saved",
                   "longest wait (file -> tuned)", "pods cut short (file -> tuned)"):
        table.add_column(column, justify="right")
    for profile, (before, after) in result.held_out_by_profile.items():
        saved = "" if before.node_seconds == 0 else \
            f"{1 - after.node_seconds / before.node_seconds:.1%}"
        table.add_row(profile, f"{before.node_seconds:.0f} -> {after.node_seconds:.0f}", saved,
                      f"{before.max_pending_seconds:.0f}s -> {after.max_pending_seconds:.0f}s",
                      f"{sum(before.pods_cut_short)} -> {sum(after.pods_cut_short)}")
    return table


def constraints_table(result: Any) -> Table:
    """The held-out figures as modelled and with the waves' placement constraints (pod
    affinity, spreading, host ports, volume zones) left out: savings a scheduler ignoring them
    would promise, beside those the modelled cluster gives."""
    table = Table(title="held-out seeds with the placement constraints modelled and left out")
    for column in ("placement constraints", "node-seconds (file -> tuned)", "saved",
                   "longest wait (file -> tuned)"):
        table.add_column(column, justify="right")
    for name, (before, after) in (
            ("modelled", (result.default_held_out, result.tuned_held_out)),
            ("left out", result.unconstrained_held_out)):
        saved = "" if before.node_seconds == 0 else \
            f"{1 - after.node_seconds / before.node_seconds:.1%}"
        table.add_row(name, f"{before.node_seconds:.0f} -> {after.node_seconds:.0f}", saved,
                      f"{before.max_pending_seconds:.0f}s -> {after.max_pending_seconds:.0f}s")
    return table


def register(app: typer.Typer) -> None:
    app.command("tune")(reports_input_errors(tune))
