"""The node-group file as a whole: Escalator's `node_groups:` and the `cluster_autoscaler:` section.

It sits above both systems (each knows only its own section), so neither system's folder imports
the other's configuration. YAML or JSON; every problem is reported at once, each prefixed with the
file and the group (spec/escalator.md §3.2).
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from kube_elevator.tasks.cluster_autoscaler.config import ClusterAutoscalerConfig, validate_cluster_autoscaler
from kube_elevator.tasks.core.documents import load_file
from kube_elevator.tasks.core.duration import go_string
from kube_elevator.tasks.core.errors import InputError, join_location, shown
from kube_elevator.tasks.escalator.config import (
    AwsOptions,
    NodeGroupConfig,
    as_go_decodes,
    go_json_keys,
    node_group_warnings,
    validate_node_group,
)


def _none_is_default(value: Any) -> Any:
    return {} if value is None else value


class NodeGroupsFile(BaseModel):
    """The whole file: Escalator reads `node_groups` and ignores any other top-level key.

    Example:
        >>> group = {"name": "batch", "label_key": "pool", "label_value": "batch"}
        >>> document = ke.NodeGroupsFile.model_validate({"node_groups": [group]})
        >>> document.node_groups[0].name, document.cluster_autoscaler.enabled
        ('batch', False)
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    node_groups: list[NodeGroupConfig] = []
    cluster_autoscaler: Annotated[ClusterAutoscalerConfig,
                                  BeforeValidator(_none_is_default)] = ClusterAutoscalerConfig()



# --- loading ------------------------------------------------------------------------------

@dataclass(frozen=True)
class LoadedConfig:
    """A validated node-group file, with the warnings (unknown keys) found while reading it.

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> config.path, config.node_groups[0].label_key
        ('deployments/examples/nodegroups.yaml', 'customer')
    """

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


def _model_at(location: Iterable[int | str]) -> type[BaseModel] | None:
    """The model that holds the key at `location` (its parent's), walking the file's models."""
    model: type[BaseModel] = NodeGroupsFile
    for part in list(location)[:-1]:
        if isinstance(part, int):
            continue
        field_info = model.model_fields.get(part)
        if field_info is None:
            return None
        candidates = [field_info.annotation, *typing.get_args(field_info.annotation)]
        found = [kind for kind in candidates
                 if isinstance(kind, type) and issubclass(kind, BaseModel)]
        if not found:
            return None
        model = found[0]
    return model


def _pydantic_problems(error: ValidationError, source: str, raw_groups: Any) -> list[str]:
    problems = []
    for detail in error.errors():
        rule = detail["msg"]
        if "input" in detail and detail["type"] not in ("missing", "go_duration",
                                                          "extra_forbidden"):
            rule = f"{rule}, got {shown(detail['input'])}"
        if detail["type"] == "extra_forbidden" and (model := _model_at(detail["loc"])):
            close = difflib.get_close_matches(str(detail["loc"][-1]), list(model.model_fields),
                                              n=1, cutoff=0.75)
            if close:
                rule = f"{rule}; did you mean `{close[0]}`?"
        problems.append(join_location(source, _key_path(detail["loc"], raw_groups), rule))
    return problems


def _unknown_keys(entry: Any, model: type[BaseModel], source: str, path: str,
                  rule: str) -> list[str]:
    """A warning for each key of the mapping `entry` that `model` does not know, with the
    known key it most looks like (`nodegroups` → did you mean `node_groups`?)."""
    if not isinstance(entry, dict):
        return []
    known = list(model.model_fields)
    # Escalator's decoder matches keys whatever their case (`go_json_keys`): such a key is read.
    read_as = go_json_keys(entry, known)
    warnings = []
    for key in entry:
        if key in known:
            continue
        text = str(key)
        if key in read_as:
            warnings.append(join_location(
                source, f"{path}.{text}" if path else text,
                f"read as `{read_as[key]}` (Escalator matches keys whatever their case)"))
            continue
        alone = as_go_decodes({key: 0}, known)  # {field: 0} when `key` spells a field
        if key not in alone:  # a spelling of a field that another key (or a null) sets
            warnings.append(join_location(
                source, f"{path}.{text}" if path else text,
                f"ignored: a spelling of `{next(iter(alone))}`, which another key sets "
                "(Escalator reads the last of them in sorted order; a null sets nothing)"))
            continue
        close = difflib.get_close_matches(text.lower().replace("-", "_"), known, n=1,
                                          cutoff=0.75)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        warnings.append(join_location(source, f"{path}.{text}" if path else text, rule + hint))
    return warnings


