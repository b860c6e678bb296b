"""Escalator's node-group file: loading, Go durations, and validation that reports every problem.

The file is Escalator's format unchanged (`node_groups:` list, YAML or JSON, snake_case keys), so
an existing Escalator config works as is. Validation messages and their order are Escalator's
(spec/escalator.md §3.2); each is prefixed with the file and the group.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
)

from tasks.cluster_autoscaler.config import ClusterAutoscalerConfig, validate_cluster_autoscaler
from tasks.core.documents import load_file
from tasks.core.duration import duration_or_zero, go_string, parse_go_duration
from tasks.core.errors import InputError, join_location, shown

# --- the models ---------------------------------------------------------------------------


GoString = Annotated[str, BeforeValidator(go_string)]
# Escalator's Go `int` (64 bits): a larger number fails its YAML decoding.
GoInt = Annotated[StrictInt, Field(ge=-(2**63), le=2**63 - 1)]
TAINT_EFFECTS = ("", "NoSchedule", "NoExecute", "PreferNoSchedule")
LIFECYCLES = ("", "on-demand", "spot")


class AwsOptions(BaseModel):
    """The `aws:` block of a node group."""

    model_config = ConfigDict(extra="allow", frozen=True)

    launch_template_id: GoString = ""
    launch_template_version: GoString = ""
    fleet_instance_ready_timeout: GoString = "1m"
    lifecycle: GoString = ""
    instance_type_overrides: list[GoString] = []
    resource_tagging: StrictBool = False


class NodeGroupConfig(BaseModel):
    """One Escalator node group, keys and defaults as spec/escalator.md §3.1."""

    model_config = ConfigDict(extra="allow", frozen=True)

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



def _none_is_default(value: Any) -> Any:
    return {} if value is None else value


class NodeGroupsFile(BaseModel):
    """The whole file: Escalator reads `node_groups` and ignores any other top-level key."""

    model_config = ConfigDict(extra="allow", frozen=True)

    node_groups: list[NodeGroupConfig] = []
    cluster_autoscaler: Annotated[ClusterAutoscalerConfig,
                                  BeforeValidator(_none_is_default)] = ClusterAutoscalerConfig()


def validate_node_group(group: NodeGroupConfig) -> list[str]:
    """Escalator's ValidateNodeGroup: every failed check, in Escalator's order and words."""
    problems: list[str] = []

    def check(condition: bool, message: str) -> None:
        if not condition:
            problems.append(message)

    check(len(group.name) > 0, "name cannot be empty")
    check(len(group.label_key) > 0, "label_key cannot be empty")
    check(len(group.label_value) > 0, "label_value cannot be empty")
    check(len(group.cloud_provider_group_name) > 0, "cloud_provider_group_name cannot be empty")

    upper = group.taint_upper_capacity_threshold_percent
    lower = group.taint_lower_capacity_threshold_percent
    scale_up = group.scale_up_threshold_percent
    check(upper > 0, "taint_upper_capacity_threshold_percent must be larger than 0")
    check(lower > 0, "taint_lower_capacity_threshold_percent must be larger than 0")
    check(scale_up > 0, "scale_up_threshold_percent must be larger than 0")
    check(lower < upper,
          "taint_lower_capacity_threshold_percent must be less than "
          "taint_upper_capacity_threshold_percent")
    check(upper < scale_up,
          "taint_upper_capacity_threshold_percent must be less than scale_up_threshold_percent")

    if not group.auto_discover_min_max:
        check(group.min_nodes < group.max_nodes, "min_nodes must be less than max_nodes")
        check(group.max_nodes > 0, "max_nodes must be larger than 0")
        check(group.min_nodes >= 0, "min_nodes must be not less than 0")

    # Escalator checks slow <= fast but words it "less than".
    check(group.slow_node_removal_rate <= group.fast_node_removal_rate,
          "slow_node_removal_rate must be less than fast_node_removal_rate")

    check(len(group.soft_delete_grace_period) > 0, "soft_delete_grace_period must not be empty")
    check(len(group.hard_delete_grace_period) > 0, "hard_delete_grace_period must not be empty")
    soft = group.soft_delete_grace_seconds
    hard = group.hard_delete_grace_seconds
    check(soft > 0,
          "soft_delete_grace_period failed to parse into a time.Duration. check your formatting.")
    check(hard > 0,
          "hard_delete_grace_period failed to parse into a time.Duration. check your formatting.")
    check(soft < hard, "soft_delete_grace_period must be less than hard_delete_grace_period")

    check(len(group.scale_up_cool_down_period) > 0, "scale_up_cool_down_period must not be empty")
    # Escalator quirk (kept for compatibility): a bad cool-down is reported as soft_delete_grace_period.
    check(group.scale_up_cool_down_seconds > 0,
          "soft_delete_grace_period failed to parse into a time.Duration. check your formatting.")

    check(group.taint_effect in TAINT_EFFECTS, "taint_effect must be valid kubernetes taint")
    check(group.aws.lifecycle in LIFECYCLES,
          "aws.lifecycle must be 'on-demand' or 'spot' if provided.")

    if group.max_node_age not in ("", "0"):
        try:
            parse_go_duration(group.max_node_age)
        except ValueError:
            problems.append(
                "max_node_age failed to parse into a time.Duration. Set to '0' or '' to "
                "disable, or a positive Go duration to enable."
            )

    if group.unhealthy_node_feature:
        newest = group.health_check_newest_nodes_percent
        unhealthy = group.max_unhealthy_nodes_percent
        check(group.unhealthy_node_grace_seconds > 0,
              "unhealthy_node_grace_period failed to parse into a time.Duration. "
              "check your formatting.")
        check(newest > 0, "health_check_newest_nodes_percent must be greater than 0")
        check(newest <= 100, "health_check_newest_nodes_percent must be less than or equal to 100")
        check(unhealthy >= 0, "max_unhealthy_nodes_percent must be greater than or equal to 0")
        check(unhealthy < 100, "max_unhealthy_nodes_percent must be less than 100")
    return problems


# --- loading ------------------------------------------------------------------------------

@dataclass(frozen=True)
class LoadedConfig:
    """A validated node-group file, with the warnings (unknown keys) found while reading it."""

    path: str
    node_groups: tuple[NodeGroupConfig, ...]
    warnings: tuple[str, ...] = field(default=())
    document: NodeGroupsFile | None = None

    @property
    def cluster_autoscaler(self) -> ClusterAutoscalerConfig:
        """The cluster-level section (disabled when the file has none)."""
        return self.document.cluster_autoscaler if self.document is not None \
            else ClusterAutoscalerConfig()

    def group(self, name: str) -> NodeGroupConfig:
        for group in self.node_groups:
            if group.name == name:
                return group
        raise KeyError(name)


def _group_label(index: int, raw_groups: Any) -> str:
    name = ""
    if isinstance(raw_groups, list) and index < len(raw_groups):
        entry = raw_groups[index]
        if isinstance(entry, dict):
            try:
                name = str(go_string(entry.get("name", "")) or "")
            except ValueError:  # a name no string can hold: the index alone says where
                name = ""
    return f"node_groups[{index}] ({name})" if name else f"node_groups[{index}]"


def _key_path(location: Iterable[int | str], raw_groups: Any) -> str:
    parts = list(location)
    if len(parts) >= 2 and parts[0] == "node_groups" and isinstance(parts[1], int):
        head = _group_label(parts[1], raw_groups)
        rest = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts[2:])
        return head + rest
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p))
                   for i, p in enumerate(parts))


def _pydantic_problems(error: ValidationError, source: str, raw_groups: Any) -> list[str]:
    problems = []
    for detail in error.errors():
        rule = detail["msg"]
        if "input" in detail and detail["type"] not in ("missing",):
            rule = f"{rule}, got {shown(detail['input'])}"
        problems.append(join_location(source, _key_path(detail["loc"], raw_groups), rule))
    return problems


def _unknown_keys(model: BaseModel, source: str, path: str) -> list[str]:
    extra = model.model_extra or {}
    return [join_location(source, f"{path}.{key}" if path else key,
                          "unknown key, ignored (as Escalator does)") for key in extra]


def parse_node_groups(document: Any, source: str) -> LoadedConfig:
    """Validate a decoded document; raise InputError with every problem at once."""
    if not isinstance(document, dict):
        # Escalator: a top level that is not a mapping is a decode error and yields no groups.
        kind = type(document).__name__ if document is not None else "empty document"
        raise InputError([join_location(source, "", f"top level must be a mapping with "
                                                    f"'node_groups', got {kind}")])
    raw_groups = document.get("node_groups")
    try:
        parsed = NodeGroupsFile.model_validate(document)
    except ValidationError as error:
        raise InputError(_pydantic_problems(error, source, raw_groups)) from None

    problems: list[str] = []
    warnings: list[str] = [
        join_location(source, key, "unknown top-level key, ignored")
        for key in (parsed.model_extra or {})
    ]
    if "node_groups" not in document:
        problems.append(join_location(source, "node_groups", "missing: no node groups defined"))
    seen: dict[str, int] = {}
    for index, group in enumerate(parsed.node_groups):
        label = _group_label(index, raw_groups)
        problems.extend(join_location(source, label, message)
                        for message in validate_node_group(group))
        if group.name:
            if group.name in seen:
                problems.append(join_location(
                    source, label,
                    f"duplicate node group name {group.name!r} "
                    f"(also node_groups[{seen[group.name]}])"))
            else:
                seen[group.name] = index
        warnings.extend(_unknown_keys(group, source, label))
        warnings.extend(_unknown_keys(group.aws, source, f"{label}.aws"))
    problems.extend(join_location(source, f"cluster_autoscaler.{path}", message)
                    for path, message in validate_cluster_autoscaler(parsed.cluster_autoscaler))
    if problems:
        raise InputError(problems)
    return LoadedConfig(path=source, node_groups=tuple(parsed.node_groups),
                        warnings=tuple(warnings), document=parsed)


def load_node_groups(path: str | Path) -> LoadedConfig:
    """Read a node-group file (YAML or JSON) and validate it."""
    # JSON is YAML, so one loader reads both, as Escalator's YAML-to-JSON decoder does.
    return parse_node_groups(load_file(path), str(path))


def effective_min_max(group: NodeGroupConfig, asg_min: int, asg_max: int) -> tuple[int, int]:
    """Escalator auto-discovery: re-read min/max from the ASG every tick when both are 0."""
    if group.auto_discover_min_max:
        return asg_min, asg_max
    return group.min_nodes, group.max_nodes


__all__ = [
    "AwsOptions",
    "LoadedConfig",
    "NodeGroupConfig",
    "NodeGroupsFile",
    "effective_min_max",
    "load_node_groups",
    "parse_node_groups",
    "validate_node_group",
]
