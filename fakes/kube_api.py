"""A fake Kubernetes API server for tests: real HTTP, real client, in-memory store.

The unmodified `kubernetes` Python client and `kubectl` talk to it over HTTP, so code under
test exercises its real request/response handling (paging, watches, conflicts, Status
errors) without a cluster.  A simulator running in the same process drives the same store
through `FakeKubeApi.create/get/list/replace/patch/delete`, with the same semantics and
resourceVersion bumps as HTTP writes, so watchers see its changes too.

Served: core/v1 pods (+eviction, +status), nodes (+status), events, configmaps;
coordination.k8s.io/v1 leases; apps/v1 deployments (+scale, +status); policy/v1
poddisruptionbudgets (+status), which evictions honour; the discovery documents kubectl needs; and
custom resources of any group/version/plural (+status) once registered with
`register_custom_resource` or `install_crd`, as a CustomResourceDefinition would.
Deliberate simplifications, none of which the code under test should depend on: no
authentication or admission, no defaulting beyond pod phase and deployment replicas, pod
deletion is immediate (there is no kubelet to finish a graceful delete), a PUT replaces
status too (only `/status` PUT and PATCH are restricted to status), and lists are served
from the latest state rather than a snapshot at the continue token's resourceVersion.
There is no disruption controller: a PodDisruptionBudget's `status` is computed from the
pods whenever it is read (get, list, write responses); watch events carry the stored object.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import contextlib
import logging
import random
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, cast

import kubernetes.client
import orjson
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from fakes.kube_faults import ADMIN_PATH, kube_faults
from tasks.adapters.http_server import ServiceThread, base_url
from tasks.core.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    format_label_selector,
    parse_field_selector,
    parse_label_selector,
)

__all__ = [
    "RESOURCES",
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "FakeKubeApi",
    "Invalid",
    "NotFound",
    "RecordedRequest",
    "ResourceType",
    "custom_resource_type",
    "json_merge_patch",
    "json_patch",
    "pdb_status",
    "strategic_merge_patch",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
ObjList = list[Obj]
Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects

TOKEN = "fake-token"
SERVER_VERSION: Obj = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-fake",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


# Resource types ----------------------------------------------------------------------

_META_FIELDS = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class ResourceType:
    """What the server knows about one REST resource (discovery, scope, field labels)."""

    plural: str
    singular: str
    kind: str
    group: str
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    fields: tuple[str, ...] = _META_FIELDS
    allow_create_on_update: bool = False
    return_deleted_object: bool = False
    has_generation: bool = False

    @property
    def api_version(self) -> str:
        """`apiVersion` of objects of this resource."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        """Kind of the list response, e.g. `PodList`."""
        return f"{self.kind}List"

    @property
    def qualified(self) -> str:
        """`pods`, `deployments.apps`: how the API server names it in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: dict[str, ResourceType] = {
    rt.plural: rt
    for rt in (
        ResourceType(
            "pods", "pod", "Pod", "", "v1", True, ("po",), ("all",), ("eviction", "status"),
            (*_META_FIELDS, "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
             "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
             "status.nominatedNodeName"),
            return_deleted_object=True,
        ),
        ResourceType(
            "nodes", "node", "Node", "", "v1", False, ("no",), (), ("status",),
            ("metadata.name", "spec.unschedulable"),
        ),
        ResourceType(
            "events", "event", "Event", "", "v1", True, ("ev",), (), (),
            (*_META_FIELDS, "involvedObject.kind", "involvedObject.namespace",
             "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion",
             "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
             "reportingComponent", "source", "type"),
            allow_create_on_update=True,
        ),
        ResourceType(
            "leases", "lease", "Lease", "coordination.k8s.io", "v1", True,
            allow_create_on_update=True,
        ),
        ResourceType(
            "deployments", "deployment", "Deployment", "apps", "v1", True, ("deploy",),
            ("all",), ("scale", "status"), has_generation=True,
        ),
        ResourceType("configmaps", "configmap", "ConfigMap", "", "v1", True, ("cm",)),
        ResourceType(
            "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", "policy",
            "v1", True, ("pdb",), (), ("status",), has_generation=True,
        ),
    )
}

_GROUP_VERSIONS: dict[str, list[ResourceType]] = {}
for _rt in RESOURCES.values():
    _GROUP_VERSIONS.setdefault(_rt.api_version, []).append(_rt)
_BY_PATH: dict[tuple[str, str], ResourceType] = {
    (rt.api_version, rt.plural): rt for rt in RESOURCES.values()
}
_BOOL_FIELDS = frozenset({"spec.unschedulable", "spec.hostNetwork"})


def custom_resource_type(group: str, version: str, plural: str, kind: str, *,
                         namespaced: bool = True, singular: str = "",
                         short_names: tuple[str, ...] = (), categories: tuple[str, ...] = (),
                         status: bool = True) -> ResourceType:
    """The ResourceType a CustomResourceDefinition serves: metadata field selectors only,
    `metadata.generation` bumped on spec changes, and an optional `/status` subresource."""
    if not group or "." not in group:
        raise ValueError(f"a custom resource group must be a DNS subdomain with a dot: {group!r}")
    return ResourceType(plural, singular or kind.lower(), kind, group, version, namespaced,
                        short_names, categories, ("status",) if status else (),
                        _META_FIELDS if namespaced else ("metadata.name",), has_generation=True)


# Errors -----------------------------------------------------------------------------

_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
    415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
    500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}


def status_body(code: int, reason: str, message: str, details: Obj | None = None) -> Obj:
    """A `metav1.Status` failure, the body every API error carries."""
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        body["details"] = details
    body["code"] = code
    return body


class ApiError(Exception):
    """An API failure, raised by the store and rendered as a `Status` over HTTP."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Obj | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = dict(headers or {})

    def __str__(self) -> str:
        return f"({self.code} {self.reason}) {self.message}"

    def status(self) -> Obj:
        """The `Status` body for this error."""
        return status_body(self.code, self.reason, self.message, self.details)


def _details(rt: ResourceType, name: str) -> Obj:
    details: Obj = {"name": name}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    return details


class NotFound(ApiError, KeyError):
    """404; also a `KeyError` so in-process `get` reads like a mapping lookup."""

    def __init__(self, rt: ResourceType, name: str) -> None:
        super().__init__(404, "NotFound", f'{rt.qualified} "{name}" not found',
                         _details(rt, name))


class AlreadyExists(ApiError):
    """409 AlreadyExists on create."""

    def __init__(self, rt: ResourceType, name: str) -> None:
        super().__init__(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists',
                         _details(rt, name))


class Conflict(ApiError):
    """409 Conflict: a stale resourceVersion (or a failed delete precondition)."""

    def __init__(self, rt: ResourceType, name: str, why: str | None = None) -> None:
        why = why or ("the object has been modified; please apply your changes to the "
                      "latest version and try again")
        super().__init__(409, "Conflict",
                         f'Operation cannot be fulfilled on {rt.qualified} "{name}": {why}',
                         _details(rt, name))


class Invalid(ApiError, ValueError):
    """422 Invalid, with the field cause the API server reports."""

    def __init__(self, rt: ResourceType, name: str, fld: str, cause: str, why: str) -> None:
        super().__init__(
            422, "Invalid", f'{rt.kind} "{name}" is invalid: {fld}: {why}',
            {"name": name, "group": rt.group, "kind": rt.kind,
             "causes": [{"reason": cause, "message": why, "field": fld}]},
        )


class BadRequest(ApiError, ValueError):
    """400 BadRequest: malformed request (selector, body, name/namespace mismatch)."""

    def __init__(self, message: str) -> None:
        super().__init__(400, "BadRequest", message)


# Patches -----------------------------------------------------------------------------


def _copy(value: Any) -> Any:
    """Deep copy of JSON data; an orjson round trip is several times faster than deepcopy."""
    return orjson.loads(orjson.dumps(value))


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns new containers, never mutates `target`."""
    if not isinstance(patch, dict):
        return patch
    result: Obj = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


# List fields merged by key under a strategic merge patch (`patchMergeKey` in the Go
# types).  Keyed by field name alone, which is unambiguous for the types served here.
SMP_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "ownerReferences": "uid",
    "addresses": "type",
    "podIPs": "ip",
    "hostIPs": "ip",
    "hostAliases": "ip",
}
# Primitive lists with `patchStrategy:"merge"`: a patch adds to them instead of replacing.
SMP_MERGE_PRIMITIVES = frozenset({"finalizers"})


def _smp_clean(value: Any) -> Any:
    """A patch value placed where nothing existed: drop directives and nulls."""
    if isinstance(value, dict):
        return strategic_merge_patch({}, value)
    if isinstance(value, list):
        return [_smp_clean(v) for v in value
                if not (isinstance(v, dict) and v.get("$patch") in ("delete", "replace")
                        and len(v) == 1)]
    return value


