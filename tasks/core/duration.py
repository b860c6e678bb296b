"""Go durations (`time.ParseDuration`): Escalator's and the Cluster Autoscaler's files and flags use them."""

from __future__ import annotations

import json
import re
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


# ASCII digits only, as Go's parser (Python's \d would take "٣s").
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]*)(ns|us|µs|μs|ms|s|m|h)")


_MAX_DURATION_NS = 2**63 - 1  # Go's time.Duration is an int64 of nanoseconds


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration (`1h10m`, `1.5h`, `90s`, `-2m`, `0`); ValueError as time.ParseDuration."""
    original = text
    sign = 1
    if text[:1] in ("+", "-"):
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return 0.0
    if not text:
        raise ValueError(f"invalid duration {original!r}")
    total_ns = 0.0
    position = 0
    while position < len(text):
        match = _DURATION_PART.match(text, position)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f"invalid duration {original!r}")
        total_ns += float(match.group(1)) * _DURATION_UNITS_NS[match.group(2)]
        position = match.end()
        if total_ns > _MAX_DURATION_NS:
            raise ValueError(f"invalid duration {original!r}: out of range")
    return sign * total_ns / 1e9


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
    try:
        return parse_go_duration(text)
    except ValueError:
        return 0.0


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
