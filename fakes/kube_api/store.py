"""The in-memory store: objects, resourceVersions, conflicts, finalizers, server-side apply."""

from __future__ import annotations

import bisect
import logging
import random
import threading
import uuid
from contextvars import ContextVar
from typing import Any

import orjson

from kube_elevator.fakes.faults import FaultInjector
from kube_elevator.fakes.kube_api.apply import ApplyConflict, apply, track_update
from kube_elevator.fakes.kube_api.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Invalid,
    NotFound,
)
from kube_elevator.fakes.kube_api.field_validation import FieldCheck
from kube_elevator.fakes.kube_api.objects import (
    _DUMP,
    _NAME_CHARS,
    RecList,
    _check_name,
    _Collection,
    _decode_continue,
    _encode_continue,
    _Event,
    _load,
    _make_rec,
    _metadata,
    _now,
    _Rec,
    _rec_matches,
    _rfc3339,
    _strip_kind,
    _with_kind,
    events_both_ways,
)
from kube_elevator.fakes.kube_api.patch import (
    JsonPatchError,
    _copy,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)
from kube_elevator.fakes.kube_api.policy import RecordedRequest, _check_pdb, _Fault
from kube_elevator.fakes.kube_api.resources import (
    SCALABLE_PLURALS,
    Key,
    Obj,
    ResourceType,
)
from kube_elevator.fakes.kube_api.validation.ephemeral import (
    SUBRESOURCE as EPHEMERAL_CONTAINERS,
)
from kube_elevator.fakes.kube_api.validation.ephemeral import with_ephemeral_containers
from kube_elevator.fakes.kube_api.validation.meta_update import (
    resource_invalid,
    unconditional_update_errors,
)
from kube_elevator.fakes.kube_api.write_path import WriteLayers
from kube_elevator.tasks.core.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
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
# Who writes when the in-process methods do (a real server names every writer).
IN_PROCESS_MANAGER = "kube-elevator-fake"

# generateName's suffixes come from a generator of the server's own: a server thread drawing
# from the `random` module's shared one moves its state under whatever else the embedding
# process runs (Hypothesis warns when it moves during a test's draws).
_NAMES = random.Random()


# A created object's zero status as the server serialises it: the fields without omitempty
# (apps/v1 StatefulSetStatus.replicas and availableReplicas, ReplicaSetStatus.replicas).
_CREATED_STATUS: dict[str, Obj] = {"statefulsets": {"replicas": 0, "availableReplicas": 0},
                                   "replicasets": {"replicas": 0}}


def _status_apart(rt: ResourceType, *, create: bool = False) -> bool:
    """Whether a write through the main resource over HTTP leaves status as stored (dropped on
    create): every kind with a `/status` subresource, as the API server's strategies do
    (PrepareForUpdate keeps the old status, PrepareForCreate clears it; a Node keeps what its
    create gives).  A CRD's status is the server's own (`_crd_written`).  The in-process methods
    (the simulator's kubelet and controllers) write both."""
    if "status" not in rt.subresources or rt.plural == "customresourcedefinitions":
        return False
    return not (create and rt.plural == "nodes")


def _without(obj: Obj, *keys: str) -> Obj:
    return {k: v for k, v in obj.items() if k not in keys}


