"""The `tune` flow: search each group's Escalator knobs on the user's own workload.

Every trial replays the scenario in the fast simulation (the same tick and decision code as
the live flow, in memory) on a few redrawn workloads (`fakes.scenario.perturbed`), so a setting
is judged on node-seconds against pending pod-seconds, not on one draw. The constraints are
judged workload by workload: no pod waits longer than with the file as it is (or than
`max_pending_seconds`), and no more running pods are cut short. The search has two phases:

1. a local search from the file, one knob at a time (`refine`): most good settings differ from
   the file in a few knobs, and changes that act only while load falls keep every wait;
2. Optuna's TPE sampler over all knobs at once (two objectives, the constraint), started from
   the file and the local search's best, for the Pareto front and what lies farther away.

Trials go out in batches, each batch a task run: on Prefect's default task runner, or on a Dask
cluster (`DaskTaskRunner`) when the search is big. The scenario is read and checked once, here;
the batches carry the loaded workload (its node groups, ASGs and every arrival), not its path:
a Dask worker is another machine, with no such file. On Dask the workload is scattered to every
worker once (`share_workload`), and each batch names it. The chosen setting is the one with the
fewest node-seconds that stays within the limits on seeds of their own, and it is judged again,
against the file as it was, on seeds the search never saw.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from pydantic import Field

from kube_elevator.tasks.core.output_files import write_atomically
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.scheduler.profiles import ProfileName
from kube_elevator.tasks.tuning.space import (
    KNOB_STEPS,
    Evaluation,
    Knobs,
    Limits,
    apply_knobs,
    as_written,
    combine,
    current_knobs,
    group_params,
    limits_of,
    one_knob_moves,
    pareto_front,
    suggest_group,
)

if TYPE_CHECKING:
    from kube_elevator.fakes.scenario import LoadedScenario

SEARCH_SEEDS_START = 1
VALIDATION_SEEDS_START = 501  # to choose among the best trials
HELD_OUT_SEEDS_START = 1001  # to judge the choice: never seen by the search or the choice


Profiles = Sequence[str] | None  # scheduler profiles to judge under (None: the scenario's)


def evaluate_by_profile(loaded: LoadedScenario, knobs: Mapping[str, Mapping[str, object]],
                        seeds: Sequence[int], profiles: Profiles = None) -> dict[str, Evaluation]:
    """One configuration over the seeds' workloads under each scheduler profile (fast
    simulation, no Prefect per tick)."""
    from kube_elevator.fakes.scenario import LoadedScenario, perturbed, with_profile
    from kube_elevator.flows.simulation import simulate

    groups = apply_knobs(loaded.config.node_groups, knobs)
    config = dataclasses.replace(loaded.config, node_groups=tuple(groups))
    judged = {}
    for profile in profiles or (loaded.scenario.scheduler.profile,):
        summaries = []
        for seed in seeds:
            drawn = perturbed(loaded, seed)
            run = with_profile(LoadedScenario(drawn.scenario, config, drawn.source,
                                              drawn.arrivals), profile)
            summaries.append(simulate(run, mode="memory").summary)
        judged[profile] = combine(summaries)
    return judged


def evaluate(loaded: LoadedScenario, knobs: Mapping[str, Mapping[str, object]],
             seeds: Sequence[int], profiles: Profiles = None) -> Evaluation:
    """One configuration over the seeds' workloads, under each profile: every (profile, seed)
    is one workload, so the limits hold under each profile on each seed, and the node-seconds
    are the mean over them (the sum over profiles, up to a constant)."""
    return merged(evaluate_by_profile(loaded, knobs, seeds, profiles).values())


def merged(evaluations: Iterable[Evaluation]) -> Evaluation:
    """Evaluations of the same seeds under several profiles as one over all their runs."""
    judged = list(evaluations)
    return Evaluation(sum(e.node_seconds for e in judged) / len(judged),
                      sum(e.pending_pod_seconds for e in judged) / len(judged),
                      tuple(wait for e in judged for wait in e.longest_waits),
                      tuple(cut for e in judged for cut in e.pods_cut_short))


@task(name="evaluate-trials", cache_policy=NO_CACHE, persist_result=False)
def evaluate_batch(workload: LoadedScenario, batch: list[Knobs], seeds: list[int],
                   profiles: list[str] | None = None) -> list[dict[str, float]]:
    """A batch of trials, one after the other (a batch is one task run: worth a round trip).
    `workload` is the loaded scenario itself; on Dask, the future `share_workload` scattered,
    which Dask resolves to the copy already on the worker."""
    return [evaluate(workload, knobs, seeds, profiles).to_json() for knobs in batch]


def share_workload(loaded: LoadedScenario) -> Any:
    """What the batches pass as their workload: on the flow's Dask task runner, a future of the
    loaded scenario scattered to every worker once (`broadcast`; a worker that joins later
    fetches it from a peer), so a batch carries a key, not a trace of a million rows; on any
    other task runner the object itself, which stays in this process."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    try:
        from prefect_dask.task_runners import DaskTaskRunner
    except ImportError:  # without the `tune` extra's Dask there is no Dask runner
        return loaded
    if context is None or not isinstance(context.task_runner, DaskTaskRunner):
        return loaded
    return context.task_runner.client.scatter(  # type: ignore[no-untyped-call]
        loaded, broadcast=True, hash=False)


