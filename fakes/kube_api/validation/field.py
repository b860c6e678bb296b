"""Field errors worded as apimachinery's `field.Error` words them, and the 422 `Invalid` Status
that carries a list of them (staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go,
pkg/api/errors/errors.go NewInvalid)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kube_elevator.fakes.kube_api.errors import ApiError, Invalid
from kube_elevator.fakes.kube_api.resources import Obj, ResourceType

# ErrorType -> its String(), the words that open the message (field/errors.go).
_TYPE_WORDS = {
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueNotFound": "Not found",
}
# The types whose body leaves the bad value out (ErrorBody's first cases).
_VALUE_OMITTED = frozenset({"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong"})


class GoValue(str):
    """A bad value already printed as Go's `%#v` prints a struct (`core.Taint{Key:"k", ...}`)."""


def go_value(value: Any) -> str:
    """`ErrorBody`'s rendering of a bad value: numbers and bools bare, strings `%q`-quoted."""
    if value is None:
        return "null"
    if isinstance(value, GoValue):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):  # a map[string]string, as %#v prints it
        inner = ", ".join(f"{json.dumps(str(k))}:{json.dumps(str(v))}" for k, v in value.items())
        return f"map[string]string{{{inner}}}"
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class FieldError:
    """One `field.Error`: its type (the cause's reason), path, bad value and detail."""

    type: str
    field: str
    value: Any = ""
    detail: str = ""

    def body(self) -> str:
        """`ErrorBody()`: the message without the field, as the cause's `message` holds it."""
        words = _TYPE_WORDS[self.type]
        text = words if self.type in _VALUE_OMITTED else f"{words}: {go_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def required(path: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", path, "", detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", path, value, detail)


def not_supported(path: str, value: Any, supported: list[str] | tuple[str, ...]) -> FieldError:
    detail = "supported values: " + ", ".join(json.dumps(v) for v in supported) \
        if supported else ""
    return FieldError("FieldValueNotSupported", path, value, detail)


def duplicate(path: str, value: Any, detail: str = "") -> FieldError:
    return FieldError("FieldValueDuplicate", path, value, detail)


def not_found(path: str, value: Any) -> FieldError:
    """field.NotFound: the value names something the object does not have."""
    return FieldError("FieldValueNotFound", path, value)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", path, "", detail)


def too_long(path: str, max_bytes: int) -> FieldError:
    """field.TooLong as apimachinery v0.32 (Kubernetes 1.32, the version the fake reports) words
    it; 1.31 said `must have at most N bytes`."""
    return FieldError("FieldValueTooLong", path, "", f"may not be more than {max_bytes} bytes")


def aggregate_message(errors: list[FieldError]) -> str:
    """`ErrorList.ToAggregate().Error()`: one message bare, several as `[a, b]`, repeats
    dropped (util/errors/errors.go aggregate.Error)."""
    seen: list[str] = []
    for error in errors:
        text = str(error)
        if text not in seen:
            seen.append(text)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


class InvalidObject(Invalid):
    """The API server's 422 for a list of field errors (`NewInvalid`): the message names the
    GroupKind (`Deployment.apps "web" is invalid: ...`), each error is a cause.  An `Invalid`
    (so a `ValueError`), as the store's single-cause refusals are."""

    def __init__(self, rt: ResourceType, name: str, errors: list[FieldError]) -> None:
        qualified = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
        details: Obj = {"name": name}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.kind
        details["causes"] = [{"reason": e.type, "message": e.body(), "field": e.field}
                             for e in errors]
        self.errors = list(errors)
        ApiError.__init__(self, 422, "Invalid",
                          f'{qualified} "{name}" is invalid: {aggregate_message(errors)}',
                          details)


__all__ = [
    "FieldError",
    "GoValue",
    "InvalidObject",
    "aggregate_message",
    "duplicate",
    "forbidden",
    "go_value",
    "invalid",
    "not_found",
    "not_supported",
    "required",
    "too_long",
]
