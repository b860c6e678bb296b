"""Server-side apply: field sets, `metadata.managedFields`, ownership conflicts and the merge.

A small model of structured-merge-diff (k8s.io/apiserver's fieldmanager), enough for
`kubectl apply --server-side`, lightkube's and kr8s's apply and controllers that apply:
maps are granular, lists are associative by the merge keys the built-in kinds declare
(`patch.SMP_MERGE_KEYS`, `k:{...}` elements), `finalizers` is a set (`v:` elements), every
other list is atomic (a custom resource's lists too: no schema is read).  Objects written
without managedFields keep none until their first apply, whose fields then belong to
`before-first-apply` (as objects that predate server-side apply do on a real server);
after that every write records its manager (the `fieldManager` query parameter, else the
client's user agent up to its first "/").
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from kube_elevator.fakes.kube_api.patch import SMP_MERGE_KEYS, SMP_MERGE_PRIMITIVES, _copy
from kube_elevator.fakes.kube_api.resources import Obj, ObjList

log = logging.getLogger(__name__)

Path = tuple[str, ...]  # "f:spec", "f:containers", 'k:{"name":"a"}', 'v:"x"', "."
BEFORE_FIRST_APPLY = "before-first-apply"
# Never owned: identity and server-set metadata (fieldmanager's reset fields).
_SERVER_META = frozenset({"name", "namespace", "uid", "resourceVersion", "generation",
                          "creationTimestamp", "managedFields", "deletionTimestamp",
                          "deletionGracePeriodSeconds", "selfLink", "generateName"})


class ApplyConflict(Exception):
    """Fields another manager owns with another value; `conflicts` is [(manager, path)]."""

    def __init__(self, conflicts: list[tuple[str, str]]) -> None:
        super().__init__(conflict_message(conflicts))
        self.conflicts = conflicts


def conflict_message(conflicts: list[tuple[str, str]]) -> str:
    """The API server's words (fieldmanager/internal/conflict.go getConflictMessage)."""
    if len(conflicts) == 1:
        manager, path = conflicts[0]
        return f"Apply failed with 1 conflict: conflict with {manager}: {path}"
    lines: list[str] = []
    for manager in sorted({m for m, _ in conflicts}):
        lines.append(f"conflicts with {manager}:")
        lines.extend(f"- {p}" for m, p in conflicts if m == manager)
    return f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)


def _key_of(item: Obj, key: str) -> str:
    return "k:" + orjson.dumps({key: item.get(key)}).decode()


def _walk(value: Any, prefix: Path, out: set[Path], name: str) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _walk(v, (*prefix, f"f:{k}"), out, k)
    elif isinstance(value, list) and name in SMP_MERGE_PRIMITIVES:
        out.update((*prefix, "v:" + orjson.dumps(v).decode()) for v in value)
    elif isinstance(value, list) and name in SMP_MERGE_KEYS and \
            all(isinstance(v, dict) for v in value):
        key = SMP_MERGE_KEYS[name]
        for item in value:
            item_path = (*prefix, _key_of(item, key))
            out.add((*item_path, "."))
            for k, v in item.items():
                _walk(v, (*item_path, f"f:{k}"), out, k)
    else:
        out.add(prefix)


def field_set(obj: Obj, *, status: bool) -> set[Path]:
    """The leaf paths `obj` sets; `status` says whether its status counts (a `/status`
    write owns only status, a main-resource write nothing of it when status is a
    subresource)."""
    out: set[Path] = set()
    for k, v in obj.items():
        if k in ("apiVersion", "kind") or (k == "status") != status:
            continue
        if k == "metadata" and isinstance(v, dict):
            for mk, mv in v.items():
                if mk not in _SERVER_META:
                    _walk(mv, ("f:metadata", f"f:{mk}"), out, mk)
            continue
        _walk(v, (f"f:{k}",), out, k)
    return out


def value_at(obj: Any, path: Path) -> Any:
    """What `obj` holds at `path` (a marker "." or `v:` element: whether it is there)."""
    cur = obj
    for element in path:
        if element == ".":
            return cur is not None
        kind, _, rest = element.partition(":")
        if kind == "f":
            cur = cur.get(rest) if isinstance(cur, dict) else None
        elif kind == "k":
            (key, wanted), = orjson.loads(rest).items()
            cur = next((i for i in cur if isinstance(i, dict) and i.get(key) == wanted), None) \
                if isinstance(cur, list) else None
        else:
            return isinstance(cur, list) and orjson.loads(rest) in cur
        if cur is None:
            return None
    return cur


