"""Kubernetes quantities in integer units (milli-CPU, bytes), parsed and printed as apimachinery does."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

KiB = 2**10
MiB = 2**20
GiB = 2**30

# --- quantities -------------------------------------------------------------------------

# ASCII digits only, as apimachinery's parser (Python's \d would take "٣").
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE]?)$"
)
# Past int64 with room to spare (19 digits, plus a sign, a point and nano decimals), and far
# below the 4,300 digits where Python refuses to convert a number.
MAX_QUANTITY_DIGITS = 100
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12,
                     "P": 15, "E": 18}


@lru_cache(maxsize=4096)
def parse_quantity(text: str) -> Fraction:
    """Exact value of a Kubernetes quantity (`500m`, `1Gi`, `1e3`, `1.5`); ValueError if malformed."""
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"malformed quantity {text!r}")
    if len(match["number"]) > MAX_QUANTITY_DIGITS:
        raise ValueError(f"quantity of {len(match['number']):,} characters is out of range")
    value = Fraction(match["number"])
    suffix = match["suffix"]
    if suffix in _BINARY:
        return value * _BINARY[suffix]
    if suffix and suffix[0] in "eE" and len(suffix) > 1:
        exponent = int(suffix[1:])
        if abs(exponent) > 100:  # far past int64 either way; 10**huge would not finish
            raise ValueError(f"quantity {text!r} is out of range")
        return value * Fraction(10) ** exponent
    return value * Fraction(10) ** _DECIMAL_EXPONENT[suffix]


_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL_EXPONENT.items()}
_BINARY_SUFFIX = {0: "", 10: "Ki", 20: "Mi", 30: "Gi", 40: "Ti", 50: "Pi", 60: "Ei"}
_NANO = 10**9


def canonical_quantity(text: str) -> str:
    """`Quantity.String()`: the canonical form of a quantity, as the API server prints it back
    ("5000m" is "5", "1024Mi" is "1Gi", "0.5" is "500m"; apimachinery's CanonicalizeBytes).

    The input's suffix picks the format (binary, decimal exponent, or decimal SI); values finer
    than a nano are rounded away from zero to nanos, as ParseQuantity does.
    """
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise ValueError(f"malformed quantity {text!r}")
    value = parse_quantity(text)
    suffix = match["suffix"]
    exponent_format = len(suffix) > 1 and suffix[0] in "eE"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if suffix in _BINARY and magnitude >= 1024 and magnitude.denominator == 1:
        amount, power = int(magnitude), 0
        while power < 60 and amount % 1024 == 0:
            amount //= 1024
            power += 10
        return f"{sign}{amount}{_BINARY_SUFFIX[power]}"
    amount = math.ceil(magnitude * _NANO)
    if amount == 0:
        return "0"
    exponent = -9
    while amount % 10 == 0:
        amount //= 10
        exponent += 1
    amount *= 10 ** (exponent % 3)  # back down to a multiple of 3
    exponent -= exponent % 3
    if exponent_format:
        return f"{sign}{amount}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{amount}{_DECIMAL_SUFFIX.get(exponent, '')}"


QuantityText = str | int | float


def _as_text(quantity: QuantityText) -> str:
    # kubectl always prints quantities as strings; hand-written files may use YAML numbers.
    return quantity if isinstance(quantity, str) else repr(quantity)


# A quantity in Kubernetes fits an int64 once scaled (apimachinery's Quantity); requests,
# limits and allocatable are never negative (the API server's validation).
_INT64_MAX = 2**63 - 1


def _bounded(value: int, text: str) -> int:
    if value < 0:
        raise ValueError(f"quantity {text!r} must not be negative")
    if value > _INT64_MAX:
        raise ValueError(f"quantity {text!r} is too large")
    return value


@lru_cache(maxsize=4096)
def _cpu_milli(text: str) -> int:
    return _bounded(math.ceil(parse_quantity(text) * 1000), text)


@lru_cache(maxsize=4096)
def _memory_bytes(text: str) -> int:
    return _bounded(math.ceil(parse_quantity(text)), text)


# Per-process caches: a cluster uses few distinct quantities ("500m", "1Gi"), and a plain dict
# lookup is the cheapest thing to do 150,000 times.
_CPU_MILLI: dict[QuantityText, int] = {}
_MEMORY_BYTES: dict[QuantityText, int] = {}
_CACHE_LIMIT = 65_536


def cpu_milli(quantity: QuantityText | None) -> int:
    """CPU quantity in millicores, rounded up as Quantity.MilliValue() does."""
    if quantity is None:
        return 0
    value = _CPU_MILLI.get(quantity)
    if value is None:
        value = _cpu_milli(_as_text(quantity))
        if len(_CPU_MILLI) < _CACHE_LIMIT:
            _CPU_MILLI[quantity] = value
    return value


def memory_bytes(quantity: QuantityText | None) -> int:
    """Memory quantity in bytes, rounded up as Quantity.Value() does."""
    if quantity is None:
        return 0
    value = _MEMORY_BYTES.get(quantity)
    if value is None:
        value = _memory_bytes(_as_text(quantity))
        if len(_MEMORY_BYTES) < _CACHE_LIMIT:
            _MEMORY_BYTES[quantity] = value
    return value


def bytes_quantity(count: int) -> str:
    """A byte count as a manifest writes it: the largest binary suffix that divides it exactly
    (268435456 is "256Mi"), else the plain number, as `canonical_quantity` prints it back."""
    return canonical_quantity(f"{count // 1024}Ki" if count and count % 1024 == 0 else str(count))
