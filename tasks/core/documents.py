"""Reading a file the user gave us, safely: bytes to a YAML or JSON document (issue 14).

Every reader of a user's file (node groups, scenarios, snapshots, `pods plan` objects and
metrics, ASG descriptions, kubeconfigs, the load watcher's state) goes through here, so one set
of limits holds everywhere: the bytes must be UTF-8; a document may nest at most `MAX_DEPTH`
levels (the deepest real Kubernetes object we hold nests 15: a pod's managedFields); a YAML alias
may not sit inside the node its anchor names (`node_groups: &a [*a]` would be a list that
contains itself, which no walk ends); and aliases may add at most `MAX_NODES` values when
expanded (a "billion laughs" of nine nested aliases is refused before anything walks it).
Every error is one line naming the file, the place and the rule.

libyaml composes the node graph without recursion in Python (and refuses past 1,000 levels
itself); the checks then walk that graph iteratively, and only a document within the limits is
constructed into Python objects. JSON read by orjson (which refuses past 1,024 levels) is
walked for its depth before it is returned (`check_depth`). The one reader that does not build
a document, a snapshot decoded item by item with msgspec (`tasks/core/decode.py`), reads only
fixed-depth structs and skips the rest; msgspec refuses a value it skips past Python's
recursion limit (about 1,000 levels) with RecursionError, which `depth_limited` turns into the
same error line.
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import yaml

from kube_elevator.tasks.core.errors import InputError, join_location

MAX_DEPTH = 100
MAX_NODES = 1_000_000
TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"
SELF_REFERENCE = ("a YAML alias inside the node its anchor names: a document cannot contain "
                  "itself")
# libyaml's own limit (1,000 levels), met before ours when a file nests that deep.
_LIBYAML_TOO_DEEP = "maximum nesting depth"

_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# Byte order marks, longest first (UTF-32 LE's starts as UTF-16 LE's does).
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))


def names_a_file(path: str | Path) -> bool:
    """Is there a regular file at `path`? A name the file system refuses (too long, a NUL byte)
    names none: `Path.is_file` raises for those, where a user's file names a file or does not."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def read_bytes(path: str | Path, source: str | None = None) -> bytes:
    """A file's bytes, as UTF-8 when it starts with a byte order mark (`utf8_from_bom`).

    A device is refused before it is read: `/dev/zero` or `/dev/urandom` never ends, and memory
    would grow until the machine gives out. A pipe is read to its end, as `cat` reads it, so
    `--snapshot <(kubectl get pods -A -o json)` works."""
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
            kind = ("a character device" if stat.S_ISCHR(mode) else
                    "a block device" if stat.S_ISBLK(mode) else "a socket")
            raise InputError([join_location(source or str(path), "",
                                            f"cannot read file: it is {kind}, not a file")])
        data = Path(path).read_bytes()
    except OSError as error:
        raise InputError([join_location(source or str(path), "",
                                        f"cannot read file: {error.strerror}")]) from None
    except ValueError:  # a NUL byte in the path
        raise InputError([join_location(source or repr(str(path)), "",
                                        "cannot read file: the path holds a NUL byte")]) from None
    return utf8_from_bom(data, source or str(path))


def utf8_from_bom(data: bytes, source: str) -> bytes:
    """A file that starts with a byte order mark, as UTF-8 without it; others unchanged.

    Windows writes them: PowerShell 5's `kubectl get pods -A -o json > pods.json` is UTF-16 with
    a BOM, and `Out-File -Encoding utf8` or a spreadsheet's "CSV UTF-8" start with UTF-8's.
    kubectl reads such files (its file reader decodes by the BOM), so do we.
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            if codec == "utf-8-sig":
                return data[len(bom):]  # its readers check the UTF-8 themselves
            try:
                return data.decode(codec).encode("utf-8")
            except UnicodeError as error:
                name = codec.upper()
                raise InputError([join_location(
                    source, f"byte {getattr(error, 'start', 0)}",
                    f"not valid {name} after its byte order mark: save the file as UTF-8"),
                ]) from None
    return data


def as_text(data: bytes, source: str) -> str:
    """UTF-8, strictly: a bad byte is named by its offset, not a traceback."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError([join_location(
            source, f"byte {error.start}",
            f"not UTF-8 (0x{data[error.start]:02x}): save the file as UTF-8")]) from None


def too_deep(source: str, where: str = "") -> InputError:
    return InputError([join_location(source, where, TOO_DEEP)])


