"""Field errors as k8s.io/apimachinery's `field.Error` words them, and the 422 `Invalid`
Status that carries a list of them (`apierrors.NewInvalid`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from kube_elevator.fakes.kube_api.errors import ApiError

# field.ErrorType: the cause's `reason` and the words of its message
# (k8s.io/apimachinery/pkg/util/validation/field/errors.go).
_WORDS = {
    "FieldValueRequired": "Required value", "FieldValueInvalid": "Invalid value",
    "FieldValueTypeInvalid": "Invalid value", "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden", "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many", "FieldValueDuplicate": "Duplicate value",
}
# Types whose message carries no value (ErrorBody's first cases).
_NO_VALUE = frozenset({"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong"})
OMIT = object()  # field.omitValue: a value not worth printing


def go_value(value: Any) -> str:
    """A bad value as ErrorBody prints it: numbers and booleans bare (%v), strings quoted
    (%q), anything else as JSON (Go prints its `%#v`; JSON reads better and is close)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    return orjson.dumps(value).decode()


@dataclass(frozen=True)
class FieldError:
    """One `field.Error`: the path (`spec.replicas`, `spec.items[0]`), its reason, the bad value
    and the detail."""

    field: str
    reason: str
    value: Any = OMIT
    detail: str = ""

    def body(self) -> str:
        """`field.Error.ErrorBody`: the message without the path."""
        text = _WORDS.get(self.reason, "Invalid value")
        if self.reason not in _NO_VALUE and self.value is not OMIT:
            text = f"{text}: {go_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


class SchemaInvalid(ApiError, ValueError):
    """422 Invalid with its causes; a ValueError too, as `install_crd` raises for a bad CRD."""


def invalid(kind: str, group: str, name: str, errors: list[FieldError]) -> ApiError:
    """422 Invalid as `apierrors.NewInvalid(GroupKind, name, errs)` builds it: one error is
    named in the message, several are listed in brackets; each is a cause."""
    qualified = f"{kind}.{group}" if group else kind
    listed = str(errors[0]) if len(errors) == 1 else \
        "[" + ", ".join(str(e) for e in errors) + "]"
    causes = [{"reason": e.reason, "message": e.body(), "field": e.field} for e in errors]
    return SchemaInvalid(422, "Invalid", f'{qualified} "{name}" is invalid: {listed}',
                         {"name": name, "group": group, "kind": kind, "causes": causes})


__all__ = ["OMIT", "FieldError", "SchemaInvalid", "go_value", "invalid"]
