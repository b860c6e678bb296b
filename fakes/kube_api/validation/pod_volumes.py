"""A pod's volumes and its containers' volume mounts as the API server checks them (kubernetes
pkg/apis/core/validation/validation.go ValidateVolumes, validateVolumeSource, the sources'
required parts, ValidateVolumeMounts, validateLocalDescendingPath).

A volume: a DNS-label name, unique; exactly one source (none is `Required value: must specify a
volume type`, though defaulting makes a bare volume an emptyDir first; a second is `Forbidden:
may not specify more than 1 volume type`, on the second source's path as upstream spells it,
`cephFS` and `downwarAPI` included).  Only a volume without errors can be mounted.  A mount:
a name that is such a volume (`Not found`), a mount path, unique in the container, a relative
subPath without `..`.  Not modelled: the sources' deeper rules (modes, items, projections, CSI
driver names), volume devices, mount propagation."""

from __future__ import annotations

from typing import Any

from kube_elevator.fakes.kube_api.validation.field import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_found,
    required,
)
from kube_elevator.tasks.core.name_formats import dns1123_label

# VolumeSource's members in validateVolumeSource's order, each with the path its "more than 1"
# error names (upstream's spelling) and the path its own checks use.
VOLUME_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("emptyDir", "emptyDir", "emptyDir"), ("hostPath", "hostPath", "hostPath"),
    ("gitRepo", "gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk", "persistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret", "secret"), ("nfs", "nfs", "nfs"), ("iscsi", "iscsi", "iscsi"),
    ("glusterfs", "glusterfs", "glusterfs"), ("flocker", "flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim", "persistentVolumeClaim"),
    ("rbd", "rbd", "rbd"), ("cinder", "cinder", "cinder"), ("cephfs", "cephFS", "cephfs"),
    ("quobyte", "quobyte", "quobyte"), ("downwardAPI", "downwarAPI", "downwardAPI"),
    ("fc", "fc", "fc"), ("flexVolume", "flexVolume", "flexVolume"),
    ("configMap", "configMap", "configMap"), ("azureFile", "azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk", "azureDisk"), ("storageos", "storageos", "storageos"),
    ("projected", "projected", "projected"), ("scaleIO", "scaleIO", "scaleIO"),
    ("csi", "csi", "csi"), ("ephemeral", "ephemeral", "ephemeral"),
)  # `image` too upstream, but the ImageVolume gate is off in 1.32: the field is dropped
# What each source must name (validateXVolumeSource's Required checks, JSON names).
_SOURCE_REQUIRED: dict[str, tuple[str, ...]] = {
    "hostPath": ("path",), "gitRepo": ("repository",), "gcePersistentDisk": ("pdName",),
    "awsElasticBlockStore": ("volumeID",), "secret": ("secretName",), "nfs": ("server", "path"),
    "iscsi": ("targetPortal", "iqn"), "glusterfs": ("endpoints", "path"),
    "persistentVolumeClaim": ("claimName",), "rbd": ("monitors", "image"),
    "cinder": ("volumeID",), "cephfs": ("monitors",), "flexVolume": ("driver",),
    "configMap": ("name",), "azureFile": ("secretName", "shareName"),
    "vsphereVolume": ("volumePath",), "photonPersistentDisk": ("pdID",),
    "portworxVolume": ("volumeID",), "azureDisk": ("diskName", "diskURI"),
    "scaleIO": ("gateway", "system", "volumeName"), "storageos": ("volumeName",),
    "ephemeral": ("volumeClaimTemplate",),
}
MORE_THAN_ONE_SOURCE = "may not specify more than 1 volume type"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


_ORDER = {source: index for index, (source, _, _) in enumerate(VOLUME_SOURCES)}


