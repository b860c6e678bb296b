"""CustomResourceDefinitions: stored as objects, served as resources, status set, cascaded.

A CRD reaches the store by any road (`POST /apis/apiextensions.k8s.io/v1/
customresourcedefinitions` from kubectl or a client, `install_crd`, `register_custom_resource`)
and the write serves its resource: discovery, CRUD, list/watch, `/status`, `/scale`, as a
real API server's apiextensions controllers would, at once (Established without delay).
Names another CRD of the same group already uses, or a built-in kind's plural, are not
accepted (NamesAccepted False) and not served; one plural in two groups is two resources.
Deleting a CRD deletes its objects (their finalizers are not waited for) and ends
their watches.  Schemas are enforced by the layers of `crd_schema`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import yaml

from kube_elevator.fakes.kube_api.crd_schema.store_hooks import CrdSchemaLayers
from kube_elevator.fakes.kube_api.errors import Invalid
from kube_elevator.fakes.kube_api.objects import (
    _DUMP,
    _Collection,
    _Event,
    _load,
    _metadata,
    _now,
)
from kube_elevator.fakes.kube_api.resources import (
    RESOURCES,
    Obj,
    ResourceType,
    custom_resource_type,
)

log = logging.getLogger(__name__)

CRDS = RESOURCES["customresourcedefinitions"]


def crd_types(crd: Obj) -> list[ResourceType]:
    """The ResourceTypes a CRD serves, its storage version first; raises `Invalid` (422)
    when the spec is not one the API server would accept."""
    spec: Obj = crd["spec"] if isinstance(crd.get("spec"), dict) else {}
    name = _metadata(crd).get("name") or ""
    names: Obj = spec["names"] if isinstance(spec.get("names"), dict) else {}
    group, plural, kind = spec.get("group") or "", names.get("plural") or "", names.get("kind")
    if not group or not plural or not kind:
        raise Invalid(CRDS, name, "spec", "FieldValueRequired",
                      "Required value: spec.group, spec.names.plural and spec.names.kind")
    if name != f"{plural}.{group}":
        raise Invalid(CRDS, name, "metadata.name", "FieldValueInvalid",
                      f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group')
    versions = [v for v in spec.get("versions") or () if isinstance(v, dict) and v.get("name")]
    if not versions:
        raise Invalid(CRDS, name, "spec.versions", "FieldValueRequired",
                      "Required value: must have exactly one version marked as storage version")
    # Field selectors (selectableFields, CustomResourceFieldSelectors GA in 1.32): the fake's
    # field tables are one per plural, so every version selects on the fields any version names.
    selectable = tuple(dict.fromkeys(
        field["jsonPath"] for v in versions for field in v.get("selectableFields") or ()
        if isinstance(field, dict) and isinstance(field.get("jsonPath"), str)))
    types: list[ResourceType] = []
    for version in sorted(versions, key=lambda v: not v.get("storage", False)):
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        scale = subresources.get("scale")
        try:
            types.append(custom_resource_type(
                group, version["name"], plural, kind,
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular") or "",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status="status" in subresources,
                scale=(scale.get("specReplicasPath") or "", scale.get("statusReplicasPath") or "",
                       scale.get("labelSelectorPath") or "") if isinstance(scale, dict) else None,
                selectable=selectable,
            ))
        except ValueError as exc:
            raise Invalid(CRDS, name, "spec.group", "FieldValueInvalid", str(exc)) from None
    return types


def _crd_document(rt: ResourceType) -> Obj:
    """The CRD `register_custom_resource` stores for `rt` (a schema that keeps any field)."""
    subresources: Obj = {}
    if "status" in rt.subresources:
        subresources["status"] = {}
    if "scale" in rt.subresources:
        spec_path, status_path, selector_path = rt.scale_paths
        subresources["scale"] = {"specReplicasPath": spec_path,
                                 "statusReplicasPath": status_path}
        if selector_path:
            subresources["scale"]["labelSelectorPath"] = selector_path
    names: Obj = {"plural": rt.plural, "singular": rt.singular, "kind": rt.kind,
                  "listKind": rt.list_kind}
    if rt.short_names:
        names["shortNames"] = list(rt.short_names)
    if rt.categories:
        names["categories"] = list(rt.categories)
    return {
        "apiVersion": CRDS.api_version, "kind": CRDS.kind,
        "metadata": {"name": f"{rt.plural}.{rt.group}"},
        "spec": {"group": rt.group, "names": names,
                 "scope": "Namespaced" if rt.namespaced else "Cluster",
                 "versions": [{"name": rt.version, "served": True, "storage": True,
                               "subresources": subresources,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


class CrdStore(CrdSchemaLayers):
    """Serves what the stored CustomResourceDefinitions define."""

    def register_custom_resource(self, group: str, version: str, plural: str, kind: str, *,
                                 namespaced: bool = True, singular: str = "",
                                 short_names: tuple[str, ...] = (),
                                 categories: tuple[str, ...] = (),
                                 status: bool = True,
                                 scale: tuple[str, str, str] | None = None) -> ResourceType:
        """Serve a custom resource by storing the CRD that defines it: CRUD, list, watch,
        `/status` (and `/scale` at the given specReplicasPath, statusReplicasPath,
        labelSelectorPath), discovery.

        Registering the same type again is a no-op; the in-process methods take its plural
        (`create("watermarkpodautoscalers", ...)`), or `plural.group` when another group
        serves the same plural.
        """
        rt = custom_resource_type(group, version, plural, kind, namespaced=namespaced,
                                  singular=singular, short_names=short_names,
                                  categories=categories, status=status, scale=scale)
        with self._lock:
            if self._types.get(rt.key) == rt:
                return rt
            return self._install(_crd_document(rt))[0]

    def install_crd(self, manifest: Obj | str | Path) -> list[ResourceType]:
        """Store and serve each CustomResourceDefinition of a dict or a YAML file (one or
        more documents, non-CRD documents skipped), as `kubectl apply` would."""
        documents: list[Any]
        if isinstance(manifest, dict):
            documents = [manifest]
        else:
            documents = list(yaml.safe_load_all(Path(manifest).read_text()))
        served: list[ResourceType] = []
        with self._lock:
            for document in documents:
                if isinstance(document, dict) and document.get("kind") == CRDS.kind:
                    served.extend(self._install(document))
        if not served:
            raise ValueError("no served CustomResourceDefinition version found")
        return served

    def _install(self, crd: Obj) -> list[ResourceType]:
        """Create or update one CRD; raises ValueError when its names are not accepted."""
        name = _metadata(crd).get("name") or ""
        coll = self._collections[CRDS.plural]
        old = coll.objects.get(("", name))
        body = {**crd, "metadata": {k: v for k, v in _metadata(crd).items()
                                    if k != "resourceVersion"}}
        if old is None:
            rec = self._create(CRDS, "", body)
        else:
            current = _load(old)
            new = {**current, "spec": body.get("spec"),
                   "metadata": {**_metadata(current), **body["metadata"]}}
            rec = self._write(CRDS, ("", name), current, new)
        stored = _load(rec)
        accepted: Obj = next((c for c in (stored.get("status") or {}).get("conditions") or ()
                         if c.get("type") == "NamesAccepted"), {})
        if accepted.get("status") != "True":
            if old is None:
                self._delete(CRDS, "", name, {})
            raise ValueError(accepted.get("message") or f"CRD {name} is not served")
        return crd_types(stored)

    # Hooks from the store's writes -------------------------------------------------

    def _crd_written(self, crd: Obj) -> None:
        types = crd_types(crd)
        self._crd_refused(crd)  # a schema apiextensions does not accept (crd_schema/)
        storage = types[0] if types else None
        name = _metadata(crd).get("name") or ""
        reason, conflict = self._names_conflict(storage) if storage is not None else ("", "")
        if storage is not None and not conflict:
            self._serve_crd(storage, types)
        crd["status"] = self._crd_status(name, crd, storage, reason, conflict)

    def _names_conflict(self, rt: ResourceType) -> tuple[str, str]:
        """Why `rt`'s names are not accepted: (reason, message), ("", "") when they are.
        apiextensions' naming controller (apiextensions-apiserver pkg/controller/status/
        naming_controller.go `calculateNamesAndConditions`) compares a CRD's names with the
        other CRDs *of its group* only: `widgets.a.example.com` and `widgets.b.example.com`
        are both served. The fake also refuses a plural a built-in kind has (its per-kind
        rules key on the plural); a real server would serve `pods.x.example.com` too."""
        for known in self._types.values():
            if not known.custom:
                if known.plural == rt.plural:
                    return "PluralConflict", (f"resource plural {rt.plural!r} is already "
                                              f"served as {known.kind} ({known.api_version})")
                continue
            if known.group != rt.group or known.plural == rt.plural:
                continue  # another group's, or this CRD's own (an update)
            # The resource names; not yet kind and listKind (KindConflict, ListKindConflict).
            resources = {known.plural, known.singular, *known.short_names}
            for reason, requested in (
                    ("PluralConflict", rt.plural), ("SingularConflict", rt.singular),
                    *(("ShortNamesConflict", short) for short in rt.short_names)):
                if requested in resources:  # equalToAcceptedOrFresh's words
                    return reason, f'"{requested}" is already in use'
        return "", ""

    def _serve_crd(self, storage: ResourceType, types: list[ResourceType]) -> None:
        """Route every served version of a CRD's resource to one collection."""
        self._unroute(storage.plural, storage.group)
        self._types[storage.key] = storage
        coll = self._collections.get(storage.key)
        if coll is None:
            self._collections[storage.key] = _Collection(storage, self.history_size)
        else:
            coll.rt = storage
        for rt in types:
            self._by_path[(rt.api_version, rt.plural)] = rt
            self._group_versions.setdefault(rt.api_version, []).append(rt)

    def _unroute(self, plural: str, group: str) -> None:
        for key, rt in list(self._by_path.items()):
            if rt.plural == plural and rt.group == group and rt.custom:
                del self._by_path[key]
                listed = [t for t in self._group_versions.get(key[0], ())
                          if not (t.plural == plural and t.custom)]
                if listed:
                    self._group_versions[key[0]] = listed
                else:
                    self._group_versions.pop(key[0], None)

    def _crd_status(self, name: str, crd: Obj, storage: ResourceType | None,
                    reason: str, conflict: str) -> Obj:
        spec = crd.get("spec") or {}
        names = dict(spec.get("names") or {})
        before = self._collections[CRDS.plural].objects.get(("", name))
        old_conditions = {c.get("type"): c for c in
                          ((_load(before).get("status") or {}).get("conditions") or ())} \
            if before is not None else {}

        def condition(kind: str, ok: bool, reason: str, message: str) -> Obj:
            status = "True" if ok else "False"
            old = old_conditions.get(kind) or {}
            since = old.get("lastTransitionTime") if old.get("status") == status else None
            return {"type": kind, "status": status, "lastTransitionTime": since or _now(),
                    "reason": reason, "message": message}

        accepted = not conflict
        conditions = [
            condition("NamesAccepted", accepted, "NoConflicts" if accepted else reason,
                      "no conflicts found" if accepted else conflict),
            condition("Established", accepted,
                      "InitialNamesAccepted" if accepted else "NotAccepted",
                      "the initial names have been accepted" if accepted
                      else "not all names are accepted"),
        ]
        names.setdefault("singular", names.get("kind", "").lower())
        names.setdefault("listKind", f"{names.get('kind', '')}List")
        return {"conditions": conditions,
                "acceptedNames": names if accepted else {"plural": "", "kind": ""},
                "storedVersions": [storage.version] if storage is not None else []}

    def _crd_removed(self, crd: Obj) -> None:
        types = crd_types(crd)
        if not types:
            return
        plural, group, store_key = types[0].plural, types[0].group, types[0].key
        if store_key not in self._types:
            return  # a CRD that was never served (its names were not accepted)
        coll = self._collections.pop(store_key)
        for key in coll.sorted_keys():
            rec = coll.objects[key]
            self._rv += 1
            gone = _load(rec)
            gone["metadata"] = {**_metadata(gone), "resourceVersion": str(self._rv)}
            coll.record(_Event(self._rv, "DELETED",
                               rec._replace(raw=orjson.dumps(gone, option=_DUMP)), rec))
        for watcher in coll.watchers:
            watcher.closed = True
            watcher.wake()
        del self._types[store_key]
        self._unroute(plural, group)
