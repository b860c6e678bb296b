"""The one paging loop of a list: each page decoded as it arrives, the next one already asked for.

A paged list is a conversation: the server builds a page, the client decodes it, then asks for
the next. Done in turn, the client waits for every page the server builds, and the server for
every page the client decodes; at 150,000 pods the two waits are about equal (the server's
bytes-only floor 0.65 s, the client's decoding 1.0 s, 1.8 s in turn). So the next page's request
goes out, on the same keep-alive connection, as soon as this page's bytes are in, before they
are decoded: the server builds page N+1 while the client decodes page N (0.9-1.1 s in all).

That needs the request and its answer apart, which the generated client methods do not offer;
the lists that matter (pods, nodes, budgets) are asked on one connection of the client's own
pool (its TLS settings, its token, refreshed as the client refreshes it). Any other list, or a
client behind a proxy, is asked through the generated method, one page after another.

The continue token of the next request is read from the page's head (the list metadata comes
before the items, as the API server writes a List), with a JSON parser on the bytes before
`"items"`; a page laid out otherwise is decoded first, and its next page asked for after.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode, urlsplit

import msgspec
import urllib3

from kube_elevator.tasks.core.api_objects import RawListMetadata
from kube_elevator.tasks.core.timeouts import timeouts

T = TypeVar("T")
# a page's bytes -> (its continue token, what the caller makes of the page)
ReadPage = Callable[[bytes], tuple[str | None, T]]

# The generated list methods whose pages go out ahead, by the path they ask.
LIST_PATHS = {
    "list_pod_for_all_namespaces": "/api/v1/pods",
    "list_node": "/api/v1/nodes",
    "list_pod_disruption_budget_for_all_namespaces": "/apis/policy/v1/poddisruptionbudgets",
}
_QUERY_NAMES = {"field_selector": "fieldSelector", "label_selector": "labelSelector"}
_ITEMS_KEY = b'"items":'
# urllib3 2 sends a request apart from reading its answer (`request(preload_content=...)`).
_URLLIB3_2 = int(str(getattr(urllib3, "__version__", "0")).split(".")[0]) >= 2
_UNKNOWN = object()  # a page's head the loop cannot read: decode it before asking on


class _ListHead(msgspec.Struct, gc=False):
    metadata: RawListMetadata | None = None


_HEAD = msgspec.json.Decoder(_ListHead)


def continue_token_ahead(data: bytes) -> str | object | None:
    """The page's continue token (None on the last page) from the bytes before its items, or
    `_UNKNOWN` when the page is not laid out as the API server lays out a List."""
    start = data.find(_ITEMS_KEY)
    if start <= 0:
        return _UNKNOWN
    try:  # the head, closed with empty items, is a List of its own when the layout is usual
        head = _HEAD.decode(data[:start] + b'"items":[]}')
    except (msgspec.DecodeError, UnicodeDecodeError):
        return _UNKNOWN
    if head.metadata is None:
        return _UNKNOWN  # the metadata comes after the items
    return head.metadata.continue_ or None


class _ClientFetch:
    """Pages through the generated list method, each asked once the previous one is decoded."""

    def __init__(self, list_call: Callable[..., Any], args: tuple[Any, ...], page_size: int,
                 query: Mapping[str, Any]) -> None:
        self.list_call = list_call
        self.args = args
        self.page_size = page_size
        self.query = query
        self.token: str | None = None

    def send(self, token: str | None) -> None:
        self.token = token

    def receive(self) -> bytes:
        response = self.list_call(*self.args, limit=self.page_size, _continue=self.token,
                                  _preload_content=False, _request_timeout=timeouts().pair,
                                  **self.query)
        return response.data  # type: ignore[no-any-return]

    def shutdown(self) -> None:
        """Nothing to end early: the call's read timeout bounds it."""

    def close(self) -> None:
        """The generated method hands its connection back to the pool itself."""


