"""`/openapi/v3` and `/openapi/v2`: enough of the API server's OpenAPI for clients to validate.

kubectl validates what it creates before sending it (`--validate`, on by default). kubectl
1.27-1.33 (the one here is 1.32) first reads `/openapi/v3`, the index of one document per
group-version, and asks the document of the object's group-version whether the PATCH operation
of its kind takes the `fieldValidation` query parameter (`QueryParamVerifierV3`); if it does, it
leaves validation to the server (`?fieldValidation=Strict` on the create). When `/openapi/v3`
answers 404 it asks `/openapi/v2` the same question, in protobuf only
(`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`; client-go has no JSON
fallback), and with neither it fails: `failed to download openapi`.

So each document here lists, for every resource the fake serves (custom resources included),
its paths with their operations, each tagged with `x-kubernetes-group-version-kind` and
`x-kubernetes-action` and taking `fieldValidation`, `dryRun` and `fieldManager` as the real
server's do, and a schema per kind that names its group-version-kind and top-level fields. `/openapi/v2`
is served in gnostic's protobuf (what client-go asks for: its paths, operations, parameters and
extensions) and in JSON (with the schemas too). A built-in kind's schema is complete, every
field from the `kubernetes` client's models (openapi_schemas.py), the same fields the server's
field validation accepts (field_validation.py); a custom resource's names its top level only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import yaml

from kube_elevator.fakes.kube_api.openapi_schemas import kind_definitions, kind_model
from kube_elevator.fakes.kube_api.protobuf_wire import _length
from kube_elevator.fakes.kube_api.resources import Obj, ResourceType

V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2"
# kube-openapi's answer to `...spec.v2@v1.0+protobuf` (client-go's Accept): Go's mime parser
# refuses the `@`, so the server names it with a dot.
V2_PROTOBUF_ANSWER = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

_QUERY_PARAMETERS = ("fieldValidation", "dryRun", "fieldManager", "pretty")
_ACTIONS = (("get", "get"), ("put", "put"), ("patch", "patch"), ("delete", "delete"))


def _gvk(rt: ResourceType) -> Obj:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def schema_name(rt: ResourceType) -> str:
    """`io.k8s.api.core.v1.Node`, as the real server names built-ins (custom resources: the
    reversed group, `com.example.v1.Widget`, as for CRDs)."""
    if not rt.group or "." not in rt.group or rt.group.endswith(".k8s.io"):
        group = (rt.group.removesuffix(".k8s.io") or "core")
        return f"io.k8s.api.{group}.{rt.version}.{rt.kind}"
    return ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind])


def _schema(rt: ResourceType, v3: bool) -> Obj:
    ref = "#/components/schemas/" if v3 else "#/definitions/"
    model = kind_model(rt)
    if model is not None:  # a built-in kind: every field, from the client's models
        full = dict(kind_definitions(rt, v3)[model])
        full["description"] = f"{rt.kind} (fields from the kubernetes client's {model})"
        full["x-kubernetes-group-version-kind"] = [_gvk(rt)]
        return full
    return {
        "type": "object",
        "description": f"{rt.kind} (the fake API server's schema: top-level fields only)",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"} if v3 else {"$ref": ref + "ObjectMeta"},
            "spec": {"type": "object"},
            "status": {"type": "object"},
        },
        "x-kubernetes-group-version-kind": [_gvk(rt)],
    }


def _parameters(v3: bool) -> list[Obj]:
    return [{"name": name, "in": "query", "uniqueItems": True,
             **({"schema": {"type": "string"}} if v3 else {"type": "string"})}
            for name in _QUERY_PARAMETERS]


def _operation(rt: ResourceType, action: str, v3: bool) -> Obj:
    return {"operationId": f"{action}{rt.kind}", "parameters": _parameters(v3),
            "responses": {"200": {"description": "OK"}},
            "x-kubernetes-action": action, "x-kubernetes-group-version-kind": _gvk(rt)}


def _paths(rt: ResourceType, v3: bool) -> dict[str, Obj]:
    prefix = f"/apis/{rt.group}/{rt.version}" if rt.group else "/api/v1"
    collection = (f"{prefix}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced
                  else f"{prefix}/{rt.plural}")
    paths = {
        collection: {"get": _operation(rt, "list", v3), "post": _operation(rt, "post", v3)},
        f"{collection}/{{name}}": {verb: _operation(rt, action, v3) for verb, action in _ACTIONS},
    }
    for sub in rt.subresources:
        if sub in ("status", "scale"):
            paths[f"{collection}/{{name}}/{sub}"] = {
                verb: _operation(rt, action, v3) for verb, action in _ACTIONS[:3]}
    return paths


def _document(types: Iterable[ResourceType], v3: bool) -> Obj:
    types = list(types)
    paths: dict[str, Obj] = {}
    schemas: dict[str, Obj] = {"ObjectMeta": {"type": "object"}}
    for rt in types:
        paths.update(_paths(rt, v3))
        schemas.update(kind_definitions(rt, v3))
        schemas[schema_name(rt)] = _schema(rt, v3)
    info = {"title": "Kubernetes (kube-elevator's fake API server)", "version": "v1.32.0"}
    if v3:
        return {"openapi": "3.0.0", "info": info, "paths": paths,
                "components": {"schemas": schemas}}
    return {"swagger": "2.0", "info": info, "paths": paths, "definitions": schemas}


def _url_path(group_version: str) -> str:
    return f"api/{group_version}" if "/" not in group_version else f"apis/{group_version}"


def v3_index(group_versions: Mapping[str, list[ResourceType]]) -> Obj:
    """`GET /openapi/v3`: each group-version's document URL, with a hash of its content (the
    real server's cache key; clients send it back as `?hash=`)."""
    paths = {}
    for group_version, types in sorted(group_versions.items()):
        digest = hashlib.sha512(orjson.dumps(_document(types, v3=True))).hexdigest()[:32].upper()
        url = _url_path(group_version)
        paths[url] = {"serverRelativeURL": f"/openapi/v3/{url}?hash={digest}"}
    return {"paths": paths}