def _smp_list(fld: str, original: list[Any], patch: list[Any]) -> list[Any]:
    """Merge one list field: by merge key, as a set of primitives, or replace it."""
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [_smp_clean(v) for v in patch
                if not (isinstance(v, dict) and v.get("$patch") == "replace")]
    if fld in SMP_MERGE_PRIMITIVES:
        merged = list(original)
        merged.extend(v for v in patch if v not in merged)
        return merged
    key = SMP_MERGE_KEYS.get(fld)
    if key is None:
        return [_smp_clean(v) for v in patch]
    merged = list(original)
    for item in patch:
        if not isinstance(item, dict):
            merged.append(item)
            continue
        wanted = item.get(key)
        pos = next((i for i, cur in enumerate(merged)
                    if isinstance(cur, dict) and cur.get(key) == wanted), None)
        if item.get("$patch") == "delete":
            merged = [cur for cur in merged
                      if not (isinstance(cur, dict) and cur.get(key) == wanted)]
        elif pos is None:
            merged.append(_smp_clean(item))
        else:
            merged[pos] = strategic_merge_patch(merged[pos], item)
    return merged


def strategic_merge_patch(original: Obj, patch: Obj) -> Obj:
    """Kubernetes strategic merge patch over plain dicts; returns new containers.

    Lists named in `SMP_MERGE_KEYS` merge element-wise by key, `finalizers` merge as a
    set, every other list (node `spec.taints`, tolerations, args ...) is replaced whole.
    Supports null deletion and the `$patch: delete|replace`, `$retainKeys`,
    `$deleteFromPrimitiveList/<f>` and (ignored) `$setElementOrder/<f>` directives.
    """
    if patch.get("$patch") == "replace":
        return cast(Obj, _smp_clean({k: v for k, v in patch.items() if k != "$patch"}))
    result: Obj = dict(original)
    deletions: list[tuple[str, list[Any]]] = []
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            deletions.append((key.split("/", 1)[1], value if isinstance(value, list) else []))
            continue
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            if value.get("$patch") == "delete":
                result.pop(key, None)
                continue
            current = result.get(key)
            result[key] = strategic_merge_patch(current if isinstance(current, dict) else {},
                                                value)
        elif isinstance(value, list):
            current = result.get(key)
            result[key] = _smp_list(key, current if isinstance(current, list) else [], value)
        else:
            result[key] = value
    for key, remove in deletions:
        current = result.get(key)
        if isinstance(current, list):
            result[key] = [v for v in current if v not in remove]
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


class JsonPatchError(ValueError):
    """A JSON patch operation that does not apply (the server answers 422)."""


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise JsonPatchError(f"invalid JSON pointer {path!r}")
    if not path:
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(token: str, size: int, *, insert: bool = False) -> int:
    if token == "-" and insert:
        return size
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise JsonPatchError(f"invalid array index {token!r}")
    idx = int(token)
    if idx > size or (idx == size and not insert):
        raise JsonPatchError(f"array index {idx} out of bounds")
    return idx


def _walk(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for token in tokens:
        if isinstance(cur, dict):
            if token not in cur:
                raise JsonPatchError(f"path element {token!r} does not exist")
            cur = cur[token]
        elif isinstance(cur, list):
            cur = cur[_index(token, len(cur))]
        else:
            raise JsonPatchError(f"cannot descend into {type(cur).__name__}")
    return cur


def _jp_add(doc: Any, tokens: list[str], value: Any, *, replace: bool = False) -> Any:
    if not tokens:
        return value
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise JsonPatchError(f"replace: path element {last!r} does not exist")
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(last, len(parent))] = value
        else:
            parent.insert(_index(last, len(parent), insert=True), value)
    else:
        raise JsonPatchError(f"cannot add to {type(parent).__name__}")
    return doc


def _jp_remove(doc: Any, tokens: list[str]) -> tuple[Any, Any]:
    if not tokens:
        raise JsonPatchError("cannot remove the whole document")
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise JsonPatchError(f"remove: path element {last!r} does not exist")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(last, len(parent)))
    raise JsonPatchError(f"cannot remove from {type(parent).__name__}")


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch; mutates and returns `doc`, so pass a private copy."""
    if not isinstance(operations, list):
        raise JsonPatchError("a JSON patch must be an array of operations")
    for op in operations:
        if not isinstance(op, dict):
            raise JsonPatchError("a JSON patch operation must be an object")
        kind = op.get("op")
        tokens = _pointer(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise JsonPatchError(f"{kind}: missing value")
        if kind == "add":
            doc = _jp_add(doc, tokens, _copy(op["value"]))
        elif kind == "replace":
            doc = _jp_add(doc, tokens, _copy(op["value"]), replace=True)
        elif kind == "remove":
            doc, _ = _jp_remove(doc, tokens)
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from"))
            if kind == "move":
                doc, value = _jp_remove(doc, source)
            else:
                value = _copy(_walk(doc, source))
            doc = _jp_add(doc, tokens, value)
        elif kind == "test":
            if _walk(doc, tokens) != op["value"]:
                raise JsonPatchError(f"test failed at {op.get('path')!r}")
        else:
            raise JsonPatchError(f"unknown operation {kind!r}")
    return doc


_PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
}


# Store ------------------------------------------------------------------------------

_DUMP = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z
_FIELD_INDEX: dict[str, dict[str, int]] = {
    rt.plural: {f: i for i, f in enumerate(rt.fields)} for rt in RESOURCES.values()
}
# Field label -> (path through the object, is a bool field), precomputed for speed.
_FIELD_PATHS: dict[str, tuple[tuple[tuple[str, ...], bool], ...]] = {
    rt.plural: tuple((tuple(("source.component" if f == "source" else f).split(".")),
                      f in _BOOL_FIELDS) for f in rt.fields)
    for rt in RESOURCES.values()
}


def _field_values(rt: ResourceType, obj: Obj) -> tuple[str, ...]:
    """All field-label values of `obj` in `rt.fields` order, as the strings the real
    field-label functions produce: "" when unset, "true"/"false" for booleans."""
    values: list[str] = []
    for path, is_bool in _FIELD_PATHS[rt.plural]:
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
    index = _FIELD_INDEX[rt.plural]
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
    return _KIND_PREFIX[rt.plural] + rec.raw[1:]


_KIND_PREFIX = {rt.plural: _kind_prefix(rt) for rt in RESOURCES.values()}
_CUSTOM_TYPES: dict[str, ResourceType] = {}


def _add_custom_tables(rt: ResourceType) -> None:
    """Precompute the per-plural tables for a custom resource (hot paths key them by plural).

    The tables are shared by every server in the process, so a plural may name only one
    custom type process-wide (real clusters allow the same plural in two groups; tests of
    this fake do not need that).
    """
    known = RESOURCES.get(rt.plural) or _CUSTOM_TYPES.get(rt.plural)
    if known is not None and known != rt:
        raise ValueError(f"resource plural {rt.plural!r} is already served as "
                         f"{known.kind} ({known.api_version})")
    _CUSTOM_TYPES[rt.plural] = rt
    _FIELD_INDEX[rt.plural] = {f: i for i, f in enumerate(rt.fields)}
    _FIELD_PATHS[rt.plural] = tuple((tuple(f.split(".")), False) for f in rt.fields)
    _KIND_PREFIX[rt.plural] = _kind_prefix(rt)


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


# Server-side printing -------------------------------------------------------------------
# kubectl asks for `Accept: application/json;as=Table;g=meta.k8s.io;v=v1` and prints
# the rows it gets, so these columns are what `kubectl get` shows (as on a real cluster).

_Column = tuple[str, str, int]  # name, type, priority (1 = shown with -o wide)
_TABLE_COLUMNS: dict[str, list[_Column]] = {
    "pods": [("Name", "string", 0), ("Ready", "string", 0), ("Status", "string", 0),
             ("Restarts", "string", 0), ("Age", "string", 0), ("IP", "string", 1),
             ("Node", "string", 1), ("Nominated Node", "string", 1),
             ("Readiness Gates", "string", 1)],
    "nodes": [("Name", "string", 0), ("Status", "string", 0), ("Roles", "string", 0),
              ("Age", "string", 0), ("Version", "string", 0), ("Internal-IP", "string", 1),
              ("External-IP", "string", 1), ("OS-Image", "string", 1),
              ("Kernel-Version", "string", 1), ("Container-Runtime", "string", 1)],
    "deployments": [("Name", "string", 0), ("Ready", "string", 0), ("Up-to-date", "integer", 0),
                    ("Available", "integer", 0), ("Age", "string", 0),
                    ("Containers", "string", 1), ("Images", "string", 1),
                    ("Selector", "string", 1)],
    "leases": [("Name", "string", 0), ("Holder", "string", 0), ("Age", "string", 0)],
    "configmaps": [("Name", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)],
    "poddisruptionbudgets": [("Name", "string", 0), ("Min Available", "string", 0),
                             ("Max Unavailable", "string", 0),
                             ("Allowed Disruptions", "integer", 0), ("Age", "string", 0)],
    "events": [("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0),
               ("Object", "string", 0), ("Message", "string", 0)],
}
_CUSTOM_COLUMNS: list[_Column] = [("Name", "string", 0), ("Age", "date", 0)]


def human_duration(seconds: float) -> str:
    """`k8s.io/apimachinery/pkg/util/duration.HumanDuration`: kubectl's AGE column."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24 % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _age(timestamp: Any, now: float) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.fromisoformat(str(timestamp))
    except ValueError:
        return "<invalid>"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return human_duration(now - then.timestamp())


