"""How every step retries: exponential back-off with jitter, and only for errors that can pass.

Validation errors, 4xx answers that will not change, and a lost Lease race are final; throttling,
server errors, conflicts and connection faults are retried. `ELEVATOR_RETRY_DELAY_SECONDS` sets
the first delay (default 1 s; tests set 0).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from kube_elevator.tasks.core.errors import CloudError, InputError, LeaseConflict, NodeChanged

if TYPE_CHECKING:
    from prefect import Task
    from prefect.client.schemas.objects import State, TaskRun

RETRIES = 3
P = ParamSpec("P")
R = TypeVar("R")


def is_retryable(error: BaseException) -> bool:
    """True for what may pass on its own: never for bad input or a lost race."""
    # Imported here: the pure paths (`elevator plan`) should not pay for the clients' import.
    import urllib3
    from kubernetes.client.exceptions import ApiException

    if isinstance(error, InputError | LeaseConflict):
        return False
    if isinstance(error, CloudError):
        return error.retryable
    if isinstance(error, ApiException):
        # Kubernetes: throttled, conflicting or failing server; other 4xx will not change.
        status = error.status or 0
        return status in (0, 409, 429) or status >= 500
    return (isinstance(error, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError
                       | NodeChanged)
            or cloud_call_may_pass(error))


def retry_only_transient(_task: Task[Any, Any], _run: TaskRun, state: State[Any]) -> bool:
    """Prefect's retry_condition_fn: look at the exception the failed run raised."""
    error = state.result(raise_on_failure=False)
    return isinstance(error, BaseException) and is_retryable(error)


def backoff_seconds(retries: int) -> list[float]:
    first = float(os.environ.get("ELEVATOR_RETRY_DELAY_SECONDS", "1"))
    return [first * 2**attempt for attempt in range(retries)]






# ClientError codes that mean "try again later" across autoscaling and ec2.
RETRYABLE_CODES = frozenset({
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "EC2ThrottledException",
    "SlowDown",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "Unavailable",
    "InternalFailure",
    "InternalError",
    "InternalServerError",
    "RequestTimeout",
    "RequestTimeoutException",
    "PriorRequestNotComplete",
    # Auto Scaling: another update or scaling activity holds the group; it will finish.
    "ResourceContention",
    "ScalingActivityInProgress",
})


def cloud_call_may_pass(exc: BaseException) -> bool:
    """Whether trying the same AWS call again later may succeed (throttling, 5xx, network)."""
    from botocore.exceptions import ClientError, HTTPClientError
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.parsers import ResponseParserError

    if isinstance(exc, CloudError):
        return exc.retryable
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        if error.get("Code", "") in RETRYABLE_CODES:
            return True
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return status >= 500 or status == 429
    # EndpointConnectionError, ConnectTimeoutError (ConnectionError); ReadTimeoutError,
    # ConnectionClosedError (HTTPClientError); an unparsable body is usually a proxy's or the
    # service's 5xx page ("Further retries may succeed").
    return isinstance(exc, BotoConnectionError | HTTPClientError | ResponseParserError)






