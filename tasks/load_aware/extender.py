"""Trimaran's scores served to kube-scheduler through the extender HTTP protocol.

kube-scheduler calls `POST <urlPrefix>/prioritize` with `ExtenderArgs` and adds the answered
0..10 priorities × weight × 10 to its plugin scores (spec/trimaran.md §8). An extender is not
told about binds unless it binds, so recently bound pods (TLP's "missing load", §5) come from
`note_bound` or an optional watch on pods.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from typing import Annotated, Any

import httpx
import msgspec
import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from kube_elevator.tasks.adapters.kube_watch import ListWatch
from kube_elevator.tasks.core.documents import check_depth
from kube_elevator.tasks.core.errors import InputError, join_location
from kube_elevator.tasks.core.health import LoopHealth
from kube_elevator.tasks.core.quantity import cpu_milli, memory_bytes
from kube_elevator.tasks.load_aware.scoring import (
    METRICS_AGENT_REPORTING_INTERVAL_SECONDS,
    BoundPod,
    ContainerLoad,
    LoadVariationRiskBalancingArgs,
    NodeLoad,
    PodLoad,
    TargetLoadPackingArgs,
    WatcherMetrics,
    extender_priority,
    load_variation_risk_balancing_score,
    parse_watcher_metrics,
    target_load_packing_score,
    validation_problems,
)

log = logging.getLogger(__name__)

# trimaran.md §5: the collector refreshes every 30 s with a 55 s client timeout; the
# scheduled-pod cache is cleaned every 5 minutes.
WATCHER_REFRESH_SECONDS = 30.0
WATCHER_TIMEOUT_SECONDS = 55.0
CACHE_CLEANUP_SECONDS = 300.0


class Policy(StrEnum):
    """Which Trimaran plugin the extender reproduces."""

    TARGET_LOAD_PACKING = "target-load-packing"
    LOAD_VARIATION_RISK_BALANCING = "load-variation-risk-balancing"


# --- Kubernetes objects at the edge: only the fields the scores read ------------------------

def _quantity_type(value: object) -> object:
    """A quantity is a JSON string or number. Checked before the union, which in lax mode takes
    `true` as 1 (one CPU), and which would give one error per member for other types."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise PydanticCustomError("quantity_type",
                                  "a quantity must be a string or a number")
    return value


Quantity = Annotated[str | int | float, BeforeValidator(_quantity_type)]