@dataclass
class TuneResult:
    """What the search found and how the chosen setting fares on held-out seeds."""

    groups: tuple[NodeGroupConfig, ...]
    trials: list[tuple[Knobs, Evaluation, bool]] = field(default_factory=list)  # (., ., feasible)
    chosen: Knobs | None = None
    default_held_out: Evaluation | None = None
    tuned_held_out: Evaluation | None = None
    # the scheduler profiles judged under, and the held-out figures under each
    profiles: tuple[str, ...] = ()
    held_out_by_profile: dict[str, tuple[Evaluation, Evaluation]] = field(default_factory=dict)
    # The file and the tuned setting on the same held-out seeds with the waves' placement
    # constraints left out (`without_placement_constraints`); None for a workload without any.
    unconstrained_held_out: tuple[Evaluation, Evaluation] | None = None

    @property
    def tried(self) -> int:
        """The trials `--trials` asked for: the file as it is, evaluated first as the
        reference, is no trial."""
        return max(len(self.trials) - 1, 0)

    @property
    def front(self) -> list[int]:
        """The Pareto front's trials, one per point: settings that did exactly the same (a
        knob that changed nothing) are one row of the table, the first tried."""
        points = [(e.node_seconds, e.pending_pod_seconds) for _, e, _ in self.trials]
        first = {point: index for index, point in reversed(list(enumerate(points)))}
        return [index for index in pareto_front(points) if first[points[index]] == index]

    def summary(self) -> dict[str, Any]:
        before, after = self.default_held_out, self.tuned_held_out
        saved = None if before is None or after is None or before.node_seconds == 0 else \
            1 - after.node_seconds / before.node_seconds
        return {"trials": self.tried,
                "feasible": sum(1 for _, _, ok in self.trials[1:] if ok),
                "scheduler_profiles": list(self.profiles),
                "default_held_out": before.to_json() if before else None,
                "tuned_held_out": after.to_json() if after else None,
                "node_seconds_saved": saved,
                "held_out_by_profile": {
                    profile: {"default_held_out": file.to_json(),
                              "tuned_held_out": tuned.to_json(),
                              "node_seconds_saved": saved_share(file, tuned)}
                    for profile, (file, tuned) in self.held_out_by_profile.items()},
                "without_placement_constraints": None if self.unconstrained_held_out is None
                else {"default_held_out": self.unconstrained_held_out[0].to_json(),
                      "tuned_held_out": self.unconstrained_held_out[1].to_json(),
                      "node_seconds_saved": saved_share(*self.unconstrained_held_out)}}


def saved_share(before: Evaluation, after: Evaluation) -> float | None:
    """The share of node-seconds the tuned setting saves (None when the file used none)."""
    return None if before.node_seconds == 0 else 1 - after.node_seconds / before.node_seconds


