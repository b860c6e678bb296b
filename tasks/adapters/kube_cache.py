"""A watch-backed cache of what a tick reads: pods, nodes and PodDisruptionBudgets.

Escalator keeps informer caches (list once, then watch) and its tick reads memory; so does a
process that keeps this cache (`elevator watch`, `elevator serve`): the tick's collect steps
read it instead of listing 150,000 pods again (`tasks.steps.source.CachedSource`). Each kind is
one `ListWatch` (the adapter's one loop: resume from the last resourceVersion, relist on 410,
bookmarks), decoded straight into the slim records the tick reads. A tick waits until every
kind has listed once (`wait_synced`); a process without a cache lists, as before.

The cache owns its freshness (DESIGN.md §7): each kind knows when the server was last heard
from on its watch (an event, a bookmark, a list, or the answer to a (re)connected watch) and the
resourceVersion it reached (`freshness`); a silent watch replaces itself (`ListWatch`), and a
tick that finds a kind older than `freshness_bound_seconds` reconnects it and waits for the
server's answer before deciding (`refresh`).

The group Leases are not cached: the claim that guards every tick compares resourceVersions,
and a cached Lease could lag the previous tick's own write by the watch's latency and turn the
next tick into a lost race. They are read with one GET per group per tick.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from kube_elevator.tasks.adapters import cache_registry
from kube_elevator.tasks.adapters.kube_watch import ListWatch, PageDecoder
from kube_elevator.tasks.core.api_objects import OBJECT_DECODER, RawList, RawObject
from kube_elevator.tasks.core.collector import keep_out_of_collections
from kube_elevator.tasks.core.pdb import PodDisruptionBudget, pdb_from_api
from kube_elevator.tasks.core.records import TERMINAL_PHASES, NodeRecord, PodRecord, node_record, pod_record
from kube_elevator.tasks.core.timeouts import watch_limits

log = logging.getLogger(__name__)

ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"  # as the tick's own pod list
STOP_CHECK_SECONDS = 0.1  # how soon `wait_synced` sees its stop event
_RAW_LIST = msgspec.json.Decoder(RawList)


def _page_of(fold: Callable[[RawObject], Any], kind: str) -> PageDecoder:
    """A list page decoded in one pass and folded into records at once."""
    def decode(data: bytes) -> tuple[list[Any], str | None, str | None]:
        page = _RAW_LIST.decode(data)
        records = [record for raw in page.items if (record := _read(fold, raw, kind)) is not None]
        return records, page.metadata.continue_, page.metadata.resourceVersion
    return decode
PodKey = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class KindAge:
    """How current one kind of the cache is: seconds since the server was last heard from on
    its watch (None: not listed yet), and the resourceVersion the cache reached.

    Example:
        >>> age = ke.KindAge("pods", age_seconds=2.5, resource_version="1042")
        >>> age.kind, age.age_seconds
        ('pods', 2.5)
    """

    kind: str
    age_seconds: float | None
    resource_version: str | None


class ClusterCache:
    """Pods, nodes and budgets of a cluster, kept current by watches in daemon threads.

    `on_pod(event_type, pod)` (if set) sees every pod change after the cache applied it, and
    `on_pods_listed(pods)` every (re)list: the pending-pod bursts that start a tick come from
    there.

    Example:
        ```python
        cache = ke.ClusterCache(kubernetes.config.new_client_from_config())
        cache.start()
        results = ke.live_tick(ke.run_plain, adapters, groups, now=time.time(), cache=cache)
        ```
    """

    def __init__(self, api_client: Any, *, timeout_seconds: int | None = None,
                 page_size: int = 500, retry_seconds: float = 1.0,
                 silence_limit_seconds: float | None = None,
                 freshness_bound_seconds: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        from kubernetes import client

        limits = watch_limits()  # the environment's, checked before any watch starts
        self.freshness_bound_seconds = (limits.freshness_bound_seconds
                                        if freshness_bound_seconds is None
                                        else freshness_bound_seconds)
        self.clock = clock
        core = client.CoreV1Api(api_client)
        policy = client.PolicyV1Api(api_client)
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._pods: dict[PodKey, PodRecord] = {}
        self._nodes: dict[str, NodeRecord] = {}
        self._pdbs: dict[PodKey, PodDisruptionBudget] = {}
        # Indexes of the pods kept current with every change, so a tick needs not sort 150,000
        # pods into their groups each time: name -> (grouper, group -> pods, pod -> groups).
        self._indexes: dict[Hashable, _Index] = {}
        self.on_pod: Callable[[str, PodRecord], None] | None = None
        self.on_pods_listed: Callable[[list[PodRecord]], None] | None = None
        options: dict[str, Any] = {
            "timeout_seconds": timeout_seconds, "page_size": page_size,
            "retry_seconds": retry_seconds, "clock": clock,
            "silence_limit_seconds": (limits.silence_limit_seconds
                                      if silence_limit_seconds is None else silence_limit_seconds)}
        self.loops = {
            "pods": ListWatch(core.list_pod_for_all_namespaces, "pods", self._pods_listed,
                              self._pod_changed, page_decoder=_page_of(pod_record, "pod"),
                              field_selector=ACTIVE_PODS, **options),
            "nodes": ListWatch(core.list_node, "nodes", self._nodes_listed,
                               self._node_changed, page_decoder=_page_of(node_record, "node"),
                               **options),
            "poddisruptionbudgets": ListWatch(
                policy.list_pod_disruption_budget_for_all_namespaces, "poddisruptionbudgets",
                self._pdbs_listed, self._pdb_changed, **options),
        }
        self._listed = {kind: threading.Event() for kind in self.loops}
        self._listed_kinds: set[str] = set()

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> ClusterCache:
        for loop in self.loops.values():
            loop.start()
        return self

    def stop(self) -> None:
        for loop in self.loops.values():
            loop.stop()

    def __enter__(self) -> ClusterCache:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def synced(self) -> bool:
        return all(event.is_set() for event in self._listed.values())

    def wait_synced(self, timeout: float | None = None,
                    stop: threading.Event | None = None) -> bool:
        """Block until every kind has been listed once (False on timeout, or once `stop` is
        set: a SIGTERM while a big cluster is listed ends the process now, not after the list)."""
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        for event in self._listed.values():
            while not event.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (stop is not None and stop.is_set()):
                    return False
                if stop is not None:  # set by a signal handler, which cannot wake this wait
                    remaining = min(remaining, STOP_CHECK_SECONDS)
                event.wait(None if remaining == math.inf else remaining)
        return True

    # --- how current it is ---------------------------------------------------------------------

    def freshness(self) -> tuple[KindAge, ...]:
        """Each kind's age and resourceVersion, now."""
        now = self.clock()
        return tuple(KindAge(kind, loop.silent_seconds(now), loop.resource_version)
                     for kind, loop in self.loops.items())

    def stale_kinds(self, ages: Iterable[KindAge]) -> list[str]:
        """The kinds older than the freshness bound (or never listed)."""
        return [age.kind for age in ages
                if age.age_seconds is None or age.age_seconds > self.freshness_bound_seconds]

    def refresh(self, kinds: Collection[str], timeout_seconds: float) -> list[str]:
        """Replace the watches of `kinds` with new ones from their resourceVersions and wait up
        to `timeout_seconds` for the server to answer each; returns the kinds it did not.

        A resumed watch, not a list: the server answers with what changed since (what a silent
        connection held back streams right behind its answer), so a refresh costs a request
        per kind, not 150,000 pods.
        """
        marks = {kind: self.loops[kind].reconnect() for kind in kinds}
        deadline = time.monotonic() + timeout_seconds
        return [kind for kind, mark in marks.items()
                if not self.loops[kind].wait_heard(mark, max(0.0, deadline - time.monotonic()))]

    # --- what a tick reads --------------------------------------------------------------------

    def pods(self) -> list[PodRecord]:
        with self._lock:
            return list(self._pods.values())

    def nodes(self) -> list[NodeRecord]:
        with self._lock:
            return list(self._nodes.values())

    def grouped_pods(self, name: Hashable, grouper: Grouper, tally: Callable[[], Tally] | None = None,
                     ) -> tuple[list[PodRecord], dict[str, list[PodRecord]], dict[str, Any]]:
        """Every pod, the pods of each group `grouper` names, and (with `tally`) each group's
        tally snapshot, all at the same instant. The index is built on first use under `name`
        and then kept current by the watch, so a tick pays for what changed."""
        with self._lock:
            index = self._indexes.get(name)
            built = index is None
            if index is None:
                index = self._indexes[name] = _Index(grouper, tally)
                for key, pod in self._pods.items():
                    index.add(key, pod)
            read = (list(self._pods.values()),
                    {group: list(members.values()) for group, members in index.members.items()},
                    {group: kept.snapshot() for group, kept in index.tallies.items()})
        if built:
            keep_out_of_collections()  # the index lives as long as the records
        return read

    def pdbs(self) -> tuple[PodDisruptionBudget, ...]:
        with self._lock:
            return tuple(self._pdbs.values())

    def wait_for(self, condition: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until `condition()` (checked after each change the watches apply) holds."""
        with self._changed:
            return self._changed.wait_for(condition, timeout)

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {"pods": len(self._pods), "nodes": len(self._nodes),
                    "poddisruptionbudgets": len(self._pdbs)}

    # --- from the watches ---------------------------------------------------------------------

    def _pods_listed(self, items: list[PodRecord], version: str) -> None:
        # Active pods only, as the field selector asks: `CachedSource` promises the tick that.
        pods = {(pod.namespace, pod.name): pod for pod in items
                if pod.phase not in TERMINAL_PHASES}
        with self._changed:
            self._pods = pods
            for index in self._indexes.values():
                index.rebuild(pods)
            self._changed.notify_all()
        self._now_listed("pods")
        if self.on_pods_listed is not None:
            self.on_pods_listed(list(pods.values()))

    def _now_listed(self, kind: str) -> None:
        """Hide what the list built from the collector, then let ticks read it. At the first
        sync, once for every kind: each collection walks all that the other kinds' lists have
        built so far (at 150k pods, 0.06 s for the nodes' and 0.09 s for the pods')."""
        with self._lock:
            self._listed_kinds.add(kind)
            every_kind = len(self._listed_kinds) == len(self.loops)
        if every_kind:
            keep_out_of_collections()
        self._listed[kind].set()

    def _pod_changed(self, event_type: str, item: msgspec.Raw) -> None:
        pod = _read(pod_record, _decoded(item), "pod")
        if pod is None:
            return
        key = (pod.namespace, pod.name)
        with self._changed:
            # The list asks for active pods only; a watch event says when one finished.
            gone = event_type == "DELETED" or pod.phase in TERMINAL_PHASES
            if gone:
                self._pods.pop(key, None)
            else:
                self._pods[key] = pod
            for index in self._indexes.values():
                if gone:
                    index.remove(key)
                else:
                    index.update(key, pod)
            self._changed.notify_all()
        if self.on_pod is not None:
            self.on_pod(event_type, pod)

    def _nodes_listed(self, items: list[NodeRecord], version: str) -> None:
        nodes = {node.name: node for node in items}
        with self._changed:
            self._nodes = nodes
            self._changed.notify_all()
        self._now_listed("nodes")

    def _node_changed(self, event_type: str, item: msgspec.Raw) -> None:
        node = _read(node_record, _decoded(item), "node")
        if node is None:
            return
        with self._changed:
            if event_type == "DELETED":
                self._nodes.pop(node.name, None)
            else:
                self._nodes[node.name] = node
            self._changed.notify_all()

    def _pdbs_listed(self, items: list[msgspec.Raw], version: str) -> None:
        pdbs = {(pdb.namespace, pdb.name): pdb for item in items
                if (pdb := _budget(item)) is not None}
        with self._changed:
            self._pdbs = pdbs
            self._changed.notify_all()
        self._now_listed("poddisruptionbudgets")

    def _pdb_changed(self, event_type: str, item: msgspec.Raw) -> None:
        pdb = _budget(item)
        if pdb is None:
            return
        with self._changed:
            if event_type == "DELETED":
                self._pdbs.pop((pdb.namespace, pdb.name), None)
            else:
                self._pdbs[(pdb.namespace, pdb.name)] = pdb
            self._changed.notify_all()


Grouper = Callable[[PodRecord], Iterable[str]]  # the groups a pod belongs to


class Tally(Protocol):
    """A running summary of one group's pods (the caller's: the cache knows no system).

    Example:
        ```python
        class CountPods:                              # a ke.Tally of one group's pods
            def __init__(self) -> None:
                self.count = 0
            ...
        ```
    """

    def add(self, key: object, pod: PodRecord) -> None: ...

    def remove(self, key: object, pod: PodRecord) -> None: ...

    def replace(self, key: object, old: PodRecord, new: PodRecord) -> None: ...

    def snapshot(self) -> Any: ...


class _Index:
    """The pods of each group, kept in listing order (dicts keep insertion order), and each
    group's tally kept current with them."""

    def __init__(self, grouper: Grouper, tally: Callable[[], Tally] | None) -> None:
        self.grouper = grouper
        self.new_tally = tally
        self.members: dict[str, dict[PodKey, PodRecord]] = {}
        self.tallies: dict[str, Tally] = {}
        self.groups_of: dict[PodKey, tuple[str, ...]] = {}

    def add(self, key: PodKey, pod: PodRecord) -> None:
        groups = tuple(self.grouper(pod))
        if groups:
            self.groups_of[key] = groups
            for group in groups:
                self.members.setdefault(group, {})[key] = pod
                if self.new_tally is not None:
                    tally = self.tallies.get(group)
                    if tally is None:
                        tally = self.tallies[group] = self.new_tally()
                    tally.add(key, pod)

    def update(self, key: PodKey, pod: PodRecord) -> None:
        """A changed pod keeps its place (as in the cache's own dict); a new one goes last."""
        groups = tuple(self.grouper(pod))
        if groups and groups == self.groups_of.get(key, ()):
            for group in groups:
                old = self.members[group][key]
                self.members[group][key] = pod
                if self.new_tally is not None:
                    self.tallies[group].replace(key, old, pod)
        else:
            self.remove(key)
            self.add(key, pod)

    def remove(self, key: PodKey) -> None:
        for group in self.groups_of.pop(key, ()):
            old = self.members[group].pop(key, None)
            if old is not None and self.new_tally is not None:
                self.tallies[group].remove(key, old)

    def rebuild(self, pods: dict[PodKey, PodRecord]) -> None:
        self.members, self.tallies, self.groups_of = {}, {}, {}
        for key, pod in pods.items():
            self.add(key, pod)


