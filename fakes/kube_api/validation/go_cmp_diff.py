"""go-cmp's `cmp.Diff(old, new)` of two Go values, in the shape its default reporter prints,
for the validation messages that quote one (pkg/apis/core/validation/validation.go
ValidatePodUpdate's spec diff, ValidatePersistentVolumeUpdate's source diff,
ValidatePersistentVolumeClaimUpdate's spec diff).

Re-expressed from github.com/google/go-cmp cmp/report_compare.go (formatDiffList: two
identical records of context around a change, `... // N identical fields` for the rest, a
changed leaf as a `-` and a `+` line, a changed composite descended into), report_reflect.go
(FormatValue: zero fields elided, types shown for composite values that differ, `&` for
pointers, verbosity limits of 4 fields or elements per level in identical values, 16 in
changed ones) and report_text.go (one line while a list fits, else one record a line indented
by tabs, keys aligned in runs).

Strings of 32 bytes or more on both sides get report_slices.go's own diff (`strings.Join({`
the common part, `-` the old span, `+` the new one `}, "")`), the changed span found as the
span between the common prefix and suffix.

Not reproduced: go-cmp picks a regular or a non-breaking space after each line's `-`/`+`/` `
at random per process (so no caller can depend on the exact bytes; the fake always writes a
regular space), its line-by-line diff of text of four lines or more and its chunked diff of
numeric slices, the exact edit script of its randomised search (elements here pair by an
edit script of least cost, see `_edit_script`) and of several changes within one long
string.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from kube_elevator.fakes.kube_api.validation.go_cmp_text import (
    ELLIPSIS,
    IDENTICAL,
    INSERTED,
    NIL,
    REMOVED,
    Line,
    Record,
    Records,
    Stats,
    Text,
    Wrap,
    append_ellipsis,
    compact,
    expanded,
    indent,
)
from kube_elevator.fakes.kube_api.validation.go_values import GoValue, struct_value

_CONTEXT_RECORDS = 2
_MAX_VERBOSITY_PRESET = 6
_MIN_TEXT, _CHUNK = 32, 64  # report_slices.go: strings this long get their own diff


# What cmp compared ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Node:
    """valueNode: one compared pair (None: absent on that side) and its children."""

    x: GoValue | None
    y: GoValue | None
    records: tuple[tuple[str, Node], ...] = ()
    num_same: int = 0
    num_diff: int = 0
    max_depth: int = 0

    @property
    def value(self) -> GoValue:
        found = self.x if self.x is not None else self.y
        assert found is not None
        return found


def _leaf(x: GoValue | None, y: GoValue | None, same: bool) -> Node:
    return Node(x, y, num_same=int(same), num_diff=int(not same))


def _parent(x: GoValue, y: GoValue, records: list[tuple[str, Node]]) -> Node:
    return Node(x, y, tuple(records), sum(n.num_same for _, n in records),
                sum(n.num_diff for _, n in records),
                1 + max(n.max_depth for _, n in records) if records else 0)


def compare(x: GoValue | None, y: GoValue | None) -> Node:
    """cmp's walk of two values of one type."""
    if x is None or y is None:
        return _leaf(x, y, False)
    if x.leaf:  # a type with an Equal method (Quantity)
        return _leaf(x, y, x.compared == y.compared)
    if x.kind in ("ptr", "slice", "map") and (x.nil or y.nil):
        return _leaf(x, y, x.nil and y.nil)
    if x.kind == "ptr":
        assert x.elem is not None and y.elem is not None
        return _parent(x, y, [("", compare(x.elem, y.elem))])
    if x.kind == "slice":
        return _parent(x, y, [("", node) for node in _edit_script(
            [item for _, item in x.items], [item for _, item in y.items])])
    if x.kind == "map":
        left, right = dict(x.items), dict(y.items)
        return _parent(x, y, [(key, compare(left.get(key), right.get(key)))
                              for key in sorted(set(left) | set(right))])
    if x.kind == "struct":
        return _parent(x, y, [(name, compare(a, b))
                              for (name, a), (_, b) in zip(x.items, y.items, strict=True)])
    return _leaf(x, y, x.scalar == y.scalar)


