"""What `elevator tune` searches: each group's Escalator knobs, inside Escalator's own rules.

The parameters are drawn so that every trial is a valid Escalator file by construction: the
three thresholds as a lower bound and two positive gaps (lower < upper < scale-up, all > 0),
the fast removal rate as the slow one plus a gap (slow <= fast), the hard grace period as the
soft one plus a gap (soft < hard), and positive durations. `validate_node_group` checks each
trial again anyway (a test samples the space at random). The local search's moves
(`one_knob_moves`) change one knob to one of a few round values (`KNOB_STEPS`), and keep only
those Escalator's rules allow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube_elevator.tasks.escalator.config import NodeGroupConfig, validate_node_group

# (name, low, high, step): the knob's range; integers with step 1, seconds with coarser steps
# (a simulation that ticks every minute cannot tell 61 s from 60 s).
INT_RANGES: tuple[tuple[str, int, int], ...] = (
    ("lower", 1, 60),
    ("upper_gap", 1, 50),
    ("scale_up_gap", 1, 80),
    ("slow_rate", 1, 10),
    ("fast_gap", 0, 15),
)
SECOND_RANGES: tuple[tuple[str, int, int, int], ...] = (
    ("soft_grace", 30, 900, 30),
    ("hard_gap", 30, 1800, 30),
    ("cool_down", 30, 600, 30),
)
KNOBS = ("taint_lower_capacity_threshold_percent", "taint_upper_capacity_threshold_percent",
         "scale_up_threshold_percent", "slow_node_removal_rate", "fast_node_removal_rate",
         "soft_delete_grace_period", "hard_delete_grace_period", "scale_up_cool_down_period")

Suggest = Callable[[str, int, int, int], int]  # (name, low, high, step) -> value
Knobs = dict[str, dict[str, object]]  # group -> key -> value

# The round values the local search tries, one knob at a time (a move may leave the optimiser's
# ranges above: a fast removal rate of 16 beside a slow one of 1). The knobs that act while load
# falls come first: they can save nodes without touching the minutes in which pods wait, so
# they are the likeliest to keep every wait as it was.
KNOB_STEPS: dict[str, tuple[object, ...]] = {
    "fast_node_removal_rate": (2, 4, 10, 16),
    "soft_delete_grace_period": ("30s", "1m", "2m", "5m"),
    "taint_lower_capacity_threshold_percent": (10, 20, 30, 40, 50),
    "slow_node_removal_rate": (1, 2, 4, 8),
    "taint_upper_capacity_threshold_percent": (30, 40, 50, 60, 70, 80),
    "hard_delete_grace_period": ("5m", "10m", "30m"),
    "scale_up_threshold_percent": (60, 70, 80, 90, 100, 120, 150),
    "scale_up_cool_down_period": ("30s", "1m", "2m", "5m"),
}


def go_duration(seconds: int) -> str:
    """Seconds as the shortest Go duration a person would write (90s, 5m, 1h30m)."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return "".join(f"{value}{unit}" for value, unit in ((hours, "h"), (minutes, "m"),
                                                         (secs, "s")) if value) or "0s"


def suggest_group(group: str, suggest: Suggest) -> dict[str, object]:
    """One group's knobs, as the node-group file's keys and values."""
    value = {name: suggest(f"{group}.{name}", low, high, 1) for name, low, high in INT_RANGES}
    seconds = {name: suggest(f"{group}.{name}", low, high, step)
               for name, low, high, step in SECOND_RANGES}
    upper = value["lower"] + value["upper_gap"]
    return {
        "taint_lower_capacity_threshold_percent": value["lower"],
        "taint_upper_capacity_threshold_percent": upper,
        "scale_up_threshold_percent": upper + value["scale_up_gap"],
        "slow_node_removal_rate": value["slow_rate"],
        "fast_node_removal_rate": value["slow_rate"] + value["fast_gap"],
        "soft_delete_grace_period": go_duration(seconds["soft_grace"]),
        "hard_delete_grace_period": go_duration(seconds["soft_grace"] + seconds["hard_gap"]),
        "scale_up_cool_down_period": go_duration(seconds["cool_down"]),
    }