def path_string(path: Path) -> str:
    """`.spec.containers[name="a"].image`, as structured-merge-diff prints a path."""
    out = ""
    for element in path:
        kind, _, rest = element.partition(":")
        if element == ".":
            continue
        if kind == "f":
            out += "." + rest
        elif kind == "k":
            out += "[" + ",".join(f"{k}={orjson.dumps(v).decode()}"
                                  for k, v in orjson.loads(rest).items()) + "]"
        else:
            out += "[=" + rest + "]"
    return out


def encode_fields(paths: set[Path]) -> Obj:
    """A field set as `fieldsV1` (a tree of `f:`/`k:`/`v:` keys, leaves `{}`)."""
    tree: Obj = {}
    for path in sorted(paths):
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    return tree


def decode_fields(tree: Any, prefix: Path = ()) -> set[Path]:
    """The inverse of `encode_fields`."""
    out: set[Path] = set()
    if not isinstance(tree, dict) or not tree:
        if prefix:
            out.add(prefix)
        return out
    for element, sub in tree.items():
        if element == ".":
            out.add((*prefix, "."))
        else:
            out |= decode_fields(sub, (*prefix, element))
    return out


Managers = dict[tuple[str, str, str], tuple[str, set[Path]]]  # (manager, op, sub) -> ...


def read_managers(meta: Obj) -> Managers:
    managers: Managers = {}
    for entry in meta.get("managedFields") or ():
        if isinstance(entry, dict) and entry.get("manager") is not None:
            key = (str(entry["manager"]), str(entry.get("operation") or "Update"),
                   str(entry.get("subresource") or ""))
            managers[key] = (str(entry.get("apiVersion") or ""),
                             decode_fields(entry.get("fieldsV1")))
    return managers


def write_managers(managers: Managers, now: str) -> ObjList:
    entries: ObjList = []
    for (manager, op, sub), (api_version, paths) in managers.items():
        if not paths:
            continue
        entry: Obj = {"manager": manager, "operation": op, "apiVersion": api_version,
                      "time": now, "fieldsType": "FieldsV1", "fieldsV1": encode_fields(paths)}
        if sub:
            entry["subresource"] = sub
        entries.append(entry)
    return entries


def _print_manager(key: tuple[str, str, str], api_version: str) -> str:
    manager, op, sub = key
    text = orjson.dumps(manager).decode()
    if sub:
        text += f" with subresource {orjson.dumps(sub).decode()}"
    if op == "Update":
        text += f" using {api_version}"
    return text


def _merge(current: Any, applied: Any, name: str) -> Any:
    if isinstance(applied, dict):
        base = dict(current) if isinstance(current, dict) else {}
        for k, v in applied.items():
            base[k] = _merge(base.get(k), v, k)
        return base
    if isinstance(applied, list) and isinstance(current, list):
        if name in SMP_MERGE_PRIMITIVES:
            return current + [v for v in applied if v not in current]
        key = SMP_MERGE_KEYS.get(name)
        if key is not None and all(isinstance(v, dict) for v in (*current, *applied)):
            merged = list(current)
            for item in applied:
                pos = next((i for i, c in enumerate(merged) if c.get(key) == item.get(key)),
                           None)
                if pos is None:
                    merged.append(_copy(item))
                else:
                    merged[pos] = _merge(merged[pos], item, "")
            return merged
    return _copy(applied)


def _remove(obj: Any, path: Path) -> None:
    """Remove what `path` names from `obj` (in place), if it is there."""
    if path and path[-1] == ".":
        path = path[:-1]
    parent = value_at(obj, path[:-1]) if len(path) > 1 else obj
    kind, _, rest = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif kind == "k" and isinstance(parent, list):
        (key, wanted), = orjson.loads(rest).items()
        parent[:] = [i for i in parent if not (isinstance(i, dict) and i.get(key) == wanted)]
    elif kind == "v" and isinstance(parent, list):
        value = orjson.loads(rest)
        parent[:] = [i for i in parent if i != value]