def _edit_script(xs: list[GoValue], ys: list[GoValue]) -> list[Node]:
    """compareSlice's records: the elements paired by an edit script of least cost, an equal
    pair free, a similar one (diff.Result.Similar: NumSame+1 >= NumDiff) modified at 1, an
    element removed or inserted at 1; ties keep a pair, then remove before inserting.
    (go-cmp's diff.Difference searches for such a script greedily, from a corner it picks at
    random; for one change in a short list both agree.)"""
    pairs: dict[tuple[int, int], Node] = {}

    def paired(i: int, j: int) -> Node:
        if (i, j) not in pairs:
            pairs[(i, j)] = compare(xs[i], ys[j])
        return pairs[(i, j)]

    n, m = len(xs), len(ys)
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n, -1, -1):
        for j in range(m, -1, -1):
            if i == n or j == m:
                cost[i][j] = (n - i) + (m - j)
                continue
            node = paired(i, j)
            step = 0 if node.num_diff == 0 else 1 if node.num_same + 1 >= node.num_diff else None
            best = min(1 + cost[i + 1][j], 1 + cost[i][j + 1])
            cost[i][j] = min(best, step + cost[i + 1][j + 1]) if step is not None else best
    records: list[Node] = []
    i = j = 0
    while i < n or j < m:
        if i < n and j < m:
            node = paired(i, j)
            step = 0 if node.num_diff == 0 else 1 if node.num_same + 1 >= node.num_diff else None
            if step is not None and cost[i][j] == step + cost[i + 1][j + 1]:
                records.append(node)
                i, j = i + 1, j + 1
                continue
        if i < n and cost[i][j] == 1 + cost[i + 1][j]:
            records.append(compare(xs[i], None))
            i += 1
        else:
            records.append(compare(None, ys[j]))
            j += 1
    return records


# Formatting ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Options:
    mode: int = 0
    types: str = "emit"  # emit, elide, auto
    verbosity: int = 0
    limited: bool = False

    def verbose(self, level: int) -> _Options:
        return replace(self, verbosity=level, limited=True)


def _quote(text: str) -> str:
    """formatString: Go's quoted string, or a raw one when quoting would escape."""
    quoted = json.dumps(text, ensure_ascii=False)
    if len(quoted) == len(text) + 2:
        return quoted
    if "`" not in text and "\n" not in text and text.isprintable():
        return f"`{text}`"
    return quoted


def _format_string(prefix: str, text: str, options: _Options) -> Line:
    limit = (1 << options.verbosity) << 5 if options.limited else len(text)
    if len(text) > limit + 3:
        return Line(prefix + _quote(text[:limit]) + "...")
    return Line(prefix + _quote(text))


def _format_type(value: GoValue, text: Text, options: _Options) -> Text:
    if options.types == "elide":
        return text
    if options.types == "auto" and (value.kind not in ("struct", "slice", "map")
                                    or text == NIL or options.mode == IDENTICAL):
        return text
    if isinstance(text, Wrap) and text.prefix.startswith(("{", "(")) and \
            text.suffix.endswith(("}", ")")):
        return Wrap(value.type, text)
    return Wrap(value.type, Wrap("(", text, ")"))


def _map_key(key: str, stringer: bool) -> str:
    return ("s" if stringer else "") + _quote(key)


def format_value(value: GoValue | None, options: _Options) -> Text | None:
    """FormatValue: a value on its own (zero fields left out)."""
    if value is None:
        return None
    if value.kind == "ptr":
        if value.nil:
            return NIL
        inner = format_value(value.elem, options)
        assert inner is not None
        return Wrap("&", inner)  # the pointed-to value prints the type
    text: Text
    if value.kind in ("struct", "slice", "map"):
        if value.nil:
            return _format_type(value, NIL, options)
        limit = len(value.items)
        child = options
        if options.limited:
            limit = ((1 << options.verbosity) >> 1) << 2
            child = replace(options, verbosity=options.verbosity - 1)
        child = replace(child, types="auto" if value.kind == "struct" else "elide")
        records: list[Record] = []
        for key, item in value.items:
            if value.kind == "struct" and item.zero:
                continue
            if len(records) == limit:
                append_ellipsis(records, None)
                break
            shown = format_value(item, child)
            assert shown is not None
            name = _map_key(key, value.stringer_keys) if value.kind == "map" else key
            records.append(Record(0, name, shown))
        text = Wrap("{", Records(tuple(records)), "}")
    elif value.kind == "stringer":  # a value with a String method: `s"..."`
        return _format_string("s", str(value.scalar), options)
    elif value.kind == "bool":
        text = Line("true" if value.scalar else "false")
    elif value.kind == "string":
        text = _format_string("", str(value.scalar), options)
    elif value.kind.startswith("float"):
        text = Line(repr(float(value.scalar)).removesuffix(".0"))
    else:
        text = Line(str(value.scalar))
    return _format_type(value, text, options)


