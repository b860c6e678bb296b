"""Subresources and what a controller would compute: `/scale`, `/eviction` and the
PodDisruptionBudgets evictions honour (a budget's status is computed when it is read)."""

from __future__ import annotations

import bisect
import logging
from typing import Any

import orjson

from kube_elevator.fakes.kube_api.decode_types import (
    cannot_handle,
    decode_error,
    go_json,
    patch_refusal,
)
from kube_elevator.fakes.kube_api.errors import ApiError, BadRequest, Conflict, Invalid
from kube_elevator.fakes.kube_api.objects import _DUMP, RecList, _load, _metadata, _raw_with_kind, _Rec
from kube_elevator.fakes.kube_api.patch import (
    JsonPatchError,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)
from kube_elevator.fakes.kube_api.policy import (
    PDB_MULTIPLE,
    PDB_VIOLATION,
    _ignores_budgets,
    _selector_empty,
    _selector_matches,
    eviction_blocked_by,
    pdb_status,
)
from kube_elevator.fakes.kube_api.resources import RESOURCES, Obj, ObjList, ResourceType
from kube_elevator.fakes.kube_api.store import KubeStore
from kube_elevator.tasks.core.selectors import format_label_selector

log = logging.getLogger(__name__)


def _dig(obj: Any, path: str) -> Any:
    """The value at a CRD JSON path such as `.spec.replicas` (None when absent)."""
    cur = obj
    for part in path.strip(".").split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def _put(obj: Obj, path: str, value: Any) -> Obj:
    """A copy of `obj` (copied along `path` only) with `value` at `path`."""
    head, _, rest = path.strip(".").partition(".")
    if not rest:
        return {**obj, head: value}
    inner = obj.get(head)
    return {**obj, head: _put(inner if isinstance(inner, dict) else {}, rest, value)}


class KubeSubresources(KubeStore):
    """`/scale`, `/eviction` and the budgets, over the store's operations."""

    @staticmethod
    def _scale(rt: ResourceType, workload: Obj) -> Obj:
        """The autoscaling/v1 Scale of a Deployment, StatefulSet, ReplicaSet, or of a custom
        resource at the paths its CRD's `scale` subresource names."""
        meta = _metadata(workload)
        spec_path, status_path, selector_path = rt.scale_paths
        if rt.custom:
            selector = _dig(workload, selector_path) if selector_path else None
            selector = selector if isinstance(selector, str) else ""
        else:
            selector = format_label_selector((workload.get("spec") or {}).get("selector"))
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                              "creationTimestamp") if k in meta},
            "spec": {"replicas": _dig(workload, spec_path) or 0},
            "status": {"replicas": _dig(workload, status_path) or 0, "selector": selector},
        }

    def _update_scale(self, rt: ResourceType, ns: str, name: str, scale: Obj) -> Obj:
        old = _load(self._get(rt, ns, name))
        if (wrong_type := decode_error("autoscaling/v1", "Scale", scale)) is not None:
            # the body decodes as an autoscaling/v1 Scale first (decode_types.py)
            raise BadRequest(cannot_handle("Scale", "v1", scale) + wrong_type)
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
        new = _put(old, rt.scale_paths[0], replicas)
        return self._scale(rt, _load(self._write(rt, (ns, name), old, new)))

    def _patch_scale(self, rt: ResourceType, ns: str, name: str, kind: str, patch: Any) -> Obj:
        current = self._scale(rt, _load(self._get(rt, ns, name)))
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
        # the patched Scale is decoded as a main resource's is (patch.go's patchers)
        if (refusal := patch_refusal("autoscaling/v1", "Scale", kind, patch, patched)):
            raise refusal
        if kind == "strategic":  # converted into the struct: an integral float is an int
            patched = orjson.loads(go_json(patched))
        return self._update_scale(rt, ns, name, patched)

    def _evict(self, ns: str, name: str, body: Obj) -> Obj:
        rt = RESOURCES["pods"]
        # the body decodes as a policy/v1 Eviction first, as a create's does (create.go);
        # policy/v1beta1's Eviction has the same fields
        if (wrong_type := decode_error("policy/v1", "Eviction", body)) is not None:
            raise BadRequest(cannot_handle("Eviction", "v1", body) + wrong_type)
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
