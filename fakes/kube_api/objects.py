"""The stored objects: records with their field index, collections, watchers and continue tokens."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple, cast

import orjson

from kube_elevator.fakes.kube_api.errors import BadRequest, Invalid
from kube_elevator.fakes.kube_api.resources import RESOURCES, Key, Obj, ResourceType
from kube_elevator.tasks.core.selectors import (
    FieldSelector,
    LabelSelector,
)

log = logging.getLogger(__name__)


_DUMP = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z


def _field_values(rt: ResourceType, obj: Obj) -> tuple[str, ...]:
    """All field-label values of `obj` in `rt.fields` order, as the strings the real
    field-label functions produce: "" when unset, "true"/"false" for booleans."""
    values: list[str] = []
    for path, is_bool in rt.field_paths:
        cur: Any = obj
        for part in path:
            cur = cur.get(part) if cur.__class__ is dict else None
        if is_bool or cur is True or cur is False:
            values.append("true" if cur else "false")
        else:
            values.append("" if cur is None else str(cur))
    return tuple(values)


class _Rec(NamedTuple):
    """A stored object: its JSON bytes plus what selectors need, extracted once.

    Bytes rather than dicts because serving a list is then a join, a copy is a parse,
    and each of 150,000 pods is a few objects for the garbage collector to scan instead
    of fifty (which was most of the cost of a write).  Records are immutable.
    """

    raw: bytes
    namespace: str
    labels: dict[str, str]
    fields: tuple[str, ...]


def _make_rec(rt: ResourceType, obj: Obj) -> _Rec:
    meta = _metadata(obj)
    labels = meta.get("labels")
    return _Rec(
        orjson.dumps(obj, option=_DUMP),
        meta.get("namespace") or "",
        {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
        _field_values(rt, obj),
    )


def _rec_matches(rt: ResourceType, rec: _Rec, labels: LabelSelector,
                 fields: FieldSelector) -> bool:
    if not labels.matches(rec.labels):
        return False
    if fields.empty:
        return True
    index = rt.field_index
    return fields.matches(lambda f: rec.fields[index[f]])


RecList = list[_Rec]  # an alias: inside FakeKubeApi, `list` names the method


def _load(rec: _Rec) -> Obj:
    return cast(Obj, orjson.loads(rec.raw))


@dataclass(frozen=True)
class _Event:
    """One change, kept in the bounded history so watches can resume from it."""

    rv: int
    type: str
    rec: _Rec
    old: _Rec | None


class _Watcher:
    """One open watch: its filter and the events waiting to be streamed."""

    def __init__(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.rt = rt
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.loop = loop
        self.wakeup = asyncio.Event()
        self.pending: list[tuple[bytes, _Rec]] = []
        self.wake_scheduled = False
        self.closed = False

    def selects(self, rec: _Rec | None) -> bool:
        """Whether `rec` passes this watch's namespace, label and field filters."""
        if rec is None:
            return False
        if self.namespace is not None and rec.namespace != self.namespace:
            return False
        return _rec_matches(self.rt, rec, self.labels, self.fields)

    def offer(self, event: _Event, *, wake: bool = True) -> None:
        """Queue `event` as this filtered watch sees it (caller holds the store lock).

        As the real watch cache does, an object modified into the filter arrives as
        ADDED and one modified out of it as DELETED.
        """
        now = self.selects(event.rec)
        if event.type == "MODIFIED":
            before = self.selects(event.old)
            etype = "MODIFIED" if now and before else "ADDED" if now else "DELETED"
            if not (now or before):
                return
        elif now:
            etype = event.type
        else:
            return
        self.pending.append((etype.encode(), event.rec))
        if wake:
            self.wake()

    def wake(self) -> None:
        """Wake the streaming coroutine from any thread (at most one pending wake-up)."""
        if self.wake_scheduled:
            return
        self.wake_scheduled = True
        with contextlib.suppress(RuntimeError):  # loop already closed: nobody to wake
            self.loop.call_soon_threadsafe(self.wakeup.set)


