"""The in-process methods: the simulator's and tests' way into the store, with HTTP's semantics."""

from __future__ import annotations

import logging
from typing import cast

import orjson

from kube_elevator.fakes.kube_api.crds import CrdStore
from kube_elevator.fakes.kube_api.objects import _Collection, _load, _metadata
from kube_elevator.fakes.kube_api.resources import Obj, ObjList, ResourceType

log = logging.getLogger(__name__)


class KubeAccess(CrdStore):
    """`create/get/list/replace/patch/delete` by plural, under the store's lock."""

    def _collection(self, resource: str) -> _Collection:
        """The collection `resource` names: a plural (`pods`, `widgets`) or, as kubectl
        takes it, `plural.group` (`deployments.apps`, `widgets.a.example.com`), which is how
        to name one of two custom resources that share a plural."""
        coll = self._collections.get(resource)
        if coll is not None:
            return coll
        found = [c for c in self._collections.values()
                 if resource in (c.rt.plural, c.rt.qualified)]
        if len(found) == 1:
            return found[0]
        if found:
            raise ValueError(f"resource {resource!r} is ambiguous: served as "
                             f"{', '.join(sorted(c.rt.qualified for c in found))}; "
                             "name one as plural.group")
        raise ValueError(f"unknown resource {resource!r}; "
                         f"served: {sorted(self._collections)}")

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
            rec = self._create(rt, ns, body, seeding=True)
            return cast(Obj, orjson.loads(self._served(rt, rec)))

    def get(self, resource: str, name: str, namespace: str | None = None) -> Obj:
        """Fetch one object (a copy); raises `NotFound`, a `KeyError`, when absent."""
        rt, sub = self._split(resource)
        ns = self._ns(rt, namespace)
        with self._lock:
            rec = self._get(rt, ns, name)
            if sub == "scale":
                return self._scale(rt, _load(rec))
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
            rec, _ = self._update(rt, ns, name, body, sub, seeding=True)
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
            rec = self._patch(rt, ns, name, kind, patch, sub, seeding=True)
            return cast(Obj, orjson.loads(self._served(rt, rec)))

    def delete(self, resource: str, name: str, namespace: str | None = None) -> None:
        """Delete an object; raises `NotFound` (a `KeyError`) when absent."""
        rt = self._collection(resource).rt
        with self._lock:
            self._delete(rt, self._ns(rt, namespace), name, {})