class _ConnectionFetch:
    """Pages on one connection of the client's pool, where a request can go out before the
    previous answer is decoded."""

    def __init__(self, api_client: Any, pool_manager: urllib3.PoolManager, path: str,
                 page_size: int, query: Mapping[str, str]) -> None:
        configuration = api_client.configuration
        host = configuration.host.rstrip("/")
        self.path = urlsplit(host).path + path
        self.query = {"limit": str(page_size), **query}
        self.headers: dict[str, str] = {**api_client.default_headers,
                                        "Accept": "application/json"}
        if api_client.cookie:
            self.headers["Cookie"] = api_client.cookie
        # The client's own auth: its bearer token, refreshed by its hook (exec plugins, the
        # in-cluster token file) as each generated call would refresh it.
        bearer = configuration.auth_settings().get("BearerToken") or {}
        if bearer.get("in") == "header" and bearer.get("value"):
            self.headers[bearer["key"]] = bearer["value"]
        limits = timeouts()
        self.read_seconds = limits.read_seconds
        self.pool = pool_manager.connection_from_url(host)
        self.connection: Any = self.pool._new_conn()  # the pool's TLS settings, a connection of ours
        self.connection.timeout = limits.connect_seconds

    def send(self, token: str | None) -> None:
        query = self.query if token is None else {**self.query, "continue": token}
        try:
            self.connection.request("GET", f"{self.path}?{urlencode(query)}",
                                    headers=self.headers)
        except Exception as error:
            raise self._as_client_error(error) from error
        self.connection.timeout = self.read_seconds  # connected: each later wait is a read

    def receive(self) -> bytes:
        from kubernetes.client.exceptions import ApiException

        try:
            response = self.connection.getresponse()
            data: bytes = response.data
        except Exception as error:
            raise self._as_client_error(error) from error
        if not 200 <= response.status <= 299:  # as the generated method raises it
            from_response = getattr(ApiException, "from_response", None)  # kubernetes >= 32
            if from_response is None:
                raise ApiException(http_resp=response)
            from_response(http_resp=response, body=None, data=None)  # raises it
        return data

    def _as_client_error(self, error: Exception) -> Exception:
        """The error urllib3's own request would raise (what callers and retries know)."""
        if isinstance(error, urllib3.exceptions.HTTPError):
            return error  # connect errors and timeouts: urllib3's already
        if isinstance(error, ssl.SSLError):  # a certificate the kubeconfig does not trust
            return urllib3.exceptions.SSLError(error)
        if isinstance(error, TimeoutError):
            return urllib3.exceptions.ReadTimeoutError(
                self.pool, self.path, f"Read timed out. (read timeout={self.read_seconds})")
        if isinstance(error, OSError | http.client.HTTPException):
            return urllib3.exceptions.ProtocolError("Connection aborted.", error)
        return error

    def shutdown(self) -> None:
        """From another thread: a read waiting on the socket ends now (`ListWatch.stop`)."""
        sock = getattr(self.connection, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        # Never handed back: a request may still be out, and its answer would be the next
        # caller's.
        self.connection.close()


def _fetch_for(list_call: Callable[..., Any], args: tuple[Any, ...], page_size: int,
               query: Mapping[str, Any]) -> _ClientFetch | _ConnectionFetch:
    api_client = getattr(getattr(list_call, "__self__", None), "api_client", None)
    path = LIST_PATHS.get(getattr(list_call, "__name__", ""))
    pool_manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if (path is None or args or set(query) - set(_QUERY_NAMES) or not _URLLIB3_2
            or type(pool_manager) is not urllib3.PoolManager):  # a ProxyManager: asked as is
        return _ClientFetch(list_call, args, page_size, query)
    wire_query = {_QUERY_NAMES[name]: str(value) for name, value in query.items()
                  if value is not None}
    assert api_client is not None and pool_manager is not None
    return _ConnectionFetch(api_client, pool_manager, path, page_size, wire_query)


class PagedList(Generic[T]):
    """A list's pages, each decoded by `decode` as it arrives; iterate once.

    `stopped` (checked before each request) ends the list without asking for more; `shutdown()`
    from another thread ends a wait for a page at once. Either way the caller sees a part of
    the list, which is not the cluster's state: it drops it.
    """

    def __init__(self, list_call: Callable[..., Any], decode: ReadPage[T], *args: Any,
                 page_size: int, stopped: Callable[[], bool] = lambda: False,
                 **query: Any) -> None:
        self.list_call = list_call
        self.decode = decode
        self.args = args
        self.page_size = page_size
        self.stopped = stopped
        self.query = query
        self.complete = False  # the last page was read
        self._fetch: _ClientFetch | _ConnectionFetch | None = None

    def shutdown(self) -> None:
        fetch = self._fetch
        if fetch is not None:
            fetch.shutdown()

    def __iter__(self) -> Iterator[T]:
        fetch = self._fetch = _fetch_for(self.list_call, self.args, self.page_size, self.query)
        try:
            fetch.send(None)
            while True:
                data = fetch.receive()
                ahead = continue_token_ahead(data)
                asked = isinstance(ahead, str) and not self.stopped()
                if asked:
                    fetch.send(ahead)  # type: ignore[arg-type]
                token, result = self.decode(data)
                if ahead is not _UNKNOWN and (token or None) != ahead:
                    raise RuntimeError(f"a list page's continue token reads {ahead!r} from its "
                                       f"head and {token!r} from the whole page")
                yield result
                if not token:
                    self.complete = True
                    return
                if not asked and self.stopped():
                    return
                if not asked:
                    fetch.send(token)
        finally:
            self._fetch = None
            fetch.close()


__all__ = ["LIST_PATHS", "PagedList", "ReadPage", "continue_token_ahead"]