def _warnings(document: dict[Any, Any], source: str) -> list[str]:
    """Unknown keys, read from the document as written, so a file with errors too keeps them."""
    warnings = _unknown_keys(document, NodeGroupsFile, source, "",
                             "unknown top-level key, ignored")
    raw_groups = as_go_decodes(document, ["node_groups"]).get("node_groups")
    raw_groups = raw_groups if isinstance(raw_groups, list) else []
    named = [as_go_decodes(entry, NodeGroupConfig.model_fields) for entry in raw_groups]
    for index, entry in enumerate(raw_groups):
        label = _group_label(index, named)
        warnings += _unknown_keys(entry, NodeGroupConfig, source, label,
                                  "unknown key, ignored (as Escalator does)")
        if isinstance(entry, dict):
            aws = as_go_decodes(entry, NodeGroupConfig.model_fields).get("aws")
            warnings += _unknown_keys(aws, AwsOptions, source, f"{label}.aws",
                                      "unknown key, ignored (as Escalator does)")
    return warnings


# Another file of the project's given by mistake: what it looks like, from its top-level keys.
# The scenario's two required keys besides `duration` (fakes/scenario.py Scenario).
_SCENARIO_KEYS = ("nodegroups", "asgs")
# The pod autoscalers `elevator pods plan` reads (flows/cli/pods_files.py).
_POD_AUTOSCALER_KINDS = ("WatermarkPodAutoscaler", "MemoryAutoscaler", "HorizontalPodAutoscaler",
                         "VerticalPodAutoscaler")


def _other_file_kind(document: dict[Any, Any], source: str) -> str | None:
    """What a mapping without `node_groups` looks like, when it is another file we know."""
    if all(key in document for key in _SCENARIO_KEYS):
        named = document.get("nodegroups")
        # the scenario's `nodegroups:` path is relative to its own folder (fakes/scenario.py)
        also = (f"; the node-group file it names is {Path(source).parent / named}"
                if isinstance(named, str) and named else "")
        return ("this looks like a scenario file for `elevator simulate` (it has `nodegroups`, "
                "`asgs`), not a node-group file: run it with `elevator simulate`" + also)
    if "apiVersion" in document and "kind" in document:
        kind = document.get("kind")
        items = document.get("items")
        kinds = {item.get("kind") for item in items if isinstance(item, dict)} \
            if isinstance(items, list) else {kind}
        if kinds & set(_POD_AUTOSCALER_KINDS):
            return ("this looks like a pod-autoscaler file for `elevator pods plan` (a "
                    f"Kubernetes {kind}), not a node-group file: check it with `elevator pods "
                    "validate`")
        return (f"this looks like a Kubernetes manifest (a {kind}), not a node-group "
                "file: a node-group file is YAML or JSON with `node_groups:`")
    return None


def _shared_label_warnings(groups: list[NodeGroupConfig], labels: list[str]) -> list[str]:
    """Two groups on one label: Escalator lists a group's nodes (and, but for `default`, its pods)
    by label_key=label_value alone (spec/escalator.md §5.1, §5.2), so both see the same ones."""
    warnings = []
    first: dict[tuple[str, str], int] = {}
    for index, group in enumerate(groups):
        key = (group.label_key, group.label_value)
        if key not in first:
            first[key] = index
            continue
        other = groups[first[key]]
        both_pods = "default" not in (group.name, other.name)
        shared = ("the same nodes and pending pods: each scales its own ASG for them"
                  if both_pods else "the same nodes: their capacity and usage count in both")
        warnings.append(f"{labels[index]}: selects nodes by {group.label_key}="
                        f"{group.label_value}, as {labels[first[key]]} does: both groups count "
                        f"{shared}")
    return warnings