def _table_cells(rt: ResourceType, obj: Obj, now: float) -> list[Any]:
    """One row of `kubectl get` output, as the real server's printers compute it."""
    meta = _metadata(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    age = _age(meta.get("creationTimestamp"), now)
    if rt.plural == "pods":
        statuses = status.get("containerStatuses") or []
        reason = status.get("reason") or status.get("phase") or ""
        for cs in statuses:
            state = cs.get("state") or {}
            why = (state.get("waiting") or {}).get("reason") or \
                (state.get("terminated") or {}).get("reason")
            if why:
                reason = why
        if meta.get("deletionTimestamp"):
            reason = "Terminating"
        ready = sum(1 for cs in statuses if cs.get("ready"))
        gates = spec.get("readinessGates") or []
        return [meta.get("name"), f"{ready}/{len(spec.get('containers') or [])}", reason,
                str(sum(int(cs.get("restartCount") or 0) for cs in statuses)), age,
                status.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
                status.get("nominatedNodeName") or "<none>",
                f"0/{len(gates)}" if gates else "<none>"]
    if rt.plural == "nodes":
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        state = "Unknown" if "Ready" not in conditions else \
            "Ready" if conditions["Ready"] == "True" else "NotReady"
        if spec.get("unschedulable"):
            state += ",SchedulingDisabled"
        labels = meta.get("labels") or {}
        roles = sorted({k.split("/", 1)[1] for k in labels
                        if k.startswith("node-role.kubernetes.io/") and "/" in k}
                       | ({labels["kubernetes.io/role"]} if "kubernetes.io/role" in labels
                          else set()))
        addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
        info = status.get("nodeInfo") or {}
        return [meta.get("name"), state, ",".join(r for r in roles if r) or "<none>", age,
                info.get("kubeletVersion", ""), addresses.get("InternalIP") or "<none>",
                addresses.get("ExternalIP") or "<none>", info.get("osImage") or "<unknown>",
                info.get("kernelVersion") or "<unknown>",
                info.get("containerRuntimeVersion") or "<unknown>"]
    if rt.plural == "deployments":
        containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
        return [meta.get("name"),
                f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
                status.get("updatedReplicas", 0), status.get("availableReplicas", 0), age,
                ",".join(c.get("name", "") for c in containers),
                ",".join(c.get("image", "") for c in containers),
                format_label_selector(spec.get("selector")) or "<none>"]
    if rt.plural == "leases":
        return [meta.get("name"), spec.get("holderIdentity") or "", age]
    if rt.plural == "configmaps":
        return [meta.get("name"), len(obj.get("data") or {}) + len(obj.get("binaryData") or {}),
                age]
    if rt.plural == "poddisruptionbudgets":
        return [meta.get("name"), str(spec.get("minAvailable", "N/A")),
                str(spec.get("maxUnavailable", "N/A")), status.get("disruptionsAllowed", 0), age]
    if rt.plural not in _TABLE_COLUMNS:  # a custom resource: a CRD's default columns
        return [meta.get("name"), age]
    involved = obj.get("involvedObject") or {}
    last = obj.get("lastTimestamp") or obj.get("eventTime") or meta.get("creationTimestamp")
    return [_age(last, now), obj.get("type", ""), obj.get("reason", ""),
            f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
            obj.get("message", "")]


def _table(rt: ResourceType, objs: ObjList, list_meta: Obj, include: str) -> Obj:
    """A `meta.k8s.io/v1` Table of `objs`; `include` is the `includeObject` parameter."""
    now = time.time()
    rows: ObjList = []
    for obj in objs:
        row: Obj = {"cells": _table_cells(rt, obj, now)}
        if include == "Object":
            row["object"] = _with_kind(rt, obj)
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": _metadata(obj)}
        rows.append(row)
    columns = [{"name": name, "type": kind, "format": "name" if name == "Name" else "",
                "description": name, "priority": priority}
               for name, kind, priority in _TABLE_COLUMNS.get(rt.plural, _CUSTOM_COLUMNS)]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
            "columnDefinitions": columns, "rows": rows}


def _wants_table(accept: str) -> bool:
    """Whether the client asked for server-side printing (kubectl get does)."""
    return any("as=Table" in part and "g=meta.k8s.io" in part for part in accept.split(","))


# Requests and faults ------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the server answered, for tests that count or inspect calls."""

    verb: str  # Kubernetes verb: get list watch create update patch delete ("" otherwise)
    resource: str  # plural resource name, "" for discovery and unknown paths
    namespace: str | None
    name: str | None
    subresource: str | None
    query: dict[str, str]
    status: int
    method: str = "GET"
    path: str = "/"

    @property
    def full_resource(self) -> str:
        """`pods/eviction` style name, as used by `fail_next`."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass
class _Fault:
    verb: str
    resource: str
    remaining: int
    status: int = 0
    delay: float = 0.0
    name: str | None = None

    def matches(self, verb: str, resource: str, name: str | None) -> bool:
        return (
            self.remaining > 0
            and self.verb in ("*", verb)
            and self.resource in ("*", resource)
            and (self.name is None or self.name == name)
        )


_FAULT_MESSAGES = {
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: injected failure",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted",
}
_TRUE = frozenset({"1", "t", "T", "true", "True", "TRUE"})
_VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "*"})


@dataclass
class _Route:
    """A parsed resource URL."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


# PodDisruptionBudgets ------------------------------------------------------------------

PDB_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
PDB_MULTIPLE = ("This pod has more than one PodDisruptionBudget, which the eviction "
                "subresource does not support.")
_PERCENT_RE = re.compile(r"^[0-9]+%$")
_UNHEALTHY_POLICIES = ("IfHealthyBudget", "AlwaysAllow")


def _selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """`metav1.LabelSelector` semantics: every matchLabels pair and matchExpression holds.

    A missing selector selects nothing and `{}` selects everything (policy/v1 rules).
    """
    if not isinstance(selector, dict):
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key"), expr.get("operator")
        values = expr.get("values") or []
        if op == "In":
            ok = key in labels and labels[key] in values
        elif op == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            ok = False
        if not ok:
            return False
    return True


def _selector_empty(selector: Any) -> bool:
    """No selector or `{}`: the eviction subresource ignores such a budget, as the real one."""
    return not isinstance(selector, dict) or not (selector.get("matchLabels")
                                                  or selector.get("matchExpressions"))


