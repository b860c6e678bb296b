"""The tuning search space: every trial is a valid Escalator file; the Pareto front; redrawn
workloads that differ by seed and not by run."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kube_elevator.fakes.scenario import Wave, load_scenario, perturbed
from kube_elevator.tasks.escalator.config import validate_node_group
from kube_elevator.tasks.tuning.space import (
    INT_RANGES,
    KNOB_STEPS,
    KNOBS,
    SECOND_RANGES,
    Evaluation,
    Limits,
    apply_knobs,
    as_written,
    combine,
    current_knobs,
    go_duration,
    group_params,
    limits_of,
    one_knob_moves,
    pareto_front,
    suggest_group,
)
from tests.builders import make_group

EXAMPLES = Path(__file__).resolve().parents[2] / "deployments" / "examples"


@pytest.mark.parametrize("seed", range(200))
def test_every_point_of_the_space_is_a_valid_escalator_group(seed: int) -> None:
    rng = random.Random(seed)

    def suggest(name: str, low: int, high: int, step: int) -> int:
        return low + step * rng.randint(0, (high - low) // step)

    knobs = suggest_group("batch", suggest)
    (group,) = apply_knobs([make_group()], {"batch": knobs})
    assert validate_node_group(group) == []
    assert group.taint_lower_capacity_threshold_percent \
        < group.taint_upper_capacity_threshold_percent < group.scale_up_threshold_percent


def test_the_extremes_of_every_range_are_valid_too() -> None:
    for pick in (0, 1):
        def suggest(name: str, low: int, high: int, step: int, pick: int = pick) -> int:
            return (low, high - (high - low) % step)[pick]

        (group,) = apply_knobs([make_group()], {"batch": suggest_group("batch", suggest)})
        assert validate_node_group(group) == []


def test_a_group_outside_the_rules_is_refused() -> None:
    with pytest.raises(ValueError, match="must be less than"):
        apply_knobs([make_group()], {"batch": {"taint_lower_capacity_threshold_percent": 50}})


def test_the_search_starts_from_the_file_as_it_is() -> None:
    group = make_group()
    params = group_params(group)
    assert params is not None

    def suggest(name: str, low: int, high: int, step: int) -> int:
        return params[name]

    assert suggest_group("batch", suggest) == current_knobs(group)
    names = {f"batch.{name}" for name, *_ in (*INT_RANGES, *SECOND_RANGES)}
    assert set(params) == names


def test_go_durations_read_as_a_person_writes_them() -> None:
    assert [go_duration(s) for s in (30, 60, 90, 3600, 5400, 0)] == \
        ["30s", "1m", "1m30s", "1h", "1h30m", "0s"]


def test_the_pareto_front_keeps_what_nothing_beats_on_both() -> None:
    points = [(10.0, 5.0), (8.0, 9.0), (12.0, 4.0), (11.0, 6.0), (8.0, 9.0), (20.0, 1.0)]
    assert [points[i] for i in pareto_front(points)] == \
        [(8.0, 9.0), (8.0, 9.0), (10.0, 5.0), (12.0, 4.0), (20.0, 1.0)]


def test_redrawn_workloads_differ_by_seed_and_repeat_by_seed() -> None:
    loaded = load_scenario(EXAMPLES / "scenario.yaml")
    assert perturbed(loaded, 0) is loaded
    first, again, other = perturbed(loaded, 1), perturbed(loaded, 1), perturbed(loaded, 2)
    assert first.arrivals == again.arrivals
    assert first.arrivals != other.arrivals
    for before, after in zip(loaded.arrivals, first.arrivals, strict=True):
        assert isinstance(before, Wave) and isinstance(after, Wave)
        assert abs(after.at - before.at) <= loaded.scenario.tick_interval
        assert 0.8 * before.count - 1 <= after.count <= 1.2 * before.count + 1


def test_a_local_move_changes_one_knob_of_one_group_and_stays_a_valid_file() -> None:
    groups = [make_group(name="batch"), make_group(name="services")]
    knobs = {group.name: current_knobs(group) for group in groups}
    for group in ("batch", "services"):
        for knob in KNOB_STEPS:
            moves = one_knob_moves(knobs, groups, group, knob)
            assert moves, (group, knob)
            for move in moves:
                changed = [(name, key) for name, values in move.items()
                           for key in KNOBS if str(values[key]) != str(knobs[name][key])]
                assert changed == [(group, knob)]
                tuned = apply_knobs(groups, move)  # raises if a group breaks Escalator's rules
                assert all(validate_node_group(config) == [] for config in tuned)


def test_a_file_beyond_the_optimisers_ranges_still_gets_local_moves() -> None:
    """A real file may say `hard_delete_grace_period: 1h` and `soft_delete_grace_period: 45s`,
    which the optimiser's ranges (and 30 s steps) do not reach: the local search still starts
    from it, moving one knob and keeping the others as they are; the same duration written
    otherwise ("60s" for "1m") is no move."""
    groups = [make_group(hard_delete_grace_period="1h", soft_delete_grace_period="45s")]
    assert group_params(groups[0]) is None
    knobs = {"batch": current_knobs(groups[0])}
    moves = one_knob_moves(knobs, groups, "batch", "fast_node_removal_rate")
    assert [move["batch"]["fast_node_removal_rate"] for move in moves] == [4, 10, 16]
    assert all(move["batch"]["hard_delete_grace_period"] == "1h" for move in moves)
    knobs["batch"]["soft_delete_grace_period"] = "60s"
    softs = [move["batch"]["soft_delete_grace_period"]
             for move in one_knob_moves(knobs, groups, "batch", "soft_delete_grace_period")]
    assert softs == ["30s", "2m", "5m"]


def test_a_sampled_value_that_behaves_as_the_files_keeps_the_files_words() -> None:
    """The optimiser writes "1m" for a file's "60s": no change, so the tuned file does not
    say "60s -> 1m" and the chooser does not count it; real changes are kept as sampled."""
    groups = [make_group(soft_delete_grace_period="60s", scale_up_cool_down_period="120s")]
    written = {"batch": current_knobs(groups[0])}
    sampled = {"batch": {**written["batch"], "soft_delete_grace_period": "1m",
                         "scale_up_cool_down_period": "1m", "slow_node_removal_rate": 2}}
    kept = as_written(sampled, written, groups)["batch"]
    assert kept["soft_delete_grace_period"] == "60s"
    assert kept["scale_up_cool_down_period"] == "1m" and kept["slow_node_removal_rate"] == 2
    assert sampled["batch"]["soft_delete_grace_period"] == "1m"  # the caller's is untouched


def test_a_local_move_leaves_out_what_breaks_the_rules() -> None:
    """An upper taint threshold at or above the scale-up threshold (70 %) is no Escalator file."""
    groups = [make_group()]
    knobs = {"batch": current_knobs(groups[0])}
    uppers = {move["batch"]["taint_upper_capacity_threshold_percent"]
              for move in one_knob_moves(knobs, groups, "batch",
                                         "taint_upper_capacity_threshold_percent")}
    assert uppers and max(uppers) < groups[0].scale_up_threshold_percent  # type: ignore[operator]


def test_the_limits_are_judged_seed_by_seed() -> None:
    """A shorter wait on one workload does not pay for a longer one on another."""
    evaluation = combine([{"node_seconds": 100.0, "pending_pod_seconds": 10.0,
                           "max_pending_seconds": wait, "evictions": cut}
                          for wait, cut in ((300.0, 0), (500.0, 2))])
    assert evaluation.longest_waits == (300.0, 500.0)
    assert evaluation.pods_cut_short == (0, 2)
    assert evaluation.max_pending_seconds == 500.0
    assert evaluation.excess(Limits((500.0, 500.0), (0, 2))) == \
        {"max_pending": 0.0, "pods_cut_short": 0.0}
    assert evaluation.within(Limits((500.0, 500.0), (0, 2)))
    assert evaluation.excess(Limits((400.0, 600.0), (1, 3))) == \
        {"max_pending": -100.0, "pods_cut_short": -1.0}
    # the worst seed's wait is no help: the second workload waits 100 s too long
    assert evaluation.excess(Limits((500.0, 400.0), (0, 2)))["max_pending"] == 100.0
    assert not evaluation.within(Limits((500.0, 400.0), (0, 2)))
    # two pods cut short on the first workload and none on the second is not "as many"
    assert not evaluation.within(Limits((500.0, 500.0), (2, 0)))
    assert Evaluation.from_json(evaluation.to_json()) == evaluation


def test_the_limits_are_the_files_unless_the_user_gives_a_wait() -> None:
    file = Evaluation(1.0, 1.0, (300.0, 500.0, 0.0), (0, 1, 0))
    assert limits_of(file) == Limits((300.0, 500.0, 1.0), (0, 1, 0))  # no waits: 1 s
    assert limits_of(file, 400.0) == Limits((400.0, 400.0, 400.0), (0, 1, 0))
    # longer waits for fewer nodes, if the user says so; never more pods cut short
    assert limits_of(file, 900.0) == Limits((900.0, 900.0, 900.0), (0, 1, 0))