class _Collection:
    """All objects of one resource, plus a lazily maintained sorted key list for paging."""

    def __init__(self, rt: ResourceType, history_size: int) -> None:
        self.rt = rt
        self.objects: dict[Key, _Rec] = {}
        self.history: deque[_Event] = deque(maxlen=history_size)
        self.floor = 0  # resourceVersion of the newest event dropped from `history`
        self.watchers: set[_Watcher] = set()
        self._sorted: list[Key] = []
        self._added: list[Key] = []
        self._removed: set[Key] = set()

    def put(self, key: Key, rec: _Rec) -> None:
        if key not in self.objects:
            self._added.append(key)
        self.objects[key] = rec

    def remove(self, key: Key) -> None:
        del self.objects[key]
        self._removed.add(key)

    def sorted_keys(self) -> list[Key]:
        """Keys in (namespace, name) order; O(n) to refresh after changes, not O(n log n)."""
        if self._added or self._removed:
            base = self._sorted
            if self._removed:
                removed = self._removed
                base = [k for k in base if k not in removed]
            if self._added:
                # Two sorted runs: timsort merges them in linear time.
                base = base + sorted({k for k in self._added if k in self.objects})
                base.sort()
            self._sorted = base
            self._added = []
            self._removed = set()
        return self._sorted

    def record(self, event: _Event) -> None:
        """Append to the history and hand the event to every open watch."""
        if self.history.maxlen is not None and len(self.history) == self.history.maxlen:
            self.floor = self.history[0].rv
        self.history.append(event)
        for watcher in self.watchers:
            watcher.offer(event)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _rfc3339(value: Any) -> str:
    """Normalise a timestamp to the API server's form: UTC, `Z`, whole seconds."""
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        raise BadRequest(f"invalid timestamp {value!r}: expected RFC 3339") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def _check_name(rt: ResourceType, name: str) -> None:
    """Reject names the API server rejects (lowercase RFC 1123 subdomain)."""
    if len(name) > 253 or not _NAME_RE.fullmatch(name):
        raise Invalid(
            rt, name, "metadata.name", "FieldValueInvalid",
            f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower '
            "case alphanumeric characters, '-' or '.', and must start and end with an "
            "alphanumeric character",
        )


def _with_kind(rt: ResourceType, obj: Obj) -> Obj:
    """Single objects on the wire carry kind/apiVersion (list items do not)."""
    return {"kind": rt.kind, "apiVersion": rt.api_version, **obj}


def _kind_prefix(rt: ResourceType) -> bytes:
    return orjson.dumps({"kind": rt.kind, "apiVersion": rt.api_version})[:-1] + b","


def _raw_with_kind(rt: ResourceType, rec: _Rec) -> bytes:
    """`rec` as a single object on the wire, without a parse/serialise round trip."""
    prefix = _KIND_PREFIX.get((rt.plural, rt.group, rt.version, rt.kind))
    if prefix is None:
        prefix = _KIND_PREFIX[(rt.plural, rt.group, rt.version, rt.kind)] = _kind_prefix(rt)
    return prefix + rec.raw[1:]


_KIND_PREFIX = {(rt.plural, rt.group, rt.version, rt.kind): _kind_prefix(rt)
                for rt in RESOURCES.values()}


def _strip_kind(body: Obj) -> Obj:
    obj = dict(body)
    obj.pop("kind", None)
    obj.pop("apiVersion", None)
    return obj


def _metadata(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _encode_continue(rv: int, key: Key) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(key)})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, Key]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        ns, name = data["start"]
        return int(data["rv"]), (str(ns), str(name))
    except (ValueError, KeyError, TypeError) as exc:
        raise BadRequest(f"continue key is not valid: {exc}") from None


# core/v1 Event field <-> events.k8s.io/v1 Event field (k8s.io/kubernetes pkg/apis/events/v1
# conversion): one stored object answers both APIs.
_EVENT_FIELDS = (("message", "note"), ("involvedObject", "regarding"),
                 ("reportingComponent", "reportingController"), ("source", "deprecatedSource"),
                 ("firstTimestamp", "deprecatedFirstTimestamp"),
                 ("lastTimestamp", "deprecatedLastTimestamp"), ("count", "deprecatedCount"))


def events_both_ways(rt: ResourceType, event: Obj) -> None:
    """Fill, in place, the other API's spelling of each field from the one `rt` writes."""
    newer = rt.group == "events.k8s.io"
    for core, v1 in _EVENT_FIELDS:
        source, target = (v1, core) if newer else (core, v1)
        if event.get(source) is not None:
            event[target] = event[source]
        else:
            event.pop(target, None)


# Server-side printing -------------------------------------------------------------------
# kubectl asks for `Accept: application/json;as=Table;g=meta.k8s.io;v=v1` and prints
# the rows it gets, so these columns are what `kubectl get` shows (as on a real cluster).

_Column = tuple[str, str, int]  # name, type, priority (1 = shown with -o wide)
