"""A bad value as Kubernetes' field errors print it (apimachinery pkg/util/validation/field
errors.go ErrorBody: a string `%q`-quoted, `Invalid value: "invalid key"`), for the messages
tasks write in kube-scheduler's words; fakes/kube_api/validation/field.py has the fake API
server's fuller one (tasks may not import fakes)."""

from __future__ import annotations

import json


def go_quoted(text: str) -> str:
    """`text` as Go's `%q` prints it: double quotes, backslash escapes (never Python's '...')."""
    return json.dumps(text, ensure_ascii=False)


def invalid_value(path: str, value: str, detail: str) -> str:
    """`<path>: Invalid value: "<value>": <detail>`, field.Invalid's message."""
    return f"{path}: Invalid value: {go_quoted(value)}: {detail}"


def unsupported_value(path: str, value: str, supported: tuple[str, ...]) -> str:
    """`<path>: Unsupported value: "<value>": supported values: "a", "b"`, field.NotSupported's
    message; without `supported` (node affinity passes none), only `Unsupported value: "x"`."""
    if not supported:
        return f"{path}: Unsupported value: {go_quoted(value)}"
    listed = ", ".join(go_quoted(option) for option in supported)
    return f"{path}: Unsupported value: {go_quoted(value)}: supported values: {listed}"
