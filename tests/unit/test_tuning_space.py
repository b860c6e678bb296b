"""The tuning search space: every trial is a valid Escalator file; the Pareto front; redrawn
workloads that differ by seed and not by run."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fakes.scenario import Wave, load_scenario, perturbed
from tasks.escalator.config import validate_node_group
from tasks.tuning.space import (
    INT_RANGES,
    SECOND_RANGES,
    apply_knobs,
    current_knobs,
    go_duration,
    group_params,
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
