"""The leader-election Lease on the wire: client-go's `resourcelock/leaselock.go`.

`get` reads the Lease and keeps it; `update` sends the Lease last read or written with its spec
replaced, so the write carries that `resourceVersion` and fails with 409 (`LeaseConflict`) when
another candidate wrote in between; `create` makes it when there is none. Every call has a
timeout the caller gives (the election's renew deadline bounds a renewal, as client-go's context
does): a hung API server must not hold a leader past the point where it must stop acting.

The calls go through the client's object API (the same URLs as its Lease API): its typed
`V1Lease` would re-format `acquireTime` and `renewTime` as Python's isoformat, which an API
server's MicroTime parser (RFC 3339 with six fractional digits) refuses.
"""

from __future__ import annotations

from typing import Any, cast

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube_elevator.tasks.core.errors import LeaseConflict
from kube_elevator.tasks.core.leader_election import LeaderRecord
from kube_elevator.tasks.core.timeouts import timeouts

MANAGED_BY = {"app.kubernetes.io/managed-by": "kube-elevator"}
LEASES = ("coordination.k8s.io", "v1", "leases")  # group, version, plural


def record_of(spec: dict[str, Any]) -> LeaderRecord:
    """`LeaseSpecToLeaderElectionRecord`: absent fields are empty."""
    return LeaderRecord(
        holder_identity=str(spec.get("holderIdentity") or ""),
        lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=str(spec.get("acquireTime") or ""),
        renew_time=str(spec.get("renewTime") or ""),
        lease_transitions=int(spec.get("leaseTransitions") or 0),
    )


def spec_of(record: LeaderRecord) -> dict[str, Any]:
    """`LeaderElectionRecordToLeaseSpec`: every field written, as client-go writes them."""
    return {"holderIdentity": record.holder_identity,
            "leaseDurationSeconds": record.lease_duration_seconds,
            "acquireTime": record.acquire_time, "renewTime": record.renew_time,
            "leaseTransitions": record.lease_transitions}


class LeaderLease:
    """One Lease, `namespace/name`, as a lock: get, create, update at the version held."""

    def __init__(self, api_client: client.ApiClient, namespace: str, name: str) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.namespace = namespace
        self.name = name
        self._lease: dict[str, Any] | None = None  # as last read or written

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    @staticmethod
    def _timeout(seconds: float) -> tuple[float, float]:
        """(connect, read), neither past `seconds` nor past the usual limits."""
        limits = timeouts()
        return (min(limits.connect_seconds, seconds), min(limits.read_seconds, seconds))

    def get(self, timeout_seconds: float) -> LeaderRecord | None:
        """The record in the Lease, or None when there is no Lease."""
        try:
            response = self.api.get_namespaced_custom_object(
                *LEASES[:2], self.namespace, LEASES[2], self.name, _preload_content=False,
                _request_timeout=self._timeout(timeout_seconds))
        except ApiException as error:
            if error.status == 404:
                self._lease = None
                return None
            raise
        self._lease = orjson.loads(cast(Any, response).data)
        return record_of(self._lease.get("spec") or {})

    def create(self, record: LeaderRecord, timeout_seconds: float) -> None:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": MANAGED_BY},
                "spec": spec_of(record)}
        self._lease = self._written(lambda timeout: self.api.create_namespaced_custom_object(
            *LEASES[:2], self.namespace, LEASES[2], body, _preload_content=False,
            _request_timeout=timeout), timeout_seconds)

    def update(self, record: LeaderRecord, timeout_seconds: float) -> None:
        """Replace the spec of the Lease last read or written; LeaseConflict if it changed
        since, RuntimeError before any `get` or `create` (as leaselock.go refuses)."""
        if self._lease is None:
            raise RuntimeError("lease not initialized, call get or create first")
        body = {**self._lease, "spec": spec_of(record)}
        self._lease = self._written(lambda timeout: self.api.replace_namespaced_custom_object(
            *LEASES[:2], self.namespace, LEASES[2], self.name, body, _preload_content=False,
            _request_timeout=timeout), timeout_seconds)

    def _written(self, call: Any, timeout_seconds: float) -> dict[str, Any]:
        try:
            response = call(self._timeout(timeout_seconds))
        except ApiException as error:
            if error.status == 409:
                raise LeaseConflict(f"Lease {self.describe()} was written by another "
                                    "candidate") from None
            raise
        written: dict[str, Any] = orjson.loads(cast(Any, response).data)
        return written