def v3_document(group_versions: Mapping[str, list[ResourceType]], path: str) -> Obj | None:
    """`GET /openapi/v3/api/v1`, `/openapi/v3/apis/apps/v1`: None for an unknown one."""
    for group_version, types in group_versions.items():
        if path == f"/openapi/v3/{_url_path(group_version)}":
            return _document(types, v3=True)
    return None


def v2_document(group_versions: Mapping[str, list[ResourceType]]) -> Obj:
    """`GET /openapi/v2` (JSON): every group-version in one Swagger 2.0 document."""
    return _document((rt for types in group_versions.values() for rt in types), v3=False)


def wants_v2_protobuf(accept: str) -> bool:
    """client-go's OpenAPISchema asks protobuf and nothing else."""
    return V2_PROTOBUF in accept and "json" not in accept and "*/*" not in accept


# gnostic's openapi_v2 messages (github.com/google/gnostic openapiv2/OpenAPIv2.proto): the
# field numbers of what is written here; every field written is a string or a message.
_PATH_ITEM_OPERATIONS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}


def _text(number: int, value: str) -> bytes:
    return _length(number, value.encode())


def _named_any(name: str, value: Any) -> bytes:
    """NamedAny{name = 1, value = 2: Any{yaml = 2}}: how gnostic carries an extension."""
    return _text(1, name) + _length(2, _text(2, yaml.safe_dump(value, sort_keys=True)))


def _operation_v2(operation: Obj) -> bytes:
    out = _text(5, operation["operationId"])  # operation_id
    for parameter in operation["parameters"]:
        query = _text(2, parameter["in"]) + _text(4, parameter["name"]) \
            + _text(6, parameter["type"])  # QueryParameterSubSchema in, name, type
        # ParametersItem.parameter = 1 > Parameter.non_body_parameter = 2
        #   > NonBodyParameter.query_parameter_sub_schema = 3
        out += _length(8, _length(1, _length(2, _length(3, query))))
    for name in ("x-kubernetes-action", "x-kubernetes-group-version-kind"):
        out += _length(13, _named_any(name, operation[name]))  # vendor_extension
    return out


def v2_protobuf(group_versions: Mapping[str, list[ResourceType]]) -> bytes:
    """`/openapi/v2` as client-go asks it: a gnostic Document with the paths and their
    operations (parameters and extensions; not the schemas, which kubectl reads only to
    validate on its own a kind whose PATCH takes no `fieldValidation`)."""
    document = v2_document(group_versions)
    paths = b""
    for path, item in document["paths"].items():
        operations = b"".join(_length(_PATH_ITEM_OPERATIONS[verb], _operation_v2(operation))
                              for verb, operation in item.items())
        paths += _length(2, _text(1, path) + _length(2, operations))  # NamedPathItem
    info = _text(1, document["info"]["title"]) + _text(2, document["info"]["version"])
    return _text(1, document["swagger"]) + _length(2, info) + _length(8, paths)


def served(path: str, group_versions: Mapping[str, list[ResourceType]]) -> Any:
    """The document `path` names (None when it names none), for JSON."""
    if path == "/openapi/v3":
        return v3_index(group_versions)
    if path == "/openapi/v2":
        return v2_document(group_versions)
    return v3_document(group_versions, path)
