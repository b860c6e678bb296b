"""A fake Kubernetes API server for tests: real HTTP, real client, in-memory store.

The unmodified `kubernetes` Python client, `kubectl`, kr8s, lightkube and kopf talk to it over
HTTP (docs/harness.md, Compatibility), so code under test exercises its real request/response
handling (paging, watches, conflicts, Status errors) without a cluster.  A simulator running in
the same process drives the same store through `FakeKubeApi.create/get/list/replace/patch/delete`,
with the same semantics and resourceVersion bumps as HTTP writes, so watchers see its changes too.

Served: core/v1 pods (+eviction, +status), nodes (+status), events, configmaps, secrets,
namespaces;
events.k8s.io/v1 events (the core ones under their other names); coordination.k8s.io/v1 leases;
apps/v1 deployments, statefulsets and replicasets (+scale, +status); policy/v1
poddisruptionbudgets (+status), which evictions honour; apiextensions.k8s.io/v1
customresourcedefinitions, each CRD however stored (POSTed, `install_crd`,
`register_custom_resource`) serving its resource (+status, +scale as declared) until deleted,
stored per group and resource (`ResourceType.key`: one plural may be served by two groups);
the discovery documents kubectl needs.  Finalizers hold a deleted object (with a
deletionTimestamp) until the last is removed; PATCH takes JSON, merge, strategic-merge (415 on
custom resources) and server-side apply (`fakes/kube_api/apply.py`: field managers, conflicts,
managedFields).
Bodies and answers are JSON, or protobuf (`application/vnd.kubernetes.protobuf`, client-go's default)
for the built-in kinds (CustomResourceDefinitions included), as `negotiation.py` describes;
custom resources refuse protobuf (415/406).
A write to a built-in kind passes the API server's layers: over HTTP its field validation
(`fieldValidation`, `field_validation.py`, and the decoders' refusal of a field of the wrong JSON
type, `decode_types.py`; `FakeKubeApi(field_validation=False)` turns both off),
then (`write_path.py`) its defaults (`defaulting.py`), the default admission plugins' on a
created Pod (`admission.py`) and value validation with its 422 answers (`validation/`), each a
switch (docs/harness.md, Validation and defaulting). A custom resource passes its CRD's schema
layers (`crd_schema/`: pruning, defaults, validation, CEL; no CEL cost limits). Over HTTP, status
is written through `/status` only (a main-resource write keeps the stored status, a create starts
with none, as the strategies do); the in-process methods write what they are given, status too.
Deliberate simplifications, none of which the code under test should depend on: no
authentication, no admission beyond those defaults; quantities are not canonicalised;
pod deletion without finalizers is immediate (there is no kubelet to finish a graceful
delete), and lists are served from the latest state rather than a snapshot at the continue
token's resourceVersion (a token older than what the server remembers of that kind answers 410
Expired, as one past etcd's compaction does).
There is no disruption controller: a PodDisruptionBudget's `status` is computed from the
pods whenever it is read (get, list, write responses); watch events carry the stored object.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kube_elevator.fakes.kube_api.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Invalid,
    NotFound,
)
from kube_elevator.fakes.kube_api.patch import json_merge_patch, json_patch, strategic_merge_patch
from kube_elevator.fakes.kube_api.policy import RecordedRequest, pdb_status
from kube_elevator.fakes.kube_api.resources import RESOURCES, ResourceType, custom_resource_type

if TYPE_CHECKING:
    from kube_elevator.fakes.kube_api.server import FakeKubeApi


def __getattr__(name: str) -> Any:
    """`FakeKubeApi` on first use (PEP 562): the server (uvicorn, starlette, the validation
    layers) is most of this package's import, and `simulate --fast` uses only its policy and
    errors (issue 40)."""
    if name == "FakeKubeApi":
        from kube_elevator.fakes.kube_api.server import FakeKubeApi

        return FakeKubeApi
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "RESOURCES",
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "FakeKubeApi",
    "Invalid",
    "NotFound",
    "RecordedRequest",
    "ResourceType",
    "custom_resource_type",
    "json_merge_patch",
    "json_patch",
    "pdb_status",
    "strategic_merge_patch",
]
