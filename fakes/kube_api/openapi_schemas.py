"""The kinds' OpenAPI schemas, from the same models field validation reads (field_schema.py).

So `/openapi/v2` and `/openapi/v3` describe exactly the fields the server accepts: a client that
validates on its own (kubectl against a server without `fieldValidation`, `kubectl explain`)
agrees with the server. A built-in kind's schema keeps the name the real server gives it
(`io.k8s.api.core.v1.Pod`, tagged with its group-version-kind); the types under it are named by
the client's model (`V1PodSpec`), which the documents only use as `$ref` targets.
"""

from __future__ import annotations

from functools import cache

from kube_elevator.fakes.kube_api.field_schema import FieldType, kind_type, struct_fields
from kube_elevator.fakes.kube_api.resources import Obj, ResourceType

_SCALAR_SCHEMAS: dict[str, Obj] = {
    "str": {"type": "string"}, "int": {"type": "integer", "format": "int64"},
    "bool": {"type": "boolean"}, "float": {"type": "number", "format": "double"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"}, "bytes": {"type": "string", "format": "byte"},
}


def _schema_of(ftype: FieldType, ref: str, out: dict[str, Obj]) -> Obj:
    """The schema of one field's type, adding the structs it names to `out`."""
    if ftype.kind == "struct":
        _add_struct(ftype.model, ref, out)
        return {"$ref": ref + ftype.model}
    if ftype.kind in ("list", "map") and ftype.item is not None:
        item = _schema_of(ftype.item, ref, out)
        return {"type": "array", "items": item} if ftype.kind == "list" else \
            {"type": "object", "additionalProperties": item}
    if ftype.kind == "scalar":
        return dict(_SCALAR_SCHEMAS[ftype.model])
    return {}  # IntOrString, RawExtension, FieldsV1, JSON: any value


def _add_struct(model: str, ref: str, out: dict[str, Obj]) -> None:
    if model in out:
        return
    out[model] = {}  # placeholder: recursive types (JSONSchemaProps) stop here
    properties = {name: _schema_of(ftype, ref, out)
                  for name, ftype in struct_fields(model).items()}
    out[model] = {"type": "object", "properties": properties}


@cache
def kind_definitions(rt: ResourceType, v3: bool) -> dict[str, Obj]:
    """The definitions `rt`'s schema needs, keyed by their names in `definitions` (v2) or
    `components/schemas` (v3); empty for a kind without a model (custom resources)."""
    ftype = kind_type(rt.api_version, rt.kind)
    if ftype is None:
        return {}
    ref = "#/components/schemas/" if v3 else "#/definitions/"
    out: dict[str, Obj] = {}
    _add_struct(ftype.model, ref, out)
    return out


def kind_model(rt: ResourceType) -> str | None:
    """The name of `rt`'s own model among its definitions."""
    ftype = kind_type(rt.api_version, rt.kind)
    return ftype.model if ftype is not None else None


__all__ = ["kind_definitions", "kind_model"]
