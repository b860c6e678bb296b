"""The calls of the generated `CoreV1Api`, `AppsV1Api` and `CoordinationV1Api` that the adapter
makes, sent through the same `ApiClient` without importing those classes.

Importing `kubernetes.client.CoreV1Api` (kubernetes 37's pydantic client) builds about 500
pydantic models and wraps 413 methods in `validate_call`: 0.56-0.88 s of CPU, a sixth of a
repeat `elevator run --once` (issue 40; `AppsV1Api` 0.43 s more), for calls the adapter makes
with `_preload_content=False` and reads as raw bytes. Each method here asks what the generated
one asks: the same path, query names and order, `Accept` and `Content-Type` choices, the
`BearerToken` auth, through `ApiClient.param_serialize` and `ApiClient.call_api` (so
`TimedApiClient`'s timeouts hold); a non-2xx answer raises the `ApiException` the generated
method raises (kubernetes `ApiClient._call_with_legacy_options`). Each returns the raw urllib3
answer, as the generated method does with `_preload_content=False` (the only way it is called).

A client without `param_serialize` (kubernetes before the pydantic client, whose API classes
import cheaply) gets the generated classes (`core_calls`, `apps_calls`, `coordination_calls`).
"""

from __future__ import annotations

from typing import Any, Literal

# The generated methods' `Accept` choices (all pick application/json, the first with "json").
_ACCEPT = ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
           "application/cbor"]
_LIST_ACCEPT = [*_ACCEPT, "application/json;stream=watch",
                "application/vnd.kubernetes.protobuf;stream=watch", "application/cbor-seq"]
# A PATCH's `Content-Type` choices when the call names none.
_PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json", "application/apply-patch+yaml",
                "application/apply-patch+cbor"]
# A list's query options, by the generated methods' argument names, in the order they send them.
_LIST_QUERY = {"pretty": "pretty", "allow_watch_bookmarks": "allowWatchBookmarks",
               "_continue": "continue", "field_selector": "fieldSelector",
               "label_selector": "labelSelector", "limit": "limit",
               "resource_version": "resourceVersion",
               "resource_version_match": "resourceVersionMatch",
               "send_initial_events": "sendInitialEvents", "shard_selector": "shardSelector",
               "timeout_seconds": "timeoutSeconds", "watch": "watch"}

Raw = Literal[False]


class _Calls:
    """Requests through `api_client`, as the generated methods send them."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client  # as the generated classes name it (kube_pages reads it)

    def _send(self, method: str, path: str, path_params: dict[str, str], *,
              query: list[tuple[str, Any]] | None = None, body: Any = None,
              content_type: str | None = None, accept: list[str] = _ACCEPT,
              request_timeout: Any = None) -> Any:
        from kubernetes.client.exceptions import ApiException

        headers: dict[str, Any] = {"Accept": self.api_client.select_header_accept(accept)}
        if content_type:
            headers["Content-Type"] = content_type
        request = self.api_client.param_serialize(
            method=method, resource_path=path, path_params=path_params,
            query_params=query or [], header_params=headers, body=body, post_params=[],
            files={}, auth_settings=["BearerToken"], collection_formats={})
        response = self.api_client.call_api(*request, _request_timeout=request_timeout)
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response.response

    def _list(self, path: str, path_params: dict[str, str], options: dict[str, Any]) -> Any:
        options.pop("_preload_content", None)  # always raw
        timeout = options.pop("_request_timeout", None)
        unknown = set(options) - set(_LIST_QUERY)
        if unknown:
            raise TypeError(f"unexpected list options: {sorted(unknown)}")
        query = [(wire, options[name]) for name, wire in _LIST_QUERY.items()
                 if options.get(name) is not None]
        return self._send("GET", path, path_params, query=query, accept=_LIST_ACCEPT,
                          request_timeout=timeout)

    def _patch(self, path: str, path_params: dict[str, str], body: Any,
               content_type: str | None, timeout: Any) -> Any:
        chosen = content_type or self.api_client.select_header_content_type(_PATCH_TYPES)
        return self._send("PATCH", path, path_params, body=body, content_type=chosen,
                          request_timeout=timeout)


class CoreCalls(_Calls):
    """`CoreV1Api`'s calls the adapter makes."""

    def list_pod_for_all_namespaces(self, **options: Any) -> Any:
        return self._list("/api/v1/pods", {}, options)

    def list_node(self, **options: Any) -> Any:
        return self._list("/api/v1/nodes", {}, options)

    def list_namespaced_pod(self, namespace: str, **options: Any) -> Any:
        return self._list("/api/v1/namespaces/{namespace}/pods", {"namespace": namespace},
                          options)

    def read_node(self, name: str, *, _preload_content: Raw = False,
                  _request_timeout: Any = None) -> Any:
        return self._send("GET", "/api/v1/nodes/{name}", {"name": name},
                          request_timeout=_request_timeout)

    def patch_node(self, name: str, body: Any, *, _content_type: str | None = None,
                   _preload_content: Raw = False, _request_timeout: Any = None) -> Any:
        return self._patch("/api/v1/nodes/{name}", {"name": name}, body, _content_type,
                           _request_timeout)

    def delete_node(self, name: str, *, _preload_content: Raw = False,
                    _request_timeout: Any = None) -> Any:
        return self._send("DELETE", "/api/v1/nodes/{name}", {"name": name},
                          request_timeout=_request_timeout)

    def create_namespaced_pod_eviction(self, name: str, namespace: str, body: Any, *,
                                       _preload_content: Raw = False,
                                       _request_timeout: Any = None) -> Any:
        return self._send("POST", "/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                          {"name": name, "namespace": namespace}, body=body,
                          request_timeout=_request_timeout)

    def read_namespaced_config_map(self, name: str, namespace: str, *,
                                   _preload_content: Raw = False,
                                   _request_timeout: Any = None) -> Any:
        return self._send("GET", "/api/v1/namespaces/{namespace}/configmaps/{name}",
                          {"name": name, "namespace": namespace},
                          request_timeout=_request_timeout)


