"""Unknown fields dropped from a custom object, as apiextensions does on every write
(k8s.io/apiextensions-apiserver pkg/apiserver/schema/pruning/algorithm.go `PruneWithOptions`):
a field its schema does not specify goes, unless `x-kubernetes-preserve-unknown-fields` holds
there; `apiVersion`, `kind` and `metadata` of the root and of every embedded resource
(`x-kubernetes-embedded-resource`) stay (metadata is the ObjectMeta code's)."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]
_KEPT = ("apiVersion", "kind", "metadata")


def pruned(value: Any, schema: Schema | None, *, root: bool = False) -> Any:
    """`value` without the fields `schema` does not allow (new containers; `value` is not
    modified)."""
    if schema is None:
        return value
    if isinstance(value, dict):
        return _object(value, schema, root or bool(schema.get("x-kubernetes-embedded-resource")))
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [pruned(item, items) for item in value]
        return value
    return value


def _object(value: dict[str, Any], schema: Schema, resource: bool) -> dict[str, Any]:
    props: Schema = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    out: dict[str, Any] = {}
    for name, item in value.items():
        if resource and name in _KEPT:
            out[name] = item
        elif name in props:
            out[name] = pruned(item, props[name] if isinstance(props[name], dict) else None)
        elif isinstance(extra, dict):
            out[name] = pruned(item, extra)
        elif preserve or extra is True:
            out[name] = item
    return out


# ObjectMeta's JSON fields (k8s.io/apimachinery pkg/apis/meta/v1 types.go): what the
# objectmeta coercion keeps of a custom object's metadata, and of each embedded resource's.
OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields"})


def meta_pruned(value: Any, schema: Schema | None, *, root: bool = False) -> Any:
    """`value` with the unknown fields of its metadata dropped, at the root and in every
    embedded resource (apiextensions pkg/apiserver/schema/objectmeta coerce.go, with
    dropInvalidFields, as the CR decoder runs it beside the pruning)."""
    if schema is None:
        return value
    if isinstance(value, list):
        items = schema.get("items")
        return [meta_pruned(item, items) for item in value] if isinstance(items, dict) \
            else value
    if not isinstance(value, dict):
        return value
    props: Schema = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    out: dict[str, Any] = {}
    resource = root or bool(schema.get("x-kubernetes-embedded-resource"))
    for name, item in value.items():
        if resource and name == "metadata" and isinstance(item, dict):
            out[name] = {k: v for k, v in item.items() if k in OBJECT_META_FIELDS}
        elif name in props and isinstance(props[name], dict):
            out[name] = meta_pruned(item, props[name])
        elif isinstance(extra, dict):
            out[name] = meta_pruned(item, extra)
        else:
            out[name] = item
    return out


def unknown_field_paths(value: Any, schema: Schema | None, path: str = "",
                        root: bool = True) -> list[str]:
    """The paths `pruned` would drop (`spec.foo`, `spec.items[0].bar`): what a server lists
    in its `unknown field` warnings and Strict errors."""
    found: list[str] = []
    if schema is None:
        return found
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            found += unknown_field_paths(item, schema["items"], f"{path}[{i}]", False)
    if not isinstance(value, dict):
        return found
    resource = root or bool(schema.get("x-kubernetes-embedded-resource"))
    props: Schema = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for name, item in value.items():
        here = f"{path}.{name}" if path else name
        if resource and name in _KEPT:
            continue
        if name in props and isinstance(props[name], dict):
            found += unknown_field_paths(item, props[name], here, False)
        elif isinstance(extra, dict):
            found += unknown_field_paths(item, extra, here, False)
        elif not (schema.get("x-kubernetes-preserve-unknown-fields") or extra is True):
            found.append(here)
    return found


__all__ = ["OBJECT_META_FIELDS", "meta_pruned", "pruned", "unknown_field_paths"]
