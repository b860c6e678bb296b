"""A `[]byte` field's JSON string as encoding/json decodes it: standard base64 with padding,
newlines skipped, refused in Go's words (`illegal base64 data at input byte N`), and written
back in Go's canonical encoding.

encoding/json decodes a []byte from a JSON string with base64.StdEncoding.Decode and saves the
error (decode.go literalStore); encoding/base64's decodeQuantum decides the offset: the first
byte outside the alphabet, a quantum cut short by the end of the input (the quantum's start),
padding where none may be (`=` as a quantum's first or second byte), a missing second `=`
(the input's length), or anything after the padding (its offset). StdEncoding is not strict:
non-zero bits after the last full byte are dropped, so `YR==` decodes as `YQ==` does.
"""

from __future__ import annotations

import base64
import contextlib
import re
from typing import Any

_ALPHABET = {c: i for i, c in enumerate(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_NEWLINES = (ord("\n"), ord("\r"))
_PAD = ord("=")


class Base64Error(ValueError):
    """encoding/base64's CorruptInputError."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"illegal base64 data at input byte {offset}")
        self.offset = offset


def _quantum(src: bytes, si: int, out: bytearray) -> tuple[int, bool]:
    """One quantum from `si`: the next index, and whether the input ended cleanly."""
    digits: list[int] = []
    while len(digits) < 4:
        if si == len(src):
            if not digits:
                return si, True
            raise Base64Error(si - len(digits))  # StdEncoding wants the padding
        byte = src[si]
        si += 1
        if byte in _ALPHABET:
            digits.append(_ALPHABET[byte])
            continue
        if byte in _NEWLINES:
            continue
        if byte != _PAD or len(digits) < 2:
            raise Base64Error(si - 1)
        if len(digits) == 2:  # a second `=` must follow
            while si < len(src) and src[si] in _NEWLINES:
                si += 1
            if si == len(src):
                raise Base64Error(len(src))
            if src[si] != _PAD:
                raise Base64Error(si - 1)
            si += 1
        while si < len(src) and src[si] in _NEWLINES:
            si += 1
        _emit(digits, out)
        if si < len(src):
            raise Base64Error(si)  # trailing garbage after the padding
        return si, True
    _emit(digits, out)
    return si, False


def _emit(digits: list[int], out: bytearray) -> None:
    value = 0
    for digit in (*digits, 0, 0, 0)[:4]:
        value = value << 6 | digit
    out += value.to_bytes(3, "big")[:len(digits) - 1]


# Padded standard base64 without newlines: Go and Python's C decoder agree on all of it (same
# bytes, non-zero trailing bits dropped by both), so it skips the quantum-by-quantum walk that
# finds Go's error offset (a 1 MiB Secret took seconds through it).
_PLAIN = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def go_base64_decode(text: str) -> bytes:
    """base64.StdEncoding.DecodeString of `text` (its UTF-8 bytes); Base64Error if refused."""
    if len(text) % 4 == 0 and _PLAIN.fullmatch(text):
        return base64.b64decode(text)
    src, out, si = text.encode(), bytearray(), 0
    while si < len(src):
        si, done = _quantum(src, si, out)
        if done:
            break
    return bytes(out)


def base64_error(text: str) -> str | None:
    """The decoder's error for `text`, None when it decodes."""
    try:
        go_base64_decode(text)
    except Base64Error as error:
        return str(error)
    return None


def canonical_base64(text: str) -> str:
    """`text` as Go writes the bytes it decodes to back (json.Marshal of a []byte)."""
    return base64.b64encode(go_base64_decode(text)).decode()




# The `[]byte` maps of the kinds the fake serves (k8s.io/api core/v1 types.go).
_BYTE_MAPS = {"configmaps": "binaryData", "secrets": "data"}


def with_canonical_bytes(plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` with its `[]byte` map's values as the server stores them: decoded, then encoded
    again (a copy only when one changes; a value that does not decode is left to the
    decoder's check, or stored as sent when that check is off)."""
    key = _BYTE_MAPS.get(plural)
    values = obj.get(key) if key is not None else None
    if key is None or not isinstance(values, dict):
        return obj
    canonical = dict(values)
    for name, text in values.items():
        if isinstance(text, str):
            with contextlib.suppress(Base64Error):
                canonical[name] = canonical_base64(text)
    return obj if canonical == values else {**obj, key: canonical}


__all__ = ["Base64Error", "base64_error", "canonical_base64", "go_base64_decode",
           "with_canonical_bytes"]
