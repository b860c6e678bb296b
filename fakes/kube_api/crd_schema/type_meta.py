"""A custom object's `apiVersion` and `kind` checked against the resource it is written to, as
apiextensions does: an apiVersion of another version fails the decode (400, crdConversion's
unstructured decoder: "the API version in the data ... does not match the expected API
version ..."), a kind other than the CRD's is a 422 on `kind` named by the kind sent
(pkg/registry/customresource/validator.go ValidateTypeMeta)."""

from __future__ import annotations

from typing import Any

from kube_elevator.fakes.kube_api.crd_schema.field_errors import FieldError, invalid
from kube_elevator.fakes.kube_api.errors import BadRequest
from kube_elevator.fakes.kube_api.resources import ResourceType


def check_type_meta(rt: ResourceType, body: dict[str, Any]) -> None:
    """Raise the server's error for a custom object whose type meta names another type."""
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if isinstance(api_version, str) and api_version and api_version != rt.api_version:
        raise BadRequest(f"the API version in the data ({api_version}) does not match the "
                         f"expected API version ({rt.api_version})")
    if isinstance(kind, str) and kind and kind != rt.kind:
        meta = body.get("metadata")
        name = str(meta.get("name") or "") if isinstance(meta, dict) else ""
        raise invalid(kind, rt.group, name,
                      [FieldError("kind", "FieldValueInvalid", kind, f"must be {rt.kind}")])


__all__ = ["check_type_meta"]