def _decoded(item: msgspec.Raw) -> RawObject | None:
    try:
        return OBJECT_DECODER.decode(item)
    except (msgspec.DecodeError, ValueError) as error:
        log.warning("cache: skipping an object the watch cannot read: %s", error)
        return None


def _read(fold: Callable[[RawObject], Any], raw: RawObject | None, kind: str) -> Any:
    """The record of one object, or None (logged) when the object cannot be read."""
    if raw is None:
        return None
    try:
        return fold(raw)
    except ValueError as error:
        log.warning("cache: skipping %s %s: %s", kind, raw.metadata.name, error)
        return None


def _budget(item: msgspec.Raw) -> PodDisruptionBudget | None:
    import orjson

    try:
        return pdb_from_api(orjson.loads(memoryview(item)))
    except (ValueError, orjson.JSONDecodeError) as error:
        log.warning("cache: skipping a PodDisruptionBudget: %s", error)
        return None


# The cache this process keeps (`elevator watch`, `elevator serve`), and the kubeconfig it
# watches: a tick against that cluster reads it instead of listing (held in `cache_registry`).
def install_process_cache(cache: ClusterCache | None, kubeconfig: str | None = None) -> None:
    cache_registry.install(cache, kubeconfig)


def process_cache(kubeconfig: str | None = None) -> ClusterCache | None:
    """This process's cache of the cluster `kubeconfig` names, if it keeps one."""
    cache = cache_registry.installed(kubeconfig)
    return cache if isinstance(cache, ClusterCache) else None


__all__ = ["ClusterCache", "KindAge", "install_process_cache", "process_cache"]
