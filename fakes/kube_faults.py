"""Faults of the fake Kubernetes API, set over HTTP at `/_faults` or as `FakeKubeApi.faults`.

A rule matches the HTTP method and the URL path (exact, prefix or regular expression), e.g.

    POST /_faults {"method": "PUT", "path": "/apis/coordination.k8s.io/v1/namespaces/kube-system/
                   leases/elevator-batch", "action": "apply_then_drop"}
    POST /_faults {"method": "GET", "path": "/api/v1/pods", "action": "hang", "count": null}
    POST /_faults {"path_prefix": "/api/", "action": "freeze", "count": null}  # open watches

A `status` rule answers with a `Status` object, as the API server does for its own errors
(429 carries `Retry-After`). See `fakes.faults` for the actions.
"""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response

from kube_elevator.fakes.faults import ADMIN_PATH, Fault, FaultInjector, RequestInfo

__all__ = ["ADMIN_PATH", "kube_faults"]

# The API server's reason for each status (k8s.io/apimachinery metav1.StatusReason).
_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 409: "Conflict", 410: "Expired", 422: "Invalid",
    429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}
_MESSAGES = {
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: injected fault",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted",
}


async def _describe(request: Request) -> RequestInfo:
    return RequestInfo(request.method, request.url.path)


def _status(fault: Fault, request: RequestInfo) -> Response:
    reason = fault.code or _REASONS.get(fault.status,
                                        "InternalError" if fault.status >= 500 else "BadRequest")
    message = fault.message or _MESSAGES.get(fault.status, f"injected fault ({fault.status})")
    body: dict[str, object] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Failure", "message": message, "reason": reason,
                               "code": fault.status}
    headers = {}
    if fault.status == 429:
        headers["Retry-After"] = "1"
        body["details"] = {"retryAfterSeconds": 1}
    return Response(orjson.dumps(body), status_code=fault.status, headers=headers,
                    media_type="application/json")


def kube_faults() -> FaultInjector:
    """The fault rules of one fake API server."""
    return FaultInjector(frozenset({"method", "path", "path_prefix", "path_regex"}),
                         _describe, _status, streams=True)
