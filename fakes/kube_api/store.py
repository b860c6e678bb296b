"""The in-memory store: objects, resourceVersions, conflicts, subresources and evictions."""

from __future__ import annotations

import bisect
import logging
import random
import threading
import uuid
from pathlib import Path
from typing import Any, cast

import orjson
import yaml

from kube_elevator.fakes.faults import FaultInjector
from kube_elevator.fakes.kube_api.defaulting import pod_spec_defaulted
from kube_elevator.fakes.kube_api.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Invalid,
    NotFound,
)
from kube_elevator.fakes.kube_api.objects import (
    _DUMP,
    _NAME_CHARS,
    RecList,
    _add_custom_tables,
    _check_name,
    _Collection,
    _decode_continue,
    _encode_continue,
    _Event,
    _load,
    _make_rec,
    _metadata,
    _now,
    _raw_with_kind,
    _Rec,
    _rec_matches,
    _rfc3339,
    _strip_kind,
    _with_kind,
)
from kube_elevator.fakes.kube_api.patch import (
    JsonPatchError,
    _copy,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)
from kube_elevator.fakes.kube_api.policy import (
    PDB_MULTIPLE,
    PDB_VIOLATION,
    RecordedRequest,
    _check_pdb,
    _Fault,
    _ignores_budgets,
    _selector_empty,
    _selector_matches,
    eviction_blocked_by,
    pdb_status,
)
from kube_elevator.fakes.kube_api.resources import (
    RESOURCES,
    SCALABLE_PLURALS,
    Key,
    Obj,
    ObjList,
    ResourceType,
    custom_resource_type,
)
from kube_elevator.tasks.core.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    format_label_selector,
    parse_field_selector,
    parse_label_selector,
)

log = logging.getLogger(__name__)

EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this response "
    "to retrieve the remainder of the results. Continuing with the provided token results in an "
    "inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list.")

# generateName's suffixes come from a generator of the server's own: a server thread drawing
# from the `random` module's shared one moves its state under whatever else the embedding
# process runs (Hypothesis warns when it moves during a test's draws).
_NAMES = random.Random()

class KubeStore:
    """The store behind the fake API; `FakeKubeApi.__init__` sets its state up."""

    host: str
    port: int
    history_size: int
    bookmark_interval: float
    requests: list[RecordedRequest]
    _lock: threading.RLock
    _changed: threading.Condition
    _rv: int
    _collections: dict[str, _Collection]
    _types: dict[str, ResourceType]
    _by_path: dict[tuple[str, str], ResourceType]
    _group_versions: dict[str, list[ResourceType]]
    _faults: list[_Fault]
    faults: FaultInjector
    _eviction_blocked: set[Key]
    _closing: bool  # set while stopping: watches opened now end at once
    watches_end_at_once: bool  # every watch ends once it has sent what it owes

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
                return self._update_scale(rt, ns, name, body)
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
                return self._patch_scale(rt, ns, name, kind, patch)
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
                name = prefix + "".join(_NAMES.choices(_NAME_CHARS, k=5))
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
            if "spec" in obj:
                obj["spec"] = pod_spec_defaulted(obj["spec"])
            status = obj.get("status")
            status = dict(status) if isinstance(status, dict) else {}
            status.setdefault("phase", "Pending")
            obj["status"] = status
        elif rt.plural in SCALABLE_PLURALS:
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
            if list_rv < coll.floor:
                # As after etcd compacted past the list's revision: the API server's words.
                raise ApiError(410, "Expired", EXPIRED_CONTINUE)
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
    def _scale(workload: Obj) -> Obj:
        """A Deployment's, StatefulSet's or ReplicaSet's autoscaling/v1 Scale."""
        meta = _metadata(workload)
        spec = workload.get("spec") or {}
        status = workload.get("status") or {}
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                              "creationTimestamp") if k in meta},
            "spec": {"replicas": spec.get("replicas", 0)},
            "status": {"replicas": status.get("replicas", 0),
                       "selector": format_label_selector(spec.get("selector"))},
        }

    def _update_scale(self, rt: ResourceType, ns: str, name: str, scale: Obj) -> Obj:
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

    def _patch_scale(self, rt: ResourceType, ns: str, name: str, kind: str, patch: Any) -> Obj:
        current = self._scale(_load(self._get(rt, ns, name)))
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
        return self._update_scale(rt, ns, name, patched)

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
        blocked = eviction_blocked_by(pdb, self._selected_pods(ns, spec.get("selector")), pod)
        if blocked is not None:
            desired, current = blocked
            name = _metadata(pdb).get("name")
            raise ApiError(429, "TooManyRequests", PDB_VIOLATION, {"causes": [{
                "reason": "DisruptionBudget",
                "message": f"The disruption budget {name} needs {desired} healthy pods and "
                           f"has {current} currently"}]})
