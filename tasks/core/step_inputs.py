"""A step's inputs, checked at its edge (issue 42 item 3).

A step called with the wrong kind of value (a file name where the loaded groups belong, a
`NodeGroupConfig` where a `GroupInputs` does) is the caller's programming error: it is raised
as one `TypeError` naming the step, the parameter and what was expected, before the step does
anything, instead of an `AttributeError` deep inside, or, in `decide`, a group's value.

The long lists (a tick's pods and nodes, 150,000 at the largest) are checked by their first
and last items: the mistakes this catches are of the whole list, and a full walk would cost
a large tick milliseconds a step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kube_elevator.tasks.core.errors import shown

# Errors of the code, not of a group's data: a step that catches a group's failure to carry it
# on as that group's value re-raises these.
PROGRAMMING_ERRORS = (TypeError, AttributeError, NameError)


def _wrong(step: str, parameter: str, expected: str, value: object) -> TypeError:
    return TypeError(f"{step}: `{parameter}` must be {expected}, not {shown(value, 60)} "
                     f"({type(value).__name__})")


def expect(step: str, parameter: str, value: object, kind: type | tuple[type, ...],
           expected: str) -> None:
    """Raise unless `value` is a `kind` (a bool is no number here: `True` is no time)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise _wrong(step, parameter, expected, value)


def expect_number(step: str, parameter: str, value: object, expected: str) -> None:
    """A float parameter: an int or a float, never a bool or a string."""
    expect(step, parameter, value, (int, float), expected)


def expect_items(step: str, parameter: str, values: object, kind: type | tuple[type, ...],
                 expected: str, *, sample: bool = False) -> None:
    """Raise unless `values` is a sequence (not a string or a mapping) of `kind`s; with
    `sample`, only its first and last items are looked at (the long lists of a tick)."""
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Sequence):
        raise _wrong(step, parameter, f"a sequence of {expected}", values)
    indices = range(len(values))
    if sample and len(values) > 2:
        indices = range(0, len(values), len(values) - 1)
    for index in indices:
        if not isinstance(values[index], kind):
            raise _wrong(step, f"{parameter}[{index}]", expected, values[index])
