"""Protobuf lists and watch events built from the stored records, each object's encoding cached.

A list answered in JSON is the stored bytes joined; in protobuf each item must be re-encoded
from its JSON by the Python codec (protobuf_wire.py), ~0.13 ms a pod, so a 1,000-pod list cost
13 times its JSON. A stored record never changes (a write makes a new one, with a new
resourceVersion), so its message encoding is computed once, on the first list or watch event
that serves it, and kept, keyed by the record's bytes (the key hashes once: bytes cache their
hash). A list is then the ListMeta, the cached items and the envelope; a watch event is the
cached message in its envelope inside a WatchEvent frame: each byte for byte what `negotiate`
would have produced from the JSON. Lists and watches share the cache, so the object an informer
lists, and every watcher's event for it, is encoded once.
"""

from __future__ import annotations

import struct
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
# Whole watch frames (~1 KiB a pod): the events of the objects being watched now, not every
# version ever listed; past it, the oldest half goes (they are rebuilt from `_messages`).
MAX_CACHED_FRAMES = 50_000

_messages: dict[bytes, bytes] = {}
_frames: dict[tuple[bytes, bytes], bytes] = {}  # (event type, record) -> watch frame
_lock = threading.Lock()


def _message(rt: ResourceType, rec: _Rec) -> bytes:
    """One stored object's message bytes (no envelope, no TypeMeta: the envelope or the list
    names the kind)."""
    encoded = _messages.get(rec.raw)
    if encoded is None:
        message = message_for(rt.api_version, rt.kind)
        assert message is not None
        encoded = encode_message(message, orjson.loads(rec.raw), top_level=True)
        with _lock:
            if len(_messages) >= MAX_CACHED_ITEMS:
                for key in list(_messages)[:MAX_CACHED_ITEMS // 2]:
                    del _messages[key]
            _messages[rec.raw] = encoded
    return encoded


def encode_list(rt: ResourceType, meta: Obj, recs: Sequence[_Rec]) -> bytes | None:
    """The `<Kind>List` of `recs` with ListMeta `meta`, enveloped; None when the kind has no
    protobuf form (the caller answers JSON)."""
    if message_for(rt.api_version, rt.list_kind) is None \
            or message_for(rt.api_version, rt.kind) is None:
        return None
    list_meta = encode_message(SCHEMA["meta.ListMeta"], meta)
    # items: the kind's bare message (field 2 of every <Kind>List)
    body = b"".join((_length(1, list_meta), *(_length(2, _message(rt, rec)) for rec in recs)))
    return envelope(rt.api_version, rt.list_kind, body)


def encode_watch_event(rt: ResourceType, event_type: bytes, rec: _Rec) -> bytes:
    """One watch event of `rec` as a length-prefixed frame (protobuf_wire.encode_watch_frame's
    bytes): a bare WatchEvent whose `object` is a RawExtension holding the enveloped object.
    The whole frame is kept too (the envelope's nine length prefixes cost 4x the JSON line's
    join): every watcher of the event sends the same bytes. The caller checks that the kind
    has a protobuf form."""
    key = (event_type, rec.raw)
    frame = _frames.get(key)
    if frame is None:
        wrapped = envelope(rt.api_version, rt.kind, _message(rt, rec))
        event = _length(1, event_type) + _length(2, _length(1, wrapped))
        frame = struct.pack(">I", len(event)) + event
        with _lock:
            if len(_frames) >= MAX_CACHED_FRAMES:
                for old in list(_frames)[:MAX_CACHED_FRAMES // 2]:
                    del _frames[old]
            _frames[key] = frame
    return frame


__all__ = ["MAX_CACHED_FRAMES", "MAX_CACHED_ITEMS", "encode_list", "encode_watch_event"]
