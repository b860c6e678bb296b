"""One Escalator node group: its keys, Go durations, and validation that reports every problem.

The keys are Escalator's unchanged (snake_case), so an existing Escalator config works as is.
Validation messages and their order are Escalator's (spec/escalator.md §3.2). Reading the whole
file, with its `cluster_autoscaler:` section, is `tasks.node_group_file`, above both systems.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    model_validator,
)

from kube_elevator.tasks.core.duration import (
    DURATION_EXAMPLES,
    duration_ns_or_zero,
    duration_or_zero,
    duration_problem,
    go_string,
    parse_go_duration_ns,
)
from kube_elevator.tasks.core.lease_state import CLAIM_SETTLE_SECONDS

# --- the models ---------------------------------------------------------------------------


def _go_string_or_zero(value: Any) -> Any:
    """A Go string as Escalator decodes it; null (a list's `- ~`) is its zero value, ""."""
    return "" if value is None else go_string(value)


GoString = Annotated[str, BeforeValidator(_go_string_or_zero)]
def _whole_float_is_int(value: Any) -> Any:
    """sigs.k8s.io/yaml hands encoding/json a YAML float as json.Marshal writes it: `3.0` is
    `3`, which a Go int takes (`3.5` and `1e21`, written `1e+21`, it refuses)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


# Escalator's Go `int` (64 bits): a larger number fails its YAML decoding.
GoInt = Annotated[StrictInt, BeforeValidator(_whole_float_is_int),
                  Field(ge=-(2**63), le=2**63 - 1)]
TAINT_EFFECTS = ("", "NoSchedule", "NoExecute", "PreferNoSchedule")
LIFECYCLES = ("", "on-demand", "spot")


# Go's encoding/json folds a key as appendFoldedName does: ASCII letters to upper case, any
# other rune to unicode.ToUpper(unicode.ToLower(r)); these four are the runes it folds onto an
# ASCII letter (the Kelvin sign, the long s, dotted and dotless I).
_GO_FOLDS_TO_ASCII = {"\u212a": "K", "\u017f": "S", "\u0130": "I", "\u0131": "I"}


def go_folded(key: str) -> str:
    """A key as encoding/json compares it with a struct field's name (fold.go foldName)."""
    return "".join(_GO_FOLDS_TO_ASCII.get(char, char.upper() if char.isascii() else char)
                   for char in key)


def go_json_keys(document: dict[Any, Any], fields: Iterable[str]) -> dict[Any, str]:
    """Which field each key of `document` sets, as Escalator's decoder reads it: keys are
    matched to fields regardless of case (encoding/json: "preferring an exact match but also
    accepting a case-insensitive match"), a null sets nothing ("has no effect on the value"),
    and of several keys for one field the last one decoded wins. sigs.k8s.io/yaml hands the
    decoder a JSON object whose keys json.Marshal sorted, so the last is the greatest, and the
    field's own spelling, when present, is the greatest of its foldings."""
    by_fold = {go_folded(name): name for name in fields}
    winners: dict[str, Any] = {}
    for key, item in document.items():
        field_name = by_fold.get(go_folded(key)) if isinstance(key, str) else None
        if field_name is None or item is None:
            continue
        if field_name not in winners or key > winners[field_name]:
            winners[field_name] = key
    return {key: field_name for field_name, key in winners.items()}


def as_go_decodes(document: Any, fields: Iterable[str]) -> Any:
    """`document` with its keys as Escalator's decoder reads them (`go_json_keys`): each field
    under its own name, from the key that wins; keys that set no field kept as they are."""
    if not isinstance(document, dict):
        return document
    fields = list(fields)
    chosen = go_json_keys(document, fields)
    folds = {go_folded(name) for name in fields}
    decoded: dict[Any, Any] = {}
    for key, item in document.items():
        if key in chosen:
            decoded[chosen[key]] = item
        elif not (isinstance(key, str) and go_folded(key) in folds):
            decoded[key] = item  # a key of no field: the unknown-key warning names it
    return decoded


class AwsOptions(BaseModel):
    """The `aws:` block of a node group: with `launch_template_id`, scale-ups go through EC2
    Fleet in one shot (spec §10, `flows/fleet.py`).

    Example:
        >>> ke.AwsOptions(launch_template_id="lt-0abc", fleet_instance_ready_timeout="1m").launch_template_id
        'lt-0abc'
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _as_go_decodes(cls, document: Any) -> Any:
        return as_go_decodes(document, cls.model_fields)

    launch_template_id: GoString = ""
    launch_template_version: GoString = ""
    fleet_instance_ready_timeout: GoString = "1m"
    lifecycle: GoString = ""
    instance_type_overrides: list[GoString] = []
    resource_tagging: StrictBool = False

    @property
    def one_shot(self) -> bool:
        """Escalator's canScaleInOneShot: a launch template means CreateFleet + AttachInstances."""
        return self.launch_template_id != ""

    @property
    def fleet_instance_ready_seconds(self) -> float:
        """Spec §3.1: the default 1m when empty; unparsable (or negative) is 0."""
        return max(duration_or_zero(self.fleet_instance_ready_timeout or "1m"), 0.0)


class NodeGroupConfig(BaseModel):
    """One Escalator node group, keys and defaults as spec/escalator.md §3.1.

    Example:
        >>> group = ke.NodeGroupConfig(name="batch", label_key="pool", label_value="batch", max_nodes=10)
        >>> group.scale_up_threshold_percent
        0
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _as_go_decodes(cls, document: Any) -> Any:
        return as_go_decodes(document, cls.model_fields)

    name: GoString = ""
    label_key: GoString = ""
    label_value: GoString = ""
    cloud_provider_group_name: GoString = ""
    min_nodes: GoInt = 0
    max_nodes: GoInt = 0
    dry_mode: StrictBool = False
    scale_on_starve: StrictBool = False
    taint_upper_capacity_threshold_percent: GoInt = 0
    taint_lower_capacity_threshold_percent: GoInt = 0
    scale_up_threshold_percent: GoInt = 0
    slow_node_removal_rate: GoInt = 0
    fast_node_removal_rate: GoInt = 0
    soft_delete_grace_period: GoString = ""
    hard_delete_grace_period: GoString = ""
    scale_up_cool_down_period: GoString = ""
    taint_effect: GoString = ""
    max_node_age: GoString = ""
    unhealthy_node_grace_period: GoString = ""
    health_check_newest_nodes_percent: GoInt = 0
    max_unhealthy_nodes_percent: GoInt = 0
    # Beyond Escalator (Trimaran): taint the least loaded nodes first, as a load watcher sees them.
    scale_down_selection: Literal["oldest", "least_loaded"] = "oldest"
    aws: AwsOptions = AwsOptions()

    @property
    def auto_discover_min_max(self) -> bool:
        """Escalator: min_nodes and max_nodes both 0 means "read them from the ASG every tick"."""
        return self.min_nodes == 0 and self.max_nodes == 0

    @property
    def soft_delete_grace_seconds(self) -> float:
        return duration_or_zero(self.soft_delete_grace_period)

    @property
    def hard_delete_grace_seconds(self) -> float:
        return duration_or_zero(self.hard_delete_grace_period)

    @property
    def scale_up_cool_down_seconds(self) -> float:
        return duration_or_zero(self.scale_up_cool_down_period)

    @property
    def max_node_age_seconds(self) -> float:
        """0 disables the rotation (`""`, `"0"`, or anything not positive)."""
        return max(duration_or_zero(self.max_node_age), 0.0)

    @property
    def unhealthy_node_feature(self) -> bool:
        return self.unhealthy_node_grace_period != ""

    @property
    def unhealthy_node_grace_seconds(self) -> float:
        return duration_or_zero(self.unhealthy_node_grace_period)

    @property
    def effective_taint_effect(self) -> str:
        return self.taint_effect or "NoSchedule"

    @property
    def claim_settle_seconds(self) -> float:
        """How long a claimed scale-up may take to show in the ASG before a later tick calls it
        lost: a one-shot group's tick may first wait for its fleet's instances to be ready."""
        if self.aws.one_shot:
            return CLAIM_SETTLE_SECONDS + self.aws.fleet_instance_ready_seconds
        return CLAIM_SETTLE_SECONDS



def validate_node_group(group: NodeGroupConfig) -> list[str]:
    """Escalator's ValidateNodeGroup: every failed check, in Escalator's order.

    The rules are Escalator's (spec/escalator.md §3.2), the words are ours where Escalator's
    mislead: a bad value is named with the rule and an example, "at most" where the check is
    `<=`, the valid taint effects listed; a key with a problem of its own is left out of the
    checks that compare it with another (no second error about the same value), and no
    problem is reported twice (Escalator reports a bad cool-down as soft_delete_grace_period).
    """
    problems: list[str] = []
    bad: set[str] = set()  # keys with a problem of their own

    def check(condition: bool, message: str, *keys: str) -> None:
        if not condition:
            problems.append(message)
            bad.update(keys)

    def compare(condition: bool, message: str, *keys: str) -> None:
        """A rule between keys, checked when none of them has a problem of its own."""
        if not bad.intersection(keys):
            check(condition, message)

    check(len(group.name) > 0, "name cannot be empty")
    check(len(group.label_key) > 0, "label_key cannot be empty")
    check(len(group.label_value) > 0, "label_value cannot be empty")
    check(len(group.cloud_provider_group_name) > 0, "cloud_provider_group_name cannot be empty")

    upper_key, lower_key, scale_up_key = ("taint_upper_capacity_threshold_percent",
                                          "taint_lower_capacity_threshold_percent",
                                          "scale_up_threshold_percent")
    upper = group.taint_upper_capacity_threshold_percent
    lower = group.taint_lower_capacity_threshold_percent
    scale_up = group.scale_up_threshold_percent
    check(upper > 0, f"{upper_key} must be larger than 0, got {upper}", upper_key)
    check(lower > 0, f"{lower_key} must be larger than 0, got {lower}", lower_key)
    check(scale_up > 0, f"{scale_up_key} must be larger than 0, got {scale_up}", scale_up_key)
    compare(lower < upper, f"{lower_key} ({lower}) must be less than {upper_key} ({upper})",
            lower_key, upper_key)
    compare(upper < scale_up, f"{upper_key} ({upper}) must be less than {scale_up_key} "
                              f"({scale_up})", upper_key, scale_up_key)

    if not group.auto_discover_min_max:
        minimum, maximum = group.min_nodes, group.max_nodes
        check(minimum < maximum, f"min_nodes ({minimum}) must be less than max_nodes ({maximum})")
        check(maximum > 0, f"max_nodes must be larger than 0, got {maximum}")
        check(minimum >= 0, f"min_nodes must be at least 0, got {minimum}")

    slow, fast = group.slow_node_removal_rate, group.fast_node_removal_rate
    check(slow <= fast, f"slow_node_removal_rate ({slow}) must be at most "
                        f"fast_node_removal_rate ({fast})")

    def duration(key: str, text: str) -> None:
        """Escalator: not empty, then parsed and positive; one problem per key."""
        if not text:
            check(False, f"{key} must not be empty: give a duration, {DURATION_EXAMPLES}", key)
        else:
            problem = duration_problem(text)
            check(problem is None, f"{key}: {problem}", key)

    duration("soft_delete_grace_period", group.soft_delete_grace_period)
    duration("hard_delete_grace_period", group.hard_delete_grace_period)
    # Compared as Go compares them, in whole nanoseconds (escalator node_group.go
    # ValidateNodeGroup: SoftDeleteGracePeriodDuration() < HardDeleteGracePeriodDuration()).
    compare(duration_ns_or_zero(group.soft_delete_grace_period)
            < duration_ns_or_zero(group.hard_delete_grace_period),
            f"soft_delete_grace_period ({group.soft_delete_grace_period}) must be less than "
            f"hard_delete_grace_period ({group.hard_delete_grace_period})",
            "soft_delete_grace_period", "hard_delete_grace_period")
    duration("scale_up_cool_down_period", group.scale_up_cool_down_period)

    check(group.taint_effect in TAINT_EFFECTS,
          f"taint_effect: {json.dumps(group.taint_effect)} is not a Kubernetes taint effect; use "
          "NoSchedule, NoExecute or PreferNoSchedule (empty: NoSchedule)")
    check(group.aws.lifecycle in LIFECYCLES,
          f"aws.lifecycle: {json.dumps(group.aws.lifecycle)} must be on-demand or spot if "
          "provided")

    # escalator node_group.go validMaxNodeAgeDuration: "" or anything time.ParseDuration
    # reads; a value not positive turns the rotation off (scaleOnMaxNodeAge), with a warning.
    if group.max_node_age:
        try:
            parse_go_duration_ns(group.max_node_age)
        except ValueError:
            check(False, f"max_node_age: {json.dumps(group.max_node_age, ensure_ascii=False)}: "
                         f"not a duration; use a number and a unit, {DURATION_EXAMPLES} "
                         "('0' or '' turns the rotation off)")

    if group.unhealthy_node_feature:
        newest = group.health_check_newest_nodes_percent
        unhealthy = group.max_unhealthy_nodes_percent
        duration("unhealthy_node_grace_period", group.unhealthy_node_grace_period)
        check(newest > 0, f"health_check_newest_nodes_percent must be larger than 0, got {newest}")
        check(newest <= 100,
              f"health_check_newest_nodes_percent must be at most 100, got {newest}")
        check(unhealthy >= 0, f"max_unhealthy_nodes_percent must be at least 0, got {unhealthy}")
        check(unhealthy < 100, f"max_unhealthy_nodes_percent must be less than 100, got "
                               f"{unhealthy}")
    return list(dict.fromkeys(problems))  # never the same line twice


def _parses(text: str) -> bool:
    try:
        parse_go_duration_ns(text)
    except ValueError:
        return False
    return True


def node_group_warnings(group: NodeGroupConfig) -> list[str]:
    """What a valid group does that its file may not mean: values Escalator accepts and reads as
    "off", or that change nothing. Never a refusal: Escalator runs such a file as it is."""
    warnings: list[str] = []
    age = group.max_node_age
    if age not in ("", "0") and _parses(age) and duration_ns_or_zero(age) <= 0:
        # escalator controller.go scaleOnMaxNodeAge: MaxNodeAgeDuration() <= 0 returns false.
        warnings.append(f"max_node_age: {json.dumps(age, ensure_ascii=False)} is not positive: "
                        "no node is rotated out, as Escalator reads it ('0' or '' says so)")
    lower = group.taint_lower_capacity_threshold_percent
    upper = group.taint_upper_capacity_threshold_percent
    # escalator controller.go scaleNodeGroup: nodesDelta = -FastNodeRemovalRate below lower,
    # -SlowNodeRemovalRate below upper; 0 is "No need to scale", a negative rate a scale-up.
    for key, rate, band in (
            ("fast_node_removal_rate", group.fast_node_removal_rate,
             f"usage below taint_lower ({lower}%)"),
            ("slow_node_removal_rate", group.slow_node_removal_rate,
             f"usage from taint_lower ({lower}%) to below taint_upper ({upper}%)")):
        if rate == 0:
            warnings.append(f"{key} is 0: {band} taints no node (tainted nodes are still "
                            "removed after their grace periods)")
        elif rate < 0:
            warnings.append(f"{key} is {rate}: {band} is a scale-up of {-rate}, as Escalator "
                            f"reads a negative rate (delta = -{key})")
    if not group.unhealthy_node_feature:
        # escalator node_group.go ValidateNodeGroup checks these only with the grace period.
        for key in ("health_check_newest_nodes_percent", "max_unhealthy_nodes_percent"):
            if getattr(group, key) != 0:
                warnings.append(f"{key} is ignored: the unhealthy-node check is on only with "
                                "unhealthy_node_grace_period")
    timeout = group.aws.fleet_instance_ready_timeout
    if group.aws.one_shot and duration_ns_or_zero(timeout or "1m") <= 0:
        # escalator node_group.go FleetInstanceReadyTimeoutDuration: a parse error reads as 0.
        warnings.append(f"aws.fleet_instance_ready_timeout: {json.dumps(timeout, ensure_ascii=False)}"
                        " is read as 0 (as Escalator does): a fleet's instances get no time "
                        "to be running before they are terminated")
    return warnings


def effective_min_max(group: NodeGroupConfig, asg_min: int, asg_max: int) -> tuple[int, int]:
    """Escalator auto-discovery: re-read min/max from the ASG every tick when both are 0."""
    if group.auto_discover_min_max:
        return asg_min, asg_max
    return group.min_nodes, group.max_nodes


__all__ = [
    "AwsOptions",
    "NodeGroupConfig",
    "as_go_decodes",
    "effective_min_max",
    "go_json_keys",
    "node_group_warnings",
    "validate_node_group",
]
