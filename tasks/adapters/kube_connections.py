"""The process's pooled connections to Kubernetes API servers, dropped together when a watch goes
silent.

A watch that stops bringing bytes without closing (a load balancer that forgot the flow, a
frozen proxy, a half-open TCP connection) says the path to the server is broken, and the idle
connections the clients keep for their next requests went the same way: handed to the next
Lease read, one would hold the tick for its read timeout. client-go's HTTP/2 connection carries
every request and watch at once, so its failed ping closes them all together; here each client
(`tasks.adapters.kube.TimedApiClient`) registers its urllib3 pool, and a silent watch empties
every pool (`drop_idle_connections`). Requests in flight keep their connection until they end;
the next request opens a new one.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from typing import Any

log = logging.getLogger(__name__)

_CLIENTS: weakref.WeakSet[Any] = weakref.WeakSet()
_LOCK = threading.Lock()


def register(api_client: Any) -> None:
    """Let a silent watch drop this client's idle connections (a `kubernetes` ApiClient)."""
    with _LOCK:
        _CLIENTS.add(api_client)


def drop_idle_connections(*api_clients: Any) -> int:
    """Close the idle pooled connections of every registered client and of `api_clients`;
    returns how many pools were emptied. urllib3's `PoolManager.clear` leaves connections in
    use alone: they are closed when handed back."""
    with _LOCK:
        clients = {id(item): item for item in (*_CLIENTS, *api_clients)}
    emptied = 0
    for api_client in clients.values():
        pool_manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
        if pool_manager is None:
            continue
        with contextlib.suppress(Exception):  # a client being torn down: nothing to keep
            pool_manager.clear()
            emptied += 1
    return emptied


__all__ = ["drop_idle_connections", "register"]