def _length(text: Text | None) -> int:
    return len(compact(text, 0)[0]) if text is not None else 0


def _long_texts(node: Node, options: _Options) -> bool:
    """CanFormatDiffSlice for strings: two differing strings of 32 bytes or more."""
    x, y = node.x, node.y
    return (options.mode == 0 and node.num_diff > 0 and x is not None and y is not None
            and x.kind == "string" and y.kind == "string" and not x.leaf
            and min(len(str(x.scalar).encode()), len(str(y.scalar).encode())) >= _MIN_TEXT)


def _quote_bytes(chunk: bytes) -> Line:
    try:
        return Line(_quote(chunk.decode()))
    except UnicodeDecodeError:  # a chunk cut inside a rune: strconv.Quote's \x escapes
        return Line('"' + chunk.decode("utf-8", "backslashreplace") + '"')


def _text_diff(node: Node) -> Text:
    """FormatDiffSlice of single-line text: `strings.Join({"same", -"old", +"new", ...}, "")`
    in chunks of 64 bytes, 128 bytes of context either side of a change. The change is the
    span between the common prefix and suffix (go-cmp's edit script, whose identical runs of
    16 bytes or less between edits it merges into them, comes to that for one change)."""
    assert node.x is not None and node.y is not None
    old, new = str(node.x.scalar).encode(), str(node.y.scalar).encode()
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    records: list[Record] = []

    def chunks(data: bytes, mode: int) -> None:
        for start in range(0, len(data), _CHUNK):
            records.append(Record(mode, "", _quote_bytes(data[start:start + _CHUNK])))

    def equal(data: bytes, first: bool, last: bool) -> None:
        low = 0 if first else min(_CHUNK * _CONTEXT_RECORDS, len(data))
        high = 0 if last else min(_CHUNK * _CONTEXT_RECORDS, len(data) - low)
        if len(data) - (low + high) <= _CHUNK:
            high = len(data) - low
        chunks(data[:low], IDENTICAL)
        if len(data) > low + high:
            append_ellipsis(records, Stats("byte", identical=len(data) - low - high))
        chunks(data[len(data) - high:], IDENTICAL)

    if prefix:
        equal(old[:prefix], True, False)
    chunks(old[prefix:len(old) - suffix], REMOVED)
    chunks(new[prefix:len(new) - suffix], INSERTED)
    if suffix:
        equal(old[len(old) - suffix:], False, True)
    return Wrap("strings.Join(", Wrap("{", Records(tuple(records)), "}"), ', "")')


def format_diff(node: Node, options: _Options) -> Text | None:
    """FormatDiff: a compared pair as the reporter shows it in `options.mode`."""
    if options.mode == IDENTICAL:
        options = options.verbose(1)
    elif not options.limited or options.verbosity < 3:
        options = options.verbose(3)
    if _long_texts(node, options):
        return _text_diff(node)
    if node.max_depth == 0:
        if options.mode in (0, IDENTICAL) and node.num_diff == 0:
            shown_x, shown_y = format_value(node.x, options), format_value(node.y, options)
            return shown_x if _length(shown_x) < _length(shown_y) else shown_y
        if options.mode == REMOVED:
            return format_value(node.x, options)
        if options.mode == INSERTED:
            return format_value(node.y, options)
        elided = replace(options, types="elide")
        both = [Record(mark, "", shown) for mark, side in ((REMOVED, node.x), (INSERTED, node.y))
                if (shown := format_value(side, elided)) is not None]
        return _format_type(node.value, Records(tuple(both)), replace(options, types="emit"))
    kind = node.value.kind
    if kind == "ptr":
        inner = format_diff(node.records[0][1], options)
        return Wrap("&", inner) if inner is not None else None
    return _format_type(node.value, _diff_list(node, options), options)


