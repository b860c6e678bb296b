"""encoding/base64's StdEncoding decoder as the fake re-expresses it (fakes/kube_api/
go_base64.py): the offsets of Go's base64_test.go TestDecodeCorrupt table, re-expressed, and
a Secret's `data` decoded by the fake's decoder (the fake serves no Secrets over HTTP)."""

from __future__ import annotations

import pytest

from kube_elevator.fakes.kube_api.decode_types import decode_error
from kube_elevator.fakes.kube_api.go_base64 import base64_error, canonical_base64


@pytest.mark.parametrize(("text", "offset"), [
    ("", None), ("\n", None), ("AAA=\n", None), ("AAAA\n", None), ("!!!!", 0), ("====", 0),
    ("x===", 1), ("=AAA", 0), ("A=AA", 1), ("AA=A", 2), ("AA==A", 4), ("AAA=AAAA", 4),
    ("AAAAA", 4), ("AAAAAA", 4), ("A=", 1), ("A==", 1), ("AA=", 3), ("AA==", None),
    ("AAA=", None), ("AAAA", None), ("AAAAAA=", 7), ("YWJjZA=====", 8), ("A!\n", 1),
    ("A=\n", 1),
])
def test_corrupt_input_offsets(text: str, offset: int | None) -> None:
    expected = None if offset is None else f"illegal base64 data at input byte {offset}"
    assert base64_error(text) == expected


def test_canonical_encoding_drops_newlines_and_stray_bits() -> None:
    assert canonical_base64("YWJj\r\nZGVm") == "YWJjZGVm"
    assert canonical_base64("YR==") == "YQ=="


def test_a_secrets_data_is_decoded_as_bytes() -> None:
    assert decode_error("v1", "Secret", {"data": {"k": "hello"}}) == \
        "illegal base64 data at input byte 4"
    assert decode_error("v1", "Secret", {"data": {"k": "aGVsbG8="}}) is None
