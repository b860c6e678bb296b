"""Status bodies and the API errors that carry them, as the API server words them."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kube_elevator.fakes.kube_api.resources import Obj, ResourceType

log = logging.getLogger(__name__)


_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
    415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
    500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}


def status_body(code: int, reason: str, message: str, details: Obj | None = None) -> Obj:
    """A `metav1.Status` failure, the body every API error carries."""
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        body["details"] = details
    body["code"] = code
    return body


class ApiError(Exception):
    """An API failure, raised by the store and rendered as a `Status` over HTTP."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Obj | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = dict(headers or {})

    def __str__(self) -> str:
        return f"({self.code} {self.reason}) {self.message}"

    def status(self) -> Obj:
        """The `Status` body for this error."""
        return status_body(self.code, self.reason, self.message, self.details)


def _details(rt: ResourceType, name: str) -> Obj:
    details: Obj = {"name": name}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    return details


class NotFound(ApiError, KeyError):
    """404; also a `KeyError` so in-process `get` reads like a mapping lookup."""

    def __init__(self, rt: ResourceType, name: str) -> None:
        super().__init__(404, "NotFound", f'{rt.qualified} "{name}" not found',
                         _details(rt, name))


class AlreadyExists(ApiError):
    """409 AlreadyExists on create."""

    def __init__(self, rt: ResourceType, name: str) -> None:
        super().__init__(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists',
                         _details(rt, name))


class Conflict(ApiError):
    """409 Conflict: a stale resourceVersion (or a failed delete precondition)."""

    def __init__(self, rt: ResourceType, name: str, why: str | None = None) -> None:
        why = why or ("the object has been modified; please apply your changes to the "
                      "latest version and try again")
        super().__init__(409, "Conflict",
                         f'Operation cannot be fulfilled on {rt.qualified} "{name}": {why}',
                         _details(rt, name))


class Invalid(ApiError, ValueError):
    """422 Invalid, with the field cause the API server reports."""

    def __init__(self, rt: ResourceType, name: str, fld: str, cause: str, why: str) -> None:
        super().__init__(
            422, "Invalid", f'{rt.kind} "{name}" is invalid: {fld}: {why}',
            {"name": name, "group": rt.group, "kind": rt.kind,
             "causes": [{"reason": cause, "message": why, "field": fld}]},
        )


class BadRequest(ApiError, ValueError):
    """400 BadRequest: malformed request (selector, body, name/namespace mismatch)."""

    def __init__(self, message: str) -> None:
        super().__init__(400, "BadRequest", message)


# Patches -----------------------------------------------------------------------------