def group_params(group: NodeGroupConfig) -> dict[str, int] | None:
    """The search's parameters for a group's current knobs (None when outside the ranges):
    the search starts from the file as it is."""
    lower = group.taint_lower_capacity_threshold_percent
    upper = group.taint_upper_capacity_threshold_percent
    soft = int(group.soft_delete_grace_seconds)
    params = {
        "lower": lower, "upper_gap": upper - lower,
        "scale_up_gap": group.scale_up_threshold_percent - upper,
        "slow_rate": group.slow_node_removal_rate,
        "fast_gap": group.fast_node_removal_rate - group.slow_node_removal_rate,
        "soft_grace": soft, "hard_gap": int(group.hard_delete_grace_seconds) - soft,
        "cool_down": int(group.scale_up_cool_down_seconds),
    }
    ranges = {name: (low, high, 1) for name, low, high in INT_RANGES}
    ranges.update({name: (low, high, step) for name, low, high, step in SECOND_RANGES})
    for name, value in params.items():
        low, high, step = ranges[name]
        if not low <= value <= high or (value - low) % step:
            return None
    return {f"{group.name}.{name}": value for name, value in params.items()}


def one_knob_moves(knobs: Knobs, groups: Sequence[NodeGroupConfig], group: str,
                   knob: str) -> list[Knobs]:
    """`knobs` with one group's one knob set to each of its other `KNOB_STEPS`, keeping only
    valid Escalator files. The other knobs keep their values, even where the optimiser's ranges
    do not reach (a hard grace period of 1h): the search starts from any valid file."""
    config = next(config for config in groups if config.name == group)
    now = _behaviour(apply_knobs([config], {group: knobs[group]})[0])
    moves = []
    for value in KNOB_STEPS[knob]:
        moved = {name: dict(values) for name, values in knobs.items()}
        moved[group][knob] = value
        try:
            changed = apply_knobs([config], {group: moved[group]})[0]
        except ValueError:
            continue
        if _behaviour(changed) != now:  # "60s" is no move from "1m"
            moves.append(moved)
    return moves


def as_written(knobs: Knobs, written: Knobs, groups: Sequence[NodeGroupConfig]) -> Knobs:
    """`knobs`, with each value that behaves as the file's (`written`) in the file's words: a
    sampled "1m" where the file says "60s" is no change, so it is not counted as one, nor
    written into the tuned file as "60s -> 1m"."""
    kept = {name: dict(values) for name, values in knobs.items()}
    for config in groups:
        file_values = written[config.name]
        file_behaviour = _behaviour(apply_knobs([config], {config.name: file_values})[0])
        for knob, value in knobs.get(config.name, {}).items():
            if knob not in file_values or value == file_values[knob]:
                continue
            try:
                alone = apply_knobs([config], {config.name: {**file_values, knob: value}})[0]
            except ValueError:  # this knob alone breaks Escalator's rules: a real change
                continue
            if _behaviour(alone) == file_behaviour:
                kept[config.name][knob] = file_values[knob]
    return kept


def _behaviour(group: NodeGroupConfig) -> tuple[float, ...]:
    return (group.taint_lower_capacity_threshold_percent,
            group.taint_upper_capacity_threshold_percent, group.scale_up_threshold_percent,
            group.slow_node_removal_rate, group.fast_node_removal_rate,
            group.soft_delete_grace_seconds, group.hard_delete_grace_seconds,
            group.scale_up_cool_down_seconds)


def apply_knobs(groups: Sequence[NodeGroupConfig],
                knobs: Mapping[str, Mapping[str, object]]) -> list[NodeGroupConfig]:
    """The groups with a trial's knobs; ValueError if a group breaks Escalator's rules."""
    tuned = []
    for group in groups:
        changed = group.model_validate({**group.model_dump(), **knobs.get(group.name, {})})
        problems = validate_node_group(changed)
        if problems:
            raise ValueError(f"node group {group.name}: {'; '.join(problems)}")
        tuned.append(changed)
    return tuned


