"""The built-in kinds' fields, read from the `kubernetes` client's generated models.

Every model class of the official client (`kubernetes.client.models.V1Pod`, ...) carries
`openapi_types` (attribute -> type) and `attribute_map` (attribute -> JSON name), generated from
Kubernetes' own OpenAPI; together they give each field's JSON name and type, recursively. That
is the schema the API server's typed decoder holds (its Go structs), so it is what field
validation (`field_validation.py`) and the served `/openapi` schemas (`openapi_schemas.py`) read.
Nothing here is a hand-written field list. Built lazily, one model at a time, and cached: the
models are already imported with the client, so building costs nothing until a write needs it.
"""

from __future__ import annotations

import ast
import logging
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import kubernetes.client.models as models

log = logging.getLogger(__name__)

# (apiVersion, kind) -> the client's model of it.
KIND_MODELS: dict[tuple[str, str], str] = {
    ("v1", "Pod"): "V1Pod",
    ("v1", "Node"): "V1Node",
    ("v1", "Event"): "CoreV1Event",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Secret"): "V1Secret",
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "PersistentVolume"): "V1PersistentVolume",
    ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
    ("events.k8s.io/v1", "Event"): "EventsV1Event",
    ("coordination.k8s.io/v1", "Lease"): "V1Lease",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("apps/v1", "StatefulSet"): "V1StatefulSet",
    ("apps/v1", "ReplicaSet"): "V1ReplicaSet",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): "V1CustomResourceDefinition",
}

_LIST = re.compile(r"^List\[(.+)\]$")
_MAP = re.compile(r"^Dict\[str, (.+)\]$")
SCALARS = {"str": "string", "int": "integer", "bool": "boolean", "float": "number",
           "datetime": "string", "date": "string", "bytes": "string"}


@dataclass(frozen=True)
class FieldType:
    """One field's type: a `struct` (a model: `model` names it), a `list` or `map` of `item`,
    a `scalar` (`model` is the client's name: str, int, ...), or `any` (the client's `object`:
    IntOrString, RawExtension, FieldsV1, JSON, whose content the decoder does not check)."""

    kind: str
    model: str = ""
    item: FieldType | None = None


ANY = FieldType("any")


@cache
def _exports() -> frozenset[str]:
    """The models the client has (its lazy-import table, else whatever it has imported)."""
    table = getattr(models, "_exports", None)
    return frozenset(table) if isinstance(table, dict) else frozenset(dir(models))


@cache
def parse_type(spec: str) -> FieldType:
    """The client's type string (`List[V1Container]`, `Dict[str, str]`, `V1ObjectMeta`, `int`)."""
    if m := _LIST.match(spec):
        return FieldType("list", item=parse_type(m.group(1)))
    if m := _MAP.match(spec):
        return FieldType("map", item=parse_type(m.group(1)))
    if spec in SCALARS:
        return FieldType("scalar", spec)
    if spec == "object" or spec not in _exports():
        return ANY
    return FieldType("struct", spec)


def _tables(model: str) -> tuple[dict[str, str], dict[str, str]]:
    """A model's `openapi_types` and `attribute_map`. Read from its module's source when it has
    not been imported yet: the client imports each (pydantic) model lazily, at ~30 ms apiece,
    and a Pod reaches a hundred of them; the two tables are plain literals in the source."""
    loaded = vars(models).get(model)
    module = getattr(models, "_exports", {}).get(model)
    if loaded is None and isinstance(module, str) and models.__file__:
        path = Path(models.__file__).parent / (module.lstrip(".") + ".py")
        try:
            source = path.read_text()
            tables = [ast.literal_eval(m.group(1)) for name in _TABLES
                      if (m := re.search(name + _TABLE_LITERAL, source, re.S))]
        except (OSError, ValueError, SyntaxError):
            tables = []
        if len(tables) == 2:
            return tables[0], tables[1]
        log.debug("field schema: %s read by importing it", model)
    cls = loaded if loaded is not None else getattr(models, model)
    return cls.openapi_types, cls.attribute_map


_TABLES = ("openapi_types", "attribute_map")
_TABLE_LITERAL = r": ClassVar\[Dict\[str, str\]\] = (\{.*?\})\n"


@cache
def struct_fields(model: str) -> dict[str, FieldType]:
    """JSON name -> type of each field of one model."""
    types, names = _tables(model)
    return {names[attr]: parse_type(spec) for attr, spec in types.items()}


def kind_type(api_version: str, kind: str) -> FieldType | None:
    """The type of a served built-in kind; None for a kind without one (custom resources)."""
    model = KIND_MODELS.get((api_version, kind))
    return FieldType("struct", model) if model is not None else None


__all__ = ["ANY", "KIND_MODELS", "SCALARS", "FieldType", "kind_type", "parse_type",
           "struct_fields"]
