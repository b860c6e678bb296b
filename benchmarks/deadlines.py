"""The one setting every wait's deadline in the tests (and the benchmarks' rigs, which the tests
share) scales from: `ELEVATOR_TEST_TIME_SCALE`, a factor on each deadline's seconds.

A deadline bounds a wait for something that will happen (a server answering, a tick
recorded): it only decides how long a broken run takes to say so. On a busy machine, both
CPUs saturated by another process, those waits took up to 1.3 times what they take on a quiet
one (a hung-API test, 150 s against its 120 s; Prefect's server start, 20-50 s), so the default
doubles each; `ELEVATOR_TEST_TIME_SCALE=1` gives the figures the tests were written with. A
budget the test asserts (a tick within N s, the speed figures) is not a deadline and is not
scaled.
"""

from __future__ import annotations

import os

VARIABLE = "ELEVATOR_TEST_TIME_SCALE"
DEFAULT_SCALE = 2.0


def time_scale() -> float:
    """The factor in `ELEVATOR_TEST_TIME_SCALE`, else `DEFAULT_SCALE`; refused when not a
    positive number."""
    text = os.environ.get(VARIABLE, "")
    if not text:
        return DEFAULT_SCALE
    try:
        scale = float(text)
    except ValueError:
        raise ValueError(f"{VARIABLE}={text!r}: not a number (a factor such as 2)") from None
    if not scale > 0:
        raise ValueError(f"{VARIABLE}={text!r}: must be more than 0")
    return scale


def scaled(seconds: float) -> float:
    """A deadline of `seconds` on a quiet machine, as this machine's tests wait for it."""
    return seconds * time_scale()
