"""`deletecollection`: DELETE on a collection URL, with label and field selectors.

As the API server's generic registry does it (k8s.io/apiserver pkg/registry/generic/registry/
store.go `DeleteCollection`): list what the selectors match in the namespace of the URL (every
namespace on a cluster-wide URL), delete each as a DELETE of it would (finalizers hold an object,
which then only gets its `deletionTimestamp`; each deletion is a watch event of its own), and
answer the list of what was deleted (`<Kind>List`, each item as the delete left it).
"""

from __future__ import annotations

from kube_elevator.fakes.kube_api.errors import NotFound
from kube_elevator.fakes.kube_api.objects import _load, _metadata
from kube_elevator.fakes.kube_api.resources import Obj, ObjList, ResourceType
from kube_elevator.fakes.kube_api.store import KubeStore


def delete_collection(store: KubeStore, rt: ResourceType, namespace: str | None,
                      label_selector: str, field_selector: str, options: Obj) -> Obj:
    """Delete every object of `rt` the selectors match; returns the `<Kind>List` of them.

    The caller does not hold the store's lock: each deletion takes it, as the server deletes
    one object at a time (a write in between may add an object the list did not see)."""
    labels, fields = store._selectors(rt, label_selector, field_selector)
    with store._lock:
        recs, _, _, _ = store._list(rt, namespace, labels, fields, 0, None)
    items: ObjList = []
    for rec in recs:
        name = _metadata(_load(rec)).get("name") or ""
        with store._lock:
            try:
                gone, _ = store._delete(rt, rec.namespace, name, options)
            except NotFound:
                continue  # deleted meanwhile, as the server skips it (IsNotFound)
            items.append({"kind": rt.kind, "apiVersion": rt.api_version, **_load(gone)})
        # `_load` gives a fresh dict each time: the stored record is not touched.
    with store._lock:
        rv = store._rv
    return {"kind": rt.list_kind, "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(rv)}, "items": items}


__all__ = ["delete_collection"]