@contextmanager
def depth_limited(source: str) -> Iterator[None]:
    """msgspec's decoders (and the pure-Python YAML loader) refuse nesting past Python's
    recursion limit with RecursionError: the same error line as every other reader's."""
    try:
        yield
    except RecursionError:
        raise too_deep(source) from None


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _yaml_problem(error: yaml.YAMLError, source: str, kind: str) -> InputError:
    where = _at(getattr(error, "problem_mark", None))
    reason = getattr(error, "problem", None) or str(error)
    if _LIBYAML_TOO_DEEP in reason:
        return too_deep(source, where)
    return InputError([join_location(source, where, f"not valid {kind}: {reason}")])


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_shape(root: yaml.Node, source: str) -> None:
    """Self-reference, depth, and the size aliases add when expanded, of the node graph, without
    recursion. A node shared through aliases is walked once; a node met again while it is still
    open (on the path from the root) holds an alias to itself."""
    height: dict[int, int] = {}  # of each finished node: its levels, itself included
    size: dict[int, int] = {}  # of each finished node: its values once aliases are expanded
    open_nodes: set[int] = set()
    # (node, its level, its children once they are pushed: None before)
    stack: list[tuple[yaml.Node, int, list[yaml.Node] | None]] = [(root, 1, None)]
    while stack:
        node, level, children = stack.pop()
        key = id(node)
        if children is not None:  # every child finished
            open_nodes.discard(key)
            height[key] = 1 + max((height[id(child)] for child in children), default=0)
            size[key] = 1 + sum(size[id(child)] for child in children)
            # What aliases add: the expanded size beyond the nodes the file itself holds. A big
            # file without aliases (`-o yaml` of 150,000 pods) is bounded by its bytes already.
            if size[key] - len(size) > MAX_NODES:
                raise InputError([join_location(source, "", f"its aliases expand to more than "
                                                            f"{MAX_NODES:,} values")])
            continue
        if key in height:  # an alias to a finished node: as deep as it is, here too
            if level + height[key] - 1 > MAX_DEPTH:
                raise too_deep(source, _at(node.start_mark))
            continue
        if key in open_nodes:
            raise InputError([join_location(source, _at(node.start_mark), SELF_REFERENCE)])
        if level > MAX_DEPTH:
            raise too_deep(source, _at(node.start_mark))
        if isinstance(node, yaml.ScalarNode):  # most nodes: finished at once
            height[key] = size[key] = 1
            continue
        if isinstance(node, yaml.MappingNode):
            _check_unique_keys(node, source)
        open_nodes.add(key)
        children = _children(node)
        stack.append((node, level, children))
        stack.extend((child, level + 1, None) for child in children)


def _check_unique_keys(node: yaml.MappingNode, source: str) -> None:
    """YAML says a mapping's keys are unique; PyYAML keeps the last, so a second `node_groups:`
    would silently replace the first."""
    seen: dict[tuple[str, str], yaml.Node] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.value == "<<":
            continue
        first = seen.setdefault((key.tag, key.value), key)
        if first is not key:
            raise InputError([join_location(
                source, _at(key.start_mark),
                f"duplicate key {key.value!r} (first on line {first.start_mark.line + 1})")])


def value_problem(error: Exception, source: str, kind: str) -> InputError:
    """A value that parses but is no value: 2001-02-30, !!int abc, a 5,000-digit number."""
    reason = str(error)
    if "sys.set_int_max_str_digits" in reason:
        reason = "a number longer than 4,300 digits"
    elif isinstance(error, KeyError | AttributeError):  # the constructors of !!bool, !!timestamp
        reason = "a value does not match its tag, such as !!bool or !!timestamp"
    return InputError([join_location(source, "", f"not valid {kind}: a value cannot be read "
                                                 f"({reason})")])


_BOOL_TAG = "tag:yaml.org,2002:bool"
_STR_TAG = "tag:yaml.org,2002:str"
_GO_YAML_SHORT_BOOLS = {"y": "true", "Y": "true", "n": "false", "N": "false"}


def _go_yaml_short_bools(root: yaml.Node) -> None:
    """goyaml.v2 (YAML 1.1, as Escalator reads its file through sigs.k8s.io/yaml) resolves a
    plain `y`, `Y`, `n` or `N` as a bool, which PyYAML reads as a string (resolve.go's
    resolveMapList); retag them, once the shape is checked (no cycle, bounded size)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if not node.style and node.tag == _STR_TAG and node.value in _GO_YAML_SHORT_BOOLS:
                node.tag, node.value = _BOOL_TAG, _GO_YAML_SHORT_BOOLS[node.value]
            continue
        stack.extend(_children(node))


def load_document(data: bytes, source: str, kind: str = "YAML or JSON",
                  go_yaml_bools: bool = False) -> Any:
    """A YAML (or JSON, which is YAML) document within the limits; None for an empty file.
    `go_yaml_bools`: a plain y/Y/n/N is a bool, as Go's goyaml.v2 reads it."""
    loader = _LOADER(as_text(data, source))
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_shape(node, source)
        if go_yaml_bools:
            _go_yaml_short_bools(node)
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        raise _yaml_problem(error, source, kind) from None
    except (ValueError, TypeError, OverflowError, KeyError, AttributeError) as error:
        raise value_problem(error, source, kind) from None
    except RecursionError:  # the pure-Python loader, where libyaml is missing
        raise too_deep(source) from None
    finally:
        loader.dispose()


def load_file(path: str | Path, kind: str = "YAML or JSON", go_yaml_bools: bool = False) -> Any:
    return load_document(read_bytes(path), str(path), kind, go_yaml_bools)


def load_json_document(data: bytes, source: str) -> Any:
    """A JSON file (strict and fast with orjson); what orjson refuses (deep nesting, numbers past
    64 bits, bad bytes, or YAML) is read by `load_document`, which says why in one line."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return load_document(data, source, "JSON")
    check_depth(document, source)
    return document


def check_depth(document: Any, source: str) -> None:
    """A decoded JSON document (orjson's limit is 1,024 levels) within `MAX_DEPTH`, walked
    iteratively; for JSON that comes from elsewhere than a file (a request's body)."""
    stack = [(document, 1)]
    while stack:
        value, level = stack.pop()
        if level > MAX_DEPTH:
            raise too_deep(source)
        if isinstance(value, dict):
            stack.extend((child, level + 1) for child in value.values())
        elif isinstance(value, list):
            stack.extend((child, level + 1) for child in value)
