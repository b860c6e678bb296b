"""kubectl's Table output (`Accept: application/json;as=Table`): columns, cells and ages."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

from kube_elevator.fakes.kube_api.objects import _Column, _metadata, _with_kind
from kube_elevator.fakes.kube_api.resources import Obj, ObjList, ResourceType
from kube_elevator.tasks.core.selectors import (
    format_label_selector,
)

log = logging.getLogger(__name__)


_TABLE_COLUMNS: dict[str, list[_Column]] = {
    "pods": [("Name", "string", 0), ("Ready", "string", 0), ("Status", "string", 0),
             ("Restarts", "string", 0), ("Age", "string", 0), ("IP", "string", 1),
             ("Node", "string", 1), ("Nominated Node", "string", 1),
             ("Readiness Gates", "string", 1)],
    "nodes": [("Name", "string", 0), ("Status", "string", 0), ("Roles", "string", 0),
              ("Age", "string", 0), ("Version", "string", 0), ("Internal-IP", "string", 1),
              ("External-IP", "string", 1), ("OS-Image", "string", 1),
              ("Kernel-Version", "string", 1), ("Container-Runtime", "string", 1)],
    "deployments": [("Name", "string", 0), ("Ready", "string", 0), ("Up-to-date", "integer", 0),
                    ("Available", "integer", 0), ("Age", "string", 0),
                    ("Containers", "string", 1), ("Images", "string", 1),
                    ("Selector", "string", 1)],
    "leases": [("Name", "string", 0), ("Holder", "string", 0), ("Age", "string", 0)],
    "configmaps": [("Name", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)],
    "secrets": [("Name", "string", 0), ("Type", "string", 0), ("Data", "integer", 0),
                ("Age", "string", 0)],
    "poddisruptionbudgets": [("Name", "string", 0), ("Min Available", "string", 0),
                             ("Max Unavailable", "string", 0),
                             ("Allowed Disruptions", "integer", 0), ("Age", "string", 0)],
    "events": [("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0),
               ("Object", "string", 0), ("Message", "string", 0)],
}
_CUSTOM_COLUMNS: list[_Column] = [("Name", "string", 0), ("Age", "date", 0)]


def human_duration(seconds: float) -> str:
    """`k8s.io/apimachinery/pkg/util/duration.HumanDuration`: kubectl's AGE column."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24 % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _age(timestamp: Any, now: float) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.fromisoformat(str(timestamp))
    except ValueError:
        return "<invalid>"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return human_duration(now - then.timestamp())


def _table_cells(rt: ResourceType, obj: Obj, now: float) -> list[Any]:
    """One row of `kubectl get` output, as the real server's printers compute it."""
    meta = _metadata(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    age = _age(meta.get("creationTimestamp"), now)
    if rt.plural == "pods":
        statuses = status.get("containerStatuses") or []
        reason = status.get("reason") or status.get("phase") or ""
        for cs in statuses:
            state = cs.get("state") or {}
            why = (state.get("waiting") or {}).get("reason") or \
                (state.get("terminated") or {}).get("reason")
            if why:
                reason = why
        if meta.get("deletionTimestamp"):
            reason = "Terminating"
        ready = sum(1 for cs in statuses if cs.get("ready"))
        gates = spec.get("readinessGates") or []
        return [meta.get("name"), f"{ready}/{len(spec.get('containers') or [])}", reason,
                str(sum(int(cs.get("restartCount") or 0) for cs in statuses)), age,
                status.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
                status.get("nominatedNodeName") or "<none>",
                f"0/{len(gates)}" if gates else "<none>"]
    if rt.plural == "nodes":
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        state = "Unknown" if "Ready" not in conditions else \
            "Ready" if conditions["Ready"] == "True" else "NotReady"
        if spec.get("unschedulable"):
            state += ",SchedulingDisabled"
        labels = meta.get("labels") or {}
        roles = sorted({k.split("/", 1)[1] for k in labels
                        if k.startswith("node-role.kubernetes.io/") and "/" in k}
                       | ({labels["kubernetes.io/role"]} if "kubernetes.io/role" in labels
                          else set()))
        addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
        info = status.get("nodeInfo") or {}
        return [meta.get("name"), state, ",".join(r for r in roles if r) or "<none>", age,
                info.get("kubeletVersion", ""), addresses.get("InternalIP") or "<none>",
                addresses.get("ExternalIP") or "<none>", info.get("osImage") or "<unknown>",
                info.get("kernelVersion") or "<unknown>",
                info.get("containerRuntimeVersion") or "<unknown>"]
    if rt.plural == "deployments":
        containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
        return [meta.get("name"),
                f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
                status.get("updatedReplicas", 0), status.get("availableReplicas", 0), age,
                ",".join(c.get("name", "") for c in containers),
                ",".join(c.get("image", "") for c in containers),
                format_label_selector(spec.get("selector")) or "<none>"]
    if rt.plural == "leases":
        return [meta.get("name"), spec.get("holderIdentity") or "", age]
    if rt.plural == "configmaps":
        return [meta.get("name"), len(obj.get("data") or {}) + len(obj.get("binaryData") or {}),
                age]
    if rt.plural == "secrets":  # printers.go printSecret
        return [meta.get("name"), obj.get("type", ""), len(obj.get("data") or {}), age]
    if rt.plural == "poddisruptionbudgets":
        return [meta.get("name"), str(spec.get("minAvailable", "N/A")),
                str(spec.get("maxUnavailable", "N/A")), status.get("disruptionsAllowed", 0), age]
    if rt.plural not in _TABLE_COLUMNS:  # a custom resource: a CRD's default columns
        return [meta.get("name"), age]
    involved = obj.get("involvedObject") or {}
    last = obj.get("lastTimestamp") or obj.get("eventTime") or meta.get("creationTimestamp")
    return [_age(last, now), obj.get("type", ""), obj.get("reason", ""),
            f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
            obj.get("message", "")]


def _table(rt: ResourceType, objs: ObjList, list_meta: Obj, include: str) -> Obj:
    """A `meta.k8s.io/v1` Table of `objs`; `include` is the `includeObject` parameter."""
    now = time.time()
    rows: ObjList = []
    for obj in objs:
        row: Obj = {"cells": _table_cells(rt, obj, now)}
        if include == "Object":
            row["object"] = _with_kind(rt, obj)
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": _metadata(obj)}
        rows.append(row)
    columns = [{"name": name, "type": kind, "format": "name" if name == "Name" else "",
                "description": name, "priority": priority}
               for name, kind, priority in _TABLE_COLUMNS.get(rt.plural, _CUSTOM_COLUMNS)]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
            "columnDefinitions": columns, "rows": rows}


def _wants_table(accept: str) -> bool:
    """Whether the client asked for server-side printing (kubectl get does)."""
    return any("as=Table" in part and "g=meta.k8s.io" in part for part in accept.split(","))


# Requests and faults ------------------------------------------------------------------