def current_knobs(group: NodeGroupConfig) -> dict[str, object]:
    return {knob: getattr(group, knob) for knob in KNOBS}


@dataclass(frozen=True)
class Limits:
    """What a trial must keep on each search seed, in the seeds' order."""

    longest_waits: tuple[float, ...]
    pods_cut_short: tuple[int, ...]


@dataclass(frozen=True)
class Evaluation:
    """A configuration's results over some seeds."""

    node_seconds: float  # mean over the seeds
    pending_pod_seconds: float  # mean over the seeds
    longest_waits: tuple[float, ...]  # each seed's longest wait, in the seeds' order
    # each seed's pods whose node went while they ran (the simulation's evictions: re-created
    # pending, their work lost), as a hard grace period shorter than a job kills them
    pods_cut_short: tuple[int, ...]

    @property
    def max_pending_seconds(self) -> float:
        """The worst seed's longest wait."""
        return max(self.longest_waits)

    def to_json(self) -> dict[str, Any]:
        return {"node_seconds": self.node_seconds,
                "pending_pod_seconds": self.pending_pod_seconds,
                "max_pending_seconds": self.max_pending_seconds,
                "longest_waits": list(self.longest_waits),
                "pods_cut_short": list(self.pods_cut_short)}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Evaluation:
        return cls(document["node_seconds"], document["pending_pod_seconds"],
                   tuple(document["longest_waits"]), tuple(document["pods_cut_short"]))

    def excess(self, limits: Limits) -> dict[str, float]:
        """How far the worst seed passes each limit (all <= 0: within on every seed).

        Judged seed by seed: on each redrawn workload no pod waits longer, and no more pods are
        cut short, than the limit there. So a setting cannot trade a longer wait on one
        workload for a shorter one on another, and the limits hold on seeds it never saw."""
        return {
            "max_pending": max(wait - limit for wait, limit in zip(
                self.longest_waits, limits.longest_waits, strict=True)),
            "pods_cut_short": float(max(cut - limit for cut, limit in zip(
                self.pods_cut_short, limits.pods_cut_short, strict=True))),
        }

    def within(self, limits: Limits) -> bool:
        return all(value <= 0 for value in self.excess(limits).values())


def limits_of(file: Evaluation, max_pending_seconds: float = 0.0) -> Limits:
    """The limits on each seed: the longest wait is the user's `max_pending_seconds` when given
    (a user may accept longer waits for fewer nodes, or ask for shorter ones), else the file's
    own wait there (at least 1 s); no more pods cut short than with the file, ever."""
    waits = ((max_pending_seconds,) * len(file.longest_waits) if max_pending_seconds > 0
             else tuple(max(wait, 1.0) for wait in file.longest_waits))
    return Limits(waits, file.pods_cut_short)


def combine(summaries: Sequence[Mapping[str, float]]) -> Evaluation:
    """One evaluation from the simulation summaries of several seeds."""
    count = len(summaries)
    return Evaluation(
        sum(s["node_seconds"] for s in summaries) / count,
        sum(s["pending_pod_seconds"] for s in summaries) / count,
        tuple(s["max_pending_seconds"] for s in summaries),
        tuple(int(s["evictions"]) for s in summaries))


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indexes of the points no other point beats on both objectives (both minimised)."""
    front = []
    for index, (first, second) in enumerate(points):
        dominated = any(a <= first and b <= second and (a, b) != (first, second)
                        for a, b in points)
        if not dominated:
            front.append(index)
    return sorted(front, key=lambda i: points[i])


__all__ = ["KNOBS", "KNOB_STEPS", "Evaluation", "Knobs", "Limits", "apply_knobs", "combine",
           "current_knobs", "go_duration", "group_params", "limits_of", "one_knob_moves",
           "pareto_front", "suggest_group"]
