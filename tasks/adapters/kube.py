"""The Kubernetes adapter: the official client, raw JSON, and writes that are safe to retry.

Lists are paged (`limit`/`continue`) and read as raw bytes (`_preload_content=False`) decoded
into slim records: the client's typed models cost ~30 s and 3 GB for 100,000 pods. Writes are
"ensure" operations carrying `resourceVersion`, so a retry or a concurrent writer is detected
(409) instead of silently overwriting. Every call has a connect and a read timeout
(`tasks.core.timeouts`), and none is retried underneath the step's Prefect retries, but for
a paged list whose continue token expired mid-list: that list starts again once, as client-go's
pager does (a read; the pages already read are dropped).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast
from urllib.parse import urlsplit

import orjson
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from kube_elevator.tasks.adapters import kube_connections
from kube_elevator.tasks.adapters.kube_calls import apps_calls, coordination_calls, core_calls
from kube_elevator.tasks.adapters.kube_pages import PagedList
from kube_elevator.tasks.core.api_objects import OBJECT_DECODER
from kube_elevator.tasks.core.collector import gc_paused
from kube_elevator.tasks.core.decode import ClusterSnapshot, decode_page
from kube_elevator.tasks.core.documents import load_document, names_a_file, read_bytes
from kube_elevator.tasks.core.errors import EvictionBlocked, InputError, LeaseConflict, NodeChanged
from kube_elevator.tasks.core.identity import user_agent
from kube_elevator.tasks.core.lease_state import (
    HOLDER_IDENTITY,
    LAST_TICK,
    GroupState,
    state_from_annotations,
    state_to_annotations,
)
from kube_elevator.tasks.core.records import ESCALATOR_TAINT_KEY, NodeRecord, PodRecord, node_record
from kube_elevator.tasks.core.timefmt import rfc3339
from kube_elevator.tasks.core.timeouts import Timeouts, timeouts
from kube_elevator.tasks.core.workload import TargetScale, unsupported_scale_kind

# Escalator §4: completed and failed pods never count.
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
DEFAULT_PAGE_SIZE = 500
CONFLICT_ATTEMPTS = 5
MERGE_PATCH = "application/merge-patch+json"
T = TypeVar("T")
log = logging.getLogger(__name__)


def _body(response: object) -> bytes:
    """The raw bytes of a `_preload_content=False` answer (typed as the model by the client)."""
    return cast(Any, response).data  # type: ignore[no-any-return]


def _json_page(data: bytes) -> tuple[str | None, list[dict[str, Any]]]:
    page = orjson.loads(data)
    return (page.get("metadata") or {}).get("continue"), page.get("items") or []


class TimedApiClient(client.ApiClient):
    """An ApiClient whose every call has a (connect, read) timeout unless the call sets its own.

    The client sends no timeout by default: an API server that accepts the connection and
    never answers would hold the tick forever (issue 14). Every generated API method goes
    through `call_api`, so no call site can forget it.
    """

    def __init__(self, configuration: client.Configuration, request_timeout: Timeouts) -> None:
        super().__init__(configuration)
        self.request_timeout = request_timeout
        kube_connections.register(self)  # a silent watch drops its idle connections too

    def call_api(self, method: Any, url: Any, header_params: Any = None, body: Any = None,
                 post_params: Any = None, _request_timeout: Any = None) -> Any:
        return super().call_api(
            method, url, header_params, body, post_params,
            _request_timeout=_request_timeout or self.request_timeout.pair)


def _listed_again_if_expired(read: Callable[[], T]) -> T:
    """A paged list whose continue token the server no longer honours (410 Expired: etcd
    compacted past the list's revision while it was read) starts again from its first page,
    once, as client-go's pager falls back to a fresh list; the pages read so far are dropped."""
    try:
        return read()
    except ApiException as error:
        if error.status != 410:
            raise
        log.info("a list's continue token expired: listing again from the start")
        return read()


@dataclass
class KubeClient:
    """The calls the autoscalers make, on one `kubernetes.client.ApiClient`.

    Example:
        ```python
        from kubernetes import config as kube_config

        kube = ke.KubeClient(kube_config.new_client_from_config())
        nodes = kube.list_nodes()
        ```
    """

    api: client.ApiClient
    page_size: int = DEFAULT_PAGE_SIZE

    @classmethod
    def from_config(cls, kubeconfig: str | Path | None = None) -> KubeClient:
        """A kubeconfig file, else in-cluster config inside a pod, else the default kubeconfig."""
        configuration = client.Configuration()
        if kubeconfig is not None:
            check_kubeconfig(kubeconfig)
        elif not os.environ.get("KUBERNETES_SERVICE_HOST"):
            check_default_kubeconfigs()
        source = str(kubeconfig) if kubeconfig is not None else (
            "in-cluster config" if os.environ.get("KUBERNETES_SERVICE_HOST") else
            os.environ.get("KUBECONFIG") or "~/.kube/config")
        try:
            if kubeconfig is not None:
                config.load_kube_config(config_file=str(kubeconfig),  # type: ignore[no-untyped-call]
                                        client_configuration=configuration)
            elif os.environ.get("KUBERNETES_SERVICE_HOST"):
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except Exception as error:  # ConfigException, YAML, OSError, or a shape it cannot read
            raise InputError([f"{source}: cannot load the Kubernetes config: "
                              f"{_short(str(error)) or type(error).__name__}"]) from None
        return cls.from_configuration(configuration)

    @classmethod
    def from_config_dict(cls, kubeconfig: dict[str, Any], context: str | None,
                         source: str) -> KubeClient:
        """A kubeconfig held as a mapping (a prefect-kubernetes `KubernetesClusterConfig`
        block's `config` and `context_name`); `source` names it in an error."""
        configuration = client.Configuration()
        try:
            config.load_kube_config_from_dict(  # type: ignore[no-untyped-call]
                kubeconfig, context=context or None, client_configuration=configuration)
        except Exception as error:
            raise InputError([f"{source}: cannot load the Kubernetes config: "
                              f"{_short(str(error)) or type(error).__name__}"]) from None
        return cls.from_configuration(configuration)

    @classmethod
    def from_configuration(cls, configuration: client.Configuration) -> KubeClient:
        # urllib3 retries a dropped GET, PUT or DELETE up to 3 times on its own by default:
        # a PUT whose answer was lost would be sent again unseen. The step's Prefect retries
        # (tasks/core/retry.py) are the one retry layer; they re-read before writing again.
        configuration.retries = False
        api = TimedApiClient(configuration, timeouts())
        api.user_agent = user_agent()  # which replica made a call (tasks/core/identity.py)
        return cls(api)

    # The generated API classes' calls the adapter makes, sent as they send them without
    # importing the classes (0.6-0.9 s of CPU for CoreV1Api alone): tasks/adapters/kube_calls.py.
    # Typed as the generated class, whose signatures they keep (a string: no import at run time).
    @property
    def core(self) -> client.CoreV1Api:
        return cast("client.CoreV1Api", core_calls(self.api))

    @property
    def coordination(self) -> client.CoordinationV1Api:
        return cast("client.CoordinationV1Api", coordination_calls(self.api))

    # --- reads ----------------------------------------------------------------------------

    def _pages(self, list_call: Any, *args: Any,
               decode: Callable[[bytes], tuple[str | None, T]], **query: Any) -> Iterator[T]:
        """Each page of a list, decoded as it arrives (`decode` gives the continue token and
        the page's result); the next page is asked for before this one is decoded
        (`tasks.adapters.kube_pages`)."""
        yield from PagedList(list_call, decode, *args, page_size=self.page_size, **query)

    def _raw_items(self, list_call: Any, *args: Any, **query: Any) -> list[dict[str, Any]]:
        """Every item of a list as raw JSON (few objects: budgets, custom objects, a target's
        pods)."""
        def read() -> list[dict[str, Any]]:
            items: list[dict[str, Any]] = []
            for page in self._pages(list_call, *args, decode=_json_page, **query):
                items.extend(page)
            return items

        return _listed_again_if_expired(read)

    def _paged(self, list_call: Any, source: str, **query: Any) -> ClusterSnapshot:
        """Pods or nodes, decoded page by page straight into slim records."""
        def read() -> ClusterSnapshot:
            snapshot = ClusterSnapshot()
            count = 0

            def decode(data: bytes) -> tuple[str | None, int]:
                try:
                    return decode_page(data, source, snapshot, count)
                except InputError as error:
                    # An object the server gave us that we cannot read: name it, do not retry.
                    raise InputError([f"API {problem}" for problem in error.problems]) from None

            with gc_paused():
                for items in self._pages(list_call, decode=decode, **query):
                    count += items
            return snapshot

        return _listed_again_if_expired(read)

    def list_pods(self) -> list[PodRecord]:
        """All active pods in all namespaces, page by page."""
        return self._paged(self.core.list_pod_for_all_namespaces, "pods",
                           field_selector=ACTIVE_PODS).pods

    def list_nodes(self) -> list[NodeRecord]:
        return self._paged(self.core.list_node, "nodes").nodes

    def read_node(self, name: str) -> NodeRecord | None:
        try:
            response = self.core.read_node(name, _preload_content=False)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return node_record(OBJECT_DECODER.decode(_body(response)))

    # --- node writes ------------------------------------------------------------------------

    def _patch_taints(self, node: NodeRecord, taints: list[dict[str, str]]) -> None:
        # A merge patch replaces the taint list whole; resourceVersion makes it conditional.
        body = {"metadata": {"resourceVersion": node.resource_version},
                "spec": {"taints": taints}}
        self.core.patch_node(node.name, body, _content_type=MERGE_PATCH, _preload_content=False)

    def _with_fresh_node(self, name: str, change: Any) -> bool:
        """Re-read and re-apply `change` on 409 until it sticks; False if the node is gone."""
        for _ in range(CONFLICT_ATTEMPTS):
            node = self.read_node(name)
            if node is None:
                return False
            try:
                return bool(change(node))
            except ApiException as error:
                if error.status == 404:
                    return False
                if error.status != 409:
                    raise
        raise NodeChanged(f"node {name} changed under every one of {CONFLICT_ATTEMPTS} attempts")

    def ensure_tainted(self, name: str, value: str, effect: str,
                       key: str = ESCALATOR_TAINT_KEY) -> bool:
        """Escalator §7.2: add the taint unless one with that key is there; True if sent."""

        def add(node: NodeRecord) -> bool:
            if node.has_taint(key):
                return False
            taints = [_taint_json(t.key, t.value, t.effect) for t in node.taints]
            self._patch_taints(node, [*taints, _taint_json(key, value, effect)])
            return True

        return self._with_fresh_node(name, add)

    def ensure_untainted(self, name: str, key: str = ESCALATOR_TAINT_KEY) -> bool:
        """Escalator §7.2: drop the first taint with that key; True if a change was sent."""

        def remove(node: NodeRecord) -> bool:
            if not node.has_taint(key):
                return False
            kept = list(node.taints)
            kept.pop(next(i for i, t in enumerate(kept) if t.key == key))
            self._patch_taints(node, [_taint_json(t.key, t.value, t.effect) for t in kept])
            return True

        return self._with_fresh_node(name, remove)

    def delete_node(self, name: str) -> bool:
        """Delete a Node object; one already gone counts as done (False)."""
        try:
            self.core.delete_node(name, _preload_content=False)
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    # --- the group's Lease --------------------------------------------------------------------

    def read_state(self, namespace: str, name: str) -> GroupState:
        """The state in Lease `name`, or a fresh state when there is none yet."""
        try:
            response = self.coordination.read_namespaced_lease(name, namespace,
                                                                _preload_content=False)
        except ApiException as error:
            if error.status == 404:
                return GroupState()
            raise
        raw = OBJECT_DECODER.decode(_body(response))
        try:
            return state_from_annotations(raw.metadata.annotations or {},
                                          raw.metadata.resourceVersion)
        except ValueError as error:
            raise InputError([f"Lease {namespace}/{name}: {error}"]) from None

    def write_state(self, namespace: str, name: str, state: GroupState,
                    now: float) -> GroupState:
        """Write the state if the Lease is still at `state.resource_version`; else LeaseConflict."""
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {**state_to_annotations(state),
                                         LAST_TICK: rfc3339(now)},
                         "labels": {"app.kubernetes.io/managed-by": "kube-elevator"}},
            # No renewTime: the client would re-format it in a way MicroTime may not parse.
            "spec": {"holderIdentity": HOLDER_IDENTITY},
        }
        try:
            if state.resource_version:
                body["metadata"]["resourceVersion"] = state.resource_version
                response = self.coordination.replace_namespaced_lease(
                    name, namespace, cast(Any, body), _preload_content=False)
            else:
                response = self.coordination.create_namespaced_lease(
                    namespace, cast(Any, body), _preload_content=False)
        except ApiException as error:
            if error.status == 409:
                raise LeaseConflict(f"Lease {namespace}/{name} was written by another tick")\
                    from None
            raise
        version = orjson.loads(_body(response))["metadata"]["resourceVersion"]
        return replace(state, resource_version=str(version))

    # --- custom objects (the pod autoscalers' CRDs), raw JSON ----------------------------------

    @property
    def custom_objects(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    @property
    def apps(self) -> client.AppsV1Api:
        return cast("client.AppsV1Api", apps_calls(self.api))

    def list_custom_objects(self, group: str, version: str, plural: str,
                            namespace: str | None = None) -> list[dict[str, Any]]:
        """Every object of a custom resource, in one namespace or all, page by page."""
        if namespace:
            return self._raw_items(self.custom_objects.list_namespaced_custom_object,
                                   group, version, namespace, plural)
        return self._raw_items(self.custom_objects.list_cluster_custom_object,
                               group, version, plural)

    def read_custom_object(self, group: str, version: str, plural: str, namespace: str,
                           name: str) -> dict[str, Any] | None:
        """One custom object, or None when it does not exist."""
        try:
            response = self.custom_objects.get_namespaced_custom_object(
                group, version, namespace, plural, name, _preload_content=False)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return cast(dict[str, Any], orjson.loads(_body(response)))

    def replace_custom_object_status(self, group: str, version: str, plural: str,
                                     obj: dict[str, Any], status: dict[str, Any]
                                     ) -> dict[str, Any] | None:
        """PUT `status` on /status at the object's resourceVersion; None if it changed (409).

        A conflict means another writer got there first: the next cycle re-reads and decides
        again, so it is not retried here.
        """
        metadata = obj.get("metadata") or {}
        body = {**obj, "status": status}
        try:
            response = self.custom_objects.replace_namespaced_custom_object_status(
                group, version, metadata.get("namespace", ""), plural, metadata.get("name", ""),
                body, _preload_content=False)
        except ApiException as error:
            if error.status == 409:
                return None
            raise
        return cast(dict[str, Any], orjson.loads(_body(response)))

    # --- scale targets --------------------------------------------------------------------------

    _SCALE_CALLS: ClassVar[dict[str, tuple[str, str]]] = {
        "Deployment": ("read_namespaced_deployment_scale", "patch_namespaced_deployment_scale"),
        "StatefulSet": ("read_namespaced_stateful_set_scale",
                        "patch_namespaced_stateful_set_scale"),
        "ReplicaSet": ("read_namespaced_replica_set_scale", "patch_namespaced_replica_set_scale"),
    }

    def _scale_call(self, kind: str, which: int) -> Any:
        calls = self._SCALE_CALLS.get(kind)
        if calls is None:
            raise InputError([unsupported_scale_kind(kind)])
        return getattr(self.apps, calls[which])

    def read_scale(self, kind: str, namespace: str, name: str) -> TargetScale | None:
        """The target's `/scale` (autoscaling/v1 Scale), or None when it does not exist."""
        try:
            response = self._scale_call(kind, 0)(name, namespace, _preload_content=False)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        scale = orjson.loads(_body(response))
        spec, status = scale.get("spec") or {}, scale.get("status") or {}
        return TargetScale(kind, name, namespace, int(spec.get("replicas") or 0),
                           int(status.get("replicas") or 0), str(status.get("selector") or ""))

    def patch_scale(self, kind: str, namespace: str, name: str, replicas: int) -> int:
        """Set the target's replicas through `/scale` (an absolute value: safe to retry)."""
        response = self._scale_call(kind, 1)(name, namespace, {"spec": {"replicas": replicas}},
                                             _preload_content=False)
        return int((orjson.loads(_body(response)).get("spec") or {}).get("replicas") or 0)

    def list_pod_objects(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        """A namespace's pods matching a selector, as raw JSON (a scale target's pods)."""
        return self._raw_items(self.core.list_namespaced_pod, namespace,
                               label_selector=label_selector)

    # --- drain and the Cluster Autoscaler's inputs ---------------------------------------------

    @property
    def policy(self) -> client.PolicyV1Api:
        return client.PolicyV1Api(self.api)

    def evict_pod(self, namespace: str, name: str, uid: str = "") -> bool:
        """Evict through the Eviction API, so PodDisruptionBudgets are honoured (a DELETE
        would not be); True when evicted, False when the pod is already gone.

        With `uid`, only that pod: a retry after a lost answer must not evict the pod a
        StatefulSet has meanwhile re-created under the same name (409: the pod we meant is
        gone). A 429 raises `EvictionBlocked`: the budget is at its limit and the caller should
        leave the pod and try again on a later tick, not retry now.
        """
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        try:
            self.core.create_namespaced_pod_eviction(name, namespace, cast(Any, body),
                                                     _preload_content=False)
        except ApiException as error:
            if error.status == 404 or (error.status == 409 and uid):
                return False
            if error.status == 429:
                raise EvictionBlocked(f"{namespace}/{name}", _status_message(error)) from None
            raise
        return True

    def list_pod_disruption_budgets(self) -> list[dict[str, Any]]:
        """Every PodDisruptionBudget in all namespaces, as raw JSON (few: one page each time)."""
        return self._raw_items(self.policy.list_pod_disruption_budget_for_all_namespaces)

    def read_config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """A ConfigMap's `data` (e.g. the priority expander's), or None when it does not exist."""
        try:
            response = self.core.read_namespaced_config_map(name, namespace,
                                                            _preload_content=False)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        data = orjson.loads(_body(response)).get("data") or {}
        return {str(key): str(value) for key, value in data.items()}


def _named(entries: Any, kind: str, name: Any, source: str, key: str) -> dict[str, Any]:
    """The `kind` entry called `name` (`contexts[].name`), or an InputError naming `key`."""
    if not isinstance(entries, list):
        raise InputError([f"{source}: {kind}: must be a list, but it is "
                          f"{'missing' if entries is None else type(entries).__name__}"])
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get(kind[:-1]), dict):
            raise InputError([f"{source}: {kind}[{index}]: must be a mapping with name and "
                              f"{kind[:-1]}"])
        if entry.get("name") == name:
            return cast(dict[str, Any], entry[kind[:-1]])
    raise InputError([f"{source}: {key}: {name!r} names no entry of {kind}"])


_MESSAGE_CHARACTERS = 300


def _short(text: str) -> str:
    """The client's message on one line, cut short: it may quote a whole section of the file."""
    text = " ".join(text.split())
    if len(text) <= _MESSAGE_CHARACTERS:
        return text
    return f"{text[:_MESSAGE_CHARACTERS]}... ({len(text):,} characters)"


def check_default_kubeconfigs() -> None:
    """The files the client merges without `--kubeconfig` ($KUBECONFIG's, else ~/.kube/config),
    within every user file's limits before its own YAML reader walks them: a billion laughs
    there ran it out of memory writing its error message."""
    for name in (os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep):
        path = Path(name).expanduser()
        if name and names_a_file(path):
            load_document(read_bytes(path), str(path), "YAML")


def check_kubeconfig(path: str | Path) -> None:
    """The kubeconfig's current context, its cluster and user, checked before the client reads
    them: the client's own errors are tracebacks or name no key (issue 14). Read as every user
    file is (`tasks/core/documents.py`): a device, a recursive alias or a document nested too
    deep is refused here, before the client's own YAML reader would walk it."""
    source = str(path)
    if not names_a_file(path):
        raise InputError([f"{source}: no such kubeconfig file"])
    document = load_document(read_bytes(path), source, "YAML")
    if not isinstance(document, dict):
        raise InputError([f"{source}: a kubeconfig is a mapping with clusters, contexts, users "
                          "and current-context"])
    current = document.get("current-context")
    if not isinstance(current, str) or not current:
        raise InputError([f"{source}: current-context: must name one of contexts"])
    context = _named(document.get("contexts"), "contexts", current, source, "current-context")
    cluster_name = context.get("cluster")
    cluster = _named(document.get("clusters"), "clusters", cluster_name, source,
                     f"contexts[{current}].cluster")
    server = cluster.get("server")
    address = urlsplit(server) if isinstance(server, str) else None
    if address is None or address.scheme not in ("http", "https") or not address.hostname:
        raise InputError([f"{source}: clusters[{cluster_name}].server: must be the API "
                          "server's URL (https://host[:port])"])
    user = context.get("user")
    if user is not None:
        _named(document.get("users"), "users", user, source, f"contexts[{current}].user")


def _status_message(error: ApiException) -> str:
    """The `Status` message of a failed call and its causes ("needs 2 healthy pods ...")."""
    try:
        status = orjson.loads(error.body or b"{}")
    except orjson.JSONDecodeError:
        return str(error.reason or error.status)
    if not isinstance(status, dict):
        return str(error.reason or error.status)
    causes = [str(cause.get("message")) for cause in
              (status.get("details") or {}).get("causes") or [] if cause.get("message")]
    message = str(status.get("message") or error.reason or error.status)
    return "; ".join([message, *causes])


def _taint_json(key: str, value: str, effect: str) -> dict[str, str]:
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint
