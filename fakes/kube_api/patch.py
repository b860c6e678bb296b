"""JSON merge patch, strategic merge patch and JSON patch, as the API server applies them."""

from __future__ import annotations

import logging
from typing import Any, cast

import orjson

from kube_elevator.fakes.kube_api.resources import Obj, ResourceType

log = logging.getLogger(__name__)


def _copy(value: Any) -> Any:
    """Deep copy of JSON data; an orjson round trip is several times faster than deepcopy."""
    return orjson.loads(orjson.dumps(value))


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns new containers, never mutates `target`."""
    if not isinstance(patch, dict):
        return patch
    result: Obj = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


# List fields merged by key under a strategic merge patch (`patchMergeKey` in the Go
# types).  Keyed by field name alone, which is unambiguous for the types served here.
SMP_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "ownerReferences": "uid",
    "addresses": "type",
    "podIPs": "ip",
    "hostIPs": "ip",
    "hostAliases": "ip",
}
# Primitive lists with `patchStrategy:"merge"`: a patch adds to them instead of replacing.
SMP_MERGE_PRIMITIVES = frozenset({"finalizers"})


def _smp_clean(value: Any) -> Any:
    """A patch value placed where nothing existed: drop directives and nulls."""
    if isinstance(value, dict):
        return strategic_merge_patch({}, value)
    if isinstance(value, list):
        return [_smp_clean(v) for v in value
                if not (isinstance(v, dict) and v.get("$patch") in ("delete", "replace")
                        and len(v) == 1)]
    return value


def _smp_list(fld: str, original: list[Any], patch: list[Any]) -> list[Any]:
    """Merge one list field: by merge key, as a set of primitives, or replace it."""
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [_smp_clean(v) for v in patch
                if not (isinstance(v, dict) and v.get("$patch") == "replace")]
    if fld in SMP_MERGE_PRIMITIVES:
        merged = list(original)
        merged.extend(v for v in patch if v not in merged)
        return merged
    key = SMP_MERGE_KEYS.get(fld)
    if key is None:
        return [_smp_clean(v) for v in patch]
    merged = list(original)
    for item in patch:
        if not isinstance(item, dict):
            merged.append(item)
            continue
        wanted = item.get(key)
        pos = next((i for i, cur in enumerate(merged)
                    if isinstance(cur, dict) and cur.get(key) == wanted), None)
        if item.get("$patch") == "delete":
            merged = [cur for cur in merged
                      if not (isinstance(cur, dict) and cur.get(key) == wanted)]
        elif pos is None:
            merged.append(_smp_clean(item))
        else:
            merged[pos] = strategic_merge_patch(merged[pos], item)
    return merged


def strategic_merge_patch(original: Obj, patch: Obj) -> Obj:
    """Kubernetes strategic merge patch over plain dicts; returns new containers.

    Lists named in `SMP_MERGE_KEYS` merge element-wise by key, `finalizers` merge as a
    set, every other list (node `spec.taints`, tolerations, args ...) is replaced whole.
    Supports null deletion and the `$patch: delete|replace`, `$retainKeys`,
    `$deleteFromPrimitiveList/<f>` and (ignored) `$setElementOrder/<f>` directives.
    """
    if patch.get("$patch") == "replace":
        return cast(Obj, _smp_clean({k: v for k, v in patch.items() if k != "$patch"}))
    result: Obj = dict(original)
    deletions: list[tuple[str, list[Any]]] = []
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            deletions.append((key.split("/", 1)[1], value if isinstance(value, list) else []))
            continue
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            if value.get("$patch") == "delete":
                result.pop(key, None)
                continue
            current = result.get(key)
            result[key] = strategic_merge_patch(current if isinstance(current, dict) else {},
                                                value)
        elif isinstance(value, list):
            current = result.get(key)
            result[key] = _smp_list(key, current if isinstance(current, list) else [], value)
        else:
            result[key] = value
    for key, remove in deletions:
        current = result.get(key)
        if isinstance(current, list):
            result[key] = [v for v in current if v not in remove]
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


class JsonPatchError(ValueError):
    """A JSON patch operation that does not apply (the server answers 422)."""


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise JsonPatchError(f"invalid JSON pointer {path!r}")
    if not path:
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(token: str, size: int, *, insert: bool = False) -> int:
    if token == "-" and insert:
        return size
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise JsonPatchError(f"invalid array index {token!r}")
    idx = int(token)
    if idx > size or (idx == size and not insert):
        raise JsonPatchError(f"array index {idx} out of bounds")
    return idx


def _walk(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for token in tokens:
        if isinstance(cur, dict):
            if token not in cur:
                raise JsonPatchError(f"path element {token!r} does not exist")
            cur = cur[token]
        elif isinstance(cur, list):
            cur = cur[_index(token, len(cur))]
        else:
            raise JsonPatchError(f"cannot descend into {type(cur).__name__}")
    return cur


def _jp_add(doc: Any, tokens: list[str], value: Any, *, replace: bool = False) -> Any:
    if not tokens:
        return value
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise JsonPatchError(f"replace: path element {last!r} does not exist")
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(last, len(parent))] = value
        else:
            parent.insert(_index(last, len(parent), insert=True), value)
    else:
        raise JsonPatchError(f"cannot add to {type(parent).__name__}")
    return doc


def _jp_remove(doc: Any, tokens: list[str]) -> tuple[Any, Any]:
    if not tokens:
        raise JsonPatchError("cannot remove the whole document")
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise JsonPatchError(f"remove: path element {last!r} does not exist")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(last, len(parent)))
    raise JsonPatchError(f"cannot remove from {type(parent).__name__}")


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch; mutates and returns `doc`, so pass a private copy."""
    if not isinstance(operations, list):
        raise JsonPatchError("a JSON patch must be an array of operations")
    for op in operations:
        if not isinstance(op, dict):
            raise JsonPatchError("a JSON patch operation must be an object")
        kind = op.get("op")
        tokens = _pointer(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise JsonPatchError(f"{kind}: missing value")
        if kind == "add":
            doc = _jp_add(doc, tokens, _copy(op["value"]))
        elif kind == "replace":
            doc = _jp_add(doc, tokens, _copy(op["value"]), replace=True)
        elif kind == "remove":
            doc, _ = _jp_remove(doc, tokens)
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from"))
            if kind == "move":
                doc, value = _jp_remove(doc, source)
            else:
                value = _copy(_walk(doc, source))
            doc = _jp_add(doc, tokens, value)
        elif kind == "test":
            if _walk(doc, tokens) != op["value"]:
                raise JsonPatchError(f"test failed at {op.get('path')!r}")
        else:
            raise JsonPatchError(f"unknown operation {kind!r}")
    return doc


_PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
APPLY_PATCH = "application/apply-patch+yaml"
# Custom resources have no Go struct with patch strategies: the server refuses the kind.
_CUSTOM_PATCH_TYPES = {k: v for k, v in _PATCH_TYPES.items() if v != "strategic"}


def _patch_types(rt: ResourceType) -> dict[str, str]:
    """The patch content types the server accepts for `rt`, mapped to the patch kind."""
    return _CUSTOM_PATCH_TYPES if rt.custom else _PATCH_TYPES


# Store ------------------------------------------------------------------------------
