"""What `elevator tune` searches: each group's Escalator knobs, inside Escalator's own rules.

The parameters are drawn so that every trial is a valid Escalator file by construction: the
three thresholds as a lower bound and two positive gaps (lower < upper < scale-up, all > 0),
the fast removal rate as the slow one plus a gap (slow <= fast), the hard grace period as the
soft one plus a gap (soft < hard), and positive durations. `validate_node_group` checks each
trial again anyway (a test samples the space at random).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tasks.escalator.config import NodeGroupConfig, validate_node_group

# (name, low, high, step): the knob's range; integers with step 1, seconds with coarser steps
# (a simulation that ticks every minute cannot tell 61 s from 60 s).
INT_RANGES: tuple[tuple[str, int, int], ...] = (
    ("lower", 1, 60),
    ("upper_gap", 1, 50),
    ("scale_up_gap", 1, 80),
    ("slow_rate", 1, 5),
    ("fast_gap", 0, 5),
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
class Evaluation:
    """A configuration's results over some seeds."""

    node_seconds: float  # mean over the seeds
    pending_pod_seconds: float  # mean over the seeds
    max_pending_seconds: float  # the worst seed's longest wait

    def to_json(self) -> dict[str, float]:
        return {"node_seconds": self.node_seconds,
                "pending_pod_seconds": self.pending_pod_seconds,
                "max_pending_seconds": self.max_pending_seconds}


def combine(summaries: Sequence[Mapping[str, float]]) -> Evaluation:
    """One evaluation from the simulation summaries of several seeds."""
    count = len(summaries)
    return Evaluation(
        sum(s["node_seconds"] for s in summaries) / count,
        sum(s["pending_pod_seconds"] for s in summaries) / count,
        max(s["max_pending_seconds"] for s in summaries))


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indexes of the points no other point beats on both objectives (both minimised)."""
    front = []
    for index, (first, second) in enumerate(points):
        dominated = any(a <= first and b <= second and (a, b) != (first, second)
                        for a, b in points)
        if not dominated:
            front.append(index)
    return sorted(front, key=lambda i: points[i])


__all__ = ["KNOBS", "Evaluation", "apply_knobs", "combine", "current_knobs", "go_duration",
           "group_params", "pareto_front", "suggest_group"]