def _default_group_warning(group: NodeGroupConfig) -> str:
    """Escalator's `default` group takes its pods by having no selector, not by its label
    (spec/escalator.md §5.1): say what the label does and what it does not."""
    label = f"{group.label_key}={group.label_value}"
    return (f"named `default`: Escalator counts in it the pods with no nodeSelector and no "
            f"affinity, not the pods that select {label} (those belong to no group unless "
            f"another group has that label); {label} picks only its nodes")


def parse_node_groups(document: Any, source: str) -> LoadedConfig:
    """Validate a decoded document; raise InputError with every problem at once."""
    if not isinstance(document, dict):
        # Escalator: a top level that is not a mapping is a decode error and yields no groups.
        kind = type(document).__name__ if document is not None else "empty document"
        raise InputError([join_location(source, "", f"top level must be a mapping with "
                                                    f"'node_groups', got {kind}")])
    if "node_groups" not in as_go_decodes(document, ["node_groups"]) \
            and (looks_like := _other_file_kind(document, source)):
        raise InputError([join_location(source, "", looks_like)])
    warnings = _warnings(document, source)
    document = as_go_decodes(document, ["node_groups"])  # `Node_Groups:` as Escalator reads it
    raw_groups = document.get("node_groups")
    if isinstance(raw_groups, list):  # each group's name for the error lines, as read
        raw_groups = [as_go_decodes(entry, NodeGroupConfig.model_fields) for entry in raw_groups]
    try:
        parsed = NodeGroupsFile.model_validate(document)
    except ValidationError as error:
        raise InputError(_pydantic_problems(error, source, raw_groups), warnings) from None

    problems: list[str] = []
    if "node_groups" not in document:
        problems.append(join_location(source, "node_groups", "missing: no node groups defined"))
    seen: dict[str, int] = {}
    labels = [_group_label(index, raw_groups) for index in range(len(parsed.node_groups))]
    for index, group in enumerate(parsed.node_groups):
        label = labels[index]
        problems.extend(join_location(source, label, message)
                        for message in validate_node_group(group))
        warnings.extend(join_location(source, label, message)
                        for message in node_group_warnings(group))
        if group.name == "default" and group.label_key:
            warnings.append(join_location(source, label, _default_group_warning(group)))
        if group.name:
            if group.name in seen:
                problems.append(join_location(
                    source, label,
                    f"duplicate node group name {group.name!r} "
                    f"(also node_groups[{seen[group.name]}])"))
            else:
                seen[group.name] = index
    warnings.extend(join_location(source, "", message)
                    for message in _shared_label_warnings(list(parsed.node_groups), labels))
    problems.extend(join_location(source, f"cluster_autoscaler.{path}", message)
                    for path, message in validate_cluster_autoscaler(parsed.cluster_autoscaler))
    if problems:
        raise InputError(list(dict.fromkeys(problems)), warnings)
    return LoadedConfig(path=source, node_groups=tuple(parsed.node_groups),
                        warnings=tuple(warnings), document=parsed)


def load_node_groups(path: str | Path) -> LoadedConfig:
    """Read a node-group file (YAML or JSON) and validate it.

    Example:
        >>> config = ke.load_node_groups("deployments/examples/nodegroups.yaml")
        >>> [group.name for group in config.node_groups], config.warnings
        (['batch', 'services'], ())
    """
    # JSON is YAML, so one loader reads both, as Escalator's YAML-to-JSON decoder does.
    # Escalator's YAML is goyaml.v2's: a plain y/n is a bool there (`dry_mode: y`).
    return parse_node_groups(load_file(path, go_yaml_bools=True), str(path))


__all__ = ["LoadedConfig", "NodeGroupsFile", "load_node_groups", "parse_node_groups"]