def _owned_below(managers: Managers, path: Path) -> bool:
    stem = path[:-1] if path[-1] == "." else path
    return any(p[:len(stem)] == stem for _, paths in managers.values() for p in paths)


def apply(current: Obj | None, config: Obj, manager: str, api_version: str, *, force: bool,
          subresource: str, status_is_subresource: bool, now: str) -> Obj:
    """The object after `manager` applies `config` to `current` (None: it is created);
    raises `ApplyConflict` unless `force`.  `current` is not modified."""
    status = subresource == "status"
    obj: Obj = _copy(current) if current is not None else {}
    meta: Obj = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    managers = read_managers(meta)
    if current is not None and not managers:
        managers[(BEFORE_FIRST_APPLY, "Update", "")] = (
            api_version, field_set(obj, status=False))
    config_status = None if status_is_subresource or status else config.get("status")
    mine_key = (manager, "Apply", subresource)
    applied = field_set(config, status=status)
    if config_status is not None:
        applied |= field_set({"status": config_status}, status=True)
    conflicts: list[tuple[str, str]] = []
    for key, (their_version, paths) in managers.items():
        if key == mine_key:
            continue
        for path in sorted(paths & applied):
            if value_at(obj, path) != value_at(config, path):
                conflicts.append((_print_manager(key, their_version), path_string(path)))
                if force:
                    paths.discard(path)
    if conflicts and not force:
        raise ApplyConflict(conflicts)
    previous = managers.pop(mine_key, ("", set()))[1]
    body = {k: v for k, v in config.items() if k not in ("apiVersion", "kind")}
    if status:
        body = {"status": body.get("status")} if "status" in body else {}
    elif status_is_subresource:
        body.pop("status", None)
    body_meta = body.get("metadata")
    if isinstance(body_meta, dict):
        body["metadata"] = {k: v for k, v in body_meta.items() if k not in _SERVER_META}
    merged: Obj = _merge(obj, body, "")
    managers[mine_key] = (api_version, applied)
    # Outermost first: an item goes whole before its fields would change its key (removing a
    # key field first left the item behind, with a hash-seed-dependent order).
    for path in sorted(previous - applied, key=lambda p: (len(p), p[-1] != ".")):
        if not _owned_below(managers, path):
            _remove(merged, path)
            _remove_emptied(merged, path, managers)
    merged_meta = dict(merged.get("metadata") or {})
    entries = write_managers(managers, now)
    if entries:
        merged_meta["managedFields"] = entries
    else:  # omitempty: no manager owns anything (apply_test.go RemovesEmptyManagedFields)
        merged_meta.pop("managedFields", None)
    merged["metadata"] = merged_meta
    return merged


def _remove_emptied(obj: Obj, path: Path, managers: Managers) -> None:
    """The lists and maps a removal left empty, up the path, that no manager owns: gone too
    (structured-merge-diff drops what no one owns; apply_test.go RemoveContainerPort)."""
    parent = path[:-1] if path and path[-1] == "." else path
    parent = parent[:-1]
    while parent:
        value = value_at(obj, parent)
        if value not in ([], {}) or _owned_below(managers, parent):
            return
        _remove(obj, parent)
        parent = parent[:-1]


def track_update(old: Obj, new: Obj, manager: str, api_version: str, subresource: str,
                 now: str) -> None:
    """Record a non-apply write of `manager` in `new`'s managedFields (in place): it owns
    what it changed; fields it removed belong to nobody.  Objects without managedFields
    stay without (see the module doc)."""
    meta = new.get("metadata")
    if not isinstance(meta, dict):
        return
    if "managedFields" not in meta or meta["managedFields"] is None:
        old_meta = old.get("metadata") or {}
        if not old_meta.get("managedFields"):
            return
        meta["managedFields"] = old_meta["managedFields"]
    managers = read_managers(meta)
    if not managers:
        meta.pop("managedFields", None)
        return
    status = subresource == "status"
    before, after = field_set(old, status=status), field_set(new, status=status)
    changed = {p for p in after if value_at(old, p) != value_at(new, p)}
    gone = before - after
    for _, paths in managers.values():
        paths -= changed | gone
    key = (manager, "Update", subresource)
    mine = managers.get(key, (api_version, set()))[1]
    managers[key] = (api_version, (mine - gone) | changed)
    meta["managedFields"] = write_managers(managers, now)