def _scaled(value: Any, total: int) -> int:
    """`intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)`; values are
    validated on write, so a string here is a percentage."""
    if isinstance(value, str):
        return -(-int(value[:-1]) * total // 100)
    return int(value)


def _pod_healthy(pod: Obj) -> bool:
    """Whether the disruption controller counts `pod` as healthy: Running and Ready.

    Simplification: a Running pod with no `Ready` condition at all also counts as healthy,
    so simulated pods need not carry conditions (the real controller wants Ready=True).
    """
    if _metadata(pod).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return not ready or ready[0].get("status") == "True"


def _ignores_budgets(pod: Obj) -> bool:
    """`canIgnorePDB`: pending, finished and terminating pods are evicted without a check."""
    return (pod.get("status") or {}).get("phase") in ("Pending", "Succeeded", "Failed") \
        or bool(_metadata(pod).get("deletionTimestamp"))


def _check_int_or_percent(rt: ResourceType, name: str, fld: str, value: Any) -> None:
    """`ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`, as on a real server."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise Invalid(rt, name, fld, "FieldValueInvalid",
                      f"Invalid value: {value!r}: must be an integer or percentage (e.g '5%')")
    if isinstance(value, int):
        if value < 0:
            raise Invalid(rt, name, fld, "FieldValueInvalid",
                          f"Invalid value: {value}: must be greater than or equal to 0")
        return
    if not _PERCENT_RE.match(value):
        raise Invalid(rt, name, fld, "FieldValueInvalid",
                      f'Invalid value: "{value}": a valid percent string must be a numeric '
                      "string followed by an ending '%' (e.g. '1%',  or '93%', regex used "
                      "for validation is '[0-9]+%')")
    if int(value[:-1]) > 100:
        raise Invalid(rt, name, fld, "FieldValueInvalid",
                      f'Invalid value: "{value}": must not be greater than 100%')


def _check_pdb(rt: ResourceType, name: str, pdb: Obj) -> None:
    """Reject the budgets a real API server rejects, so status maths can trust the spec."""
    spec = pdb.get("spec") or {}
    if not isinstance(spec, dict):
        raise Invalid(rt, name, "spec", "FieldValueInvalid", "Invalid value: must be an object")
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        raise Invalid(rt, name, "spec.minAvailable", "FieldValueInvalid",
                      f"Invalid value: {min_available!r}: minAvailable and maxUnavailable "
                      "cannot be both set")
    if min_available is not None:
        _check_int_or_percent(rt, name, "spec.minAvailable", min_available)
    if max_unavailable is not None:
        _check_int_or_percent(rt, name, "spec.maxUnavailable", max_unavailable)
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _UNHEALTHY_POLICIES:
        raise Invalid(rt, name, "spec.unhealthyPodEvictionPolicy", "FieldValueNotSupported",
                      f'Unsupported value: "{policy}": supported values: '
                      '"AlwaysAllow", "IfHealthyBudget"')


def pdb_status(pdb: Obj, pods: ObjList) -> Obj:
    """What the disruption controller would write: counts over the non-finished pods the
    budget selects (expected pods are those pods, not the owning controllers' scale)."""
    spec = pdb.get("spec") or {}
    selector = spec.get("selector")
    expected = healthy = 0
    for pod in pods:
        labels = _metadata(pod).get("labels") or {}
        if not _selector_matches(selector, labels):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        expected += 1
        healthy += _pod_healthy(pod)
    if spec.get("maxUnavailable") is not None:
        desired = max(expected - _scaled(spec["maxUnavailable"], expected), 0)
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = 0
    return {"observedGeneration": _metadata(pdb).get("generation", 1),
            "disruptionsAllowed": max(healthy - desired, 0), "currentHealthy": healthy,
            "desiredHealthy": desired, "expectedPods": expected}


# The server ---------------------------------------------------------------------------


class FakeKubeApi:
    """In-memory Kubernetes API server on 127.0.0.1, run by uvicorn in a thread.

    Use as a context manager or with `start()`/`stop()`.  Store access methods work
    whether or not the HTTP server is running.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *,
                 history_size: int = 1000, bookmark_interval: float = 30.0) -> None:
        self.host = host
        self.port = port
        self.history_size = history_size
        self.bookmark_interval = bookmark_interval
        self.requests: list[RecordedRequest] = []
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._rv = 1
        self._collections = {name: _Collection(rt, history_size)
                             for name, rt in RESOURCES.items()}
        # What this server serves: the built-ins plus the custom resources registered here.
        self._types: dict[str, ResourceType] = dict(RESOURCES)
        self._by_path: dict[tuple[str, str], ResourceType] = dict(_BY_PATH)
        self._group_versions: dict[str, list[ResourceType]] = {
            gv: list(types) for gv, types in _GROUP_VERSIONS.items()}
        self._faults: list[_Fault] = []
        # Faults set over HTTP (`POST /_faults`) or from Python: see fakes/kube_faults.py.
        self.faults = kube_faults()
        self._eviction_blocked: set[Key] = set()
        self._service: ServiceThread | None = None
        self._closing = False  # set while stopping: watches opened now end at once
        self.app = Starlette(routes=[
            Route("/{path:path}", self.faults.endpoint(self._handle),
                  methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        ])

    # Lifecycle ----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL of the server, e.g. `http://127.0.0.1:43123`."""
        if self._service is not None:
            return self._service.url
        if not self.port:
            raise RuntimeError("FakeKubeApi has no port yet: call start() first")
        return base_url(self.host, self.port)

    def start(self) -> FakeKubeApi:
        """Bind the port, start uvicorn in a daemon thread, return once it is serving.

        TCP_NODELAY on the socket (see `bind_socket`) keeps a request at ~0.5 ms, not ~40 ms.
        A bind failure raises the OSError: this is a library, not a command line.
        """
        if self._service is not None:
            raise RuntimeError("FakeKubeApi is already running")
        self.faults.rearm()
        # A new service each time: with port 0, a restart picks a fresh free port.
        self._service = ServiceThread(
            self.app, self.host, self.port, "fake-kube-api", startup_timeout=30,
            lifespan="off", graceful_shutdown_timeout=2, stop_timeout=10,
            keep_alive_timeout=30, bind_option=None).start()
        return self

    def stop(self) -> None:
        """End open watches, shut uvicorn down and join its thread."""
        service = self._service
        if service is None:
            return
        with self._lock:
            self._closing = True
            self.faults.release()  # hung requests drop now instead of holding the shutdown
            for coll in self._collections.values():
                for watcher in coll.watchers:
                    watcher.closed = True
                    watcher.wake()
        service.stop()
        self._service = None
        self._closing = False

    def __enter__(self) -> FakeKubeApi:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def write_kubeconfig(self, path: str | Path) -> Path:
        """Write a kubeconfig (context `fake`, bearer token, TLS checks off) for this server."""
        target = Path(path)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url,
                                                      "insecure-skip-tls-verify": True}}],
            "users": [{"name": "fake", "user": {"token": TOKEN}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake",
                                                      "namespace": "default"}}],
            "current-context": "fake",
            "preferences": {},
        }
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(config, sort_keys=False))
        return target

    @property
    def faults_url(self) -> str:
        """The fault admin endpoint (`POST` a rule, `GET` them, `DELETE` them all)."""
        return self.url + ADMIN_PATH

    def api_client(self) -> kubernetes.client.ApiClient:
        """A real `ApiClient` pointed at this server (does not touch the global default)."""
        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        configuration.verify_ssl = False
        configuration.api_key = {"authorization": TOKEN}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return kubernetes.client.ApiClient(configuration)

    # Fault injection ----------------------------------------------------------------

    def fail_next(self, verb: str, resource: str, count: int = 1, status: int = 500, *,
                  name: str | None = None) -> None:
        """Answer the next `count` matching HTTP requests with a `status` Status error.

        `verb` and `resource` may be "*"; `resource` names a subresource as
        `pods/eviction`.  Only HTTP requests are affected, never in-process calls.
        """
        self._check_fault_target(verb, resource)
        if status < 400:
            raise ValueError(f"an injected failure needs an error status, not {status}")
        with self._lock:
            self._faults.append(_Fault(verb, resource, count, status=status, name=name))

    def delay_next(self, verb: str, resource: str, seconds: float, count: int = 1) -> None:
        """Hold the next `count` matching HTTP requests for `seconds` before serving them."""
        self._check_fault_target(verb, resource)
        with self._lock:
            self._faults.append(_Fault(verb, resource, count, delay=seconds))

    def _check_fault_target(self, verb: str, resource: str) -> None:
        """Catch typos ("pod", "evict") that would otherwise silently never match."""
        if verb not in _VERBS:
            raise ValueError(f"unknown verb {verb!r}; expected one of {sorted(_VERBS)}")
        plural, _, sub = resource.partition("/")
        types = self._types
        if resource != "*" and (plural not in types
                                or (sub and sub not in types[plural].subresources)):
            raise ValueError(f"unknown resource {resource!r}; served: {sorted(types)} "
                             "and their subresources, e.g. pods/eviction, deployments/scale")

    def set_eviction_blocked(self, namespace: str, name: str, blocked: bool) -> None:
        """Make evictions of one pod answer 429, as a PodDisruptionBudget would."""
        with self._lock:
            if blocked:
                self._eviction_blocked.add((namespace, name))
            else:
                self._eviction_blocked.discard((namespace, name))

    def clear_faults(self) -> None:
        """Forget pending injected failures and delays."""
        with self._lock:
            self._faults.clear()

    def wait_for_watchers(self, resource: str, count: int = 1, timeout: float = 10.0) -> bool:
        """Block until exactly `count` watches on `resource` are open (False on timeout).

        Lets a test write only once its watch is established, or check that a watch
        was closed, without sleeping.
        """
        coll = self._collection(resource)
        with self._changed:
            return self._changed.wait_for(lambda: len(coll.watchers) == count, timeout)

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out."""
        with self._lock:
            return self._rv

    # Custom resources ------------------------------------------------------------------

    def register_custom_resource(self, group: str, version: str, plural: str, kind: str, *,
                                 namespaced: bool = True, singular: str = "",
                                 short_names: tuple[str, ...] = (),
                                 categories: tuple[str, ...] = (),
                                 status: bool = True) -> ResourceType:
        """Serve a custom resource as its CRD would: CRUD, list, watch, `/status`, discovery.

        Registering the same type again is a no-op; the in-process methods take its plural
        (`create("watermarkpodautoscalers", ...)`).
        """
        rt = custom_resource_type(group, version, plural, kind, namespaced=namespaced,
                                  singular=singular, short_names=short_names,
                                  categories=categories, status=status)
        with self._lock:
            known = self._types.get(plural)
            if known == rt:
                return rt
            if known is not None:
                raise ValueError(f"resource plural {plural!r} is already served as "
                                 f"{known.kind} ({known.api_version})")
            _add_custom_tables(rt)
            self._types[plural] = rt
            self._by_path[(rt.api_version, plural)] = rt
            self._group_versions.setdefault(rt.api_version, []).append(rt)
            self._collections[plural] = _Collection(rt, self.history_size)
        return rt

    def install_crd(self, manifest: Obj | str | Path) -> list[ResourceType]:
        """Register every served version of a CustomResourceDefinition (a dict, or a YAML
        file holding one or more documents, non-CRD documents skipped)."""
        documents: list[Any]
        if isinstance(manifest, dict):
            documents = [manifest]
        else:
            documents = list(yaml.safe_load_all(Path(manifest).read_text()))
        served: list[ResourceType] = []
        for document in documents:
            if not isinstance(document, dict) or document.get("kind") != \
                    "CustomResourceDefinition":
                continue
            spec = document.get("spec") or {}
            names = spec.get("names") or {}
            for version in spec.get("versions") or []:
                if not version.get("served", True):
                    continue
                served.append(self.register_custom_resource(
                    spec["group"], version["name"], names["plural"], names["kind"],
                    namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                    singular=names.get("singular", ""),
                    short_names=tuple(names.get("shortNames") or ()),
                    categories=tuple(names.get("categories") or ()),
                    status="status" in (version.get("subresources") or {})))
        if not served:
            raise ValueError("no served CustomResourceDefinition version found")
        return served

    # In-process store access ----------------------------------------------------------

    def _collection(self, resource: str) -> _Collection:
        try:
            return self._collections[resource]
        except KeyError:
            raise ValueError(f"unknown resource {resource!r}; "
                             f"served: {sorted(self._collections)}") from None

    def _split(self, resource: str) -> tuple[ResourceType, str | None]:
        plural, _, sub = resource.partition("/")
        rt = self._collection(plural).rt
        if sub and sub not in rt.subresources:
            raise ValueError(f"unknown subresource {resource!r}")
        return rt, sub or None

    @staticmethod
    def _ns(rt: ResourceType, namespace: str | None, body: Obj | None = None) -> str:
        if not rt.namespaced:
            return ""
        return namespace or (_metadata(body).get("namespace") if body else None) or "default"

    def create(self, resource: str, body: Obj, namespace: str | None = None) -> Obj:
        """Create an object, as POST does; returns the stored object (a copy).

        `body` is not modified or kept.  `pods/eviction` evicts, as POSTing an Eviction.
        """
        rt, sub = self._split(resource)
        ns = self._ns(rt, namespace, body)
        with self._lock:
            if sub == "eviction":
                return self._evict(ns, _metadata(body).get("name") or "", body)
            rec = self._create(rt, ns, body)
            return cast(Obj, orjson.loads(self._served(rt, rec)))

    def get(self, resource: str, name: str, namespace: str | None = None) -> Obj:
        """Fetch one object (a copy); raises `NotFound`, a `KeyError`, when absent."""
        rt, sub = self._split(resource)
        ns = self._ns(rt, namespace)
        with self._lock:
            rec = self._get(rt, ns, name)
            if sub == "scale":
                return self._scale(_load(rec))
            return cast(Obj, orjson.loads(self._served(rt, rec)))

    def list(self, resource: str, namespace: str | None = None, label_selector: str = "",
             field_selector: str = "") -> ObjList:
        """All matching objects in (namespace, name) order, as copies without
        kind/apiVersion (like the items of a list response)."""
        rt = self._collection(resource).rt
        labels, fields = self._selectors(rt, label_selector, field_selector)
        ns = namespace if rt.namespaced else None
        with self._lock:
            recs, _, _, _ = self._list(rt, ns, labels, fields, 0, None)
            recs = self._fresh(rt, recs)
        return cast(ObjList, orjson.loads(b"[" + b",".join(r.raw for r in recs) + b"]"))

    def replace(self, resource: str, body: Obj, namespace: str | None = None) -> Obj:
        """Update an object, as PUT does (a set metadata.resourceVersion must match)."""
        rt, sub = self._split(resource)
        ns = self._ns(rt, namespace, body)
        name = _metadata(body).get("name") or ""
        with self._lock:
            if sub == "scale":
                return self._update_scale(ns, name, body)
            rec, _ = self._update(rt, ns, name, body, sub)
            return cast(Obj, orjson.loads(self._served(rt, rec)))

    def patch(self, resource: str, name: str, patch: Obj | ObjList,
              namespace: str | None = None, kind: str = "merge") -> Obj:
        """Patch an object; `kind` is "merge", "strategic" or "json"."""
        if kind not in ("merge", "strategic", "json"):
            raise ValueError(f"unknown patch kind {kind!r}")
        rt, sub = self._split(resource)
        ns = self._ns(rt, namespace)
        with self._lock:
            if sub == "scale":
                return self._patch_scale(ns, name, kind, patch)
            rec = self._patch(rt, ns, name, kind, patch, sub)
            return cast(Obj, orjson.loads(self._served(rt, rec)))

    def delete(self, resource: str, name: str, namespace: str | None = None) -> None:
        """Delete an object; raises `NotFound` (a `KeyError`) when absent."""
        rt = self._collection(resource).rt
        with self._lock:
            self._delete(rt, self._ns(rt, namespace), name, {})

    # Store operations (caller holds the lock) -------------------------------------------

    def _selectors(self, rt: ResourceType, label_selector: str,
                   field_selector: str) -> tuple[LabelSelector, FieldSelector]:
        try:
            return (parse_label_selector(label_selector),
                    parse_field_selector(field_selector, rt.fields))
        except SelectorError as exc:
            raise BadRequest(str(exc)) from None

    def _get(self, rt: ResourceType, ns: str, name: str) -> _Rec:
        rec = self._collections[rt.plural].objects.get((ns, name))
        if rec is None:
            raise NotFound(rt, name)
        return rec

    def _write(self, rt: ResourceType, key: Key, old: Obj | None, new: Obj) -> _Rec:
        """Store `new` with a new resourceVersion and tell the watches.

        `old` is the parsed current object (None on create).  Only `new` itself and its
        metadata are modified (metadata is copied first), so a caller's nested dicts are
        never touched.  Writes that change nothing keep the resourceVersion and send no
        event, as on the real server.
        """
        if rt.plural == "poddisruptionbudgets":
            _check_pdb(rt, key[1], new)
        coll = self._collections[rt.plural]
        meta = dict(_metadata(new))
        new["metadata"] = meta
        old_rec: _Rec | None = None
        if old is not None:
            old_meta = _metadata(old)
            for fixed in ("uid", "creationTimestamp"):
                if fixed in old_meta:
                    meta[fixed] = old_meta[fixed]
            if rt.has_generation:
                generation = old_meta.get("generation", 1)
                meta["generation"] = generation + (new.get("spec") != old.get("spec"))
            meta["resourceVersion"] = old_meta.get("resourceVersion")
            old_rec = coll.objects[key]
            if new == old:
                return old_rec
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        try:
            rec = _make_rec(rt, new)
        except TypeError as exc:  # in-process bodies may hold what JSON cannot
            raise BadRequest(f"the object is not JSON serialisable: {exc}") from None
        coll.put(key, rec)
        coll.record(_Event(self._rv, "ADDED" if old_rec is None else "MODIFIED", rec, old_rec))
        return rec

    def _create(self, rt: ResourceType, ns: str, body: Obj) -> _Rec:
        if not isinstance(body.get("metadata", {}), dict):
            raise BadRequest("metadata must be an object")
        obj = _strip_kind(body)
        meta = dict(_metadata(obj))
        obj["metadata"] = meta
        name = meta.get("name") or ""
        coll = self._collections[rt.plural]
        if not name:
            prefix = meta.get("generateName") or ""
            if not prefix:
                raise Invalid(rt, "", "metadata.name", "FieldValueRequired",
                              "Required value: name or generateName is required")
            while not name or (ns, name) in coll.objects:
                name = prefix + "".join(random.choices(_NAME_CHARS, k=5))
            meta["name"] = name
        _check_name(rt, name)
        if rt.namespaced:
            if meta.get("namespace") not in (None, "", ns):
                raise BadRequest("the namespace of the provided object does not match the "
                                 "namespace sent on the request")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise ApiError(500, "InternalError", "Internal error occurred: resourceVersion "
                           "should not be set on objects to be created")
        if (ns, name) in coll.objects:
            raise AlreadyExists(rt, name)
        meta["uid"] = meta.get("uid") or str(uuid.uuid4())
        given = meta.get("creationTimestamp")
        meta["creationTimestamp"] = _rfc3339(given) if given else _now()
        if rt.has_generation:
            meta["generation"] = 1
        if rt.plural == "pods":
            status = obj.get("status")
            status = dict(status) if isinstance(status, dict) else {}
            status.setdefault("phase", "Pending")
            obj["status"] = status
        elif rt.plural == "deployments":
            spec = obj.get("spec")
            spec = dict(spec) if isinstance(spec, dict) else {}
            spec.setdefault("replicas", 1)
            obj["spec"] = spec
        return self._write(rt, (ns, name), None, obj)

    def _update(self, rt: ResourceType, ns: str, name: str, body: Obj,
                subresource: str | None = None) -> tuple[_Rec, bool]:
        """PUT semantics; returns the stored record and whether it was created."""
        if not isinstance(body.get("metadata", {}), dict):
            raise BadRequest("metadata must be an object")
        meta = _metadata(body)
        if meta.get("name") != name:
            raise BadRequest(f"the name of the object ({meta.get('name') or ''}) does not "
                             f"match the name on the URL ({name})")
        if rt.namespaced and meta.get("namespace") not in (None, "", ns):
            raise BadRequest(f"the namespace of the object ({meta.get('namespace')}) does not "
                             f"match the namespace on the request ({ns})")
        coll = self._collections[rt.plural]
        old_rec = coll.objects.get((ns, name))
        wanted = meta.get("resourceVersion")
        if old_rec is None:
            if not rt.allow_create_on_update or wanted or subresource:
                raise NotFound(rt, name)
            return self._create(rt, ns, body), True
        old = _load(old_rec)
        if wanted and wanted != _metadata(old).get("resourceVersion"):
            raise Conflict(rt, name)
        if subresource == "status":
            new = {**old, "status": body.get("status")}
        else:
            new = _strip_kind(body)
            new["metadata"] = {**meta, "namespace": ns} if rt.namespaced else \
                {k: v for k, v in meta.items() if k != "namespace"}
        return self._write(rt, (ns, name), old, new), False

    def _patch(self, rt: ResourceType, ns: str, name: str, kind: str, patch: Any,
               subresource: str | None = None) -> _Rec:
        old = _load(self._get(rt, ns, name))
        if kind == "json":
            try:
                patched = json_patch(_with_kind(rt, _copy(old)), patch)
            except JsonPatchError as exc:
                raise ApiError(422, "Invalid", str(exc)) from None
        elif not isinstance(patch, dict):
            raise BadRequest(f"a {kind} merge patch must be a JSON object")
        elif kind == "merge":
            patched = json_merge_patch(_with_kind(rt, old), patch)
        else:
            patched = strategic_merge_patch(_with_kind(rt, old), patch)
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata", {}), dict):
            raise ApiError(422, "Invalid", "the patched object is not a valid object")
        meta = _metadata(patched)
        wanted = meta.get("resourceVersion")
        if wanted and wanted != _metadata(old).get("resourceVersion"):
            raise Conflict(rt, name)
        if meta.get("name") != name:
            raise BadRequest(f"the name of the object ({meta.get('name') or ''}) does not "
                             f"match the name on the URL ({name})")
        if rt.namespaced and meta.get("namespace") != ns:
            raise BadRequest("the namespace of the object does not match the namespace on "
                             "the request")
        new = {**old, "status": patched.get("status")} if subresource == "status" \
            else _strip_kind(patched)
        return self._write(rt, (ns, name), old, new)

    def _delete(self, rt: ResourceType, ns: str, name: str, options: Obj) -> _Rec:
        coll = self._collections[rt.plural]
        old_rec = self._get(rt, ns, name)
        gone = _load(old_rec)
        have = _metadata(gone)
        pre = options.get("preconditions") if isinstance(options, dict) else None
        if isinstance(pre, dict):
            if pre.get("resourceVersion") and pre["resourceVersion"] != have.get(
                    "resourceVersion"):
                raise Conflict(rt, name, (
                    f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does "
                    f"not match the ResourceVersion in record ({have.get('resourceVersion')})."
                    " The object might have been modified"))
            if pre.get("uid") and pre["uid"] != have.get("uid"):
                raise Conflict(rt, name, (
                    f"Precondition failed: UID in precondition: {pre['uid']}, "
                    f"UID in object meta: {have.get('uid')}"))
        coll.remove((ns, name))
        self._rv += 1
        have["resourceVersion"] = str(self._rv)  # the DELETED event carries a new version
        gone_rec = old_rec._replace(raw=orjson.dumps(gone, option=_DUMP))
        coll.record(_Event(self._rv, "DELETED", gone_rec, old_rec))
        return gone_rec

    def _list(self, rt: ResourceType, ns: str | None, labels: LabelSelector,
              fields: FieldSelector, limit: int, token: str | None,
              ) -> tuple[RecList, int, str | None, int | None]:
        """One page: (records, list resourceVersion, continue token, remaining count)."""
        coll = self._collections[rt.plural]
        keys = coll.sorted_keys()
        lo, hi = 0, len(keys)
        if ns is not None and rt.namespaced:
            lo = bisect.bisect_left(keys, (ns, ""))
            hi = bisect.bisect_left(keys, (ns + "\x00", ""), lo)
        list_rv = self._rv
        start = lo
        if token:
            list_rv, after = _decode_continue(token)
            start = bisect.bisect_right(keys, after, lo, hi)
        objects = coll.objects
        remaining: int | None = None
        if labels.empty and fields.empty:
            end = min(hi, start + limit) if limit > 0 else hi
            items = [objects[k] for k in keys[start:end]]
            more = end < hi
            last = keys[end - 1] if end > start else None
            remaining = hi - end
        else:
            items, pos, last, more = [], start, None, False
            while pos < hi:
                rec = objects[keys[pos]]
                if _rec_matches(rt, rec, labels, fields):
                    if limit > 0 and len(items) == limit:
                        more = True  # another match exists: this page is not the last
                        break
                    items.append(rec)
                    last = keys[pos]
                pos += 1
        next_token = _encode_continue(list_rv, last) if more and last is not None else None
        return items, list_rv, next_token, (remaining if next_token else None)

    @staticmethod
    def _scale(deployment: Obj) -> Obj:
        meta = _metadata(deployment)
        spec = deployment.get("spec") or {}
        status = deployment.get("status") or {}
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                              "creationTimestamp") if k in meta},
            "spec": {"replicas": spec.get("replicas", 0)},
            "status": {"replicas": status.get("replicas", 0),
                       "selector": format_label_selector(spec.get("selector"))},
        }

    def _update_scale(self, ns: str, name: str, scale: Obj) -> Obj:
        rt = RESOURCES["deployments"]
        old = _load(self._get(rt, ns, name))
        meta = _metadata(scale)
        if meta.get("name") not in (None, name):
            raise BadRequest(f"the name of the object ({meta.get('name')}) does not match "
                             f"the name on the URL ({name})")
        wanted = meta.get("resourceVersion")
        if wanted and wanted != _metadata(old).get("resourceVersion"):
            raise Conflict(rt, name)
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise Invalid(rt, name, "spec.replicas", "FieldValueInvalid",
                          f"Invalid value: {replicas!r}: must be a non-negative integer")
        new = {**old, "spec": {**(old.get("spec") or {}), "replicas": replicas}}
        return self._scale(_load(self._write(rt, (ns, name), old, new)))

    def _patch_scale(self, ns: str, name: str, kind: str, patch: Any) -> Obj:
        current = self._scale(_load(self._get(RESOURCES["deployments"], ns, name)))
        if kind == "json":
            try:
                patched = json_patch(current, patch)
            except JsonPatchError as exc:
                raise ApiError(422, "Invalid", str(exc)) from None
        elif not isinstance(patch, dict):
            raise BadRequest(f"a {kind} merge patch must be a JSON object")
        elif kind == "merge":
            patched = json_merge_patch(current, patch)
        else:
            patched = strategic_merge_patch(current, patch)
        return self._update_scale(ns, name, patched)

    def _evict(self, ns: str, name: str, body: Obj) -> Obj:
        rt = RESOURCES["pods"]
        body_name = _metadata(body).get("name")
        if body_name and body_name != name:
            raise BadRequest("name in URL does not match name in Eviction object")
        rec = self._get(rt, ns, name)
        if (ns, name) in self._eviction_blocked:
            raise ApiError(
                429, "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                {"causes": [{"reason": "DisruptionBudget",
                             "message": "The disruption budget fake-pdb needs 1 healthy pods "
                                        "and has 1 currently"}]},
            )
        pod = _load(rec)
        if not _ignores_budgets(pod):
            self._check_budgets(ns, rec, pod)
        options = body.get("deleteOptions")
        self._delete(rt, ns, name, options if isinstance(options, dict) else {})
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "code": 201}

    def _namespace_recs(self, plural: str, ns: str) -> RecList:
        """The records of one namespace, found by bisection on the sorted keys."""
        coll = self._collections[plural]
        keys = coll.sorted_keys()
        lo = bisect.bisect_left(keys, (ns, ""))
        hi = bisect.bisect_left(keys, (ns + "\x00", ""), lo)
        return [coll.objects[k] for k in keys[lo:hi]]

    def _selected_pods(self, ns: str, selector: Any) -> ObjList:
        """The pods of `ns` a budget's selector picks; only those are parsed."""
        return [_load(rec) for rec in self._namespace_recs("pods", ns)
                if _selector_matches(selector, rec.labels)]

    def _fresh(self, rt: ResourceType, recs: RecList) -> RecList:
        """`recs` as served: budgets get the status a disruption controller would write now."""
        if rt.plural != "poddisruptionbudgets" or not recs:
            return recs
        fresh: RecList = []
        with self._lock:
            for rec in recs:
                pdb = _load(rec)
                pods = self._selected_pods(rec.namespace, (pdb.get("spec") or {}).get("selector"))
                stored = pdb.get("status")
                pdb["status"] = {**(stored if isinstance(stored, dict) else {}),
                                 **pdb_status(pdb, pods)}
                fresh.append(rec._replace(raw=orjson.dumps(pdb, option=_DUMP)))
        return fresh

    def _served(self, rt: ResourceType, rec: _Rec) -> bytes:
        """One object on the wire, with a budget's status computed."""
        return _raw_with_kind(rt, self._fresh(rt, [rec])[0])

    def _check_budgets(self, ns: str, rec: _Rec, pod: Obj) -> None:
        """The eviction subresource's budget checks (pkg/registry/core/pod/storage/eviction.go):
        at most one budget may select the pod, and evicting must leave it enough healthy pods."""
        budgets = [pdb for pdb in map(_load, self._namespace_recs("poddisruptionbudgets", ns))
                   if not _selector_empty((pdb.get("spec") or {}).get("selector"))
                   and _selector_matches(pdb["spec"]["selector"], rec.labels)]
        if not budgets:
            return
        if len(budgets) > 1:
            raise ApiError(500, "InternalError", f"Internal error occurred: {PDB_MULTIPLE}",
                           {"causes": [{"message": PDB_MULTIPLE}]})
        pdb = budgets[0]
        spec = pdb.get("spec") or {}
        status = pdb_status(pdb, self._selected_pods(ns, spec.get("selector")))
        current, desired = status["currentHealthy"], status["desiredHealthy"]
        if not _pod_healthy(pod):
            # An unhealthy pod costs the budget nothing: AlwaysAllow lets it go, and the
            # default IfHealthyBudget does while the budget is met.
            if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
                return
            if current >= desired > 0:
                return
        if status["disruptionsAllowed"] == 0:
            name = _metadata(pdb).get("name")
            raise ApiError(429, "TooManyRequests", PDB_VIOLATION, {"causes": [{
                "reason": "DisruptionBudget",
                "message": f"The disruption budget {name} needs {desired} healthy pods and "
                           f"has {current} currently"}]})

    # HTTP -----------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        """Route one request, apply injected faults, and record it."""
        path = request.url.path
        query = dict(request.query_params)
        method = request.method
        verb, resource, route = "", "", None
        try:
            route = self._route(path)
            if route is None:
                response = self._non_resource(path, method)
                verb = "get" if method == "GET" else ""
            else:
                resource = route.rt.plural
                verb = self._verb(method, route, query)
                response = await self._serve(request, route, verb, query)
        except ApiError as exc:
            response = self._error(exc)
        except Exception as exc:  # a bug here must still answer like an API server
            log.exception("fake kube api: %s %s failed", method, path)
            response = self._error(ApiError(500, "InternalError",
                                            f"Internal error occurred: {exc}"))
        self.requests.append(RecordedRequest(
            verb=verb, resource=resource,
            namespace=route.namespace if route else None,
            name=route.name if route else None,
            subresource=route.subresource if route else None,
            query=query, status=response.status_code, method=method, path=path,
        ))
        return response

    @staticmethod
    def _json(body: Any, status: int = 200, headers: Mapping[str, str] | None = None
              ) -> Response:
        return Response(orjson.dumps(body), status_code=status, headers=headers,
                        media_type="application/json")

    @staticmethod
    def _raw(body: bytes, status: int = 200) -> Response:
        return Response(body, status_code=status, media_type="application/json")

    def _error(self, exc: ApiError) -> Response:
        return self._json(exc.status(), exc.code, exc.headers)

    def _route(self, path: str) -> _Route | None:
        """Parse a resource URL; None for non-resource paths (discovery, health)."""
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
            group_version, rest = "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return None
        if not rest:
            return None
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        rt = self._by_path.get((group_version, rest[0]))
        if rt is None or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if (namespace is not None and not rt.namespaced) or (
                rt.namespaced and namespace is None and name is not None) or (
                sub is not None and sub not in rt.subresources):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return _Route(rt, namespace, name, sub)

    @staticmethod
    def _verb(method: str, route: _Route, query: Mapping[str, str]) -> str:
        if method == "GET":
            if route.name is None:
                return "watch" if query.get("watch") in _TRUE else "list"
            return "get"
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
        allowed = (
            (route.name is None and verb == "create")
            or (route.name is not None and route.subresource is None and verb != "create")
            or (route.subresource == "eviction" and verb == "create")
            or (route.subresource in ("scale", "status") and verb in ("update", "patch"))
        )
        if not allowed:
            raise ApiError(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource")
        return verb

    def _non_resource(self, path: str, method: str) -> Response:
        path = path.rstrip("/") or "/"
        if method != "GET":
            raise ApiError(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource")
        if path == "/version":
            return self._json(SERVER_VERSION)
        if path in ("/healthz", "/livez", "/readyz"):
            return Response(b"ok", media_type="text/plain")
        if path == "/api":
            return self._json({
                "kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": self.url.removeprefix("http://")}],
            })
        if path == "/apis":
            groups = []
            for gv in sorted(self._group_versions):
                if "/" not in gv:
                    continue
                group, version = gv.split("/")
                ref = {"groupVersion": gv, "version": version}
                groups.append({"name": group, "versions": [ref], "preferredVersion": ref})
            return self._json({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        if path == "/api/v1":
            return self._json(self._resource_list("v1"))
        group_version = path.removeprefix("/apis/")
        if path.startswith("/apis/") and "/" in group_version \
                and group_version in self._group_versions:
            return self._json(self._resource_list(group_version))
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _resource_list(self, group_version: str) -> Obj:
        resources: ObjList = []
        for rt in self._group_versions[group_version]:
            entry: Obj = {"name": rt.plural, "singularName": rt.singular,
                          "namespaced": rt.namespaced, "kind": rt.kind,
                          "verbs": ["create", "delete", "get", "list", "patch", "update",
                                    "watch"]}
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            if rt.categories:
                entry["categories"] = list(rt.categories)
            resources.append(entry)
            for sub in rt.subresources:
                sub_entry: Obj = {"name": f"{rt.plural}/{sub}", "singularName": "",
                                  "namespaced": rt.namespaced, "kind": rt.kind,
                                  "verbs": ["get", "patch", "update"]}
                if sub == "eviction":
                    sub_entry.update(group="policy", version="v1", kind="Eviction",
                                     verbs=["create"])
                elif sub == "scale":
                    sub_entry.update(group="autoscaling", version="v1", kind="Scale")
                resources.append(sub_entry)
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                "resources": resources}

    async def _take_faults(self, verb: str, route: _Route) -> None:
        """Apply the first matching delay, then the first matching failure."""
        resource = route.rt.plural + (f"/{route.subresource}" if route.subresource else "")
        delay, failure = 0.0, 0
        with self._lock:
            for fault in self._faults:
                if fault.delay and not delay and fault.matches(verb, resource, route.name):
                    fault.remaining -= 1
                    delay = fault.delay
            for fault in self._faults:
                if fault.status and fault.matches(verb, resource, route.name):
                    fault.remaining -= 1
                    failure = fault.status
                    break
            self._faults = [f for f in self._faults if f.remaining > 0]
        if delay:
            await asyncio.sleep(delay)
        if failure:
            reason = _REASONS.get(failure, "InternalError" if failure >= 500 else "BadRequest")
            message = _FAULT_MESSAGES.get(failure, f"injected failure ({failure})")
            details = _details(route.rt, route.name) if route.name else None
            headers = {}
            if failure == 429:
                headers["Retry-After"] = "1"
                details = {**(details or {}), "retryAfterSeconds": 1}
            raise ApiError(failure, reason, message, details, headers)

    async def _body(self, request: Request) -> Any:
        raw = await request.body()
        if not raw.strip():
            return None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"the request body is not valid JSON: {exc}") from None

    async def _serve(self, request: Request, route: _Route, verb: str,
                     query: Mapping[str, str]) -> Response:
        await self._take_faults(verb, route)
        rt, name, sub = route.rt, route.name, route.subresource
        ns = route.namespace or ""
        if verb == "list":
            return self._serve_list(route, query, request.headers.get("accept", ""))
        if verb == "watch":
            return self._serve_watch(route, query, request.headers.get("accept", ""))
        if verb == "get":
            assert name is not None
            with self._lock:
                rec = self._fresh(rt, [self._get(rt, ns, name)])[0]
            if sub == "scale":
                return self._json(self._scale(_load(rec)))
            if _wants_table(request.headers.get("accept", "")):
                rv = _metadata(_load(rec)).get("resourceVersion")
                return self._json(_table(rt, [_load(rec)], {"resourceVersion": rv},
                                         query.get("includeObject", "")))
            return self._raw(_raw_with_kind(rt, rec))
        content_type = request.headers.get("content-type", "application/json")
        content_type = content_type.split(";")[0].strip().lower()
        body = await self._body(request)
        if verb == "delete":
            assert name is not None
            with self._lock:
                gone = self._delete(rt, ns, name, body if isinstance(body, dict) else {})
            if rt.return_deleted_object:
                return self._raw(_raw_with_kind(rt, gone))
            details = {**_details(rt, name), "uid": _metadata(_load(gone)).get("uid")}
            return self._json({"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Success", "details": details})
        if verb == "patch":
            assert name is not None
            kind = _PATCH_TYPES.get(content_type)
            if kind is None:
                raise ApiError(415, "UnsupportedMediaType",
                               f"the body of the request was in an unknown format - accepted "
                               f"media types include: {', '.join(_PATCH_TYPES)}")
            with self._lock:
                if sub == "scale":
                    return self._json(self._patch_scale(ns, name, kind, body))
                rec = self._patch(rt, ns, name, kind, body, sub)
                return self._raw(self._served(rt, rec))
        if content_type not in ("application/json", ""):
            raise ApiError(415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted "
                           "media types include: application/json")
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        with self._lock:
            if verb == "create" and sub == "eviction":
                assert name is not None
                return self._json(self._evict(ns, name, body), 201)
            if verb == "create":
                return self._raw(self._served(rt, self._create(rt, ns, body)), 201)
            assert name is not None
            if sub == "scale":
                return self._json(self._update_scale(ns, name, body))
            rec, created = self._update(rt, ns, name, body, sub)
            return self._raw(self._served(rt, rec), 201 if created else 200)

    def _serve_list(self, route: _Route, query: Mapping[str, str], accept: str) -> Response:
        rt = route.rt
        labels, fields = self._selectors(rt, query.get("labelSelector", ""),
                                         query.get("fieldSelector", ""))
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise BadRequest(f"invalid limit {query.get('limit')!r}") from None
        with self._lock:
            recs, rv, token, remaining = self._list(rt, route.namespace, labels, fields,
                                                     limit, query.get("continue") or None)
            recs = self._fresh(rt, recs)
        meta: Obj = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
            if remaining is not None:
                meta["remainingItemCount"] = remaining
        if _wants_table(accept):
            return self._json(_table(rt, [_load(r) for r in recs], meta,
                                     query.get("includeObject", "")))
        # Items are the stored JSON bytes, joined: no per-object serialisation at all.
        head = orjson.dumps({"kind": rt.list_kind, "apiVersion": rt.api_version,
                             "metadata": meta})
        return self._raw(b"".join((head[:-1], b',"items":[', b",".join(r.raw for r in recs),
                                   b"]}")))

    def _serve_watch(self, route: _Route, query: Mapping[str, str], accept: str) -> Response:
        rt = route.rt
        labels, fields = self._selectors(rt, query.get("labelSelector", ""),
                                         query.get("fieldSelector", ""))
        try:
            timeout = float(query.get("timeoutSeconds") or 0) or 1800.0
            since = query.get("resourceVersion") or ""
            since_rv = int(since) if since else 0
        except ValueError:
            raise BadRequest("invalid timeoutSeconds or resourceVersion") from None
        watcher = _Watcher(rt, route.namespace if rt.namespaced else None, labels, fields,
                           asyncio.get_running_loop())
        encode = self._table_event_encoder(rt, query.get("includeObject", "")) \
            if _wants_table(accept) else partial(self._event_line, rt)
        stream = self._watch_stream(
            watcher, encode, since_rv, timeout,
            bookmarks=query.get("allowWatchBookmarks") in _TRUE,
            initial_events=query.get("sendInitialEvents") in _TRUE,
        )
        return StreamingResponse(stream, media_type="application/json",
                                 headers={"Cache-Control": "no-cache, private"})

    def _open_watch(self, watcher: _Watcher, since_rv: int, initial_events: bool
                    ) -> Obj | None:
        """Queue the initial or replayed events and register the watch, atomically with
        respect to writes; returns a 410 Status instead when `since_rv` is too old."""
        coll = self._collections[watcher.rt.plural]
        with self._lock:
            if since_rv == 0 or initial_events:
                for key in coll.sorted_keys():
                    rec = coll.objects[key]
                    if watcher.selects(rec):
                        watcher.pending.append((b"ADDED", rec))
            elif since_rv < coll.floor:
                oldest = coll.history[0].rv if coll.history else self._rv
                return status_body(410, "Expired",
                                   f"too old resource version: {since_rv} ({oldest})")
            else:
                for event in coll.history:
                    if event.rv > since_rv:
                        watcher.offer(event, wake=False)
            watcher.closed = self._closing
            coll.watchers.add(watcher)
            self._changed.notify_all()
        return None

    @staticmethod
    def _event_line(rt: ResourceType, etype: bytes, rec: _Rec) -> bytes:
        return b"".join((b'{"type":"', etype, b'","object":', _raw_with_kind(rt, rec),
                         b"}\n"))

    def _bookmark(self, rt: ResourceType, rv: int, initial_end: bool = False) -> bytes:
        meta: Obj = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return orjson.dumps({"type": "BOOKMARK", "object": {
            "kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}}) + b"\n"

    @staticmethod
    def _table_event_encoder(rt: ResourceType, include: str) -> Callable[[bytes, _Rec], bytes]:
        """Watch events for `kubectl get -w`: each object is a one-row Table, and only
        the first carries the column definitions, as from the real server."""
        first = True

        def encode(etype: bytes, rec: _Rec) -> bytes:
            nonlocal first
            obj = _load(rec)
            table = _table(rt, [obj], {"resourceVersion": _metadata(obj).get("resourceVersion")},
                           include)
            if not first:
                table["columnDefinitions"] = []
            first = False
            return orjson.dumps({"type": etype.decode(), "object": table}) + b"\n"

        return encode

    async def _watch_stream(self, watcher: _Watcher, encode: Callable[[bytes, _Rec], bytes],
                            since_rv: int, timeout: float, *, bookmarks: bool,
                            initial_events: bool) -> AsyncIterator[bytes]:
        """Stream events as JSON lines until timeout, server stop or client disconnect.

        The watch registers here, when streaming starts, so the `finally` that
        unregisters it always runs.
        """
        rt = watcher.rt
        expired = self._open_watch(watcher, since_rv, initial_events)
        if expired is not None:
            yield orjson.dumps({"type": "ERROR", "object": expired}) + b"\n"
            return
        loop = watcher.loop
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + self.bookmark_interval
        initial_end = initial_events and bookmarks
        bookmark_due = False
        try:
            while True:
                with self._lock:
                    batch, watcher.pending = watcher.pending, []
                    watcher.wake_scheduled = False
                    closed, rv_now = watcher.closed, self._rv
                watcher.wakeup.clear()
                for start in range(0, len(batch), 500):
                    yield b"".join(encode(etype, rec) for etype, rec in batch[start:start + 500])
                if initial_end:
                    # rv_now was read with the initial events drained: they are all sent.
                    yield self._bookmark(rt, rv_now, initial_end=True)
                    initial_end = False
                if batch:
                    continue
                if closed or loop.time() >= deadline:
                    return
                if bookmark_due:
                    # Every event up to rv_now has been drained, so this bookmark is exact.
                    yield self._bookmark(rt, rv_now)
                    bookmark_due = False
                    next_bookmark = loop.time() + self.bookmark_interval
                wait = deadline - loop.time()
                if bookmarks:
                    wait = min(wait, next_bookmark - loop.time())
                try:
                    await asyncio.wait_for(watcher.wakeup.wait(), max(wait, 0.0))
                except TimeoutError:
                    bookmark_due = bookmarks and loop.time() >= next_bookmark
        finally:
            with self._lock:
                self._collections[rt.plural].watchers.discard(watcher)
                self._changed.notify_all()
