"""Canonical quantities (`Quantity.String()`), ported from apimachinery's quantity_test.go."""

from __future__ import annotations

import pytest

from kube_elevator.tasks.core.quantity import canonical_quantity

# TestQuantityString's canonical forms, each with its alternate spelling, and
# TestQuantityParseEmit; ids name the upstream case.
CASES = [
    ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("300Mi", "300Mi"), ("307200Ki", "300Mi"),
    ("6Ki", "6Ki"), ("1001Gi", "1001Gi"), ("1025024Mi", "1001Gi"), ("1Ti", "1Ti"),
    ("1024Gi", "1Ti"), ("5", "5"), ("5000m", "5"), ("500m", "500m"), ("0.5", "500m"),
    ("1G", "1G"), ("1000M", "1G"), ("0.001T", "1G"), ("1m", "1m"), ("1000u", "1m"),
    ("80m", "80m"), ("1080m", "1080m"), ("1.08", "1080m"), ("1080000000n", "1080m"),
    ("300M", "300M"), ("1T", "1T"), ("1234567M", "1234567M"), ("1234567m", "1234567m"),
    ("3k", "3k"), ("1025", "1025"), ("0", "0"), ("1e9", "1e9"), (".001e12", "1e9"),
    ("1e-3", "1e-3"), ("0.001e0", "1e-3"), ("1e-9", "1e-9"), ("1000e-12", "1e-9"),
    ("80e-3", "80e-3"), ("300e6", "300e6"), ("1e12", "1e12"), ("1e3", "1e3"),
    ("3e3", "3e3"), ("00", "0"), ("1n", "1n"), ("80n", "80n"), ("1080n", "1080n"),
    ("1u", "1u"), ("80u", "80u"), ("1080u", "1080u"),
    # TestQuantityParseEmit
    ("1Ki", "1Ki"), ("1Mi", "1Mi"), (".001Ki", "1024m"), (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"), (".000000000001Ki", "2n"),
]


@pytest.mark.parametrize(("text", "canonical"), CASES,
                         ids=[f"TestQuantityString:{text}" for text, _ in CASES])
def test_canonical_quantity_apimachinery(text: str, canonical: str) -> None:
    assert canonical_quantity(text) == canonical
    if canonical != "0":  # negative values print with a sign, never "-0"
        assert canonical_quantity("-" + text) == "-" + canonical