def _diff_list(node: Node, options: _Options) -> Wrap:
    """formatDiffList."""
    kind = node.value.kind
    name = {"struct": "field", "slice": "element", "map": "entry"}[kind]
    options = replace(options, types="auto" if kind == "struct" else "elide")
    stringer = node.value.stringer_keys

    def key_of(key: str) -> str:
        return _map_key(key, stringer) if kind == "map" else key

    limit = -1
    if options.limited:
        limit = (((1 << options.verbosity) >> 1) << 2 if options.mode == IDENTICAL
                 else (1 << options.verbosity) << 1)
        options = replace(options, verbosity=options.verbosity - 1)
    records: list[Record] = []
    if options.mode != 0:  # one side, or both alike
        dropped = False
        for key, child in node.records:
            if len(records) == limit:
                dropped = True
                break
            if kind == "struct":
                x_zero = child.x is None or child.x.zero
                y_zero = child.y is None or child.y.zero
                if {IDENTICAL: x_zero or y_zero, REMOVED: x_zero, INSERTED: y_zero}[options.mode]:
                    continue
            shown = format_diff(child, options)
            if shown is not None:
                records.append(Record(0, key_of(key), shown))
        if dropped:
            append_ellipsis(records, None)
        return Wrap("{", Records(tuple(records)), "}")
    groups = _groups(name, node.records)
    pending = list(node.records)
    differing, skipped = 0, Stats(name)
    for index, group in enumerate(groups):
        changed = group.removed + group.inserted + group.modified
        if 0 <= limit <= differing:
            skipped = skipped + group
            continue
        if changed == 0:
            equal = group.identical
            low = min(_CONTEXT_RECORDS, equal) if index != 0 else 0
            high = min(_CONTEXT_RECORDS, equal - low) if index != len(groups) - 1 else 0
            if equal - (low + high) == 1:
                high += 1  # no ellipsis for a single record
            same = replace(options, mode=IDENTICAL)
            for key, child in pending[:low]:
                records.append(Record(0, key_of(key), _shown(format_diff(child, same))))
            if equal > low + high:
                append_ellipsis(records, Stats(name, identical=equal - low - high))
            for key, child in pending[equal - high:equal]:
                records.append(Record(0, key_of(key), _shown(format_diff(child, same))))
            pending = pending[equal:]
            continue
        for key, child in pending[:changed]:
            if _long_texts(child, options):
                records.append(Record(0, key_of(key), _text_diff(child)))
            elif _is_flat(child):
                shown_x, shown_y = _both_sides(child, options)
                if shown_x is not None:
                    records.append(Record(REMOVED, key_of(key), shown_x))
                if shown_y is not None:
                    records.append(Record(INSERTED, key_of(key), shown_y))
            else:
                records.append(Record(0, key_of(key), _shown(format_diff(child, options))))
        pending = pending[changed:]
        differing += changed
    if skipped != Stats(name):
        append_ellipsis(records, skipped)
    return Wrap("{", Records(tuple(records)), "}")


def _is_flat(node: Node) -> bool:
    """NumChildren == MaxDepth: a leaf, or a value with one level of one child."""
    return len(node.records) == node.max_depth


def _both_sides(node: Node, options: _Options) -> tuple[Text | None, Text | None]:
    shown_x = format_diff(node, replace(options, mode=REMOVED))
    shown_y = format_diff(node, replace(options, mode=INSERTED))
    preset = 0
    while shown_x is not None and shown_x == shown_y and preset <= _MAX_VERBOSITY_PRESET:
        more = options.verbose(options.verbosity + 2 * preset)
        shown_x = format_diff(node, replace(more, mode=REMOVED))
        shown_y = format_diff(node, replace(more, mode=INSERTED))
        preset += 1
    return shown_x, shown_y


def _shown(text: Text | None) -> Text:
    return text if text is not None else ELLIPSIS


def _groups(name: str, records: tuple[tuple[str, Node], ...]) -> list[Stats]:
    """coalesceAdjacentRecords: runs of identical records and of differing ones."""
    groups: list[Stats] = []
    previous = ""
    for _, node in records:
        case = "same" if node.num_diff == 0 else "diff"
        if case != previous:
            groups.append(Stats(name))
            previous = case
        if node.num_diff == 0:
            change = Stats(name, identical=1)
        elif node.y is None:
            change = Stats(name, removed=1)
        elif node.x is None:
            change = Stats(name, inserted=1)
        else:
            change = Stats(name, modified=1)
        groups[-1] = groups[-1] + change
    return groups


def cmp_diff(old: GoValue, new: GoValue) -> str:
    """cmp.Diff(old, new): empty when they are equal, else the report with its last newline."""
    root = compare(old, new)
    if root.num_diff == 0:
        return ""
    text = format_diff(root, _Options())
    assert text is not None
    return indent(0, 0) + expanded(compact(text, 0)[1], 0, 0) + "\n"


def go_diff(old: Any, new: Any, message: str) -> str:
    """cmp.Diff of two JSON objects as the Go struct `message` (`core.PodSpec`)."""
    return cmp_diff(struct_value(message, old if isinstance(old, dict) else {}),
                    struct_value(message, new if isinstance(new, dict) else {}))


__all__ = ["cmp_diff", "compare", "format_diff", "format_value", "go_diff"]
