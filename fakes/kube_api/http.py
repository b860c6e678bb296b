"""The HTTP side: routes, verbs, lists, watches and tables as the real API server serves them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from functools import partial
from typing import Any

import orjson
import yaml
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from kube_elevator.fakes.kube_api.access import KubeAccess
from kube_elevator.fakes.kube_api.crd_schema.type_meta import check_type_meta
from kube_elevator.fakes.kube_api.delete_collection import delete_collection
from kube_elevator.fakes.kube_api.errors import _REASONS, ApiError, BadRequest, _details, status_body
from kube_elevator.fakes.kube_api.field_validation import (
    field_check,
    unrecognized_body,
    warning_header,
)
from kube_elevator.fakes.kube_api.negotiation import (
    WATCH_PROTOBUF,
    check_acceptable,
    decode_body,
    is_protobuf,
    media_type,
    negotiate,
    prefers_protobuf,
    serves_protobuf,
)
from kube_elevator.fakes.kube_api.objects import _load, _metadata, _raw_with_kind, _Rec, _Watcher
from kube_elevator.fakes.kube_api.openapi import V2_PROTOBUF_ANSWER, served, v2_protobuf, wants_v2_protobuf
from kube_elevator.fakes.kube_api.patch import APPLY_PATCH, _patch_types
from kube_elevator.fakes.kube_api.policy import _FAULT_MESSAGES, _TRUE, RecordedRequest, _Route
from kube_elevator.fakes.kube_api.protobuf_lists import encode_list, encode_watch_event
from kube_elevator.fakes.kube_api.protobuf_wire import PROTOBUF, encode_watch_frame
from kube_elevator.fakes.kube_api.resources import (
    SERVER_VERSION,
    Obj,
    ObjList,
    ResourceType,
    discovery_order,
)
from kube_elevator.fakes.kube_api.store import DRY_RUN
from kube_elevator.fakes.kube_api.tables import _table, _wants_table

log = logging.getLogger(__name__)

# The API server's cacher: a bookmark on a quiet watch about once a minute (bookmarkFrequency),
# and one 2 s before the watch's timeout (cacheWatcher.nextBookmarkTime).
BOOKMARK_FREQUENCY_SECONDS = 60.0
YAML = "application/yaml"
_WRITES = frozenset({"create", "update", "patch", "delete"})
PRE_TIMEOUT_BOOKMARK_SECONDS = 2.0


async def _apply_body(request: Request) -> Any:
    """An apply configuration: YAML (JSON is YAML too)."""
    raw = await request.body()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise BadRequest(f"the apply configuration is not valid YAML: {exc}") from None


def _json_line(event: Obj) -> bytes:
    """A bookmark or error event on a JSON watch: one line."""
    return orjson.dumps(event) + b"\n"


def _protobuf_frame(event: Obj) -> bytes:
    """A bookmark or error event on a protobuf watch: one frame."""
    return encode_watch_frame(event["type"], event["object"])


def _manager(request: Request, query: Mapping[str, str]) -> str:
    """Who writes: `fieldManager`, else the user agent up to its first "/" (as the API
    server's fieldmanager names an Update's manager)."""
    return query.get("fieldManager") or \
        request.headers.get("user-agent", "").split("/")[0] or "unknown"


class KubeHttp(KubeAccess):
    """Serves the store over the Kubernetes REST API (the `FakeKubeApi` app's handler)."""

    field_validation: bool  # unknown and duplicate fields checked on HTTP writes

    @property
    def url(self) -> str:
        raise NotImplementedError  # the server's: `FakeKubeApi.url`

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
                response = self._non_resource(path, method, request.headers.get("accept", ""))
                verb = "get" if method == "GET" else ""
            else:
                resource = route.rt.plural
                verb = self._verb(method, route, query)
                check_acceptable(request.headers.get("accept", ""), route.rt)
                response = await self._serve(request, route, verb, query)
        except ApiError as exc:
            response = self._error(exc)
        except Exception as exc:  # a bug here must still answer like an API server
            log.exception("fake kube api: %s %s failed", method, path)
            response = self._error(ApiError(500, "InternalError",
                                            f"Internal error occurred: {exc}"))
        if route is not None:  # protobuf for a client that prefers it (client-go's typed ones)
            response = negotiate(response, request.headers.get("accept", ""), route.rt)
        if response.status_code < 400:  # fieldValidation=Warn's findings, one header each
            for warning in getattr(request.state, "field_warnings", ()):
                response.headers.append("Warning", warning_header(warning))
        self.requests.append(RecordedRequest(
            verb=verb, resource=resource,
            namespace=route.namespace if route else None,
            name=route.name if route else None,
            subresource=route.subresource if route else None,
            query=query, status=response.status_code, method=method, path=path,
            user_agent=request.headers.get("user-agent", ""),
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
        if verb == "delete" and route.name is None:
            return "deletecollection"
        allowed = (
            (route.name is None and verb == "create")
            or (route.name is not None and route.subresource is None and verb != "create")
            or (route.subresource == "eviction" and verb == "create")
            or (route.subresource in ("scale", "status", "ephemeralcontainers")
                and verb in ("update", "patch"))
        )
        if not allowed:
            raise ApiError(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource")
        return verb

    def _non_resource(self, path: str, method: str, accept: str = "") -> Response:
        path = path.rstrip("/") or "/"
        if method != "GET":
            raise ApiError(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource")
        if path == "/version":
            return self._json(SERVER_VERSION)
        if path.startswith("/openapi/"):
            if path == "/openapi/v2" and wants_v2_protobuf(accept):
                return Response(v2_protobuf(self._group_versions),
                                media_type=V2_PROTOBUF_ANSWER)
            document = served(path, self._group_versions)
            if document is not None:
                return self._json(document)
        if path in ("/healthz", "/livez", "/readyz"):
            return Response(b"ok", media_type="text/plain")
        if path == "/api":
            return self._json({
                "kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": self.url.removeprefix("http://")}],
            })
        if path == "/apis":
            return self._json({"kind": "APIGroupList", "apiVersion": "v1",
                               "groups": self._api_groups()})
        if path.startswith("/apis/") and path.count("/") == 2:
            group = next((g for g in self._api_groups() if g["name"] == path[6:]), None)
            if group is not None:
                return self._json({"kind": "APIGroup", "apiVersion": "v1", **group})
        if path == "/api/v1":
            return self._json(self._resource_list("v1"))
        group_version = path.removeprefix("/apis/")
        if path.startswith("/apis/") and "/" in group_version \
                and group_version in self._group_versions:
            return self._json(self._resource_list(group_version))
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _api_groups(self) -> ObjList:
        """Each group with its versions, the storage (preferred) version first."""
        versions: dict[str, list[str]] = {}
        for gv, types in self._group_versions.items():
            if "/" in gv:
                group, version = gv.split("/")
                preferred = any(rt.custom and self._types.get(rt.key) == rt for rt in types)
                listed = versions.setdefault(group, [])
                listed.insert(0, version) if preferred else listed.append(version)
        groups: ObjList = []
        pairs = [(group, version) for group, listed in versions.items() for version in listed]
        for group in discovery_order(pairs):  # the aggregator's order, kubectl's priority
            refs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions[group]]
            groups.append({"name": group, "versions": refs, "preferredVersion": refs[0]})
        return groups

    def _resource_list(self, group_version: str) -> Obj:
        resources: ObjList = []
        for rt in self._group_versions[group_version]:
            entry: Obj = {"name": rt.plural, "singularName": rt.singular,
                          "namespaced": rt.namespaced, "kind": rt.kind,
                          "verbs": ["create", "delete", "deletecollection", "get", "list",
                                    "patch", "update", "watch"]}
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

    async def _body(self, request: Request, rt: ResourceType, verb: str = "") -> Any:
        raw = await request.body()
        if is_protobuf(request.headers.get("content-type", "")):
            return decode_body(raw, rt)
        if not raw.strip():
            return None
        if verb in ("create", "update") and \
                media_type(request.headers.get("content-type", "")) == YAML:
            try:
                return yaml.safe_load(raw)
            except yaml.YAMLError as exc:
                raise BadRequest(f"the request body is not valid YAML: {exc}") from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if verb in ("create", "update"):  # the decoder cannot read a kind: rest.go
                raise BadRequest(unrecognized_body(rt, raw)) from None  # transformDecodeError
            raise BadRequest(f"the request body is not valid JSON: {exc}") from None

    async def _serve(self, request: Request, route: _Route, verb: str,
                     query: Mapping[str, str]) -> Response:
        await self._take_faults(verb, route)
        # dryRun=All (store.DRY_RUN): this request's writes run every layer, store nothing.
        DRY_RUN.set(query.get("dryRun") == "All" and verb in _WRITES)
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
                return self._json(self._scale(rt, _load(rec)))
            if _wants_table(request.headers.get("accept", "")):
                rv = _metadata(_load(rec)).get("resourceVersion")
                return self._json(_table(rt, [_load(rec)], {"resourceVersion": rv},
                                         query.get("includeObject", "")))
            return self._raw(_raw_with_kind(rt, rec))
        content_type = request.headers.get("content-type", "application/json")
        content_type = content_type.split(";")[0].strip().lower()
        body = await (_apply_body(request) if content_type == APPLY_PATCH
                      else self._body(request, rt, verb))
        if rt.custom and verb in ("create", "update") and sub in (None, "status") \
                and isinstance(body, dict) and self.crd_schema_layers:
            check_type_meta(rt, body)  # crd_schema/type_meta.py
        if verb == "deletecollection":
            options = body if isinstance(body, dict) else {}
            return self._json(delete_collection(
                self, rt, route.namespace, query.get("labelSelector", ""),
                query.get("fieldSelector", ""), options))
        # Field validation (field_validation.py): after decoding, before the store's
        # defaulting and validation; None when switched off or not a checked write.
        fields = field_check(rt, verb, sub, query, self._crd_schema(rt)) \
            if self.field_validation else None
        if fields is not None:
            request.state.field_warnings = fields.warnings
            raw = await request.body()
            if content_type == APPLY_PATCH:
                fields.apply_body(raw, body, ns, name or "")
            elif verb == "patch":
                fields.patch_body(raw, _patch_types(rt).get(content_type, ""))
            elif content_type in ("application/json", "", YAML) and isinstance(body, dict):
                body = fields.body(raw, yaml_body=content_type == YAML)
        if verb == "delete":
            assert name is not None
            with self._lock:
                gone, deleted = self._delete(rt, ns, name, body if isinstance(body, dict) else {})
            if rt.return_deleted_object or not deleted:  # not deleted: finalizers hold it
                return self._raw(_raw_with_kind(rt, gone))
            details = {**_details(rt, name), "uid": _metadata(_load(gone)).get("uid")}
            return self._json({"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Success", "details": details})
        if verb == "patch":
            assert name is not None
            kinds = _patch_types(rt)
            kind = kinds.get(content_type)
            if kind is None:
                raise ApiError(415, "UnsupportedMediaType",
                               f"the body of the request was in an unknown format - accepted "
                               f"media types include: {', '.join(kinds)}")
            with self._lock:
                if kind == "apply" and sub != "scale":
                    rec, created = self._apply(rt, ns, name, body, query.get("fieldManager", ""),
                                               query.get("force") in _TRUE, sub)
                    return self._raw(self._served(rt, rec), 201 if created else 200)
                if sub == "scale":
                    return self._json(self._patch_scale(rt, ns, name, kind, body))
                rec = self._patch(rt, ns, name, kind, body, sub, _manager(request, query),
                                  fields=fields)
                return self._raw(self._served(rt, rec))
        if content_type not in ("application/json", "", PROTOBUF, YAML):
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
                return self._json(self._update_scale(rt, ns, name, body))
            rec, created = self._update(rt, ns, name, body, sub, _manager(request, query))
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
        if prefers_protobuf(accept):  # each item's encoding cached (protobuf_lists.py)
            encoded = encode_list(rt, meta, recs)
            if encoded is not None:
                return Response(encoded, media_type=PROTOBUF)
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
        control: Callable[[Obj], bytes] = _json_line
        media = "application/json"
        if _wants_table(accept):
            encode = self._table_event_encoder(rt, query.get("includeObject", ""))
        elif prefers_protobuf(accept) and serves_protobuf(rt):
            # Frames from each record's cached encoding (protobuf_lists.py), shared with
            # lists and every other watcher; bookmarks and errors encoded as they come.
            encode, media = partial(encode_watch_event, rt), WATCH_PROTOBUF
            control = _protobuf_frame
        else:
            encode = partial(self._event_line, rt)
        if rt.custom:  # a custom object as read: its schema's defaults (crd_schema/)
            line = encode
            encode = lambda etype, rec: line(etype, self._fresh(rt, [rec])[0])  # noqa: E731
        stream = self._watch_stream(
            watcher, encode, control, since_rv, timeout,
            bookmarks=query.get("allowWatchBookmarks") in _TRUE,
            initial_events=query.get("sendInitialEvents") in _TRUE,
        )
        return StreamingResponse(stream, media_type=media,
                                 headers={"Cache-Control": "no-cache, private"})

    def _open_watch(self, watcher: _Watcher, since_rv: int, initial_events: bool
                    ) -> Obj | None:
        """Queue the initial or replayed events and register the watch, atomically with
        respect to writes; returns a 410 Status instead when `since_rv` is too old."""
        coll = self._collections[watcher.rt.key]
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
            watcher.closed = self._closing or self.watches_end_at_once
            coll.watchers.add(watcher)
            self._changed.notify_all()
        return None

    @staticmethod
    def _event_line(rt: ResourceType, etype: bytes, rec: _Rec) -> bytes:
        return b"".join((b'{"type":"', etype, b'","object":', _raw_with_kind(rt, rec),
                         b"}\n"))

    @staticmethod
    def _bookmark(rt: ResourceType, rv: int, initial_end: bool = False) -> Obj:
        meta: Obj = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"type": "BOOKMARK", "object": {
            "kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}}

    def _next_bookmark(self, now: float, deadline: float) -> float | None:
        """When a quiet watch gets its next bookmark, as the API server's cacheWatcher
        schedules it (nextBookmarkTime, k8s.io/apiserver/pkg/storage/cacher): every
        `bookmark_interval` (the cacher's bookmarkFrequency, a minute), and 2 s before the
        watch's timeout, so a client resuming after it starts from a fresh resourceVersion;
        none once that moment has passed."""
        at = min(now + self.bookmark_interval, deadline - PRE_TIMEOUT_BOOKMARK_SECONDS)
        return None if at < now else at

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
                            control: Callable[[Obj], bytes], since_rv: int, timeout: float, *,
                            bookmarks: bool, initial_events: bool) -> AsyncIterator[bytes]:
        """Stream events (`encode`; bookmarks and errors: `control`) until timeout, server
        stop or client disconnect.

        The watch registers here, when streaming starts, so the `finally` that
        unregisters it always runs.
        """
        rt = watcher.rt
        expired = self._open_watch(watcher, since_rv, initial_events)
        if expired is not None:
            yield control({"type": "ERROR", "object": expired})
            return
        loop = watcher.loop
        deadline = loop.time() + timeout
        next_bookmark = self._next_bookmark(loop.time(), deadline)
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
                    yield control(self._bookmark(rt, rv_now, initial_end=True))
                    initial_end = False
                if batch:
                    continue
                if closed or loop.time() >= deadline:
                    return
                if bookmark_due:
                    # Every event up to rv_now has been drained, so this bookmark is exact.
                    yield control(self._bookmark(rt, rv_now))
                    bookmark_due = False
                    next_bookmark = self._next_bookmark(loop.time(), deadline)
                wait = deadline - loop.time()
                if bookmarks and next_bookmark is not None:
                    wait = min(wait, next_bookmark - loop.time())
                try:
                    await asyncio.wait_for(watcher.wakeup.wait(), max(wait, 0.0))
                except TimeoutError:
                    bookmark_due = (bookmarks and next_bookmark is not None
                                    and loop.time() >= next_bookmark)
        finally:
            with self._lock:
                coll = self._collections.get(rt.key)  # None: its CRD was deleted
                if coll is not None:
                    coll.watchers.discard(watcher)
                self._changed.notify_all()