class CoordinationCalls(_Calls):
    """`CoordinationV1Api`'s Lease calls."""

    _LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"

    def read_namespaced_lease(self, name: str, namespace: str, *,
                              _preload_content: Raw = False, _request_timeout: Any = None) -> Any:
        return self._send("GET", self._LEASES + "/{name}", {"name": name, "namespace": namespace},
                          request_timeout=_request_timeout)

    def replace_namespaced_lease(self, name: str, namespace: str, body: Any, *,
                                 _preload_content: Raw = False,
                                 _request_timeout: Any = None) -> Any:
        return self._send("PUT", self._LEASES + "/{name}", {"name": name, "namespace": namespace},
                          body=body, request_timeout=_request_timeout)

    def create_namespaced_lease(self, namespace: str, body: Any, *,
                                _preload_content: Raw = False,
                                _request_timeout: Any = None) -> Any:
        return self._send("POST", self._LEASES, {"namespace": namespace}, body=body,
                          request_timeout=_request_timeout)


class AppsCalls(_Calls):
    """`AppsV1Api`'s `/scale` calls (Deployments, StatefulSets, ReplicaSets)."""

    def _read_scale(self, plural: str, name: str, namespace: str, timeout: Any) -> Any:
        return self._send("GET", f"/apis/apps/v1/namespaces/{{namespace}}/{plural}/{{name}}/scale",
                          {"name": name, "namespace": namespace}, request_timeout=timeout)

    def _patch_scale(self, plural: str, name: str, namespace: str, body: Any,
                     content_type: str | None, timeout: Any) -> Any:
        return self._patch(f"/apis/apps/v1/namespaces/{{namespace}}/{plural}/{{name}}/scale",
                           {"name": name, "namespace": namespace}, body, content_type, timeout)

    def read_namespaced_deployment_scale(self, name: str, namespace: str, *,
                                         _preload_content: Raw = False,
                                         _request_timeout: Any = None) -> Any:
        return self._read_scale("deployments", name, namespace, _request_timeout)

    def read_namespaced_stateful_set_scale(self, name: str, namespace: str, *,
                                           _preload_content: Raw = False,
                                           _request_timeout: Any = None) -> Any:
        return self._read_scale("statefulsets", name, namespace, _request_timeout)

    def read_namespaced_replica_set_scale(self, name: str, namespace: str, *,
                                          _preload_content: Raw = False,
                                          _request_timeout: Any = None) -> Any:
        return self._read_scale("replicasets", name, namespace, _request_timeout)

    def patch_namespaced_deployment_scale(self, name: str, namespace: str, body: Any, *,
                                          _content_type: str | None = None,
                                          _preload_content: Raw = False,
                                          _request_timeout: Any = None) -> Any:
        return self._patch_scale("deployments", name, namespace, body, _content_type,
                                 _request_timeout)

    def patch_namespaced_stateful_set_scale(self, name: str, namespace: str, body: Any, *,
                                            _content_type: str | None = None,
                                            _preload_content: Raw = False,
                                            _request_timeout: Any = None) -> Any:
        return self._patch_scale("statefulsets", name, namespace, body, _content_type,
                                 _request_timeout)

    def patch_namespaced_replica_set_scale(self, name: str, namespace: str, body: Any, *,
                                           _content_type: str | None = None,
                                           _preload_content: Raw = False,
                                           _request_timeout: Any = None) -> Any:
        return self._patch_scale("replicasets", name, namespace, body, _content_type,
                                 _request_timeout)


def _raw(api_client: Any) -> bool:
    """The pydantic client (kubernetes >= 37) serializes requests apart from sending them."""
    return callable(getattr(api_client, "param_serialize", None))


def core_calls(api_client: Any) -> CoreCalls:
    if _raw(api_client):
        return CoreCalls(api_client)
    from kubernetes import client

    return client.CoreV1Api(api_client)  # type: ignore[return-value]  # the same methods


def coordination_calls(api_client: Any) -> CoordinationCalls:
    if _raw(api_client):
        return CoordinationCalls(api_client)
    from kubernetes import client

    return client.CoordinationV1Api(api_client)  # type: ignore[return-value]


def apps_calls(api_client: Any) -> AppsCalls:
    if _raw(api_client):
        return AppsCalls(api_client)
    from kubernetes import client

    return client.AppsV1Api(api_client)  # type: ignore[return-value]
