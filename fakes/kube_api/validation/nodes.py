"""Nodes as the API server checks them (pkg/apis/core/validation/validation.go ValidateNode,
ValidateNodeUpdate, validateNodeTaints, ValidateNodeResources): taints, pod CIDRs, the
status's capacity and allocatable quantities, and on update the fields that may only be set
once (podCIDRs, providerID) and the node config source.

Upstream reports the taints under `metadata.taints[i]` (ValidateNode passes the metadata path
to validateNodeTaints), and so does the fake."""

from __future__ import annotations

import ipaddress
from typing import Any

from kube_elevator.fakes.kube_api.resources import Obj
from kube_elevator.fakes.kube_api.validation.field import (
    FieldError,
    GoValue,
    duplicate,
    forbidden,
    invalid,
    required,
)
from kube_elevator.fakes.kube_api.validation.pods import quantity_errors, taint_effect_errors
from kube_elevator.tasks.core.name_formats import label_value, qualified_name

_CIDR = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
_ONE_PER_FAMILY = "may specify no more than one CIDR for each IP family"
_SET_ONCE = 'node updates may not change {} except from "" to valid'
_CONFIG_SOURCE = "exactly one reference subfield must be non-nil"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def taint_errors(taints: Any, path: str) -> list[FieldError]:
    """validateNodeTaints: keys qualified names, values label values, effects known, unique
    by (key, effect)."""
    errors: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(_list(taints)):
        at, taint = f"{path}[{index}]", _dict(taint)
        key, value = str(taint.get("key") or ""), str(taint.get("value") or "")
        effect = taint.get("effect") or ""
        errors.extend(invalid(f"{at}.key", key, msg) for msg in qualified_name(key))
        msgs = label_value(value)
        if msgs:
            errors.append(invalid(f"{at}.value", value, ";".join(msgs)))
        errors.extend(taint_effect_errors(effect, False, f"{at}.effect"))
        if (key, effect) in seen:
            shown = GoValue(f'core.Taint{{Key:"{key}", Value:"{value}", Effect:"{effect}", '
                            "TimeAdded:<nil>}")
            errors.append(duplicate(at, shown, "taints must be unique by key and effect pair"))
            continue
        seen.add((key, effect))
    return errors


def pod_cidrs(spec: dict[str, Any]) -> list[str]:
    """The internal PodCIDRs: v1's `podCIDRs`, else its `podCIDR` (Convert_v1_NodeSpec)."""
    cidrs = [str(c) for c in _list(spec.get("podCIDRs"))]
    if not cidrs and spec.get("podCIDR"):
        cidrs = [str(spec["podCIDR"])]
    return cidrs


def _cidr_errors(cidrs: list[str]) -> list[FieldError]:
    errors: list[FieldError] = []
    families: list[int] = []
    for index, cidr in enumerate(cidrs):
        address, slash, bits = cidr.partition("/")
        try:  # net.ParseCIDR: an address, "/", a prefix length (host bits may be set)
            if not slash or not bits.isdigit():
                raise ValueError(cidr)
            families.append(ipaddress.ip_network(f"{address}/{bits}", strict=False).version)
        except ValueError:
            errors.append(invalid(f"spec.podCIDRs[{index}]", cidr, _CIDR))
    if len(cidrs) > 1 and not errors and (len(cidrs) > 2 or len(set(families)) != 2):
        shown = GoValue("[]string{" + ", ".join(f'"{c}"' for c in cidrs) + "}")
        errors.append(invalid("spec.podCIDRs", shown, _ONE_PER_FAMILY))
    return errors


def resource_errors(status: Any) -> list[FieldError]:
    """ValidateNodeResources: every capacity and allocatable quantity valid and not
    negative."""
    errors: list[FieldError] = []
    for part in ("capacity", "allocatable"):
        for name, text in _dict(_dict(status).get(part)).items():
            errors.extend(quantity_errors(str(name), text, f"status.{part}.{name}")[0])
    return errors


def node_errors(node: Obj) -> list[FieldError]:
    """ValidateNode: taints, pod CIDRs, resources (metadata is meta.py's)."""
    spec = _dict(node.get("spec"))
    errors = taint_errors(spec.get("taints"), "metadata.taints")
    errors += resource_errors(node.get("status"))
    errors += _cidr_errors(pod_cidrs(spec))
    return errors


def _config_source_errors(source: Any) -> list[FieldError]:
    """validateNodeConfigSourceSpec: exactly one reference (configMap), and what it names."""
    source = _dict(source)
    config_map = source.get("configMap")
    if not isinstance(config_map, dict):
        return [invalid("spec.configSource", GoValue("core.NodeConfigSource{ConfigMap:nil}"),
                        _CONFIG_SOURCE)]
    errors: list[FieldError] = []
    at = "spec.configSource.configMap"
    for key in ("namespace", "name", "kubeletConfigKey"):
        if not config_map.get(key):
            errors.append(required(f"{at}.{key}", f"{key} must be set"))
    for key in ("uid", "resourceVersion"):
        if config_map.get(key):
            errors.append(forbidden(f"{at}.{key}", f"{key} must not be set in spec"))
    return errors


def node_update_errors(old: Obj, new: Obj) -> list[FieldError]:
    """ValidateNodeUpdate's own rules: podCIDRs and providerID set once, no duplicate
    addresses, a config source well formed."""
    before, after = _dict(old.get("spec")), _dict(new.get("spec"))
    errors: list[FieldError] = []
    old_cidrs, new_cidrs = pod_cidrs(before), pod_cidrs(after)
    if old_cidrs and (len(old_cidrs) != len(new_cidrs) or old_cidrs != new_cidrs):
        changed = 1 if len(old_cidrs) != len(new_cidrs) else sum(
            a != b for a, b in zip(old_cidrs, new_cidrs, strict=True))
        errors.extend([forbidden("spec.podCIDRs", _SET_ONCE.format("podCIDR"))] * changed)
    provider = before.get("providerID") or ""
    if provider and provider != (after.get("providerID") or ""):
        errors.append(forbidden("spec.providerID", _SET_ONCE.format("providerID")))
    if after.get("configSource") is not None:
        errors += _config_source_errors(after["configSource"])
    seen: list[Any] = []
    for index, address in enumerate(_list(_dict(new.get("status")).get("addresses"))):
        if address in seen:
            shown = GoValue(f'core.NodeAddress{{Type:"{_dict(address).get("type") or ""}", '
                            f'Address:"{_dict(address).get("address") or ""}"}}')
            errors.append(duplicate(f"status.addresses[{index}]", shown))
        seen.append(address)
    if before.get("externalID") != after.get("externalID"):
        errors.append(forbidden("spec.externalID", "may not be updated"))
    return errors


__all__ = ["node_errors", "node_update_errors", "pod_cidrs", "resource_errors", "taint_errors"]