class _ApiModel(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Resources(_ApiModel):
    limits: dict[str, Quantity] | None = None
    requests: dict[str, Quantity] | None = None


class _Container(_ApiModel):
    resources: _Resources | None = None


class _PodSpec(_ApiModel):
    nodeName: str | None = None
    containers: list[_Container] | None = None
    initContainers: list[_Container] | None = None
    overhead: dict[str, Quantity] | None = None


class _Metadata(_ApiModel):
    name: str = ""
    namespace: str = ""
    uid: str = ""


class _Pod(_ApiModel):
    metadata: _Metadata = _Metadata()
    spec: _PodSpec | None = None


class _NodeStatus(_ApiModel):
    capacity: dict[str, Quantity] | None = None
    allocatable: dict[str, Quantity] | None = None


class _Node(_ApiModel):
    metadata: _Metadata = _Metadata()
    status: _NodeStatus | None = None


class _Quantities:
    """Converts quantities, collecting one problem line per malformed value."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[str] = []

    def get(self, values: Mapping[str, Quantity] | None, key: str, path: str,
            convert: Callable[[Quantity], int]) -> int | None:
        if values is None or key not in values:
            return None  # absent, which is not the same as "0" (TLP's limit rule)
        try:
            return convert(values[key])
        except ValueError as error:
            self.problems.append(join_location(self.source, f"{path}.{key}", str(error)))
            return None


def _container_load(container: _Container, path: str, quantities: _Quantities) -> ContainerLoad:
    resources = container.resources or _Resources()
    return ContainerLoad(
        cpu_limit_milli=quantities.get(resources.limits, "cpu", f"{path}.resources.limits",
                                       cpu_milli),
        cpu_request_milli=quantities.get(resources.requests, "cpu",
                                         f"{path}.resources.requests", cpu_milli),
        memory_request_bytes=quantities.get(resources.requests, "memory",
                                            f"{path}.resources.requests", memory_bytes),
    )


def pod_load_from_api(obj: Any, source: str, path: str = "Pod") -> PodLoad:
    """A v1.Pod (API JSON) to a PodLoad; InputError naming source, key path and rule."""
    try:
        raw = _Pod.model_validate(obj)
    except ValidationError as error:
        raise InputError(validation_problems(error, source, path)) from None
    spec = raw.spec or _PodSpec()
    quantities = _Quantities(source)
    pod = PodLoad(
        name=raw.metadata.name, namespace=raw.metadata.namespace, uid=raw.metadata.uid,
        containers=tuple(_container_load(c, f"{path}.spec.containers[{i}]", quantities)
                         for i, c in enumerate(spec.containers or ())),
        init_containers=tuple(_container_load(c, f"{path}.spec.initContainers[{i}]", quantities)
                              for i, c in enumerate(spec.initContainers or ())),
        overhead_cpu_milli=quantities.get(spec.overhead, "cpu", f"{path}.spec.overhead",
                                          cpu_milli) or 0,
        overhead_memory_bytes=quantities.get(spec.overhead, "memory", f"{path}.spec.overhead",
                                             memory_bytes) or 0,
    )
    if quantities.problems:
        raise InputError(quantities.problems)
    return pod


def pod_node_name(obj: Any) -> str:
    """`spec.nodeName` of a v1.Pod (API JSON), "" when unassigned."""
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    name = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) else ""


def node_load_from_api(obj: Any, source: str, path: str = "Node") -> NodeLoad:
    """A v1.Node (API JSON) to a NodeLoad; a node without a name is bad input."""
    try:
        raw = _Node.model_validate(obj)
    except ValidationError as error:
        raise InputError(validation_problems(error, source, path)) from None
    if not raw.metadata.name:
        raise InputError([join_location(source, f"{path}.metadata.name", "required")])
    status = raw.status or _NodeStatus()
    quantities = _Quantities(source)
    node = NodeLoad(
        name=raw.metadata.name,
        cpu_capacity_milli=quantities.get(status.capacity, "cpu", f"{path}.status.capacity",
                                          cpu_milli) or 0,
        cpu_allocatable_milli=quantities.get(status.allocatable, "cpu",
                                             f"{path}.status.allocatable", cpu_milli) or 0,
        memory_allocatable_bytes=quantities.get(status.allocatable, "memory",
                                                f"{path}.status.allocatable",
                                                memory_bytes) or 0,
    )
    if quantities.problems:
        raise InputError(quantities.problems)
    return node


# --- the extender protocol's request (trimaran.md §8) --------------------------------------


@dataclass(frozen=True)
class ExtenderArgs:
    """`ExtenderArgs`: the pod and either full nodes (`Nodes`) or names (`NodeNames`)."""

    pod: PodLoad
    nodes: tuple[NodeLoad, ...] | None = None
    node_names: tuple[str, ...] | None = None
    raw_nodes: Any = None  # the NodeList as sent, echoed back by /filter

    def candidate_names(self) -> list[str]:
        if self.nodes is not None:
            return [node.name for node in self.nodes]
        return list(self.node_names or ())


def parse_extender_args(body: bytes, source: str) -> ExtenderArgs:
    """Decode `ExtenderArgs`. Keys match case-insensitively, as Go's encoding/json does, so
    both the Go field names (`Pod`, `Nodes`, `NodeNames`) and older lower-case tags work."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise InputError([join_location(source, "", f"not JSON: {error}")]) from None
    check_depth(document, source)  # `Nodes` is echoed back whole: json.dumps recurses
    if not isinstance(document, dict):
        raise InputError([join_location(source, "", "ExtenderArgs must be a JSON object")])
    fields = {key.lower(): value for key, value in document.items()}
    if fields.get("pod") is None:
        raise InputError([join_location(source, "Pod", "required")])
    pod = pod_load_from_api(fields["pod"], source, "Pod")
    raw_nodes = fields.get("nodes")
    nodes: tuple[NodeLoad, ...] | None = None
    if raw_nodes is not None:
        items = raw_nodes.get("items") if isinstance(raw_nodes, dict) else ()
        if not isinstance(items, list | None):
            raise InputError([join_location(source, "Nodes.items", "must be a list of nodes")])
        problems: list[str] = []
        loaded = []
        for index, item in enumerate(items or ()):
            try:
                loaded.append(node_load_from_api(item, source, f"Nodes.items[{index}]"))
            except InputError as error:
                problems.extend(error.problems)
        if problems:
            raise InputError(problems)
        nodes = tuple(loaded)
    names = fields.get("nodenames")
    node_names: tuple[str, ...] | None = None
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise InputError([join_location(source, "NodeNames", "must be a list of strings")])
        node_names = tuple(names)
    return ExtenderArgs(pod=pod, nodes=nodes, node_names=node_names, raw_nodes=raw_nodes)


# --- recently bound pods (trimaran.md §5, PodAssignEventHandler) ---------------------------


class BoundPods:
    """`ScheduledPodsCache`: per node, the pods bound there and when; safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_node: dict[str, list[BoundPod]] = {}
        self._node_of: dict[str, str] = {}  # pod uid -> node it was last seen on

    def add(self, node: str, pod: PodLoad, at: float) -> None:
        """Append an entry (OnAdd, or OnUpdate when `nodeName` changed); "" is unassigned."""
        if not node:
            return
        with self._lock:
            self._by_node.setdefault(node, []).append(BoundPod(pod, at))
            if pod.uid:
                self._node_of[pod.uid] = node

    def observe(self, node: str, pod: PodLoad, at: float) -> None:
        """A pod seen by a watch: counted when it is new on `node` (the informer's add/update)."""
        if not node:
            return
        with self._lock:
            if pod.uid and self._node_of.get(pod.uid) == node:
                return
        self.add(node, pod, at)

    def delete(self, node: str, uid: str) -> None:
        """OnDelete: drop the first entry with this uid under the pod's node."""
        with self._lock:
            self._node_of.pop(uid, None)
            entries = self._by_node.get(node)
            if entries is None:
                return
            for index, entry in enumerate(entries):
                if entry.pod.uid == uid:
                    del entries[index]
                    break

    def on_node(self, node: str) -> tuple[BoundPod, ...]:
        with self._lock:
            return tuple(self._by_node.get(node, ()))

    def cleanup(self, now: float) -> None:
        """Drop entries older than 60 s, as `cleanupCache` does every 5 minutes.

        Quirk kept from upstream (§5): when *every* entry of a node is old, that node is
        skipped, so its entries stay (they stop counting once the watcher window moves on).
        """
        with self._lock:
            for node, entries in list(self._by_node.items()):
                # sort.Search over entries in bind order: first one younger than 60 s.
                index = bisect.bisect_right(
                    entries, now, key=lambda e: e.bound_at_unix_seconds
                    + METRICS_AGENT_REPORTING_INTERVAL_SECONDS)
                if index == len(entries):
                    continue
                del entries[:index]
                if not entries:
                    del self._by_node[node]

    def nodes(self) -> dict[str, int]:
        """Entries per node, for logs and tests."""
        with self._lock:
            return {node: len(entries) for node, entries in self._by_node.items()}


# --- the load-watcher client (trimaran.md §5 Collector, service mode) ----------------------


class WatcherCollector:
    """Keeps the latest `GET {watcher}/watcher` document; a failed fetch keeps the old one."""

    def __init__(self, watcher_url: str, client: httpx.AsyncClient | None = None,
                 timeout_seconds: float = WATCHER_TIMEOUT_SECONDS) -> None:
        self.url = watcher_url.rstrip("/") + "/watcher"
        self._client = client
        self._timeout = timeout_seconds
        self.document: WatcherMetrics | None = None
        self.last_error: str | None = None  # why the last fetch failed; None once one worked

    async def refresh(self) -> bool:
        """One fetch; False (and the previous document kept) on any error."""
        try:
            if self._client is not None:
                response = await self._client.get(self.url, timeout=self._timeout)
            else:
                async with httpx.AsyncClient(timeout=self._timeout) as client:
                    response = await client.get(self.url)
        except httpx.HTTPError as error:
            return self._failed(f"load watcher {self.url}: {type(error).__name__}: {error}")
        if response.status_code != 200:
            return self._failed(f"load watcher {self.url}: received status code "
                                f"{response.status_code}")
        try:
            self.document = parse_watcher_metrics(response.content, self.url)
        except InputError as error:
            return self._failed(f"unable to decode watcher metrics: {error}")
        self.last_error = None
        return True

    def _failed(self, problem: str) -> bool:
        log.error("%s", problem)
        self.last_error = problem
        return False


# --- the extender ------------------------------------------------------------------------------


@dataclass
class SchedulerExtender:
    """TLP or LVRB behind `/prioritize` and a pass-through `/filter`."""

    collector: WatcherCollector
    policy: Policy = Policy.TARGET_LOAD_PACKING
    target_load_packing: TargetLoadPackingArgs = field(default_factory=TargetLoadPackingArgs)
    load_variation: LoadVariationRiskBalancingArgs = field(
        default_factory=LoadVariationRiskBalancingArgs)
    clock: Callable[[], float] = time.time
    refresh_seconds: float = WATCHER_REFRESH_SECONDS
    cleanup_seconds: float = CACHE_CLEANUP_SECONDS
    bound_pods: BoundPods = field(default_factory=BoundPods)
    # Full nodes seen in requests or by the node watch, for `NodeNames` requests.
    known_nodes: dict[str, NodeLoad] = field(default_factory=dict)
    # For the health check: every fetch of the watcher's document, and whether it worked.
    monotonic: Callable[[], float] = time.monotonic
    health: LoopHealth = field(default_factory=lambda: LoopHealth(time.monotonic()))

    # -- the Python API --

    def note_bound(self, pod: PodLoad | Mapping[str, Any], node: str,
                   at: float | None = None) -> None:
        """Record that `pod` was bound to `node` at `at` (Unix seconds; default now)."""
        if not isinstance(pod, PodLoad):
            pod = pod_load_from_api(pod, "note_bound")
        self.bound_pods.add(node, pod, self.clock() if at is None else at)

    def note_node(self, node: NodeLoad) -> None:
        self.known_nodes[node.name] = node

    def forget_node(self, name: str) -> None:
        self.known_nodes.pop(name, None)

    def score(self, pod: PodLoad, node: NodeLoad) -> int:
        """The plugin's raw 0..100 score for one node."""
        document = self.collector.document
        if self.policy is Policy.TARGET_LOAD_PACKING:
            return target_load_packing_score(pod, node, document,
                                             self.bound_pods.on_node(node.name),
                                             self.target_load_packing)
        return load_variation_risk_balancing_score(pod, node, document, self.load_variation)

    def prioritize(self, args: ExtenderArgs) -> list[dict[str, Any]]:
        """`HostPriorityList` in the Go field names: `[{"Host": ..., "Score": 0..10}]`."""
        if args.nodes is not None:
            for node in args.nodes:
                self.note_node(node)
            candidates = list(args.nodes)
        else:
            candidates = []
            for name in args.node_names or ():
                known = self.known_nodes.get(name)
                if known is None:
                    # nodeCacheCapable without --kubeconfig: capacity unknown, like a node
                    # without metrics it scores the minimum.
                    log.warning("node %s: capacity unknown (send Nodes, or watch nodes)", name)
                    known = NodeLoad(name=name)
                candidates.append(known)
        return [{"Host": node.name, "Score": extender_priority(self.score(args.pod, node))}
                for node in candidates]

    @staticmethod
    def filter(args: ExtenderArgs) -> dict[str, Any]:
        """`ExtenderFilterResult` passing every node: TLP and LVRB are score-only (§1)."""
        return {
            "Nodes": args.raw_nodes if args.nodes is not None else None,
            "NodeNames": list(args.node_names) if args.node_names is not None else None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }

    # -- HTTP --

    async def _handle(self, request: Request,
                      answer: Callable[[ExtenderArgs], Any]) -> Response:
        try:
            body = await request.body()
        except ClientDisconnect:
            # The client left, or the server's read timeout closed the connection (a stalled
            # body): nobody is there to answer, and it is no server error worth a traceback.
            log.warning("%s: the client disconnected before sending its whole body",
                        request.url.path)
            return Response(status_code=408)
        try:
            args = parse_extender_args(body, f"{request.url.path} body")
        except InputError as error:
            log.warning("bad extender request: %s", error)
            return PlainTextResponse(str(error) + "\n", status_code=400)
        return JSONResponse(answer(args))

    async def _prioritize(self, request: Request) -> Response:
        return await self._handle(request, self.prioritize)

    async def _filter(self, request: Request) -> Response:
        return await self._handle(request, self.filter)

    async def _health(self, request: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def refresh(self) -> bool:
        """One fetch of the watcher's document, recorded for the health check."""
        fetched = await self.collector.refresh()
        self.health.finished(self.monotonic(), self.clock(), fetched)
        return fetched

    async def _refresh_forever(self) -> None:
        """The collector's ticker: refetch the watcher document every 30 s."""
        while True:
            await asyncio.sleep(self.refresh_seconds)
            await self.refresh()

    async def _cleanup_forever(self) -> None:
        """The handler's ticker: drop old bound-pod entries every 5 minutes."""
        while True:
            await asyncio.sleep(self.cleanup_seconds)
            self.bound_pods.cleanup(self.clock())

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        # The Go collector fetches once at construction (a failure is only logged).
        await self.refresh()
        tasks = [asyncio.create_task(self._refresh_forever()),
                 asyncio.create_task(self._cleanup_forever())]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def app(self) -> Starlette:
        """`POST /prioritize`, `POST /filter`, `GET /healthz`."""
        return Starlette(routes=[
            Route("/prioritize", self._prioritize, methods=["POST"]),
            Route("/filter", self._filter, methods=["POST"]),
            Route("/healthz", self._health, methods=["GET"]),
        ], lifespan=self._lifespan)


# --- optional: watch pods (and nodes) with the official client ------------------------------


class KubeWatch:
    """Feeds the extender from watches on pods and nodes (the Kubernetes adapter's
    list-then-watch loop, each in a daemon thread).

    The first list counts every pod as just bound, as with the plugin's informer (§5). After a
    410 the watch relists; pods already known on the same node are not counted again (the
    informer would see an update).
    """

    def __init__(self, extender: SchedulerExtender, api_client: Any,
                 timeout_seconds: int = 60) -> None:
        from kubernetes import client

        self.extender = extender
        core = client.CoreV1Api(api_client)
        self.loops = [
            ListWatch(call, kind, partial(self._relisted, kind), partial(self._event, kind),
                      timeout_seconds=timeout_seconds)
            for kind, call in (("pods", core.list_pod_for_all_namespaces),
                               ("nodes", core.list_node))]

    def start(self) -> KubeWatch:
        for loop in self.loops:
            loop.start()
        return self

    def stop(self) -> None:
        for loop in self.loops:
            loop.stop()

    def _relisted(self, kind: str, items: list[msgspec.Raw], version: str) -> None:
        for item in items:
            self._event(kind, "ADDED", item)

    def _event(self, kind: str, event_type: str, item: msgspec.Raw) -> None:
        self._apply(kind, event_type, orjson.loads(memoryview(item)))

    def _apply(self, kind: str, event_type: str, obj: Mapping[str, Any]) -> None:
        try:
            if kind == "nodes":
                node = node_load_from_api(obj, "watch nodes")
                if event_type == "DELETED":
                    self.extender.forget_node(node.name)
                else:
                    self.extender.note_node(node)
                return
            pod = pod_load_from_api(obj, "watch pods")
        except InputError as error:
            log.warning("skipping %s event: %s", kind, error)
            return
        node_name = pod_node_name(obj)
        if event_type == "DELETED":
            self.extender.bound_pods.delete(node_name, pod.uid)
        else:
            self.extender.bound_pods.observe(node_name, pod, self.extender.clock())