# A request with `dryRun=All` (k8s.io/apiserver registry/generic/registry/dryrun.go): every
# layer runs, nothing is stored. Per request task, so other requests and threads are not.
DRY_RUN: ContextVar[bool] = ContextVar("dry_run", default=False)


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
    layers: WriteLayers  # defaulting, admission defaults, value validation (write_path.py)
    watches_end_at_once: bool  # every watch ends once it has sent what it owes

    # Hooks the CustomResourceDefinition side fills in (crds.py) -------------------------

    def _crd_written(self, crd: Obj) -> None:
        """A CustomResourceDefinition is about to be stored: serve it, set its status."""
        raise NotImplementedError

    def _crd_removed(self, crd: Obj) -> None:
        """A CustomResourceDefinition is gone: stop serving it, drop its objects."""
        raise NotImplementedError

    def _custom_admitted(self, rt: ResourceType, name: str, old: Obj | None, new: Obj) -> Obj:
        """A custom object as its CRD's schema stores it (crd_schema/store_hooks.py)."""
        raise NotImplementedError

    # Store operations (caller holds the lock) -------------------------------------------

    def _selectors(self, rt: ResourceType, label_selector: str,
                   field_selector: str) -> tuple[LabelSelector, FieldSelector]:
        try:
            return (parse_label_selector(label_selector),
                    parse_field_selector(field_selector, rt.fields))
        except SelectorError as exc:
            raise BadRequest(str(exc)) from None

    def _get(self, rt: ResourceType, ns: str, name: str) -> _Rec:
        rec = self._collections[rt.key].objects.get((ns, name))
        if rec is None:
            raise NotFound(rt, name)
        return rec

    def _write(self, rt: ResourceType, key: Key, old: Obj | None, new: Obj, *,
               in_process: bool = False, subresource: str | None = None) -> _Rec:
        """Store `new` with a new resourceVersion and tell the watches.

        `old` is the parsed current object (None on create).  Only `new` itself and its
        metadata are modified (metadata is copied first), so a caller's nested dicts are
        never touched.  Writes that change nothing keep the resourceVersion and send no
        event, as on the real server.  An object being deleted whose last finalizer this
        write removes is deleted by it.  The write layers (defaults, admission, validation)
        run first; `in_process` (the methods the simulator uses) exempts a Pod from the update
        rule, as the control plane's binding and status writes are.
        """
        if rt.custom:  # the CRD schema layers: prune, default, validate (crd_schema/)
            new = self._custom_admitted(rt, key[1], old, new)
        else:  # the built-in kinds' layers: defaults, admission, validation (write_path.py)
            new = self.layers.apply(rt, old, new, in_process=in_process,
                                    subresource=subresource)
        if rt.plural == "poddisruptionbudgets":
            _check_pdb(rt, key[1], new)
        elif rt.plural == "events":
            events_both_ways(rt, new)
        coll = self._collections[rt.key]
        meta = dict(_metadata(new))
        new["metadata"] = meta
        old_rec: _Rec | None = None
        if old is not None:
            old_meta = _metadata(old)
            for fixed in ("uid", "creationTimestamp", "deletionTimestamp",
                          "deletionGracePeriodSeconds"):
                if fixed in old_meta:
                    meta[fixed] = old_meta[fixed]
                else:
                    meta.pop(fixed, None)
            if "deletionTimestamp" in old_meta:
                added = [f for f in meta.get("finalizers") or ()
                         if f not in (old_meta.get("finalizers") or ())]
                if added:
                    raise Invalid(rt, key[1], "metadata.finalizers", "FieldValueForbidden",
                                  "Forbidden: no new finalizers can be added if the object "
                                  f"is being deleted, found new finalizers {added!r}")
            if rt.has_generation:
                generation = old_meta.get("generation", 1)
                if rt.custom:
                    changed = _without(new, "metadata", "status") != \
                        _without(old, "metadata", "status")
                else:
                    changed = new.get("spec") != old.get("spec")
                meta["generation"] = generation + changed
            meta["resourceVersion"] = old_meta.get("resourceVersion")
            old_rec = coll.objects[key]
            if new == old:
                return old_rec
        if DRY_RUN.get():  # dryRun=All: the answer as the write would give it, nothing kept
            if old_rec is None:  # DryRunnableStorage.Create answers the object as prepared
                meta.pop("resourceVersion", None)
            return _make_rec(rt, new)
        if rt.plural == "customresourcedefinitions":
            self._crd_written(new)
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        try:
            rec = _make_rec(rt, new)
        except TypeError as exc:  # in-process bodies may hold what JSON cannot
            raise BadRequest(f"the object is not JSON serialisable: {exc}") from None
        if old_rec is not None and meta.get("deletionTimestamp") and not meta.get("finalizers"):
            coll.remove(key)
            coll.record(_Event(self._rv, "DELETED", rec, old_rec))
            if rt.plural == "customresourcedefinitions":
                self._crd_removed(new)
            return rec
        coll.put(key, rec)
        coll.record(_Event(self._rv, "ADDED" if old_rec is None else "MODIFIED", rec, old_rec))
        return rec

    def _create(self, rt: ResourceType, ns: str, body: Obj, *, seeding: bool = False) -> _Rec:
        """POST semantics; `seeding` (the in-process methods) keeps a custom resource's
        status as given, so a test or the simulator sets an object up in one call."""
        if not isinstance(body.get("metadata", {}), dict):
            raise BadRequest("metadata must be an object")
        obj = _strip_kind(body)
        meta = dict(_metadata(obj))
        obj["metadata"] = meta
        name = meta.get("name") or ""
        coll = self._collections[rt.key]
        if not name:
            prefix = meta.get("generateName") or ""
            if not prefix:
                raise Invalid(rt, "", "metadata.name", "FieldValueRequired",
                              "Required value: name or generateName is required")
            # SimpleNameGenerator: the prefix cut to 58 characters, then 5 random ones.
            while not name or (ns, name) in coll.objects:
                name = prefix[:58] + "".join(_NAMES.choices(_NAME_CHARS, k=5))
            meta["name"] = name
        if not self.layers.validation:  # else the validation layer words it, with the rest
            _check_name(rt, name)
        if rt.namespaced:
            if meta.get("namespace") not in (None, "", ns):
                raise BadRequest("the namespace of the provided object does not match the "
                                 "namespace sent on the request")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        # etcd3 store.go Create refuses a resourceVersion it can parse as a non-zero number
        # (APIObjectVersioner.ObjectResourceVersion); one it cannot parse is dropped.
        given_rv = str(meta.pop("resourceVersion", "") or "")
        if given_rv.isdigit() and int(given_rv) != 0:
            raise ApiError(500, "InternalError", "Internal error occurred: resourceVersion "
                           "should not be set on objects to be created")
        if (ns, name) in coll.objects:
            raise AlreadyExists(rt, name)
        meta["uid"] = meta.get("uid") or str(uuid.uuid4())
        given = meta.get("creationTimestamp")
        meta["creationTimestamp"] = _rfc3339(given) if given else _now()
        for server_set in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(server_set, None)
        if rt.has_generation:
            meta["generation"] = 1
        if _status_apart(rt, create=True) and not seeding:
            # Status is written through /status only: a built-in starts with an empty one
            # (PrepareForCreate), a custom resource with none.
            obj.pop("status", None)
            if not rt.custom:
                obj["status"] = dict(_CREATED_STATUS.get(rt.plural, {}))
        if rt.plural == "pods":
            status = obj.get("status")
            status = dict(status) if isinstance(status, dict) else {}
            status.setdefault("phase", "Pending")
            obj["status"] = status
        elif rt.plural == "namespaces":
            obj["status"] = {"phase": "Active"}
        elif rt.plural in SCALABLE_PLURALS:
            spec = obj.get("spec")
            spec = dict(spec) if isinstance(spec, dict) else {}
            spec.setdefault("replicas", 1)
            obj["spec"] = spec
        return self._write(rt, (ns, name), None, obj, in_process=seeding)

    @staticmethod
    def _kept_apart(rt: ResourceType, old: Obj, new: Obj, subresource: str | None,
                    seeding: bool) -> Obj:
        """`new` as the write may make it: a `/status` write changes only status; on a
        custom resource with a status subresource a main write changes everything else."""
        if subresource == "status":
            return {**old, "status": new.get("status")}
        if subresource == EPHEMERAL_CONTAINERS:
            return with_ephemeral_containers(old, new)
        if _status_apart(rt) and not seeding:
            kept = _without(new, "status")
            if "status" in old:
                kept["status"] = old["status"]
            return kept
        return new

    def _update(self, rt: ResourceType, ns: str, name: str, body: Obj,
                subresource: str | None = None, manager: str = IN_PROCESS_MANAGER, *,
                seeding: bool = False) -> tuple[_Rec, bool]:
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
        coll = self._collections[rt.key]
        old_rec = coll.objects.get((ns, name))
        wanted = meta.get("resourceVersion")
        if old_rec is None:
            if not rt.allow_create_on_update or wanted or subresource:
                raise NotFound(rt, name)
            return self._create(rt, ns, body, seeding=seeding), True
        if not seeding and self.layers.validation and (
                unconditional := unconditional_update_errors(rt, body)):
            raise resource_invalid(rt, name, unconditional)
        old = _load(old_rec)
        if wanted and wanted != _metadata(old).get("resourceVersion"):
            raise Conflict(rt, name)
        new = _strip_kind(body)
        new["metadata"] = {**meta, "namespace": ns} if rt.namespaced else \
            {k: v for k, v in meta.items() if k != "namespace"}
        new = self._kept_apart(rt, old, new, subresource, seeding)
        track_update(old, new, manager, rt.api_version, subresource or "", _now())
        return self._write(rt, (ns, name), old, new, in_process=seeding,
                           subresource=subresource), False

    def _patch(self, rt: ResourceType, ns: str, name: str, kind: str, patch: Any,
               subresource: str | None = None, manager: str = IN_PROCESS_MANAGER, *,
               seeding: bool = False, fields: FieldCheck | None = None) -> _Rec:
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
        if fields is not None:  # field validation of the patched object (field_validation.py)
            patched = fields.patched(patched)
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
        new = self._kept_apart(rt, old, _strip_kind(patched), subresource, seeding)
        track_update(old, new, manager, rt.api_version, subresource or "", _now())
        return self._write(rt, (ns, name), old, new, in_process=seeding,
                           subresource=subresource)

    def _apply(self, rt: ResourceType, ns: str, name: str, config: Any, manager: str,
               force: bool, subresource: str | None = None) -> tuple[_Rec, bool]:
        """Server-side apply (PATCH application/apply-patch+yaml); creates the object when
        it does not exist.  Returns the record and whether it was created."""
        if not manager:
            raise BadRequest("fieldManager is required for apply requests")
        if not isinstance(config, dict) or not isinstance(config.get("metadata", {}), dict):
            raise BadRequest("an apply configuration must be an object")
        meta = _metadata(config)
        if meta.get("name") not in (None, name):
            raise BadRequest(f"the name of the object ({meta.get('name')}) does not match "
                             f"the name on the URL ({name})")
        if rt.namespaced and meta.get("namespace") not in (None, "", ns):
            raise BadRequest("the namespace of the object does not match the namespace on "
                             "the request")
        for field_ in ("apiVersion", "kind"):
            if config.get(field_) != getattr(rt, "api_version" if field_ == "apiVersion"
                                             else "kind"):
                raise BadRequest(f"{field_} must be set to {rt.api_version} {rt.kind} in an "
                                 "apply configuration")
        rec = self._collections[rt.key].objects.get((ns, name))
        old = _load(rec) if rec is not None else None
        wanted = meta.get("resourceVersion")
        if wanted and (old is None or wanted != _metadata(old).get("resourceVersion")):
            raise Conflict(rt, name)
        if old is None and meta.get("uid"):  # patch.go applyPatcher: no create with a uid
            raise Conflict(rt, name, f"uid mismatch: the provided object specified uid "
                                     f"{meta['uid']}, and no existing object was found")
        try:
            merged = apply(old, config, manager, rt.api_version, force=force,
                           subresource=subresource or "",
                           status_is_subresource="status" in rt.subresources, now=_now())
        except ApplyConflict as exc:
            raise ApiError(409, "Conflict", str(exc), {"causes": [
                {"type": "FieldManagerConflict", "message": f"conflict with {who}",
                 "field": path} for who, path in exc.conflicts]}) from None
        merged_meta = dict(_metadata(merged))
        merged_meta["name"] = name
        merged["metadata"] = merged_meta
        if old is None:
            if subresource:
                raise NotFound(rt, name)
            return self._create(rt, ns, merged), True
        return self._write(rt, (ns, name), old, _strip_kind(merged)), False

    def _delete(self, rt: ResourceType, ns: str, name: str, options: Obj) -> tuple[_Rec, bool]:
        """Delete an object; returns its last record and whether it is gone (False: it has
        finalizers, so it only got a `deletionTimestamp` and stays until they are removed)."""
        coll = self._collections[rt.key]
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
        if DRY_RUN.get():  # the object as it is, nothing deleted
            return old_rec, not have.get("finalizers")
        if have.get("finalizers"):
            if have.get("deletionTimestamp"):
                return old_rec, False
            meta = {**have, "deletionTimestamp": _now(), "deletionGracePeriodSeconds": 0}
            new = {**gone, "metadata": meta}
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            rec = _make_rec(rt, new)
            coll.put((ns, name), rec)
            coll.record(_Event(self._rv, "MODIFIED", rec, old_rec))
            return rec, False
        coll.remove((ns, name))
        self._rv += 1
        have["resourceVersion"] = str(self._rv)  # the DELETED event carries a new version
        gone_rec = old_rec._replace(raw=orjson.dumps(gone, option=_DUMP))
        coll.record(_Event(self._rv, "DELETED", gone_rec, old_rec))
        if rt.plural == "customresourcedefinitions":
            self._crd_removed(gone)
        return gone_rec, True

    def _list(self, rt: ResourceType, ns: str | None, labels: LabelSelector,
              fields: FieldSelector, limit: int, token: str | None,
              ) -> tuple[RecList, int, str | None, int | None]:
        """One page: (records, list resourceVersion, continue token, remaining count)."""
        coll = self._collections[rt.key]
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
