"""Field validation as the API server does it: unknown and duplicate fields, Strict/Warn/Ignore.

The API server decodes a write's body into its kind's Go struct; with `fieldValidation=Strict` or
`Warn` it decodes strictly (k8s.io/apiserver pkg/endpoints/handlers create.go, update.go,
patch.go; sigs.k8s.io/json UnmarshalStrict), collecting `unknown field "<path>"` and
`duplicate field "<path>"` in the order met, each message once, at most 100. Strict answers 400
`strict decoding error: <errors joined by ", ">` (for a create or update prefixed by
`<Kind> in version "<v>" cannot be handled as a <Kind>: `, transformDecodeError in rest.go);
Warn stores the object and sends one `Warning: 299 - "<error>"` header per error; Ignore stores
it silently. In all three the unknown fields are dropped (the struct has nowhere to keep them)
and a duplicated field keeps its last value. A request naming no directive gets Warn (the
default since 1.27, ServerSideFieldValidation GA; the fake reports 1.32); kubectl >= 1.27 sends
Strict.

Patches (patch.go): a merge or strategic merge patch's own duplicates come first, in the
patch's order; then the unknown fields of the patched object, which the server re-encodes as a
map, so in sorted key order. A JSON patch's operations are decoded as {op, path, from, value}:
`json patch unknown field "[0].foo"`, `json patch duplicate field "[1].path"`. YAML bodies
(create, update and server-side apply) report duplicates as go-yaml does:
`yaml: unmarshal errors:\\n  line 10: key "paused" already set in map`. Server-side apply
converts its configuration to the typed schema whatever the directive: an unknown field there
is refused with the server's 500 `failed to create typed patch object (...): .spec.x: field not
declared in schema` (structured-merge-diff; kubernetes issue 122480).

The built-in kinds are checked against their Go structs (field_schema.KIND_MODELS); a custom
resource against its CRD's schema, as apiextensions' decoder does (apiserver.go crdHandler:
the unstructured decoder reports duplicates by their key alone, `duplicate field "hostPort"`,
in document order; then the fields pruning would drop, `unknown field "spec.ports[0].x"`, in
sorted order; a schema that preserves unknown fields there reports none). Test tables:
tests/contract/test_fake_field_validation.py, ported from kubernetes
test/integration/apiserver/field_validation_test.go, and its CRD subtests in tests/replay/.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import yaml

from kube_elevator.fakes.kube_api.crd_schema.pruning import unknown_field_paths
from kube_elevator.fakes.kube_api.decode_types import (
    apply_type_errors,
    cannot_handle,
    decode_error,
    patch_refusal,
)
from kube_elevator.fakes.kube_api.errors import ApiError, BadRequest
from kube_elevator.fakes.kube_api.field_schema import FieldType, kind_type, struct_fields
from kube_elevator.fakes.kube_api.resources import Obj, ResourceType

log = logging.getLogger(__name__)

STRICT, WARN, IGNORE = "Strict", "Warn", "Ignore"
DEFAULT_DIRECTIVE = WARN
_ALLOWED = ("", IGNORE, STRICT, WARN)  # sorted, as the server lists them
MAX_ERRORS = 100  # sigs.k8s.io/json saveStrictError stops collecting here
_JSON_PATCH_OP_FIELDS = frozenset({"op", "path", "from", "value"})
_OPTIONS = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}


class _Pairs(dict[str, Any]):
    """A JSON object as parsed, with its members in order, duplicates included."""

    pairs: list[tuple[str, Any]]


def _pairs_hook(pairs: list[tuple[str, Any]]) -> _Pairs:
    obj = _Pairs(pairs)
    obj.pairs = pairs
    return obj


def _members(value: dict[str, Any], ordered: bool) -> Iterable[tuple[str, Any]]:
    if isinstance(value, _Pairs):
        return value.pairs if ordered else sorted(value.pairs, key=lambda kv: kv[0])
    return value.items() if ordered else sorted(value.items())


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _typed(value: Any, ftype: FieldType, path: str, errors: list[str], ordered: bool) -> Any:
    """`value` with the fields its type lacks dropped (and a duplicate's last value kept);
    appends `unknown field` / `duplicate field` errors as the strict decoder meets them."""
    if ftype.kind == "struct" and isinstance(value, dict):
        fields = struct_fields(ftype.model)
        out: dict[str, Any] = {}
        for key, item in _members(value, ordered):
            sub = fields.get(key)
            where = _join(path, key)
            if sub is None:
                errors.append(f'unknown field "{where}"')
                continue
            if key in out:
                errors.append(f'duplicate field "{where}"')
            out[key] = _typed(item, sub, where, errors, ordered)
        return out
    if ftype.kind == "map" and isinstance(value, dict) and ftype.item is not None:
        out = {}
        for key, item in _members(value, ordered):
            where = _join(path, key)
            if key in out:
                errors.append(f'duplicate field "{where}"')
            out[key] = _typed(item, ftype.item, where, errors, ordered)
        return out
    if ftype.kind == "list" and isinstance(value, list) and ftype.item is not None:
        return [_typed(item, ftype.item, f"{path}[{i}]", errors, ordered)
                for i, item in enumerate(value)]
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _duplicates(value: Any, path: str, errors: list[str]) -> None:
    """Duplicate members anywhere in a parsed patch, in document order (patch.go decodes a
    merge patch into a map strictly before applying it)."""
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, item in value.pairs:
            where = _join(path, key)
            if key in seen:
                errors.append(f'duplicate field "{where}"')
            seen.add(key)
            _duplicates(item, where, errors)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _duplicates(item, f"{path}[{i}]", errors)


def _key_duplicates(value: Any, errors: list[str]) -> None:
    """Duplicate members anywhere in a custom object's JSON body, by their key alone, in
    document order (the unstructured strict decoder's words)."""
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, item in value.pairs:
            if key in seen:
                errors.append(f'duplicate field "{key}"')
            seen.add(key)
            _key_duplicates(item, errors)
    elif isinstance(value, list):
        for item in value:
            _key_duplicates(item, errors)


def _deduped(errors: list[str]) -> list[str]:
    return list(dict.fromkeys(errors))[:MAX_ERRORS]


# YAML ----------------------------------------------------------------------------------

class _DuplicateKeysLoader(yaml.SafeLoader):
    """A SafeLoader that records each mapping key met twice, as go-yaml's unmarshal errors."""

    duplicates: list[str]

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                self.duplicates.append(f'line {key_node.start_mark.line + 1}: key "{key}" '
                                       "already set in map")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def yaml_duplicates(raw: bytes) -> list[str]:
    """go-yaml's `line N: key "k" already set in map` for every duplicated key (tabs, which JSON
    allows and YAML does not, read as spaces: the lines stay where they were)."""
    loader = _DuplicateKeysLoader(raw.replace(b"\t", b" ").decode("utf-8", "replace"))
    loader.duplicates = []
    try:
        loader.get_single_data()
    except yaml.YAMLError:
        return []  # not YAML at all: the body's own parse reports it
    finally:
        loader.dispose()
    return loader.duplicates


def _yaml_error(lines: list[str]) -> str:
    return "yaml: unmarshal errors:\n  " + "\n  ".join(lines)


# The directive --------------------------------------------------------------------------

def directive(query: Mapping[str, str], verb: str) -> str:
    """The request's `fieldValidation` (Warn when it names none); anything else is refused
    as ValidateCreateOptions/ValidateUpdateOptions/ValidatePatchOptions refuse it."""
    value = query.get("fieldValidation", "")
    if value not in _ALLOWED:
        supported = ", ".join(f'"{v}"' for v in _ALLOWED)
        why = f'Unsupported value: "{value}": supported values: {supported}'
        options = _OPTIONS.get(verb, "CreateOptions")
        raise ApiError(422, "Invalid",
                       f'{options}.meta.k8s.io "" is invalid: fieldValidation: {why}',
                       {"group": "meta.k8s.io", "kind": options, "causes": [
                           {"reason": "FieldValueNotSupported", "message": why,
                            "field": "fieldValidation"}]})
    return value or DEFAULT_DIRECTIVE


def warning_header(text: str) -> str:
    """`299 - "<text>"`, quoted as k8s.io/apimachinery pkg/util/net NewWarningHeader does."""
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _summary(raw: bytes) -> str:
    """summarizeData(body, 30) of rest.go."""
    if not raw:
        return "<empty>"
    if raw[:1] == b"{":
        return raw[:30].decode("utf-8", "replace") + (" ..." if len(raw) > 30 else "")
    return raw[:30].hex() + (" ..." if len(raw) > 30 else "")


def unrecognized_body(rt: ResourceType, raw: bytes) -> str:
    """A create's or update's body that is not JSON (YAML sent as JSON, as `kubectl create
    --raw` does): transformDecodeError's words around encoding/json's first error."""
    text = raw.lstrip()
    first = text[:1].decode("utf-8", "replace")
    why = (f"invalid character '{first}' looking for beginning of value"
           if first and first not in '{["-0123456789tfn' else "unexpected end of JSON input"
           if not first else "invalid JSON")
    return (f"the object provided is unrecognized (must be of type {rt.kind}): couldn't get "
            f"version/kind; json parse error: {why} ({_summary(raw)})")


@dataclass
class FieldCheck:
    """One write's field validation: what it found, and the warnings to send back."""

    rt: ResourceType
    directive: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    patch_kind: str = ""  # "merge", "strategic" or "json" for a patch
    patch: Any = None  # the patch as parsed (a strategic merge patch's error prints it)
    crd_schema: Any = None  # a custom resource's openAPIV3Schema (None: a built-in kind)

    @property
    def strict_decoding(self) -> bool:
        return self.directive in (STRICT, WARN)

    def _settle(self, errors: list[str], prefix: str = "") -> None:
        """Refuse (Strict) or warn (Warn) about what was found; Ignore says nothing."""
        errors = _deduped(errors)
        if not errors or not self.strict_decoding:
            return
        if self.directive == STRICT:
            raise BadRequest(prefix + "strict decoding error: " + ", ".join(errors))
        for error in errors:
            self.warnings.extend(error.removeprefix("yaml: unmarshal errors:\n  ")
                                 .split("\n  ") if error.startswith("yaml: ") else [error])

    def body(self, raw: bytes, yaml_body: bool) -> Any:
        """A create's or update's body, decoded as the typed decoder does: unknown fields
        dropped, errors reported per the directive."""
        if self.rt.custom:
            return self._custom_body(raw, yaml_body)
        ftype = kind_type(self.rt.api_version, self.rt.kind)
        errors: list[str] = []
        if yaml_body:
            parsed = self._yaml_body(raw, errors)
            ordered = False  # YAML becomes JSON through a map: its keys sorted
        elif self.strict_decoding:
            parsed = _parse_json(raw, pairs=True)
            ordered = True
        else:
            parsed = _parse_json(raw, pairs=False)
            ordered = True
        if not isinstance(parsed, dict) or ftype is None:
            return _plain(parsed)
        # A value of the wrong JSON type fails the decode itself, whatever the directive
        # (decode_types.py); it trumps the strict errors (apimachinery json.go unmarshal).
        if (wrong_type := decode_error(self.rt.api_version, self.rt.kind, parsed)) is not None:
            raise BadRequest(_type_prefix(self.rt, parsed) + wrong_type)
        pruned = _typed(parsed, ftype, "", errors, ordered)
        self._settle(errors, _decode_prefix(self.rt, parsed, raw))
        return pruned

    def _yaml_body(self, raw: bytes, errors: list[str]) -> Any:
        """A YAML body, parsed; its duplicate keys reported first where decoding is strict."""
        duplicates = yaml_duplicates(raw) if self.strict_decoding else []
        if duplicates:
            errors.append(_yaml_error(duplicates))
        return _parse_yaml(raw)

    def _custom_body(self, raw: bytes, yaml_body: bool) -> Any:
        """A custom object's body: its duplicates, then the fields its schema would prune,
        reported per the directive; returned as parsed (the schema layers prune it)."""
        errors: list[str] = []
        if yaml_body:
            parsed = self._yaml_body(raw, errors)
        else:
            parsed = _parse_json(raw, pairs=self.strict_decoding)
            _key_duplicates(parsed, errors)
        if self.strict_decoding and isinstance(self.crd_schema, dict):
            errors += [f'unknown field "{path}"'
                       for path in sorted(unknown_field_paths(parsed, self.crd_schema))]
        if isinstance(parsed, dict):
            self._settle(errors, _decode_prefix(self.rt, parsed, raw))
        return _plain(parsed)

    def patch_body(self, raw: bytes, kind: str) -> None:
        """A patch's own strict errors: its duplicates (merge, strategic) or its operations'
        unknown and duplicate members (json), reported with the patched object's."""
        self.patch_kind = kind
        try:
            parsed = json.loads(raw, object_pairs_hook=_pairs_hook)
        except ValueError:
            return  # the patch handler reports a body that is not JSON
        self.patch = _plain(parsed)
        if not self.strict_decoding:
            return
        if kind != "json":
            _duplicates(parsed, "", self.errors)
            return
        for i, op in enumerate(parsed if isinstance(parsed, list) else []):
            if not isinstance(op, _Pairs):
                continue
            seen: set[str] = set()
            for key, _ in op.pairs:
                if key not in _JSON_PATCH_OP_FIELDS:
                    self.errors.append(f'json patch unknown field "[{i}].{key}"')
                elif key in seen:
                    self.errors.append(f'json patch duplicate field "[{i}].{key}"')
                seen.add(key)

    def patched(self, obj: Obj) -> Obj:
        """The patched object as the server decodes it (re-encoded as a map: sorted keys)."""
        if self.rt.custom:  # the patch's own errors, then the fields the schema would prune
            errors = list(self.errors)
            if self.strict_decoding and isinstance(self.crd_schema, dict):
                errors += [f'unknown field "{path}"'
                           for path in sorted(unknown_field_paths(obj, self.crd_schema))]
            self._settle(errors)
            return obj
        ftype = kind_type(self.rt.api_version, self.rt.kind)
        if ftype is None:
            return obj
        self._patch_types(obj)
        errors = list(self.errors)
        pruned = _typed(obj, ftype, "", errors, ordered=False)
        self._settle(errors)
        return pruned if isinstance(pruned, dict) else obj

    def _patch_types(self, obj: Obj) -> None:
        """A patched object whose field has the wrong type (decode_types.patch_refusal)."""
        refusal = patch_refusal(self.rt.api_version, self.rt.kind, self.patch_kind, self.patch,
                                obj)
        if refusal is not None:
            raise refusal

    def apply_body(self, raw: bytes, config: Any, namespace: str, name: str) -> None:
        """Server-side apply: the configuration's YAML duplicates per the directive, then its
        unknown fields refused whatever the directive (the typed conversion of SSA)."""
        if self.strict_decoding:
            duplicates = yaml_duplicates(raw)
            if duplicates and self.directive == STRICT:
                raise BadRequest("error strict decoding YAML: error converting YAML to JSON: "
                                 + _yaml_error(duplicates))
            self.warnings.extend(duplicates)
        ftype = kind_type(self.rt.api_version, self.rt.kind)
        if ftype is None or not isinstance(config, dict):
            return
        unknown: list[str] = []
        _undeclared(config, ftype, "", unknown)
        unknown += apply_type_errors(self.rt.api_version, self.rt.kind, config)
        if unknown:
            rt = self.rt
            group_version = rt.api_version if rt.group else f"/{rt.api_version}"
            where = f"{namespace}/{name}" if rt.namespaced else f"/{name}"
            why = unknown[0] if len(unknown) == 1 else "errors:\n  " + "\n  ".join(unknown)
            raise ApiError(500, "", f"failed to create typed patch object ({where}; "
                           f"{group_version}, Kind={rt.kind}): {why}")


def _undeclared(value: Any, ftype: FieldType, path: str, out: list[str]) -> None:
    """structured-merge-diff's `.spec.x: field not declared in schema`, a list element named
    by its `name` key when it has one (`containers[name="app"]`), else by its index."""
    if ftype.kind == "struct" and isinstance(value, dict):
        fields = struct_fields(ftype.model)
        for key, item in value.items():
            sub = fields.get(key)
            if sub is None:
                out.append(f"{path}.{key}: field not declared in schema")
            else:
                _undeclared(item, sub, f"{path}.{key}", out)
    elif ftype.kind == "map" and isinstance(value, dict) and ftype.item is not None:
        for key, item in value.items():
            _undeclared(item, ftype.item, f"{path}.{key}", out)
    elif ftype.kind == "list" and isinstance(value, list) and ftype.item is not None:
        for i, item in enumerate(value):
            named = isinstance(item, dict) and isinstance(item.get("name"), str)
            _undeclared(item, ftype.item,
                        f'{path}[name="{item["name"]}"]' if named else f"{path}[{i}]", out)


def _decode_prefix(rt: ResourceType, body: dict[str, Any], raw: bytes) -> str:
    """transformDecodeError's words before the decoder's own (rest.go)."""
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if isinstance(kind, str) and kind:
        version = api_version.rpartition("/")[2] if isinstance(api_version, str) else ""
        return f'{kind} in version "{version}" cannot be handled as a {rt.kind}: '
    return f"the object provided is unrecognized (must be of type {rt.kind}): "


def _type_prefix(rt: ResourceType, body: dict[str, Any]) -> str:
    return cannot_handle(rt.kind, rt.version, body)


def _parse_json(raw: bytes, *, pairs: bool) -> Any:
    try:
        if pairs:
            return json.loads(raw, object_pairs_hook=_pairs_hook)
        return orjson.loads(raw)
    except ValueError as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}") from None


def _parse_yaml(raw: bytes) -> Any:
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise BadRequest(f"the request body is not valid YAML: {exc}") from None


def field_check(rt: ResourceType, verb: str, subresource: str | None,
                query: Mapping[str, str], crd_schema: Any = None) -> FieldCheck | None:
    """The check one write gets: None for what is not field-validated here (/scale and
    /eviction bodies, reads, kinds without a schema). `crd_schema`: a custom resource's."""
    if verb not in _OPTIONS:
        return None
    check_directive = directive(query, verb)
    if subresource in ("scale", "eviction"):
        return None
    if rt.custom:
        return FieldCheck(rt, check_directive, crd_schema=crd_schema)
    if kind_type(rt.api_version, rt.kind) is None:
        return None
    return FieldCheck(rt, check_directive)


__all__ = ["DEFAULT_DIRECTIVE", "IGNORE", "STRICT", "WARN", "FieldCheck", "directive",
           "field_check", "unrecognized_body", "warning_header", "yaml_duplicates"]
