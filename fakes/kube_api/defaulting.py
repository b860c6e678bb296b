"""What the API server fills in on every write (its defaulting functions), so a controller
reads what a cluster serves: kubernetes pkg/apis/core/v1/defaults.go (SetDefaults_Pod,
SetDefaults_PodSpec, SetDefaults_Container, SetDefaults_ContainerPort, SetDefaults_Probe,
SetDefaults_Volume, SetDefaults_Namespace, SetDefaults_NodeStatus, SetDefaults_PersistentVolume,
SetDefaults_PersistentVolumeClaim), the v1 PodSpec conversion's `serviceAccount` mirror, and
pkg/apis/apps/v1/defaults.go (SetDefaults_Deployment, SetDefaults_ReplicaSet,
SetDefaults_StatefulSet).  The admission plugins' part is in `admission.py`.

Every function returns new dicts where it changes something, so an in-process caller's body
stays as it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kube_elevator.tasks.core.quantity import parse_quantity

Obj = dict[str, Any]

# The container lists whose requests SetDefaults_Pod fills from limits; ephemeral containers are
# not among them (pkg/apis/core/v1/defaults.go; they may not set resources at all).
_DEFAULTED_CONTAINER_LISTS = ("containers", "initContainers")
_ALL_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                   "failureThreshold": 3}
_VOLUME_SOURCES_WITH_MODE = ("configMap", "secret", "downwardAPI", "projected")
_VOLUME_MODE_DEFAULT = 0o644  # 420, DefaultMode of configMap, secret, downwardAPI, projected
_NOT_SOURCES = frozenset({"name"})


def _requests_defaulted(container: Any) -> Any:
    """The container with each resource its limits name and its requests lack requested at the
    limit, as SetDefaults_Pod does."""
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


def image_pull_policy(image: str) -> str:
    """SetDefaults_Container: `Always` when the image's tag is `latest` or absent (without a
    digest, ParseImageName takes `latest`), else `IfNotPresent`; an image that does not parse
    (none at all) has no tag."""
    if not image:
        return "IfNotPresent"
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ("" if digest else "latest")
    return "Always" if tag == "latest" else "IfNotPresent"


def _zero_filled(obj: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """`obj` with each of `defaults` set where it is absent or Go's zero value (0, "", null),
    as the SetDefaults_ functions test `== 0` / `== ""`."""
    return {**obj, **{key: value for key, value in defaults.items()
                      if obj.get(key) in (None, 0, "") and obj.get(key) is not False}}


def _handler_defaulted(handler: Any) -> Any:
    """SetDefaults_HTTPGetAction: an httpGet's path `/` and scheme HTTP."""
    if not isinstance(handler, dict) or not isinstance(handler.get("httpGet"), dict):
        return handler
    return {**handler, "httpGet": _zero_filled(handler["httpGet"],
                                               {"path": "/", "scheme": "HTTP"})}


def _probe_defaulted(probe: Any) -> Any:
    """SetDefaults_Probe."""
    if not isinstance(probe, dict):
        return probe
    return _handler_defaulted(_zero_filled(probe, _PROBE_DEFAULTS))


def _lifecycle_defaulted(lifecycle: Any) -> Any:
    if not isinstance(lifecycle, dict):
        return lifecycle
    return {**lifecycle, **{hook: _handler_defaulted(lifecycle[hook])
                            for hook in ("postStart", "preStop") if hook in lifecycle}}


def _container_defaulted(container: Any, host_network: bool) -> Any:
    if not isinstance(container, dict):
        return container
    container = dict(container)
    if not container.get("imagePullPolicy"):
        image = container.get("image")
        container["imagePullPolicy"] = image_pull_policy(image if isinstance(image, str) else "")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    ports = container.get("ports")
    if isinstance(ports, list):
        defaulted = []
        for port in ports:
            if isinstance(port, dict):
                port = {"protocol": "TCP", **port}
                if host_network and not port.get("hostPort") and "containerPort" in port:
                    port["hostPort"] = port["containerPort"]  # defaultHostNetworkPorts
            defaulted.append(port)
        container["ports"] = defaulted
    for probe in _PROBES:
        if probe in container:
            container[probe] = _probe_defaulted(container[probe])
    if "lifecycle" in container:
        container["lifecycle"] = _lifecycle_defaulted(container["lifecycle"])
    env = container.get("env")
    if isinstance(env, list):
        container["env"] = [_env_defaulted(item) for item in env]
    return container


