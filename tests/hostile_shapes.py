"""Hostile shapes of a real file, for the fuzz suite and the hostile-file probe (issue 27).

Each shape is put at a chosen key path of a parsed document, so every reader meets it where it
reads, not only at the top: a YAML alias inside the node its anchor names (a document that
contains itself), nesting far past any real object's depth, a "billion laughs" of aliases,
and a value of the wrong type.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import yaml

KeyPath = tuple[str | int, ...]

# A value of each JSON type, and of each size that broke a reader before.
WRONG_TYPES: tuple[Any, ...] = ("x", 5, -1, 1.5, True, None, [], {}, ["x"], {"a": 1},
                                10**30, "9" * 5000)

_PLACEHOLDER = "__hostile_value__"


def key_paths(document: Any, prefix: KeyPath = (), items_per_list: int = 3) -> Iterator[KeyPath]:
    """Every key path of `document` (the first few items of each list), the root first."""
    yield prefix
    if isinstance(document, dict):
        for key, value in document.items():
            yield from key_paths(value, (*prefix, key), items_per_list)
    elif isinstance(document, list):
        for index, value in enumerate(document[:items_per_list]):
            yield from key_paths(value, (*prefix, index), items_per_list)


def object_first_key_path(document: Any, choose: Callable[[Sequence[Any]], Any]) -> KeyPath:
    """A key path inside one object of the file, drawn by `choose` (`random.choice`, or a
    hypothesis draw): the object first (each item of a List as likely), then how deep (an
    object's own keys, `metadata` or `spec`, as likely as a leaf), then the path."""
    items = document.get("items") if isinstance(document, dict) else None
    root: KeyPath = ("items", choose(range(len(items)))) if isinstance(items, list) and items \
        else ()
    target = document
    for key in root:
        target = target[key]
    paths = list(key_paths(target))
    depth = choose(sorted({len(path) for path in paths}))
    return (*root, *choose([path for path in paths if len(path) == depth]))


def replaced(document: Any, path: KeyPath, value: Any) -> Any:
    """A copy of `document` with `value` at `path` (the root itself for `()`)."""
    if not path:
        return value
    copied = copy.deepcopy(document)
    parent = copied
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return copied


def recursive_alias(document: Any, path: KeyPath, up: int) -> bytes:
    """YAML in which the node at `path` is a list holding its `up`-th ancestor (0: itself):
    `node_groups: &a [*a]` at the top, the same anywhere below."""
    holder: list[Any] = []
    copied = replaced(document, path, holder)
    ancestors = [copied]
    for key in path[:-1]:
        ancestors.append(ancestors[-1][key])
    ancestors.append(holder)
    holder.append(ancestors[max(len(ancestors) - 1 - up, 0)])
    return yaml.safe_dump(copied).encode()


def billion_laughs(levels: int = 9, width: int = 9) -> list[Any]:
    """Nine lists of nine references to the one below: dumped as YAML, a few anchors and
    aliases that expand to 9**9 values."""
    value: list[Any] = ["lol"] * width
    for _ in range(levels - 1):
        value = [value] * width
    return value


def deep_text(levels: int, mapping: bool = False) -> str:
    """A JSON (and YAML flow) value nested `levels` deep: `[[[...]]]` or `{"a":{"a":...}}`."""
    if mapping:
        return '{"a":' * levels + "1" + "}" * levels
    return "[" * levels + "]" * levels


def with_text(document: Any, path: KeyPath, text: str, as_yaml: bool) -> bytes:
    """`document` as JSON or block YAML, with the raw `text` (too deep to build as a Python value
    and dump) as the value at `path`."""
    marked = replaced(document, path, _PLACEHOLDER)
    if as_yaml:
        return yaml.safe_dump(marked).replace(_PLACEHOLDER, text).encode()
    return json.dumps(marked).replace(json.dumps(_PLACEHOLDER), text).encode()
