"""Reading a file the user gave us, safely: bytes to a YAML or JSON document (issue 14).

Every reader of a user's file (node groups, scenarios, `pods plan` objects, metrics, ASG
descriptions) goes through here, so one set of limits holds everywhere: the bytes must be
UTF-8; a document may nest at most `MAX_DEPTH` levels and, with YAML aliases expanded, hold at
most `MAX_NODES` values (a "billion laughs" of nine nested aliases is refused before anything
walks it); and every error is one line naming the file and the place.

libyaml composes the node graph without recursion in Python; the checks then walk that graph
iteratively, and only a document within the limits is constructed into Python objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml

from tasks.core.errors import InputError, join_location

MAX_DEPTH = 100
MAX_NODES = 1_000_000

_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_bytes(path: str | Path, source: str | None = None) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise InputError([join_location(source or str(path), "",
                                        f"cannot read file: {error.strerror}")]) from None


def as_text(data: bytes, source: str) -> str:
    """UTF-8, strictly: a bad byte is named by its offset, not a traceback."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError([join_location(
            source, f"byte {error.start}",
            f"not UTF-8 (0x{data[error.start]:02x}): save the file as UTF-8")]) from None


def _yaml_problem(error: yaml.YAMLError, source: str, kind: str) -> InputError:
    mark = getattr(error, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    reason = getattr(error, "problem", None) or str(error)
    return InputError([join_location(source, where, f"not valid {kind}: {reason}")])


def _check_shape(root: yaml.Node, source: str) -> None:
    """Depth and alias-expanded size of the node graph, without recursion."""
    depth: dict[int, int] = {}
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in size:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in size)
            continue
        depth[key] = 1 + max((depth[id(child)] for child in children), default=0)
        size[key] = 1 + sum(size[id(child)] for child in children)
        if depth[key] > MAX_DEPTH:
            raise InputError([join_location(source, "", f"nested deeper than {MAX_DEPTH} "
                                                        "levels")])
        if size[key] > MAX_NODES:
            raise InputError([join_location(source, "", f"more than {MAX_NODES:,} values once "
                                                        "its aliases are expanded")])


def load_document(data: bytes, source: str, kind: str = "YAML or JSON") -> Any:
    """A YAML (or JSON, which is YAML) document within the limits; None for an empty file."""
    loader = _LOADER(as_text(data, source))
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_shape(node, source)
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        raise _yaml_problem(error, source, kind) from None
    except RecursionError:  # the pure-Python loader, where libyaml is missing
        raise InputError([join_location(source, "", f"nested deeper than {MAX_DEPTH} "
                                                    "levels")]) from None
    finally:
        loader.dispose()


def load_file(path: str | Path, kind: str = "YAML or JSON") -> Any:
    return load_document(read_bytes(path), str(path), kind)


def load_json_document(data: bytes, source: str) -> Any:
    """A JSON file (strict and fast with orjson); what orjson refuses (deep nesting, numbers past
    64 bits, bad bytes, or YAML) is read by `load_document`, which says why in one line."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return load_document(data, source, "JSON")
    depth, stack = 0, [(document, 1)]
    while stack:
        value, level = stack.pop()
        depth = max(depth, level)
        if depth > MAX_DEPTH:
            raise InputError([join_location(source, "", f"nested deeper than {MAX_DEPTH} "
                                                        "levels")])
        if isinstance(value, dict):
            stack.extend((child, level + 1) for child in value.values())
        elif isinstance(value, list):
            stack.extend((child, level + 1) for child in value)
    return document