def _field_ref_defaulted(holder: Any) -> Any:
    """SetDefaults_ObjectFieldSelector: a fieldRef's apiVersion is v1."""
    ref = holder.get("fieldRef") if isinstance(holder, dict) else None
    if not isinstance(ref, dict) or ref.get("apiVersion"):
        return holder
    return {**holder, "fieldRef": {"apiVersion": "v1", **ref}}


def _env_defaulted(item: Any) -> Any:
    source = item.get("valueFrom") if isinstance(item, dict) else None
    if not isinstance(source, dict):
        return item
    return {**item, "valueFrom": _field_ref_defaulted(source)}


def _downward_items(source: Any) -> Any:
    if not isinstance(source, dict) or not isinstance(source.get("items"), list):
        return source
    return {**source, "items": [_field_ref_defaulted(item) for item in source["items"]]}


def _projection_defaulted(projection: Any) -> Any:
    """A projected source: downward API items' fieldRefs, a token's expirationSeconds 3600
    (SetDefaults_ServiceAccountTokenProjection)."""
    if not isinstance(projection, dict):
        return projection
    projection = dict(projection)
    if "downwardAPI" in projection:
        projection["downwardAPI"] = _downward_items(projection["downwardAPI"])
    token = projection.get("serviceAccountToken")
    if isinstance(token, dict):
        projection["serviceAccountToken"] = {"expirationSeconds": 3600, **token}
    return projection


def _volume_defaulted(volume: Any) -> Any:
    """SetDefaults_Volume (no source: an emptyDir) and the sources' defaultMode 0644."""
    if not isinstance(volume, dict):
        return volume
    if all(value is None for key, value in volume.items() if key not in _NOT_SOURCES):
        # util.AllPtrFieldsNil: a source given as null is no source
        return {**{k: v for k, v in volume.items() if k in _NOT_SOURCES}, "emptyDir": {}}
    volume = dict(volume)
    for source in _VOLUME_SOURCES_WITH_MODE:
        if isinstance(volume.get(source), dict):
            volume[source] = {"defaultMode": _VOLUME_MODE_DEFAULT, **volume[source]}
    if "downwardAPI" in volume:
        volume["downwardAPI"] = _downward_items(volume["downwardAPI"])
    projected = volume.get("projected")
    if isinstance(projected, dict) and isinstance(projected.get("sources"), list):
        volume["projected"] = {**projected, "sources": [_projection_defaulted(p)
                                                        for p in projected["sources"]]}
    if isinstance(volume.get("hostPath"), dict):
        volume["hostPath"] = {"type": "", **volume["hostPath"]}
    return volume


