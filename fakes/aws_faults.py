"""A fault proxy in front of moto: AWS calls fail, hang or lose their answer on request.

boto3 pointed at the proxy (`AWS_ENDPOINT_URL`, as `elevator fake-cluster` exports it) reaches
moto unchanged until a rule matches. A rule names the AWS API action (`operation`, e.g.
`SetDesiredCapacity`, `DescribeAutoScalingGroups`, `TerminateInstanceInAutoScalingGroup`),
set over `POST /_faults` or as `AwsFaultProxy.faults`:

    POST /_faults {"operation": "SetDesiredCapacity", "action": "status", "status": 400,
                   "code": "Throttling", "count": 3}
    POST /_faults {"operation": "SetDesiredCapacity", "action": "apply_then_drop"}
    POST /_faults {"operation": "DescribeInstanceStatus", "action": "rewrite", "count": null,
                   "find": "<status>ok</status>", "replace": "<status>impaired</status>"}

(the last: every instance's status checks fail, which moto never reports).

A `status` rule answers with the service's own error document (the query protocol's
`ErrorResponse`, EC2's `Response/Errors`), so botocore raises the ClientError AWS would cause.
Unlike the botocore hooks of `fakes.aws.fail_next_calls`, the proxy sees every HTTP attempt
(`requests` records them), from any process. See `fakes.faults` for the actions.
"""

from __future__ import annotations

import re
import threading
import uuid
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kube_elevator.fakes.faults import ADMIN_PATH, Fault, FaultInjector, RequestInfo
from kube_elevator.tasks.adapters.http_server import ServiceThread

__all__ = ["AwsFaultProxy", "ProxiedRequest"]

# Hop-by-hop headers (RFC 9110 §7.6.1) and those httpx recomputes.
_HOP_HEADERS = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding",
                          "te", "trailer", "upgrade", "host", "content-length",
                          "content-encoding"})
_SCOPE_SERVICE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request")


@dataclass(frozen=True)
class ProxiedRequest:
    """One HTTP attempt that reached the proxy: the AWS action and the fault it met, if any."""

    operation: str
    fault: str  # "" when forwarded untouched, else the action of the rule that fired


def _operation(request: Request, body: bytes) -> str:
    """`Action` of a query-protocol call (autoscaling, ec2), else the `X-Amz-Target` operation."""
    target = request.headers.get("x-amz-target")
    if target:
        return target.rpartition(".")[2]
    content_type = request.headers.get("content-type", "")
    if request.method == "POST" and "x-www-form-urlencoded" in content_type:
        values = parse_qs(body.decode("utf-8", "replace")).get("Action")
    else:
        values = parse_qs(request.url.query).get("Action")
    return values[0] if values else ""


def _service(request: Request) -> str:
    match = _SCOPE_SERVICE.search(request.headers.get("authorization", ""))
    return match.group(1) if match else ""


class AwsFaultProxy:
    """An HTTP proxy on 127.0.0.1 that forwards to `upstream` (moto) and injects faults."""

    def __init__(self, upstream: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.host = host
        self.port = port
        self.requests: list[ProxiedRequest] = []
        self._requests_lock = threading.Lock()
        self._service: ServiceThread | None = None
        self._client: httpx.AsyncClient | None = None
        self.faults = FaultInjector(frozenset({"operation", "method", "path", "path_prefix",
                                               "path_regex"}),
                                    self._describe, self._error, self._record)
        self.app = Starlette(routes=[Route("/{path:path}", self.faults.endpoint(self._forward),
                                           methods=["GET", "POST", "PUT", "DELETE", "HEAD"])])

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._service is None:
            raise RuntimeError("AwsFaultProxy is not started")
        return self._service.url

    @property
    def faults_url(self) -> str:
        return self.url + ADMIN_PATH

    def start(self) -> AwsFaultProxy:
        self.faults.rearm()
        self._service = ServiceThread(self.app, self.host, self.port, "aws-fault-proxy",
                                      startup_timeout=30, lifespan="off",
                                      graceful_shutdown_timeout=2, stop_timeout=10,
                                      keep_alive_timeout=30, bind_option=None).start()
        return self

    def stop(self) -> None:
        if self._service is None:
            return
        self.faults.release()
        self._service.stop()
        self._service = None
        self._client = None  # bound to the stopped event loop

    def __enter__(self) -> AwsFaultProxy:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def attempts(self, operation: str) -> list[ProxiedRequest]:
        """The HTTP attempts of one AWS action that reached the proxy, faulted or not."""
        with self._requests_lock:
            return [seen for seen in self.requests if seen.operation == operation]

    # --- serving ----------------------------------------------------------------------------

    async def _describe(self, request: Request) -> RequestInfo:
        body = await request.body()  # cached by Starlette for `_forward`
        return RequestInfo(request.method, request.url.path, _operation(request, body),
                           _service(request))

    def _record(self, request: RequestInfo, fault: Fault | None) -> None:
        with self._requests_lock:
            self.requests.append(ProxiedRequest(request.operation,
                                                fault.action if fault else ""))

    @staticmethod
    def _error(fault: Fault, request: RequestInfo) -> Response:
        code = fault.code or ("InternalFailure" if fault.status >= 500 else "Throttling")
        message = escape(fault.message or f"injected {code} by the fault proxy")
        request_id = str(uuid.uuid4())
        if request.service == "ec2":
            body = (f"<Response><Errors><Error><Code>{escape(code)}</Code><Message>{message}"
                    f"</Message></Error></Errors><RequestID>{request_id}</RequestID></Response>")
        else:
            kind = "Receiver" if fault.status >= 500 else "Sender"
            body = (f'<ErrorResponse xmlns="https://{request.service or "autoscaling"}'
                    f'.amazonaws.com/doc/2011-01-01/"><Error><Type>{kind}</Type>'
                    f"<Code>{escape(code)}</Code><Message>{message}</Message></Error>"
                    f"<RequestId>{request_id}</RequestId></ErrorResponse>")
        return Response(body.encode(), status_code=fault.status, media_type="text/xml",
                        headers={"x-amzn-RequestId": request_id})

    async def _forward(self, request: Request) -> Response:
        if self._client is None:  # created on the server's event loop, reused after
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0))
        headers = [(key, value) for key, value in request.headers.items()
                   if key.lower() not in _HOP_HEADERS]
        query = f"?{request.url.query}" if request.url.query else ""
        answer = await self._client.request(request.method,
                                            self.upstream + request.url.path + query,
                                            headers=headers, content=await request.body())
        kept = {key: value for key, value in answer.headers.items()
                if key.lower() not in _HOP_HEADERS}
        return Response(answer.content, status_code=answer.status_code, headers=kept)