def search(loaded: LoadedScenario, groups: Sequence[NodeGroupConfig], trials: int, batch: int,
           parallel: int, seeds: list[int], held_out: list[int], validation: list[int],
           max_pending_seconds: float,
           run_batches: Callable[[list[list[Knobs]]], list[list[dict[str, float]]]],
           seed: int = 0, on_round: Callable[[int], None] | None = None,
           profiles: Sequence[str] = (),
           on_phase: Callable[[str], None] | None = None) -> TuneResult:
    """The local search from the file (`refine`), then rounds of TPE (ask, evaluate in
    batches, tell); then choose (`choose`) and judge on the held-out seeds. With `profiles`,
    every setting is judged under each scheduler profile (`evaluate`); `run_batches` must
    judge them so too. `on_round` hears the trials done after each round, `on_phase` each
    step that is no trial (the file as it is first, the checks of the choice last)."""
    import optuna

    def phase(text: str) -> None:
        if on_phase is not None:
            on_phase(text)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    default = {group.name: current_knobs(group) for group in groups}
    phase("the file as it is")
    baseline = evaluate(loaded, default, seeds, profiles)
    limits = limits_of(baseline, max_pending_seconds)

    result = TuneResult(tuple(groups), profiles=tuple(profiles))
    result.trials.append((default, baseline, baseline.within(limits)))

    def run(settings: list[Knobs]) -> list[Evaluation]:
        """Evaluate settings in batches of `batch`, `batch * parallel` at once, and record them."""
        evaluations: list[Evaluation] = []
        for first in range(0, len(settings), batch * parallel):
            wave = settings[first:first + batch * parallel]
            chunks = [wave[start:start + batch] for start in range(0, len(wave), batch)]
            answers = [answer for chunk in run_batches(chunks) for answer in chunk]
            evaluations.extend(Evaluation.from_json(answer) for answer in answers)
        for knobs, evaluation in zip(settings, evaluations, strict=True):
            result.trials.append((knobs, evaluation, evaluation.within(limits)))
        if on_round is not None:
            on_round(len(result.trials) - 1)
        return evaluations

    # First a local search from the file: one knob at a time. Most good settings differ from
    # the file in a few knobs, and a change that leaves the busiest minutes alone keeps every
    # wait as it was; a global sampler, moving all knobs at once, rarely lands on one.
    phase("searching")
    best, _ = refine(groups, default, baseline, limits, trials * 3 // 4, run)

    study = optuna.create_study(
        directions=["minimize", "minimize"],
        sampler=optuna.samplers.TPESampler(seed=seed, multivariate=True,
                                           n_startup_trials=max(8, batch * parallel)))
    for start in (default, best):  # the file as it is, and the local search's best
        params = [group_params(group) for group in apply_knobs(groups, start)]
        if all(group is not None for group in params):
            study.enqueue_trial({k: v for group in params if group for k, v in group.items()})
    done = len(result.trials) - 1
    while done < trials:
        size = min(batch * parallel, trials - done)
        asked = [study.ask() for _ in range(size)]
        knobs = [as_written(_knobs(trial, groups), default, groups) for trial in asked]
        for trial, evaluation in zip(asked, run(knobs), strict=True):
            # the constraints: a setting that passes a limit on any seed is infeasible
            for name, excess in evaluation.excess(limits).items():
                trial.set_constraint(name, excess)
            study.tell(trial, [evaluation.node_seconds, evaluation.pending_pod_seconds])
        done += size
    phase("checking the cheapest on seeds of their own")
    chosen = result.chosen = choose(loaded, result, default, validation, max_pending_seconds,
                                    profiles=profiles)
    phase("the file and the choice on the held-out seeds")
    file_by_profile = evaluate_by_profile(loaded, default, held_out, profiles)
    tuned_by_profile = evaluate_by_profile(loaded, chosen, held_out, profiles)
    result.default_held_out = merged(file_by_profile.values())
    result.tuned_held_out = merged(tuned_by_profile.values())
    result.profiles = tuple(file_by_profile)
    result.held_out_by_profile = {profile: (file_by_profile[profile], tuned_by_profile[profile])
                                  for profile in file_by_profile}
    from kube_elevator.fakes.scenario import without_placement_constraints

    if without_placement_constraints(loaded) is not None:
        phase("the file and the choice with the placement constraints left out")
    result.unconstrained_held_out = judged_without_constraints(loaded, default, chosen,
                                                               held_out, profiles)
    return result


def judged_without_constraints(loaded: LoadedScenario, default: Knobs, chosen: Knobs,
                               held_out: Sequence[int], profiles: Profiles = None
                               ) -> tuple[Evaluation, Evaluation] | None:
    """The file and the chosen setting on the held-out seeds with the waves' pod affinity,
    spreading, host ports and volume zones left out: a scheduler that ignored them would
    pack the pods tighter, so the savings stated both ways show what the constraints cost
    and whether the tuned file counts on them (None when no wave has any)."""
    from kube_elevator.fakes.scenario import without_placement_constraints

    stripped = without_placement_constraints(loaded)
    if stripped is None:
        return None
    return (evaluate(stripped, default, held_out, profiles),
            evaluate(stripped, chosen, held_out, profiles))


def refine(groups: Sequence[NodeGroupConfig], start: Knobs, start_evaluation: Evaluation,
           limits: Limits, budget: int,
           run: Callable[[list[Knobs]], list[Evaluation]]) -> tuple[Knobs, Evaluation]:
    """Coordinate descent: for each knob of each group in turn, try its other steps at once and
    move to the cheapest within every limit on every seed; again while a pass moves and
    `budget` trials remain. Returns the cheapest setting reached."""
    best, best_evaluation = start, start_evaluation
    seen = {repr(start)}
    spent, moved = 0, True
    while moved and spent < budget:
        moved = False
        # knob by knob, each group in turn: with many groups and a small budget, the removal
        # knobs of every group are tried before the other knobs of the first
        for knob in KNOB_STEPS:
            for group in groups:
                moves = [move for move in one_knob_moves(best, groups, group.name, knob)
                         if repr(move) not in seen][:budget - spent]
                if not moves:
                    continue
                seen.update(repr(move) for move in moves)
                spent += len(moves)
                evaluations = run(moves)
                cheaper = [(evaluation.node_seconds, evaluation.pending_pod_seconds, index)
                           for index, evaluation in enumerate(evaluations)
                           if evaluation.within(limits)
                           and evaluation.node_seconds < best_evaluation.node_seconds]
                if cheaper:
                    *_, index = min(cheaper)
                    best, best_evaluation, moved = moves[index], evaluations[index], True
                if spent >= budget:
                    return best, best_evaluation
    return best, best_evaluation


def choose(loaded: LoadedScenario, result: TuneResult, default: Knobs,
           validation: list[int], max_pending_seconds: float = 0.0,
           candidates: int = 20, profiles: Sequence[str] = ()) -> Knobs:
    """The cheapest setting within the limits, checked on seeds of its own: the
    `candidates` cheapest within the limits are replayed on `validation`, and the cheapest there
    within the limits on every seed wins (the file itself if none is).

    Settings that did exactly the same on the search seeds (a knob that changed nothing, such
    as a group without pods) count as one candidate, the one that changes fewest knobs."""
    def changes(knobs: Knobs) -> int:
        return sum(str(value) != str(default[group][knob])
                   for group, values in knobs.items() for knob, value in values.items())

    feasible = sorted(((k, e) for k, e, ok in result.trials if ok and changes(k)),
                      key=lambda item: (item[1].node_seconds, item[1].pending_pod_seconds,
                                        changes(item[0])))
    distinct: dict[Evaluation, Knobs] = {}
    for knobs, evaluation in feasible:
        distinct.setdefault(evaluation, knobs)
    if not distinct:
        return default
    reference = evaluate(loaded, default, validation, profiles)
    limits = limits_of(reference, max_pending_seconds)
    checked = [(knobs, evaluate(loaded, knobs, validation, profiles))
               for knobs in list(distinct.values())[:candidates]]
    keeping = [(k, e) for k, e in checked
               if e.within(limits) and e.node_seconds < reference.node_seconds]
    if not keeping:
        return default
    return min(keeping, key=lambda item: item[1].node_seconds)[0]


def _knobs(trial: Any, groups: Sequence[NodeGroupConfig]) -> Knobs:
    def suggest(name: str, low: int, high: int, step: int) -> int:
        return int(trial.suggest_int(name, low, high, step=step))

    return {group.name: suggest_group(group.name, suggest) for group in groups}


MAX_SEED = 2**32 - 1  # Optuna's TPE sampler takes a NumPy seed: 0 .. 2**32 - 1


def seeds_from(start: int, count: int) -> list[int]:
    return list(range(start, start + count))


def make_flow(dask_address: str | None) -> Any:
    """The search as a flow of its own, on Dask when an address is given (else Prefect's
    thread runner): `tune_flow` runs it so when asked for a Dask cluster."""
    runner: Any = None
    if dask_address:
        from prefect_dask.task_runners import DaskTaskRunner

        runner = DaskTaskRunner(address=dask_address)
    options: dict[str, Any] = {"name": "tune-on-dask" if dask_address else "tune-search",
                               "persist_result": False}
    if runner is not None:
        options["task_runner"] = runner
    return flow(**options)(tune)


# Set by `elevator tune` for its progress bar (a callable is no flow parameter): the trials
# done, and the steps between them.
progress: Callable[[int], None] | None = None
phase: Callable[[str], None] | None = None


def tune(scenario: str, trials: int = 100, batch: int = 4, parallel: int = 2, seeds: int = 8,
         held_out_seeds: int = 5, max_pending_seconds: float = 0.0,
         seed: int = 0, profiles: list[str] | None = None) -> dict[str, Any]:
    """The search's body: run as the `tune` flow (`tune_flow`), on Dask by `make_flow`."""
    from kube_elevator.fakes.scenario import load_scenario

    loaded = load_scenario(scenario)  # here, where the path means something; once
    workload = share_workload(loaded)
    search_seeds = seeds_from(SEARCH_SEEDS_START, seeds)
    held_out = seeds_from(HELD_OUT_SEEDS_START, held_out_seeds)
    judged = list(profiles or [loaded.scenario.scheduler.profile])

    def run_batches(batches: list[list[Knobs]]) -> list[list[dict[str, float]]]:
        futures = [evaluate_batch.submit(workload, chunk, search_seeds, judged)
                   for chunk in batches]
        return [future.result() for future in futures]

    validation = seeds_from(VALIDATION_SEEDS_START, seeds)
    result = search(loaded, loaded.config.node_groups, trials, batch, parallel, search_seeds,
                    held_out, validation, max_pending_seconds, run_batches, seed, progress,
                    profiles=judged, on_phase=phase)
    _publish(result)
    return {"result": result, **result.summary()}


# The run form's bounds are those of `elevator tune`: parallel=0 spun forever, seeds=0
# divided by zero after the whole search.
@flow(name="tune", persist_result=False)
def tune_flow(scenario: str, trials: Annotated[int, Field(ge=1, le=100_000)] = 100,
              batch: Annotated[int, Field(ge=1, le=1000)] = 4,
              parallel: Annotated[int, Field(ge=1, le=1000)] = 2,
              seeds: Annotated[int, Field(ge=1, le=100)] = 8,
              held_out_seeds: Annotated[int, Field(ge=1, le=100)] = 5,
              max_pending_seconds: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] = 0.0,
              seed: Annotated[int, Field(ge=0, le=MAX_SEED)] = 0,
              dask_address: str | None = None,
              profiles: list[ProfileName] | None = None,
              ) -> dict[str, Any]:
    """Search the node groups' Escalator knobs on a scenario's workload (a deployment).

    Args:
        scenario: Path of the scenario file where the flow runs (its node-group file is the
            start); read once there, and its workload sent to the task runs.
        trials: How many settings to try.
        batch: Trials per task run.
        parallel: Task runs at once.
        seeds: Redrawn workloads each trial is judged on.
        held_out_seeds: Workloads the search never sees, to judge the chosen setting.
        max_pending_seconds: The longest a pod may wait (0: no worse than the file as it is).
        seed: The optimiser's seed.
        dask_address: A Dask scheduler (tcp://host:8786) to run the batches on; empty: here.
        profiles: Scheduler profiles to judge every setting under (within the limits under
            each; node-seconds summed over them); empty: the scenario's own.

    Example:
        ```python
        state = ke.tune_flow("deployments/examples/scenario.yaml", trials=50)
        ```
    """
    options: dict[str, Any] = {
        "scenario": scenario, "trials": trials, "batch": batch, "parallel": parallel,
        "seeds": seeds, "held_out_seeds": held_out_seeds,
        "max_pending_seconds": max_pending_seconds, "seed": seed,
        "profiles": list(dict.fromkeys(profiles)) if profiles else None}
    answer = (make_flow(dask_address)(**options) if dask_address else tune(**options))
    result = answer["result"]
    return {"result": result, **result.summary(), "chosen": result.chosen}


