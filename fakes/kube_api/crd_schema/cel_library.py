"""Kubernetes' CEL library extensions for `x-kubernetes-validations`, as cel-python functions:
cel-go's ext strings (Kubernetes enables `ext.Strings(ext.StringsVersion(2))`), and
k8s.io/apiserver pkg/cel/library lists.go and regex.go; quantity, url, ip and cidr are in
`cel_types`. Imported only with cel-python (see cel.py).

A method call `x.f(a)` reaches cel-python as `f(x, a)`, so a name both libraries use
(`indexOf`, `lastIndexOf`) dispatches on the receiver's type. Errors are returned as
CELEvalError values with cel-go's wording (cel-python turns a returned error into the
evaluation's error). Each function charges its cost to the running evaluation
(cel_cost.charge), as cel-go's cost tracker does per library call.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import re2
from celpy import celtypes
from celpy.evaluation import CELEvalError

from kube_elevator.fakes.kube_api.crd_schema.cel_cost import charge

CELFunction = Callable[..., Any]


def _string_cost(*texts: Any) -> None:
    # cel-go's common traversal cost: 0.1 per character (checker/cost.go stringTraversalCostFactor)
    charge(math.ceil(0.1 * sum(len(t) for t in texts if isinstance(t, str))))


def _check(value: Any, kind: type, name: str) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"no such overload: {name}({type(value).__name__})")


# cel-go ext/strings.go -----------------------------------------------------------------------

def char_at(text: Any, index: Any) -> Any:
    _check(text, str, "charAt")
    _string_cost(text)
    if index < 0 or index > len(text):
        return CELEvalError(f"index out of range: {index}")
    return celtypes.StringType(text[index] if index < len(text) else "")


def index_of(target: Any, item: Any, offset: Any = None) -> Any:
    """`string.indexOf(substr[, offset])` (ext strings) or `list.indexOf(item)` (lists.go)."""
    if isinstance(target, list):
        charge(len(target))
        return celtypes.IntType(next((i for i, v in enumerate(target) if v == item), -1))
    _check(target, str, "indexOf")
    _string_cost(target, item)
    start = 0 if offset is None else int(offset)
    if start < 0 or start > len(target):
        return CELEvalError(f"index out of range: {start}")
    return celtypes.IntType(target.find(item, start))


def last_index_of(target: Any, item: Any, offset: Any = None) -> Any:
    if isinstance(target, list):
        charge(len(target))
        found = [i for i, v in enumerate(target) if v == item]
        return celtypes.IntType(found[-1] if found else -1)
    _check(target, str, "lastIndexOf")
    _string_cost(target, item)
    if offset is None:
        return celtypes.IntType(target.rfind(item))
    end = int(offset)
    if end < 0 or end >= len(target):
        return CELEvalError(f"index out of range: {end}")
    # the last occurrence starting at or before `offset`
    return celtypes.IntType(target.rfind(item, 0, end + len(item)))


def lower_ascii(text: Any) -> Any:
    _check(text, str, "lowerAscii")
    _string_cost(text)
    return celtypes.StringType("".join(c.lower() if "A" <= c <= "Z" else c for c in text))


def upper_ascii(text: Any) -> Any:
    _check(text, str, "upperAscii")
    _string_cost(text)
    return celtypes.StringType("".join(c.upper() if "a" <= c <= "z" else c for c in text))


def replace(text: Any, old: Any, new: Any, count: Any = -1) -> Any:
    """Go's strings.Replace: `count` < 0 replaces all."""
    _check(text, str, "replace")
    _string_cost(text, old, new)
    return celtypes.StringType(text.replace(old, new, int(count)))


def split(text: Any, sep: Any, count: Any = -1) -> Any:
    """Go's strings.SplitN: 0 -> [], < 0 -> every piece, n -> at most n; "" splits runes."""
    _check(text, str, "split")
    _string_cost(text, sep)
    limit = int(count)
    if limit == 0:
        return celtypes.ListType([])
    if sep == "":
        pieces = list(text)
        if 0 < limit < len(pieces):
            pieces = [*pieces[:limit - 1], "".join(pieces[limit - 1:])]
    else:
        pieces = text.split(sep, limit - 1) if limit > 0 else text.split(sep)
    return celtypes.ListType([celtypes.StringType(p) for p in pieces])


def substring(text: Any, start: Any, end: Any = None) -> Any:
    _check(text, str, "substring")
    _string_cost(text)
    stop = len(text) if end is None else int(end)
    if start < 0 or start > len(text):
        return CELEvalError(f"index out of range: {start}")
    if stop < 0 or stop > len(text):
        return CELEvalError(f"index out of range: {stop}")
    if start > stop:
        return CELEvalError(f"invalid substring range. start: {start}, end: {stop}")
    return celtypes.StringType(text[start:stop])


