"""go-cmp's text tree (cmp/report_text.go), re-expressed: a line, a wrapped node, a list of
records; a list is written on one line while it fits (and holds no change), else one record a
line, indented by tabs after a two-character mark (`  `, `- `, `+ `), keys aligned in runs of
one-line records, plain values batched up to 80 columns. go_cmp_diff.py builds the tree."""

from __future__ import annotations

from dataclasses import dataclass, replace

IDENTICAL, REMOVED, INSERTED = 0x20, ord("-"), ord("+")  # diffUnknown is 0
MAX_COLUMN = 80


@dataclass(frozen=True)
class Line:
    text: str


@dataclass(frozen=True)
class Wrap:
    prefix: str
    value: Text
    suffix: str = ""


@dataclass(frozen=True)
class Stats:
    """diffStats: what an ellipsis stands for."""

    name: str
    identical: int = 0
    removed: int = 0
    inserted: int = 0
    modified: int = 0

    def __add__(self, other: Stats) -> Stats:
        return Stats(self.name, self.identical + other.identical, self.removed + other.removed,
                     self.inserted + other.inserted, self.modified + other.modified)

    def __str__(self) -> str:
        counts = [(n, label) for n, label in ((self.identical, "identical"),
                                               (self.removed, "removed"),
                                               (self.inserted, "inserted"),
                                               (self.modified, "modified")) if n > 0]
        total = sum(n for n, _ in counts)
        name = self.name + "s" if total > 1 else self.name
        if name.endswith("ys"):
            name = name[:-2] + "ies"  # entrys -> entries
        parts = [f"{n} {label}" for n, label in counts]
        if len(parts) <= 2:
            return " and ".join(parts) + " " + name
        return ", ".join(parts[:-1]) + ", and " + parts[-1] + " " + name


@dataclass(frozen=True)
class Record:
    diff: int
    key: str
    value: Text
    elide_comma: bool = False
    comment: Stats | None = None


@dataclass(frozen=True)
class Records:
    items: tuple[Record, ...]


Text = Line | Wrap | Records
NIL, ELLIPSIS = Line("nil"), Line("...")


def append_ellipsis(records: list[Record], stats: Stats | None) -> None:
    if records and records[-1].value == ELLIPSIS:
        last = records[-1]
        if stats is not None:
            merged = stats if last.comment is None else last.comment + stats
            records[-1] = replace(last, comment=merged)
        return
    records.append(Record(0, "", ELLIPSIS, elide_comma=True, comment=stats))


def compact(text: Text, mode: int) -> tuple[str, Text]:
    """formatCompactTo: the one-line form, and the node with what fits on a line collapsed."""
    if isinstance(text, Line):
        return text.text, text
    if isinstance(text, Wrap):
        inner, node = compact(text.value, mode)
        line = text.prefix + inner + text.suffix
        return line, (Line(line) if isinstance(node, Line) else Wrap(text.prefix, node,
                                                                      text.suffix))
    parts: list[str] = []
    items: list[Record] = []
    multi_line = False
    for record in text.items:
        multi_line |= record.diff in (REMOVED, INSERTED) or record.comment is not None
        line, node = compact(record.value, mode | record.diff)
        multi_line |= not isinstance(node, Line)
        parts.append((record.key + ": " if record.key else "") + line)
        items.append(replace(record, value=node))
    line = ", ".join(parts)
    if mode in (REMOVED, INSERTED) and len(line.encode()) > MAX_COLUMN:
        multi_line = True
    return line, (Records(tuple(items)) if multi_line else Line(line))


def indent(depth: int, mode: int) -> str:
    return {REMOVED: "- ", INSERTED: "+ "}.get(mode, "  ") + "\t" * depth


def _key_padding(items: tuple[Record, ...]) -> list[int]:
    """alignLens: keys of consecutive one-line records padded to the longest of the run."""
    pads = [0] * len(items)
    start, longest = 0, 0
    for index, record in enumerate((*items, Record(0, "", Records(())))):
        if record.key == "" or not isinstance(record.value, Line):
            for j in range(start, index):
                pads[j] = longest - len(items[j].key)
            start, longest = index + 1, 0
        else:
            longest = max(longest, len(record.key))
    return pads


def expanded(text: Text, mode: int, depth: int) -> str:
    """formatExpandedTo."""
    if isinstance(text, Line):
        return text.text
    if isinstance(text, Wrap):
        return text.prefix + expanded(text.value, mode, depth) + text.suffix
    items = text.items
    if items and all(r.diff == 0 and not r.key and isinstance(r.value, Line)
                     and r.comment is None for r in items):
        out, batch = "", ""
        for record in items:  # a list of plain values, batched up to 80 columns a line
            assert isinstance(record.value, Line)
            if batch and len(batch) + len(record.value.text) + 2 > MAX_COLUMN:
                out += "\n" + indent(depth + 1, mode) + batch.rstrip(" ")
                batch = ""
            batch += record.value.text + ", "
        out += "\n" + indent(depth + 1, mode) + batch.rstrip(" ")
        return out + "\n" + indent(depth, mode)
    out = ""
    for record, pad in zip(items, _key_padding(items), strict=True):
        here = mode | record.diff
        out += "\n" + indent(depth + 1, here) + (record.key + ": " if record.key else "")
        out += " " * pad + expanded(record.value, here, depth + 1)
        out += "" if record.elide_comma else ","
        out += f" // {record.comment}" if record.comment is not None else ""
    return out + "\n" + indent(depth, mode)


__all__ = ["ELLIPSIS", "IDENTICAL", "INSERTED", "MAX_COLUMN", "NIL", "REMOVED", "Line", "Record",
           "Records", "Stats", "Text", "Wrap", "append_ellipsis", "compact", "expanded",
           "indent"]
