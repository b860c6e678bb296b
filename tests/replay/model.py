"""A replay case: the requests a case sends, the real server's answer upstream asserts, and the
comparison of that answer with the fake's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

# Layers, in the order the summary prints them.
FIELD_VALIDATION = "field validation"
VALUE_VALIDATION = "value validation"
DEFAULTING = "defaulting"
CRD_VALIDATION = "CRD schema validation"
CRD_DEFAULTING = "CRD defaulting"
CRD_PRUNING = "CRD pruning"
CRD_FIELD_SELECTORS = "CRD field selectors"
CEL = "CEL"
SUBRESOURCES = "subresources"
APPLY = "server-side apply"
KUBECTL = "kubectl"
LAYERS = (FIELD_VALIDATION, VALUE_VALIDATION, DEFAULTING, CRD_VALIDATION, CRD_DEFAULTING,
          CRD_PRUNING, CEL, CRD_FIELD_SELECTORS, SUBRESOURCES, APPLY, KUBECTL)


class _Absent:
    """A field upstream asserts is not there (pruned, or never set)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()
PRESENT = object()  # a field upstream asserts is there, whatever its value


@dataclass(frozen=True)
class Request:
    """One HTTP request (or, with `kubectl`, one kubectl command) of a case.

    `body` is sent as JSON when it is a mapping or list, as it is when it is a string (duplicate
    keys and YAML cannot pass through a dict). `{rv}` in a string body, or as a string value
    anywhere in a mapping, is replaced by the resourceVersion of the previous step's answer.
    `tolerate` lists codes a set-up step may also get (409 for a namespace already made)."""

    method: str = "GET"
    path: str = ""
    body: Any = None
    content_type: str = "application/json"
    query: Mapping[str, str] = field(default_factory=dict)
    tolerate: tuple[int, ...] = ()
    kubectl: tuple[str, ...] = ()
    stdin: str = ""


@dataclass(frozen=True)
class Expect:
    """What upstream asserts of the last step's answer; None/empty: not asserted."""

    status: int | None = None
    reason: str | None = None
    message_contains: tuple[str, ...] = ()
    warnings: tuple[str, ...] | None = None  # exactly these, in order
    fields: Mapping[str, Any] = field(default_factory=dict)  # dotted path -> value/ABSENT
    names: frozenset[str] | None = None  # the names in a list answer
    resource_version_kept: bool = False  # the answer keeps the previous step's version
    exit_code: int | None = None  # kubectl
    output_contains: tuple[str, ...] = ()  # kubectl: stdout + stderr
    output_equals: str | None = None  # kubectl: stdout + stderr, exactly


@dataclass(frozen=True)
class Case:
    """An upstream case: `source` is the upstream file, `test` its test (and case) name."""

    id: str
    layer: str
    source: str
    test: str
    steps: tuple[Request, ...]
    expect: Expect
    disagrees: str = ""  # why the fake still answers otherwise (a strict xfail)


@dataclass
class Answer:
    status: int
    body: Any
    warnings: list[str]
    output: str = ""  # kubectl

    @property
    def resource_version(self) -> str:
        if isinstance(self.body, dict):
            return str(self.body.get("metadata", {}).get("resourceVersion", ""))
        return ""


def lookup(obj: Any, path: str) -> Any:
    """The value at a dotted path (`spec.containers.0.image`), or ABSENT."""
    current = obj
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return ABSENT
    return current


def differences(expect: Expect, answer: Answer, previous_version: str = "") -> list[str]:
    """How the answer differs from what upstream asserts (empty: they agree)."""
    found: list[str] = []
    if expect.resource_version_kept and answer.resource_version != previous_version:
        found.append(f"resourceVersion {answer.resource_version!r}, upstream kept "
                     f"{previous_version!r}")
    body = answer.body if isinstance(answer.body, dict) else {}
    if expect.status is not None and answer.status != expect.status:
        found.append(f"status {answer.status}, upstream {expect.status}")
    if expect.reason is not None and body.get("reason") != expect.reason:
        found.append(f"reason {body.get('reason')!r}, upstream {expect.reason!r}")
    message = str(body.get("message", ""))
    found += [f"message lacks {part!r}: {message!r}" for part in expect.message_contains
              if part not in message]
    if expect.warnings is not None and tuple(answer.warnings) != expect.warnings:
        found.append(f"warnings {answer.warnings}, upstream {list(expect.warnings)}")
    for path, wanted in expect.fields.items():
        got = lookup(answer.body, path)
        if wanted is PRESENT:
            if got is ABSENT:
                found.append(f"{path} absent, upstream present")
        elif got != wanted:
            found.append(f"{path} = {got!r}, upstream {wanted!r}")
    if expect.names is not None:
        names = {item["metadata"]["name"] for item in body.get("items", [])}
        if names != expect.names:
            found.append(f"names {sorted(names)}, upstream {sorted(expect.names)}")
    if expect.exit_code is not None and answer.status != expect.exit_code:
        found.append(f"exit code {answer.status}, upstream {expect.exit_code}")
    found += [f"output lacks {part!r}: {answer.output!r}" for part in expect.output_contains
              if part not in answer.output]
    if expect.output_equals is not None and answer.output != expect.output_equals:
        found.append(f"output {answer.output!r}, upstream {expect.output_equals!r}")
    return found


def with_resource_version(body: Any, resource_version: str) -> Any:
    """The body with `{rv}` replaced (see Request)."""
    if isinstance(body, str):
        return body.replace("{rv}", resource_version)
    if isinstance(body, dict):
        return {key: with_resource_version(value, resource_version) for key, value in body.items()}
    if isinstance(body, list):
        return [with_resource_version(value, resource_version) for value in body]
    return body


def parse_body(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")
