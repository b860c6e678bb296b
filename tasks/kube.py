"""The Kubernetes adapter: the official client, raw JSON, and writes that are safe to retry.

Lists are paged (`limit`/`continue`) and read as raw bytes (`_preload_content=False`) decoded
into slim records: the client's typed models cost ~30 s and 3 GB for 100,000 pods. Writes are
"ensure" operations carrying `resourceVersion`, so a retry or a concurrent writer is detected
(409) instead of silently overwriting.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import orjson
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tasks.collect import ClusterSnapshot, decode_page
from tasks.errors import InputError, LeaseConflict, NodeChanged
from tasks.filter_nodes import ESCALATOR_TAINT_KEY
from tasks.lock import HOLDER_IDENTITY, LAST_TICK, GroupState, state_from_annotations, state_to_annotations
from tasks.resources import OBJECT_DECODER, NodeRecord, PodRecord, node_record

# Escalator §4: completed and failed pods never count.
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
DEFAULT_PAGE_SIZE = 500
CONFLICT_ATTEMPTS = 5
MERGE_PATCH = "application/merge-patch+json"


def _rfc3339(unix_seconds: float) -> str:
    return datetime.fromtimestamp(unix_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _body(response: object) -> bytes:
    """The raw bytes of a `_preload_content=False` answer (typed as the model by the client)."""
    return cast(Any, response).data  # type: ignore[no-any-return]


@dataclass
class KubeClient:
    """The calls the autoscalers make, on one `kubernetes.client.ApiClient`."""

    api: client.ApiClient
    page_size: int = DEFAULT_PAGE_SIZE

    @classmethod
    def from_config(cls, kubeconfig: str | Path | None = None) -> KubeClient:
        """A kubeconfig file, else in-cluster config inside a pod, else the default kubeconfig."""
        configuration = client.Configuration()
        if kubeconfig is not None:
            config.load_kube_config(config_file=str(kubeconfig),  # type: ignore[no-untyped-call]
                                    client_configuration=configuration)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return cls(client.ApiClient(configuration))

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def coordination(self) -> client.CoordinationV1Api:
        return client.CoordinationV1Api(self.api)

    # --- reads ----------------------------------------------------------------------------

    def _paged(self, list_call: Any, source: str, **query: Any) -> ClusterSnapshot:
        snapshot = ClusterSnapshot()
        token: str | None = None
        count = 0
        while True:
            response = list_call(limit=self.page_size, _continue=token, _preload_content=False,
                                 **query)
            try:
                token, items = decode_page(_body(response), source, snapshot, count)
            except InputError as error:
                # An object the server gave us that we cannot read: name it, do not retry.
                raise InputError([f"API {problem}" for problem in error.problems]) from None
            count += items
            if not token:
                return snapshot

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
                                         LAST_TICK: _rfc3339(now)},
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
        return GroupState(state.lock, state.dry_mode_tainted, state.node_capacity, str(version))


def _taint_json(key: str, value: str, effect: str) -> dict[str, str]:
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint
