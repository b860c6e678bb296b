"""PersistentVolumes and PersistentVolumeClaims as the API server checks them
(pkg/apis/core/validation/validation.go ValidatePersistentVolumeSpec,
ValidatePersistentVolumeUpdate, ValidatePersistentVolumeClaimSpec,
ValidatePersistentVolumeClaimUpdate).

A volume: access modes (at least one, known, ReadWriteOncePod alone), a capacity of exactly
`storage`, positive; exactly one volume source (`spec: Required value: must specify a volume
type`, a second one `Forbidden: may not specify more than 1 volume type`), the common sources'
required parts; a known reclaim policy and volume mode; a local volume needs node affinity; on
update the source, the volume mode and a set node affinity are immutable.  A claim: access
modes, a positive `storage` request (upstream's path `spec.resources[storage]`), a known volume
mode; on update the spec is immutable except a bound claim's requests, a first `volumeName`,
and a storage request may not drop to the recorded capacity (RecoverVolumeExpansionFailure,
on in the 1.32 the fake reports)."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from kube_elevator.fakes.kube_api.resources import Obj
from kube_elevator.fakes.kube_api.validation.field import (
    FieldError,
    GoValue,
    forbidden,
    invalid,
    not_supported,
    required,
)
from kube_elevator.fakes.kube_api.validation.go_cmp_diff import go_diff
from kube_elevator.fakes.kube_api.validation.kinds import label_selector_errors
from kube_elevator.fakes.kube_api.validation.meta_update import IMMUTABLE
from kube_elevator.fakes.kube_api.validation.pods import quantity_errors
from kube_elevator.tasks.core.name_formats import dns1123_subdomain
from kube_elevator.tasks.core.quantity import canonical_quantity

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
VOLUME_MODES = ("Block", "Filesystem")
RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
# PersistentVolumeSource's members in the order ValidatePersistentVolumeSpec counts them.
VOLUME_SOURCES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "glusterfs",
                  "flocker", "nfs", "rbd", "quobyte", "cephfs", "iscsi", "cinder", "fc",
                  "flexVolume", "azureFile", "vsphereVolume", "photonPersistentDisk",
                  "portworxVolume", "azureDisk", "scaleIO", "local", "storageos", "csi")
# What the common sources must name (validateHostPathVolumeSource, validateNFSVolumeSource,
# validateLocalVolumeSource, validateCSIPersistentVolumeSource).
_SOURCE_REQUIRED = {"hostPath": ("path",), "nfs": ("server", "path"), "local": ("path",),
                    "csi": ("driver", "volumeHandle")}
_POSITIVE = "must be greater than zero"
_PVC_IMMUTABLE = ("spec is immutable after creation except resources.requests and "
                  "volumeAttributesClassName for bound claims")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _access_mode_errors(modes: Any, path: str, required_detail: str) -> list[FieldError]:
    modes = _list(modes)
    errors = [] if modes else [required(path, required_detail)]
    errors += [not_supported(path, mode, ACCESS_MODES) for mode in modes
               if mode not in ACCESS_MODES]
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        errors.append(forbidden(path, "may not use ReadWriteOncePod with other access modes"))
    return errors


def _positive(name: str, text: Any, path: str) -> list[FieldError]:
    found, value = quantity_errors(name, text, path)
    if isinstance(value, Fraction) and value <= 0:
        return [invalid(path, canonical_quantity(str(text)), _POSITIVE)]
    return found


def _class_name_errors(name: Any, path: str) -> list[FieldError]:
    return [invalid(path, name, msg) for msg in dns1123_subdomain(str(name))] if name else []


def _source_errors(spec: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    count = 0
    for source in VOLUME_SOURCES:
        if spec.get(source) is None:
            continue
        if count:
            errors.append(forbidden(f"spec.{source}", "may not specify more than 1 volume type"))
            continue
        count += 1
        for part in _SOURCE_REQUIRED.get(source, ()):
            if not _dict(spec[source]).get(part):
                errors.append(required(f"spec.{source}.{part}", ""))
        path = _dict(spec[source]).get("path")
        if source == "nfs" and path and not str(path).startswith("/"):
            errors.append(invalid("spec.nfs.path", path, "must be an absolute path"))
    if not count:
        errors.append(required("spec", "must specify a volume type"))
    return errors


def pv_errors(pv: Obj) -> list[FieldError]:
    """ValidatePersistentVolumeSpec (not inline)."""
    spec = _dict(pv.get("spec"))
    errors = _access_mode_errors(spec.get("accessModes"), "spec.accessModes", "")
    capacity = _dict(spec.get("capacity"))
    if not capacity:
        errors.append(required("spec.capacity", ""))
    if "storage" not in capacity or len(capacity) > 1:
        shown = GoValue("core.ResourceList{" + ", ".join(
            f'"{k}":resource.Quantity{{{json.dumps(str(v))}}}' for k, v in capacity.items()) + "}")
        errors.append(not_supported("spec.capacity", shown, ["storage"]))
    for name, text in capacity.items():
        errors += _positive(str(name), text, f"spec.capacity[{name}]")
    errors += _class_name_errors(spec.get("storageClassName"), "spec.storageClassName")
    mode = spec.get("volumeMode")
    if mode is not None and mode not in VOLUME_MODES:
        errors.append(not_supported("spec.volumeMode", mode, VOLUME_MODES))
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy and policy not in RECLAIM_POLICIES:
        errors.append(not_supported("spec.persistentVolumeReclaimPolicy", policy,
                                    RECLAIM_POLICIES))
    errors += _source_errors(spec)
    if spec.get("local") is not None and not _dict(spec.get("nodeAffinity")).get("required"):
        errors.append(required("spec.nodeAffinity", "Local volume requires node affinity"))
    return errors


def _sources(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: spec[k] for k in VOLUME_SOURCES if spec.get(k) is not None}


def pv_update_errors(old: Obj, new: Obj) -> list[FieldError]:
    """ValidatePersistentVolumeUpdate: the source, the volume mode and a node affinity once
    set are immutable."""
    before, after = _dict(old.get("spec")), _dict(new.get("spec"))
    errors: list[FieldError] = []
    if _sources(before) != _sources(after):
        errors.append(forbidden("spec.persistentvolumesource", "spec.persistentvolumesource is "
                                "immutable after creation\n" + go_diff(
                                    before, after, "core.PersistentVolumeSource")))
    if before.get("volumeMode") != after.get("volumeMode"):
        errors.append(invalid("volumeMode", after.get("volumeMode"), IMMUTABLE))
    if before.get("nodeAffinity") is not None and \
            before.get("nodeAffinity") != after.get("nodeAffinity"):
        errors.append(invalid("nodeAffinity", GoValue("&core.VolumeNodeAffinity{...}"),
                              IMMUTABLE))
    return errors


def pvc_errors(pvc: Obj) -> list[FieldError]:
    """ValidatePersistentVolumeClaimSpec."""
    spec = _dict(pvc.get("spec"))
    errors = _access_mode_errors(spec.get("accessModes"), "spec.accessModes",
                                 "at least 1 access mode is required")
    if spec.get("selector") is not None:
        errors += label_selector_errors(spec["selector"], "spec.selector")
    requests = _dict(_dict(spec.get("resources")).get("requests"))
    if "storage" not in requests:
        errors.append(required("spec.resources[storage]", ""))
    else:
        errors += _positive("storage", requests["storage"], "spec.resources[storage]")
    errors += _class_name_errors(spec.get("storageClassName"), "spec.storageClassName")
    mode = spec.get("volumeMode")
    if mode is not None and mode not in VOLUME_MODES:
        errors.append(not_supported("spec.volumeMode", mode, VOLUME_MODES))
    return errors


def _storage(resources: Any) -> Fraction | None:
    text = _dict(resources).get("storage")
    if text is None:
        return None
    value = quantity_errors("storage", text, "")[1]
    return value if isinstance(value, Fraction) else None


def pvc_update_errors(old: Obj, new: Obj) -> list[FieldError]:
    """ValidatePersistentVolumeClaimUpdate: the spec is fixed but for a first volumeName and
    a bound claim's requests; the request may not drop to the capacity recorded."""
    before, after = _dict(old.get("spec")), _dict(new.get("spec"))
    old_spec, new_spec = dict(before), dict(after)
    if not before.get("volumeName"):
        old_spec["volumeName"] = after.get("volumeName")
    bound = _dict(new.get("status")).get("phase") == "Bound"
    old_requests = _dict(_dict(before.get("resources")).get("requests"))
    if bound and _dict(after.get("resources")).get("requests") is not None:
        resources = dict(_dict(after.get("resources")))
        resources["requests"] = {**_dict(resources["requests"]),
                                 "storage": old_requests.get("storage")}
        new_spec["resources"] = resources
    new_spec.pop("volumeAttributesClassName", None)
    old_spec.pop("volumeAttributesClassName", None)
    errors: list[FieldError] = []
    if {k: v for k, v in new_spec.items() if v is not None} != \
            {k: v for k, v in old_spec.items() if v is not None}:
        errors.append(forbidden("spec", _PVC_IMMUTABLE + "\n" + go_diff(
            old_spec, new_spec, "core.PersistentVolumeClaimSpec")))
    old_size = _storage(old_requests)
    new_size = _storage(_dict(_dict(after.get("resources")).get("requests")))
    recorded = _storage(_dict(_dict(old.get("status")).get("capacity"))) or Fraction(0)
    if old_size is not None and new_size is not None and new_size < old_size \
            and new_size <= recorded:
        errors.append(forbidden("spec.resources.requests.storage",
                                "field can not be less than status.capacity"))
    if before.get("volumeMode") != after.get("volumeMode"):
        errors.append(invalid("volumeMode", after.get("volumeMode"), IMMUTABLE))
    return errors


__all__ = ["ACCESS_MODES", "VOLUME_SOURCES", "pv_errors", "pv_update_errors", "pvc_errors",
           "pvc_update_errors"]
