"""Go's math functions where Python's differ in the last bit: scores ported from Go must
reproduce Go's floats exactly before they are rounded to integers."""

from __future__ import annotations

import math


def go_round(value: float) -> int:
    """Go's `int64(math.Round(x))`: half away from zero (Python's `round` is half to even)."""
    if not math.isfinite(value):
        raise ValueError(f"cannot round {value!r} to an integer score")
    whole = math.trunc(value)
    # `value - whole` is exact for binary floats, so 0.49999999999999994 stays below one half.
    if abs(value - whole) >= 0.5:
        whole += 1 if value > 0 else -1
    return int(whole)


# src/math/log.go (FreeBSD's e_log.c), which src/math/log_amd64.s computes in the same order
# of operations: glibc's `log`, behind Python's math.log, differs from it in the last bit for
# about 1 % of integers (log(3) among them).
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_L1 = 6.666666666666735130e-01
_L2 = 3.999999999940941908e-01
_L3 = 2.857142874366239149e-01
_L4 = 2.222219843214978396e-01
_L5 = 1.818357216161805012e-01
_L6 = 1.531383769920937332e-01
_L7 = 1.479819860511658591e-01
_HALF_SQRT2 = 7.07106781186547524401e-01


def go_log(value: float) -> float:
    """Go's `math.Log` for a positive finite argument, operation for operation."""
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"go_log takes a positive finite number, not {value!r}")
    fraction, exponent = math.frexp(value)
    if fraction < _HALF_SQRT2:
        fraction *= 2
        exponent -= 1
    f = fraction - 1
    k = float(exponent)
    s = f / (2 + f)
    s2 = s * s
    s4 = s2 * s2
    t1 = s2 * (_L1 + s4 * (_L3 + s4 * (_L5 + s4 * _L7)))
    t2 = s4 * (_L2 + s4 * (_L4 + s4 * _L6))
    r = t1 + t2
    hfsq = 0.5 * f * f
    return k * _LN2_HI - ((hfsq - (s * (hfsq + r) + k * _LN2_LO)) - f)


__all__ = ["go_log", "go_round"]
