"""The store's calls into the CRD schema layers: a mixin between the subresources and the CRD
side (`CrdStore`), so the store's write and read paths each make one call."""

from __future__ import annotations

import orjson

from kube_elevator.fakes.kube_api.crd_schema.field_errors import FieldError, invalid
from kube_elevator.fakes.kube_api.crd_schema.layers import (
    VersionSchema,
    admitted,
    crd_refusal,
    read_defaulted,
    version_schemas,
)
from kube_elevator.fakes.kube_api.objects import _DUMP, RecList, _load
from kube_elevator.fakes.kube_api.resources import RESOURCES, Obj, ResourceType
from kube_elevator.fakes.kube_api.subresources import KubeSubresources

_CRDS = RESOURCES["customresourcedefinitions"].plural


_MAX_INT32 = 2**31 - 1


def scale_spec_errors(rt: ResourceType, obj: Obj) -> list[FieldError]:
    """ValidateScaleSpec (pkg/registry/customresource/validator.go): the replicas at the scale
    subresource's specReplicasPath, when set, are an int32 that is not negative."""
    path = rt.scale_paths[0]
    value: object = obj
    for part in path.strip(".").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None or isinstance(value, bool) or not isinstance(value, int):
        return []
    if value < 0:
        return [FieldError(path, "FieldValueInvalid", value, "should be a non-negative integer")]
    if value > _MAX_INT32:
        return [FieldError(path, "FieldValueInvalid", value,
                           f"should be less than or equal to {_MAX_INT32}")]
    return []


class CrdSchemaLayers(KubeSubresources):
    """Enforces the stored CRDs' schemas on custom objects (see `crd_schema`)."""

    # The switch: False stores custom objects as sent and CRDs whatever their schemas.
    crd_schema_layers: bool = True

    def _schema_of(self, rt: ResourceType) -> VersionSchema | None:
        """The schema of `rt`'s version in its stored CRD (cached per CRD resourceVersion)."""
        rec = self._collections[_CRDS].objects.get(("", f"{rt.plural}.{rt.group}"))
        if rec is None:
            return None
        # Records are immutable bytes whose hash Python keeps: one lookup per write.
        cache: dict[bytes, dict[str, VersionSchema]] = \
            self.__dict__.setdefault("_crd_schema_cache", {})
        schemas = cache.get(rec.raw)
        if schemas is None:
            if len(cache) > 64:
                cache.clear()
            schemas = cache[rec.raw] = version_schemas(_load(rec))
        return schemas.get(rt.version) or next(iter(schemas.values()), None)

    def _crd_schema(self, rt: ResourceType) -> Obj | None:
        """A custom resource's `openAPIV3Schema` for field validation (None: a built-in kind,
        no schema, or the layers switched off)."""
        if not rt.custom or not self.crd_schema_layers:
            return None
        with self._lock:
            vs = self._schema_of(rt)
        return vs.schema if vs is not None else None

    def _crd_refused(self, crd: Obj) -> None:
        """Raise the 422 apiextensions answers a CRD whose schemas are not accepted."""
        if self.crd_schema_layers:
            refusal = crd_refusal(crd)
            if refusal is not None:
                raise refusal

    def _custom_admitted(self, rt: ResourceType, name: str, old: Obj | None, new: Obj) -> Obj:
        """A custom object as its schema lets it be stored (pruned, defaulted), or the 422."""
        if not self.crd_schema_layers:
            return new
        vs = self._schema_of(rt)
        stored = new if vs is None else admitted(vs, rt.kind, rt.group, name, new, old)
        if "scale" in rt.subresources and (errs := scale_spec_errors(rt, stored)):
            raise invalid(rt.kind, rt.group, name, errs)
        return stored

    def _fresh(self, rt: ResourceType, recs: RecList) -> RecList:
        """Custom objects as read: defaulted by their schema as it is now."""
        recs = super()._fresh(rt, recs)
        if not rt.custom or not recs or not self.crd_schema_layers:
            return recs
        with self._lock:
            vs = self._schema_of(rt)
        if vs is None or not vs.defaults:
            return recs
        fresh: RecList = []
        for rec in recs:
            obj = _load(rec)
            served = read_defaulted(vs, obj)
            fresh.append(rec if served == obj else
                         rec._replace(raw=orjson.dumps(served, option=_DUMP)))
        return fresh
