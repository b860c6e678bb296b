"""What the API server fills in on create that the code under test reads: a pod's container
requests from their limits (SetDefaults_Pod, pkg/apis/core/v1/defaults.go)."""

from __future__ import annotations

from typing import Any

# The container lists whose requests SetDefaults_Pod fills from limits; ephemeral containers are
# not among them (pkg/apis/core/v1/defaults.go; they may not set resources at all).
_DEFAULTED_CONTAINER_LISTS = ("containers", "initContainers")


def _requests_defaulted(container: Any) -> Any:
    """The container with each resource its limits name and its requests lack requested at the
    limit, as SetDefaults_Pod does; new dicts, so an in-process caller's body stays as it was."""
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        return container
    limits, requests = resources.get("limits"), resources.get("requests")
    # A body of the wrong shape is one the real server refuses to decode; stored as given here.
    if not isinstance(limits, dict) or not isinstance(requests, dict | None):
        return container
    missing = {name: value for name, value in limits.items() if name not in (requests or {})}
    if not missing:
        return container
    return {**container, "resources": {**resources, "requests": {**(requests or {}), **missing}}}


def pod_spec_defaulted(spec: Any) -> Any:
    """A created pod's spec with container requests defaulted from limits (SetDefaults_Pod),
    so a limits-only container is counted at its limits, as on a real cluster."""
    if not isinstance(spec, dict):
        return spec
    spec = dict(spec)
    for list_name in _DEFAULTED_CONTAINER_LISTS:
        if isinstance(spec.get(list_name), list):
            spec[list_name] = [_requests_defaulted(container) for container in spec[list_name]]
    return spec


__all__ = ["pod_spec_defaulted"]
