"""Defaults of a CRD's schema applied to a custom object, as apiextensions applies them on
create, update and read (k8s.io/apiextensions-apiserver pkg/apiserver/schema/defaulting/
algorithm.go `Default`, and `PruneNonNullableNullsWithoutDefaults`): a property that is
absent, or null where the schema does not allow null, takes its default; the default is then
defaulted inside as well; a null that is not allowed and has no default is dropped."""

from __future__ import annotations

import copy
from typing import Any

Schema = dict[str, Any]


def _filled(value: Any, schema: Any) -> Any:
    """A missing or disallowed-null value replaced by the schema's default (a copy)."""
    if value is None and isinstance(schema, dict) and "default" in schema \
            and not schema.get("nullable"):
        return copy.deepcopy(schema["default"])
    return value


def defaulted(value: Any, schema: Schema | None) -> Any:
    """`value` with its schema's defaults (new containers; `value` is not modified)."""
    if schema is None:
        return value
    if isinstance(value, dict):
        props: Schema = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = dict(value)
        for name, prop in props.items():
            if not isinstance(prop, dict):
                continue
            if name not in out and "default" in prop:
                out[name] = copy.deepcopy(prop["default"])
            elif name in out and out[name] is None and not prop.get("nullable"):
                if "default" in prop:
                    out[name] = copy.deepcopy(prop["default"])
                else:
                    del out[name]  # PruneNonNullableNullsWithoutDefaults
        for name, item in out.items():
            if isinstance(props.get(name), dict):
                out[name] = defaulted(item, props[name])
            elif name not in props and isinstance(extra, dict):
                out[name] = defaulted(_filled(item, extra), extra)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = schema["items"]
        return [defaulted(_filled(item, items), items) for item in value]
    return value


def has_defaults(schema: Any) -> bool:
    """Whether any node of `schema` has a default (else reads skip the defaulting)."""
    if isinstance(schema, dict):
        return "default" in schema or any(has_defaults(v) for v in schema.values())
    if isinstance(schema, list):
        return any(has_defaults(v) for v in schema)
    return False


__all__ = ["defaulted", "has_defaults"]
