"""Go durations (`time.ParseDuration`): Escalator's and the Cluster Autoscaler's files and flags use them."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator
from pydantic_core import PydanticCustomError

from kube_elevator.tasks.core.errors import InputError

_DURATION_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}


_MAX_DURATION_NS = 2**63 - 1  # Go's time.Duration is an int64 of nanoseconds
_DIGITS = "0123456789"  # ASCII digits only, as Go's parser (Python's isdigit takes "٣")


def _leading_int(text: str) -> tuple[int, str]:
    """Go's time.leadingInt: the digits at the start; ValueError past 1<<63."""
    value, index = 0, 0
    while index < len(text) and text[index] in _DIGITS:
        if value > (1 << 63) // 10:
            raise ValueError("overflow")
        value = value * 10 + int(text[index])
        if value > 1 << 63:
            raise ValueError("overflow")
        index += 1
    return value, text[index:]


def _leading_fraction(text: str) -> tuple[int, float, str]:
    """Go's time.leadingFraction: the digits after the dot, as (value, scale); digits past
    what an int64 holds are consumed and ignored, not an error."""
    value, scale, index, overflow = 0, 1.0, 0, False
    while index < len(text) and text[index] in _DIGITS:
        if not overflow:
            if value > ((1 << 63) - 1) // 10:
                overflow = True
            else:
                bigger = value * 10 + int(text[index])
                if bigger > 1 << 63:
                    overflow = True
                else:
                    value, scale = bigger, scale * 10
        index += 1
    return value, scale, text[index:]


def parse_go_duration_ns(text: str) -> int:
    r"""Nanoseconds in a Go duration, as Go's time.ParseDuration computes them (integers, a
    fraction truncated through float64 as Go does); ValueError where it returns an error.

    Go's grammar: an optional sign, then "0" alone, or one or more <number><unit> with number
    `[0-9]*(\.[0-9]*)?` (some digit on either side of the dot) and unit the longest run of
    characters that are not digits or a dot, one of ns, us, µs (U+00B5), μs (U+03BC), ms, s, m,
    h: `1h30m`, `1.5h`, `.5m`, `5.m`, `-1h`, `+0`. "" and a number without a unit are errors.
    """
    original, rest, negative = text, text, False
    if rest[:1] in ("+", "-"):
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise ValueError(f"invalid duration {original!r}")
    total = 0
    while rest:
        if rest[0] != "." and rest[0] not in _DIGITS:
            raise ValueError(f"invalid duration {original!r}")
        before = len(rest)
        try:
            whole, rest = _leading_int(rest)
        except ValueError:
            raise ValueError(f"invalid duration {original!r}") from None
        digits_before = before != len(rest)
        fraction, scale, digits_after = 0, 1.0, False
        if rest[:1] == ".":
            rest = rest[1:]
            before = len(rest)
            fraction, scale, rest = _leading_fraction(rest)
            digits_after = before != len(rest)
        if not digits_before and not digits_after:
            raise ValueError(f"invalid duration {original!r}")
        end = 0
        while end < len(rest) and rest[end] != "." and rest[end] not in _DIGITS:
            end += 1
        if end == 0:
            raise ValueError(f"missing unit in duration {original!r}")
        unit_text, rest = rest[:end], rest[end:]
        unit = _DURATION_UNITS_NS.get(unit_text)
        if unit is None:
            raise ValueError(f"unknown unit {unit_text!r} in duration {original!r}")
        if whole > (1 << 63) // unit:
            raise ValueError(f"invalid duration {original!r}")
        whole *= unit
        if fraction > 0:
            whole += int(float(fraction) * (float(unit) / scale))  # Go: uint64(float64 ...)
            if whole > 1 << 63:
                raise ValueError(f"invalid duration {original!r}")
        total += whole
        if total > 1 << 63:
            raise ValueError(f"invalid duration {original!r}")
    if negative:
        return -total
    if total > _MAX_DURATION_NS:
        raise ValueError(f"invalid duration {original!r}")
    return total


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration (`1h10m`, `1.5h`, `90s`, `-2m`, `0`); ValueError as time.ParseDuration."""
    return parse_go_duration_ns(text) / 1e9


def positive_duration_option(text: str, option: str) -> float:
    """A command-line duration (`--interval 60s`): seconds, or InputError naming the option."""
    try:
        value = parse_go_duration(text)
    except ValueError:
        raise InputError([f"{option}: {text!r} is not a Go duration (like 60s)"]) from None
    if value <= 0:
        raise InputError([f"{option}: {text!r} must be positive"])
    return value


DURATION_EXAMPLES = "e.g. 30s, 5m, 1h30m"


def seconds_option(text: str, option: str) -> float:
    """A command-line time that was plain seconds once (`--interval 60`): a Go duration
    (`90s`, `5m`) as every other interval, or a plain number of seconds as before. The
    range is the caller's to check; text that is neither is an InputError naming the option."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_go_duration(text)
    except ValueError:
        raise InputError([f"{option}: {json.dumps(text, ensure_ascii=False)}: not a duration; "
                          f"use a number and a unit, {DURATION_EXAMPLES} (or plain seconds)"]) \
            from None


def duration_problem(text: str, *, zero_allowed: bool = False) -> str | None:
    """Why `text` is no usable duration, naming the value, the rule and an example
    (`"90x": not a duration; use a number and a unit, e.g. 30s, 5m, 1h30m`), or None."""
    quoted = json.dumps(text, ensure_ascii=False)
    try:
        seconds = parse_go_duration(text)
    except ValueError:
        return f"{quoted}: not a duration; use a number and a unit, {DURATION_EXAMPLES}"
    if seconds < 0 or (seconds == 0 and not zero_allowed):
        rule = "must not be negative" if zero_allowed else "must be positive"
        return f"{quoted}: {rule}, {DURATION_EXAMPLES}"
    return None


def duration_or_zero(text: str) -> float:
    """Escalator's `XDuration()` helpers: a parse error reads as 0."""
    return duration_ns_or_zero(text) / 1e9


def duration_ns_or_zero(text: str) -> int:
    """Escalator's `XDuration()` helpers in Go's own unit, nanoseconds: compare durations
    with these (two values a nanosecond apart may be one float of seconds)."""
    try:
        return parse_go_duration_ns(text)
    except ValueError:
        return 0


def go_string(value: Any) -> Any:
    """Escalator decodes YAML through JSON into Go strings: a number becomes its string form."""
    if isinstance(value, bool):
        return "true" if value else "false"
    try:
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            return str(int(value)) if value.is_integer() else repr(value)
    except ValueError:  # past Python's 4,300-digit conversion limit
        raise ValueError("a number of more than 4,300 digits") from None
    return value


def _valid_go_duration(text: str) -> str:
    problem = duration_problem(text, zero_allowed=True)
    if problem is not None:
        # A custom error keeps pydantic from prefixing the message with "Value error, "; the
        # value is in the message, so the error line does not add it again (`got ...`).
        raise PydanticCustomError("go_duration", "{problem}", {"problem": problem})
    return text


# A config field holding a Go duration: kept as written, checked when loaded.
GoDuration = Annotated[str, BeforeValidator(go_string), AfterValidator(_valid_go_duration)]