def trim(text: Any) -> Any:
    _check(text, str, "trim")
    _string_cost(text)
    return celtypes.StringType(text.strip())


def join(items: Any, sep: Any = "") -> Any:
    _check(items, list, "join")
    if not all(isinstance(i, str) for i in items):
        return CELEvalError("join: list elements must be strings")
    _string_cost(*items, sep)
    return celtypes.StringType(sep.join(items))


_VERB = re2.compile(r"%(\.\d+)?([sdfexXobc%])")


def _shown(value: Any) -> str:
    """%s of a CEL value as cel-go's formatter writes it."""
    if isinstance(value, bool | celtypes.BoolType):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_shown(k)}: {_shown(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "null"
    return str(value)


def string_format(template: Any, args: Any) -> Any:
    """`'%s has %d items'.format([name, n])` (cel-go ext/strings.go format, version 1):
    %s, %d, %f/%.Nf, %e, %x/%X, %o, %b and %%."""
    _check(template, str, "format")
    _check(args, list, "format")
    _string_cost(template)
    out, used, pos = [], 0, 0
    for match in _VERB.finditer(template):
        out.append(template[pos:match.start()])
        pos = match.end()
        precision, verb = match.group(1), match.group(2)
        if verb == "%":
            out.append("%")
            continue
        if used >= len(args):
            return CELEvalError(f"index {used} out of range")
        value, used = args[used], used + 1
        try:
            if verb == "s":
                out.append(_shown(value))
            elif verb == "d":
                out.append(str(int(value)))
            elif verb in "fe":
                out.append(f"{float(value):{precision or '.6'}{verb}}")
            elif verb in "xX" and isinstance(value, str):
                text = value.encode().hex()
                out.append(text.upper() if verb == "X" else text)
            else:
                out.append(format(int(value), {"o": "o", "b": "b", "x": "x", "X": "X",
                                               "c": "c"}[verb]))
        except (TypeError, ValueError):
            return CELEvalError(f"error during formatting: unsupported value for %{verb}: "
                                f"{_shown(value)}")
    out.append(template[pos:])
    return celtypes.StringType("".join(out))


# k8s.io/apiserver pkg/cel/library/lists.go ---------------------------------------------------

def is_sorted(items: Any) -> Any:
    _check(items, list, "isSorted")
    charge(len(items))
    return celtypes.BoolType(all(a <= b for a, b in itertools.pairwise(items)))


def list_sum(items: Any) -> Any:
    _check(items, list, "sum")
    charge(len(items))
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    for item in items[1:]:
        total = total + item
    return type(items[0])(total)  # celpy's DoubleType + DoubleType is a bare float


def list_max(items: Any) -> Any:
    _check(items, list, "max")
    charge(len(items))
    if not items:
        return CELEvalError("max called on empty list")
    return max(items)


def list_min(items: Any) -> Any:
    if isinstance(items, CELEvalError):
        return items
    _check(items, list, "min")
    charge(len(items))
    if not items:
        return CELEvalError("min called on empty list")
    return min(items)


def includes(target: Any, item: Any) -> Any:
    """`list.includes(x)`, and `x.includes(y)` of any other value: equality (lists.go, v1)."""
    if isinstance(target, list):
        charge(len(target))
        return celtypes.BoolType(any(v == item for v in target))
    return celtypes.BoolType(target == item)


# k8s.io/apiserver pkg/cel/library/regex.go ---------------------------------------------------

def _regex(pattern: str) -> Any:
    try:
        return re2.compile(pattern)
    except re2.error as exc:
        return CELEvalError(f"Illegal regex: {exc}")


def find(text: Any, pattern: Any) -> Any:
    _check(text, str, "find")
    _string_cost(text, pattern)
    regex = _regex(pattern)
    if isinstance(regex, CELEvalError):
        return regex
    found = regex.search(text)
    return celtypes.StringType(found.group(0) if found else "")


def find_all(text: Any, pattern: Any, limit: Any = -1) -> Any:
    _check(text, str, "findAll")
    _string_cost(text, pattern)
    regex = _regex(pattern)
    if isinstance(regex, CELEvalError):
        return regex
    count = int(limit)
    if count == 0:
        return celtypes.ListType([])
    found = [celtypes.StringType(m.group(0)) for m in regex.finditer(text)]
    return celtypes.ListType(found if count < 0 else found[:count])


FUNCTIONS: dict[str, CELFunction] = {
    "charAt": char_at, "indexOf": index_of, "lastIndexOf": last_index_of,
    "lowerAscii": lower_ascii, "upperAscii": upper_ascii, "replace": replace, "split": split,
    "substring": substring, "trim": trim, "join": join, "format": string_format,
    "isSorted": is_sorted, "sum": list_sum, "max": list_max, "includes": includes,
    "min": list_min, "find": find, "findAll": find_all,
}

__all__ = ["FUNCTIONS"]
