"""A Secret's `stringData` as the API server takes it: merged into `data`, never stored.

`stringData` is write-only: converting a v1 Secret to the internal one writes each of its
values into `data` as bytes, over any value `data` has for the key (kubernetes
pkg/apis/core/v1/conversion.go `Convert_v1_Secret_To_core_Secret`, "StringData overwrites
Data"), and the internal type has no `stringData`, so nothing of it is stored or read back.
This runs on every write (create, update, patch, apply; HTTP or in-process), before
defaulting and validation, whichever layers are switched on: it is decoding, not a layer.
"""

from __future__ import annotations

import base64
from typing import Any

from kube_elevator.fakes.kube_api.resources import Obj


def with_string_data_merged(secret: Obj) -> Obj:
    """`secret` with `stringData` folded into `data` (base64, as `data` is on the wire) and
    removed; the same object when it has none."""
    if "stringData" not in secret:
        return secret
    merged = {k: v for k, v in secret.items() if k != "stringData"}
    string_data: Any = secret.get("stringData")
    if isinstance(string_data, dict) and string_data:
        data = secret.get("data")
        data = dict(data) if isinstance(data, dict) else {}
        for key, value in string_data.items():
            if isinstance(value, str):
                data[key] = base64.b64encode(value.encode()).decode()
        merged["data"] = data
    return merged


__all__ = ["with_string_data_merged"]