def pod_template_spec_defaulted(spec: Any) -> Any:
    """SetDefaults_PodSpec and the containers' defaults: what a pod template gets, and a pod
    before SetDefaults_Pod's own part."""
    if not isinstance(spec, dict):
        return spec
    spec = dict(spec)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("securityContext", {})
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", "default-scheduler")
    # The v1 conversion: the deprecated `serviceAccount` and serviceAccountName mirror each
    # other (Convert_v1_PodSpec_To_core_PodSpec and back).
    if not spec.get("serviceAccountName") and spec.get("serviceAccount"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    host_network = bool(spec.get("hostNetwork"))
    for list_name in _ALL_CONTAINER_LISTS:
        if isinstance(spec.get(list_name), list):
            spec[list_name] = [_container_defaulted(c, host_network) for c in spec[list_name]]
    if isinstance(spec.get("volumes"), list):
        spec["volumes"] = [_volume_defaulted(volume) for volume in spec["volumes"]]
    return spec


def _pod(pod: Obj) -> Obj:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return pod
    spec = pod_spec_defaulted(pod_template_spec_defaulted(spec))
    spec.setdefault("enableServiceLinks", True)
    return {**pod, "spec": spec}


def _template_defaulted(spec: dict[str, Any]) -> dict[str, Any]:
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        spec["template"] = {**template,
                            "spec": pod_template_spec_defaulted(template["spec"])}
    return spec


def _spec(obj: Obj) -> dict[str, Any] | None:
    spec = obj.get("spec")
    return dict(spec) if isinstance(spec, dict) else None


def _deployment(obj: Obj) -> Obj:
    spec = _spec(obj)
    if spec is None:
        return obj
    spec.setdefault("replicas", 1)
    strategy = dict(spec.get("strategy") or {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        strategy["rollingUpdate"] = {"maxUnavailable": "25%", "maxSurge": "25%",
                                     **(strategy.get("rollingUpdate") or {})}
    spec["strategy"] = strategy
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    return {**obj, "spec": _template_defaulted(spec)}


def _replicaset(obj: Obj) -> Obj:
    spec = _spec(obj)
    if spec is None:
        return obj
    spec.setdefault("replicas", 1)
    return {**obj, "spec": _template_defaulted(spec)}


def _statefulset(obj: Obj) -> Obj:
    spec = _spec(obj)
    if spec is None:
        return obj
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = dict(spec.get("updateStrategy") or {})
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
        strategy.setdefault("rollingUpdate", {})
    if strategy["type"] == "RollingUpdate" and isinstance(strategy.get("rollingUpdate"), dict):
        strategy["rollingUpdate"] = {"partition": 0, **strategy["rollingUpdate"]}
    spec["updateStrategy"] = strategy
    # StatefulSetAutoDeletePVC, on by default since v1.27.
    spec["persistentVolumeClaimRetentionPolicy"] = {
        "whenDeleted": "Retain", "whenScaled": "Retain",
        **(spec.get("persistentVolumeClaimRetentionPolicy") or {})}
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    return {**obj, "spec": _template_defaulted(spec)}


def _namespace(obj: Obj) -> Obj:
    """SetDefaults_Namespace: the `kubernetes.io/metadata.name` label names it."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        return obj
    labels = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}
    return {**obj, "metadata": {**meta, "labels": labels}}


def _secret(obj: Obj) -> Obj:
    """SetDefaults_Secret (pkg/apis/core/v1/defaults.go): no `type` is `Opaque`."""
    return obj if obj.get("type") else {**obj, "type": "Opaque"}


def _node(obj: Obj) -> Obj:
    """SetDefaults_NodeStatus: allocatable is the capacity when not given."""
    status = obj.get("status")
    if isinstance(status, dict) and "allocatable" not in status and \
            isinstance(status.get("capacity"), dict):
        return {**obj, "status": {**status, "allocatable": dict(status["capacity"])}}
    return obj


def _persistent_volume(obj: Obj) -> Obj:
    spec = _spec(obj)
    if spec is None:
        return obj
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    status = dict(obj.get("status") or {})
    status.setdefault("phase", "Pending")
    return {**obj, "spec": spec, "status": status}


def _persistent_volume_claim(obj: Obj) -> Obj:
    spec = _spec(obj)
    if spec is None:
        return obj
    spec.setdefault("volumeMode", "Filesystem")
    status = dict(obj.get("status") or {})
    status.setdefault("phase", "Pending")
    return {**obj, "spec": spec, "status": status}


_DEFAULTERS: dict[str, Callable[[Obj], Obj]] = {
    "pods": _pod,
    "deployments": _deployment,
    "replicasets": _replicaset,
    "statefulsets": _statefulset,
    "namespaces": _namespace,
    "nodes": _node,
    "secrets": _secret,
    "persistentvolumes": _persistent_volume,
    "persistentvolumeclaims": _persistent_volume_claim,
}


def api_defaulted(plural: str, obj: Obj) -> Obj:
    """`obj` with the API server's defaults for its kind (the built-in `plural`s served);
    unchanged for kinds without defaults (Leases, ConfigMaps, Events, budgets, custom)."""
    defaulter = _DEFAULTERS.get(plural)
    return defaulter(obj) if defaulter is not None else obj


def _amount(text: Any) -> Any:
    try:
        return parse_quantity(str(text))
    except ValueError:
        return text


def pod_qos_class(spec: Any) -> str:
    """GetPodQOS (pkg/apis/core/helper/qos): Guaranteed when every container limits cpu and
    memory at its requests, BestEffort when none asks for any, else Burstable."""
    containers = [c for name in ("initContainers", "containers")
                  for c in (spec.get(name) or [] if isinstance(spec, dict) else [])
                  if isinstance(c, dict)]
    requests_seen, guaranteed = False, True
    for container in containers:
        resources = container.get("resources") or {}
        requests = {k: v for k, v in (resources.get("requests") or {}).items()
                    if k in ("cpu", "memory")}
        limits = {k: v for k, v in (resources.get("limits") or {}).items()
                  if k in ("cpu", "memory")}
        requests_seen = requests_seen or bool(requests) or bool(limits)
        if set(limits) != {"cpu", "memory"} or any(
                _amount(requests.get(k, limits[k])) != _amount(limits[k]) for k in limits):
            guaranteed = False
    if not requests_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


__all__ = ["api_defaulted", "image_pull_policy", "pod_qos_class", "pod_spec_defaulted",
           "pod_template_spec_defaulted"]
