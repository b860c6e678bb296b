"""Secrets as the API server checks them (kubernetes pkg/apis/core/validation/validation.go
`ValidateSecret`, `ValidateSecretUpdate`): `data` keys are config keys, at most 1 MiB of data in
all (`core.MaxSecretSize`), the keys or annotation each built-in `type` requires, and on update a
`type` that does not change and, once `immutable: true`, data that does not either.

`data` reaches these checks as the server holds it: `stringData` already merged in
(`secret_data.py`, the v1 conversion) and every value valid base64 (the decoder refused any
other with a 400 first). No error here carries a value of `data`: where upstream quotes one it
prints `<secret contents redacted>`, and so does this.
"""

from __future__ import annotations

import json
from typing import Any

from kube_elevator.fakes.kube_api.resources import Obj
from kube_elevator.fakes.kube_api.validation.field import (
    FieldError,
    forbidden,
    invalid,
    required,
    too_long,
)
from kube_elevator.fakes.kube_api.validation.kinds import (
    IMMUTABLE_WHEN_SET,
    MAX_DATA_BYTES,
    config_key_errors,
    decoded_bytes,
)
from kube_elevator.fakes.kube_api.validation.meta_update import IMMUTABLE

MAX_SECRET_SIZE_BYTES = MAX_DATA_BYTES  # core.MaxSecretSize
REDACTED = "<secret contents redacted>"
SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"
# pkg/apis/core/types.go: each built-in Secret type and the data keys it requires.
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
DOCKERCFG, DOCKERCFG_KEY = "kubernetes.io/dockercfg", ".dockercfg"
DOCKER_CONFIG_JSON, DOCKER_CONFIG_JSON_KEY = "kubernetes.io/dockerconfigjson", ".dockerconfigjson"
BASIC_AUTH, BASIC_AUTH_KEYS = "kubernetes.io/basic-auth", ("username", "password")
SSH_AUTH, SSH_AUTH_KEY = "kubernetes.io/ssh-auth", "ssh-privatekey"
TLS, TLS_KEYS = "kubernetes.io/tls", ("tls.crt", "tls.key")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def go_json_object_error(raw: bytes) -> str | None:
    """encoding/json's error for `json.Unmarshal(raw, &map[string]interface{}{})`, None when
    it decodes (JSON `null` does). Exact for an empty or cut-off document, a first character
    that cannot start a value, and a value that is not an object; other syntax errors are
    worded as Go words a bad character, at the first one Python's parser stops on."""
    text = raw.decode("utf-8", "replace")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()):
            return "unexpected end of JSON input"
        where = "after top-level value" if exc.msg == "Extra data" \
            else "looking for beginning of value"
        return f"invalid character {_quote_char(text[exc.pos])} {where}"
    if value is None or isinstance(value, dict):
        return None
    kind = ("array" if isinstance(value, list) else "string" if isinstance(value, str)
            else "bool" if isinstance(value, bool) else "number")
    return f"json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"


def _quote_char(char: str) -> str:
    """encoding/json's quoteChar: `'x'`, with `'` and `"` escaped as Go does."""
    if char == "'":
        return "'\\''"
    if char == '"':
        return "'\"'"
    quoted = json.dumps(char)[1:-1]
    return f"'{quoted}'"


def secret_errors(secret: Obj) -> list[FieldError]:
    """ValidateSecret's checks of `data` and `type` (ObjectMeta is checked for every kind)."""
    errors: list[FieldError] = []
    data = _dict(secret.get("data"))
    total_bytes = 0
    for key, value in data.items():
        errors += config_key_errors(f"data[{key}]", key)
        total_bytes += len(decoded_bytes(value))
    if total_bytes > MAX_SECRET_SIZE_BYTES:
        errors.append(too_long("data", MAX_SECRET_SIZE_BYTES))
    kind = secret.get("type") or ""
    if kind == SERVICE_ACCOUNT_TOKEN:
        # Only the annotation: the token controller adds the uid annotation and data later.
        annotations = _dict(_dict(secret.get("metadata")).get("annotations"))
        if not annotations.get(SERVICE_ACCOUNT_NAME_KEY):
            errors.append(required(f"metadata.annotations[{SERVICE_ACCOUNT_NAME_KEY}]"))
    elif kind in (DOCKERCFG, DOCKER_CONFIG_JSON):
        key = DOCKERCFG_KEY if kind == DOCKERCFG else DOCKER_CONFIG_JSON_KEY
        if key not in data:
            errors.append(required(f"data[{key}]"))
        elif (why := go_json_object_error(decoded_bytes(data[key]))) is not None:
            errors.append(invalid(f"data[{key}]", REDACTED, why))
    elif kind == BASIC_AUTH:
        # Either key may be empty, but one of them must be there.
        if not any(key in data for key in BASIC_AUTH_KEYS):
            errors += [required(f"data[{key}]") for key in BASIC_AUTH_KEYS]
    elif kind == SSH_AUTH:
        if not decoded_bytes(data.get(SSH_AUTH_KEY)):
            errors.append(required(f"data[{SSH_AUTH_KEY}]"))
    elif kind == TLS:
        errors += [required(f"data[{key}]") for key in TLS_KEYS if key not in data]
    return errors


def secret_update_errors(old: Obj, new: Obj) -> list[FieldError]:
    """ValidateSecretUpdate's own checks: `type` is immutable; once `immutable: true`, so are
    `immutable` itself and `data` (stringData was merged into data before this runs)."""
    errors: list[FieldError] = []
    if (new.get("type") or "") != (old.get("type") or ""):
        errors.append(invalid("type", new.get("type") or "", IMMUTABLE))
    if old.get("immutable") is True:
        if new.get("immutable") is not True:
            errors.append(forbidden("immutable", IMMUTABLE_WHEN_SET))
        if _dict(new.get("data")) != _dict(old.get("data")):
            errors.append(forbidden("data", IMMUTABLE_WHEN_SET))
    return errors


__all__ = ["MAX_SECRET_SIZE_BYTES", "REDACTED", "go_json_object_error", "secret_errors",
           "secret_update_errors"]