def _publish(result: TuneResult) -> None:
    """The Pareto front as a table artifact, and a line in the run's log."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    rows = [{"node_seconds": round(result.trials[i][1].node_seconds),
             "pending_pod_seconds": round(result.trials[i][1].pending_pod_seconds),
             "max_pending_seconds": round(result.trials[i][1].max_pending_seconds),
             "within_limit": result.trials[i][2]} for i in result.front]
    create_table_artifact(rows, key="tune-pareto-front",
                          description="Node-seconds against pending pod-seconds, the "
                                      "settings no other setting beats on both")
    picture = _front_picture(result)
    if picture is not None:
        create_markdown_artifact(picture, key="tune-pareto-plot",
                                 description="Every trial, the Pareto front, the file as it "
                                             "is and the chosen setting")
    get_run_logger().info("tune: %s", {k: v for k, v in result.summary().items()})


def _front_picture(result: TuneResult) -> str | None:
    """The plot as Markdown with the PNG inline (Prefect's image artifacts take only a URL, and
    a worker has none to serve it from); None without matplotlib (the `sim` extra)."""
    import base64
    import importlib.util
    import tempfile

    if importlib.util.find_spec("matplotlib") is None or not result.trials:
        return None
    from kube_elevator.fakes.plot import plot_front

    with tempfile.TemporaryDirectory(prefix="elevator-tune-") as scratch:
        png = plot_front(result, Path(scratch) / "front.png").read_bytes()
    encoded = base64.b64encode(png).decode("ascii")
    return f"![elevator tune: the Pareto front](data:image/png;base64,{encoded})"


def node_group_text(loaded: LoadedScenario) -> str:
    """The node groups to tune, as the user wrote them: the node-group file, read as every input
    is (a byte order mark, UTF-16 from Windows); or the mapping inline in the scenario."""
    import yaml

    from kube_elevator.tasks.core.documents import as_text, read_bytes

    inline = loaded.scenario.nodegroups
    if isinstance(inline, dict):
        return (f"# The node groups inline in {loaded.source}: give this file as its "
                f"`nodegroups`.\n{yaml.safe_dump(inline, sort_keys=False)}")
    source = str(loaded.config.path)
    return as_text(read_bytes(source, source), source)


def tuned_file(path: Path, original: str, result: TuneResult) -> Path:
    """The node groups (`node_group_text`) with the chosen knobs, edited in place: the user's
    comments, key order and other keys stay as written, and comments on top say what changed.
    Written as UTF-8, whole or not at all (a full disk leaves the previous file)."""
    import io

    from ruamel.yaml import YAML

    editor = YAML()  # round trip: comments, order and quoting kept
    editor.preserve_quotes = True
    editor.width = 4096  # no line of the user's is folded anew
    editor.indent(mapping=2, sequence=4, offset=2)  # Escalator's examples: "  - name: a"
    document = editor.load(original)
    chosen = result.chosen or {}
    # What each group ran with: the file's values, and Escalator's defaults for keys it omits
    # (a rate left out is 0; writing that 0 in is no change).
    searched = {config.name: current_knobs(config) for config in result.groups}
    lines = [f"# Tuned by `elevator tune` ({result.tried} trials). Changed:"]
    for group in document.get("node_groups") or []:
        ran_with = searched.get(group["name"], {})
        for key, value in chosen.get(group["name"], {}).items():
            if str(value) == str(ran_with.get(key)):
                continue
            before = group[key] if key in group else f"{ran_with.get(key)} (not set)"
            lines.append(f"#   {group['name']}.{key}: {before} -> {value}")
            group[key] = value
    if len(lines) == 1:
        lines[0] = (f"# Tuned by `elevator tune` ({result.tried} trials): no setting tried "
                    "stayed within the limits with fewer node-seconds; the file is as it was.")
    for profile, (before, after) in result.held_out_by_profile.items():
        lines.append(f"# Held-out seeds: node-seconds {before.node_seconds:.0f} -> "
                     f"{after.node_seconds:.0f}, longest wait {before.max_pending_seconds:.0f}s"
                     f" -> {after.max_pending_seconds:.0f}s (scheduler profile {profile})")
    if result.unconstrained_held_out is not None:
        before, after = result.unconstrained_held_out
        modelled = saved_share(*_merged_held_out(result))
        unmodelled = saved_share(before, after)
        lines.append(f"# Savings on held-out seeds with the workload's pod affinity, spreading, "
                     f"host ports and volume zones modelled: {_share(modelled)}; with them "
                     f"left out: {_share(unmodelled)} (node-seconds {before.node_seconds:.0f} "
                     f"-> {after.node_seconds:.0f})")
    text = io.StringIO()
    editor.dump(document, text)
    tuned = "\n".join(lines) + "\n" + text.getvalue()
    return write_atomically(path, tuned.encode("utf-8"), "--output")


def _merged_held_out(result: TuneResult) -> tuple[Evaluation, Evaluation]:
    if result.default_held_out is None or result.tuned_held_out is None:
        raise ValueError("the search has not judged its choice on held-out seeds")
    return result.default_held_out, result.tuned_held_out


def _share(saved: float | None) -> str:
    return "none used" if saved is None else f"{saved:.1%}"


__all__ = ["TuneResult", "evaluate", "evaluate_by_profile", "judged_without_constraints",
           "make_flow", "merged", "node_group_text", "saved_share", "search", "tune",
           "tune_flow", "tuned_file"]