def _source_errors(volume: dict[str, Any], path: str) -> list[FieldError]:
    """validateVolumeSource: one source and its required parts."""
    # The volume's own keys, in upstream's order (cheaper than asking for all 29 sources).
    present = [_ORDER[key] for key in volume if key in _ORDER and volume[key] is not None]
    if len(present) == 1 and VOLUME_SOURCES[present[0]][0] not in _SOURCE_REQUIRED:
        return []  # the common case (an emptyDir): one source with nothing required
    present.sort()
    errors: list[FieldError] = []
    count = 0
    for source, extra_path, own_path in (VOLUME_SOURCES[index] for index in present):
        body = volume[source]
        if count:
            errors.append(forbidden(f"{path}.{extra_path}", MORE_THAN_ONE_SOURCE))
            continue
        count += 1
        body = _dict(body)
        for part in _SOURCE_REQUIRED.get(source, ()):
            if not body.get(part):
                errors.append(required(f"{path}.{own_path}.{part}"))
                if source == "hostPath":
                    break  # validateHostPathVolumeSource returns at once
        if source == "nfs" and not str(body.get("path") or "").startswith("/"):
            errors.append(invalid(f"{path}.nfs.path", body.get("path") or "",
                                  "must be an absolute path"))
    if not count:
        errors.append(required(path, "must specify a volume type"))
    return errors


def volume_errors(volumes: Any, path: str) -> tuple[set[str], list[FieldError]]:
    """ValidateVolumes: the names a mount may use (the volumes without errors) and the
    errors."""
    names: set[str] = set()
    errors: list[FieldError] = []
    if not isinstance(volumes, list):
        return names, errors
    for index, volume in enumerate(volumes):
        at, volume = f"{path}[{index}]", _dict(volume)
        found = _source_errors(volume, at)
        name = volume.get("name") or ""
        if not name:
            found.append(required(f"{at}.name"))
        else:
            messages = dns1123_label(str(name))
            if messages:
                found.extend(invalid(f"{at}.name", name, msg) for msg in messages)
        if name in names:
            found.append(duplicate(f"{at}.name", name))
        if found:
            errors.extend(found)
        else:
            names.add(str(name))
    return names, errors


def _descending_path_errors(target: str, path: str) -> list[FieldError]:
    """validateLocalDescendingPath: relative, no `..` element."""
    errors: list[FieldError] = []
    if target.startswith("/"):
        errors.append(invalid(path, target, "must be a relative path"))
    if ".." in target.replace("\\", "/").split("/"):
        errors.append(invalid(path, target, "must not contain '..'"))
    return errors


def volume_mount_errors(mounts: Any, volumes: set[str], path: str) -> list[FieldError]:
    """ValidateVolumeMounts (the subPath's errors name `volumeMounts.subPath`, unindexed, as
    upstream's do)."""
    if not isinstance(mounts, list):
        return []
    errors: list[FieldError] = []
    mount_paths: set[str] = set()
    for index, mount in enumerate(mounts):
        mount = _dict(mount)
        name = mount.get("name") or ""
        mount_path = mount.get("mountPath")
        if name in volumes and mount_path and isinstance(mount_path, str) and \
                mount_path not in mount_paths and not mount.get("subPath"):
            mount_paths.add(mount_path)  # the common case: nothing to report
            continue
        at = f"{path}[{index}]"
        if not name:
            errors.append(required(f"{at}.name"))
        if name not in volumes:
            errors.append(not_found(f"{at}.name", name))
        mount_path = str(mount.get("mountPath") or "")
        if not mount_path:
            errors.append(required(f"{at}.mountPath"))
        if mount_path in mount_paths:
            errors.append(invalid(f"{at}.mountPath", mount_path, "must be unique"))
        mount_paths.add(mount_path)
        sub_path = mount.get("subPath") or ""
        if sub_path:
            errors.extend(_descending_path_errors(str(sub_path), f"{path}.subPath"))
    return errors


__all__ = ["MORE_THAN_ONE_SOURCE", "VOLUME_SOURCES", "volume_errors", "volume_mount_errors"]
