"""Protobuf lists built from the stored records, each item's encoding cached.

A list answered in JSON is the stored bytes joined; in protobuf each item must be re-encoded
from its JSON by the Python codec (protobuf_wire.py), ~0.13 ms a pod, so a 1,000-pod list cost
13 times its JSON. A stored record never changes (a write makes a new one, with a new
resourceVersion), so its item encoding is computed once, on the first list that serves it, and
kept, keyed by the record's bytes (the key hashes once: bytes cache their hash). The list is then
the ListMeta, the cached items and the envelope, as `negotiate` would have produced it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import orjson

from kube_elevator.fakes.kube_api.objects import _Rec
from kube_elevator.fakes.kube_api.protobuf_wire import (
    SCHEMA,
    _length,
    encode_message,
    envelope,
    message_for,
)
from kube_elevator.fakes.kube_api.resources import Obj, ResourceType

# Enough for the largest lists the suite and benchmarks serve; past it, the oldest half goes.
MAX_CACHED_ITEMS = 200_000

_items: dict[bytes, bytes] = {}
_lock = threading.Lock()


def _item(rt: ResourceType, rec: _Rec) -> bytes:
    """One list item's message bytes (no envelope: items are the kind's bare message)."""
    encoded = _items.get(rec.raw)
    if encoded is None:
        message = message_for(rt.api_version, rt.kind)
        assert message is not None
        encoded = _length(2, encode_message(message, orjson.loads(rec.raw)))
        with _lock:
            if len(_items) >= MAX_CACHED_ITEMS:
                for key in list(_items)[:MAX_CACHED_ITEMS // 2]:
                    del _items[key]
            _items[rec.raw] = encoded
    return encoded


def encode_list(rt: ResourceType, meta: Obj, recs: Sequence[_Rec]) -> bytes | None:
    """The `<Kind>List` of `recs` with ListMeta `meta`, enveloped; None when the kind has no
    protobuf form (the caller answers JSON)."""
    if message_for(rt.api_version, rt.list_kind) is None \
            or message_for(rt.api_version, rt.kind) is None:
        return None
    list_meta = encode_message(SCHEMA["meta.ListMeta"], meta)
    body = b"".join((_length(1, list_meta), *(_item(rt, rec) for rec in recs)))
    return envelope(rt.api_version, rt.list_kind, body)


__all__ = ["MAX_CACHED_ITEMS", "encode_list"]
