"""`FakeKubeApi`: the store and its HTTP side, served by uvicorn on 127.0.0.1 (see the package doc)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

import kubernetes.client
import yaml
from starlette.applications import Starlette
from starlette.routing import Route

from kube_elevator.fakes.kube_api.admission import PLUGINS as ADMISSION_PLUGINS
from kube_elevator.fakes.kube_api.http import BOOKMARK_FREQUENCY_SECONDS, KubeHttp
from kube_elevator.fakes.kube_api.objects import _Collection
from kube_elevator.fakes.kube_api.policy import _VERBS, HELD, RecordedRequest, _Fault
from kube_elevator.fakes.kube_api.resources import (
    _BY_PATH,
    _GROUP_VERSIONS,
    RESOURCES,
    TOKEN,
    Key,
    ResourceType,
)
from kube_elevator.fakes.kube_api.write_path import WriteLayers
from kube_elevator.fakes.kube_faults import ADMIN_PATH, kube_faults
from kube_elevator.tasks.adapters.http_server import ServiceThread, base_url

log = logging.getLogger(__name__)


class FakeKubeApi(KubeHttp):
    """In-memory Kubernetes API server on 127.0.0.1, run by uvicorn in a thread.

    Use as a context manager or with `start()`/`stop()`.  Store access methods work
    whether or not the HTTP server is running.

    Example:
        >>> from kube_elevator.harness import FakeKubeApi
        >>> api = FakeKubeApi()        # the store works before start(); start() serves it over HTTP
        >>> settings = {"metadata": {"name": "settings"}, "data": {"a": "1"}}
        >>> created = api.create("configmaps", settings, "default")
        >>> api.get("configmaps", "settings", "default")["data"]
        {'a': '1'}
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *,
                 history_size: int = 1000,
                 bookmark_interval: float = BOOKMARK_FREQUENCY_SECONDS,
                 field_validation: bool = True, validation: bool = True,
                 defaulting: bool = True, admission_defaults: bool = True,
                 disable_admission_plugins: Iterable[str] = ()) -> None:
        self.host = host
        # Unknown and duplicate fields of HTTP writes to built-in kinds, as the API server's
        # `fieldValidation` (fakes/kube_api/field_validation.py); False stores bodies as given.
        self.field_validation = field_validation
        self.port = port
        self.history_size = history_size
        self.bookmark_interval = bookmark_interval
        self.requests: list[RecordedRequest] = []
        # The write layers (docs/harness.md, Validation and defaulting): switches a test may
        # also flip later, e.g. `api.layers.admission_defaults = False`.
        disabled = frozenset(disable_admission_plugins)
        if unknown := sorted(disabled - set(ADMISSION_PLUGINS)):
            raise ValueError(f"unknown admission plugin(s) {', '.join(unknown)}: the fake has "
                             f"{', '.join(ADMISSION_PLUGINS)}")
        self.layers = WriteLayers(defaulting=defaulting, admission_defaults=admission_defaults,
                                  validation=validation, disabled_admission_plugins=disabled)
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._rv = 1
        self._collections = {name: _Collection(rt, history_size)
                             for name, rt in RESOURCES.items()}
        # What this server serves: the built-ins plus the custom resources registered here.
        self._types: dict[str, ResourceType] = dict(RESOURCES)
        self._by_path: dict[tuple[str, str], ResourceType] = dict(_BY_PATH)
        self._group_versions: dict[str, list[ResourceType]] = {
            gv: list(types) for gv, types in _GROUP_VERSIONS.items()}
        self._faults: list[_Fault] = []
        # Faults set over HTTP (`POST /_faults`) or from Python: see fakes/kube_faults.py.
        self.faults = kube_faults()
        self._eviction_blocked: set[Key] = set()
        self._service: ServiceThread | None = None
        self._closing = False  # set while stopping: watches opened now end at once
        # A proxy or server that ends every watch as soon as it opens (after the events it
        # owes): clients must not ask again in a tight loop.
        self.watches_end_at_once = False
        self.app = Starlette(routes=[
            Route("/{path:path}", self.faults.endpoint(self._handle),
                  methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        ])

    # Lifecycle ----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL of the server, e.g. `http://127.0.0.1:43123`."""
        if self._service is not None:
            return self._service.url
        if not self.port:
            raise RuntimeError("FakeKubeApi has no port yet: call start() first")
        return base_url(self.host, self.port)

    def start(self) -> FakeKubeApi:
        """Bind the port, start uvicorn in a daemon thread, return once it is serving.

        TCP_NODELAY on the socket (see `bind_socket`) keeps a request at ~0.5 ms, not ~40 ms.
        A bind failure raises the OSError: this is a library, not a command line.
        """
        if self._service is not None:
            raise RuntimeError("FakeKubeApi is already running")
        self.faults.rearm()
        # A new service each time: with port 0, a restart picks a fresh free port.
        self._service = ServiceThread(
            self.app, self.host, self.port, "fake-kube-api", startup_timeout=30,
            lifespan="off", graceful_shutdown_timeout=2, stop_timeout=10,
            keep_alive_timeout=30, bind_option=None).start()
        return self

    def stop(self) -> None:
        """End open watches, shut uvicorn down and join its thread."""
        service = self._service
        if service is None:
            return
        with self._lock:
            self._closing = True
            self.faults.release()  # hung requests drop now instead of holding the shutdown
            for coll in self._collections.values():
                for watcher in coll.watchers:
                    watcher.closed = True
                    watcher.wake()
        service.stop()
        self._service = None
        self._closing = False

    def __enter__(self) -> FakeKubeApi:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def write_kubeconfig(self, path: str | Path, server: str | None = None) -> Path:
        """Write a kubeconfig (context `fake`, bearer token, TLS checks off) for this server,
        or for `server` in front of it (a proxy, e.g. `fakes.freezing_proxy`)."""
        target = Path(path)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": server or self.url,
                                                      "insecure-skip-tls-verify": True}}],
            "users": [{"name": "fake", "user": {"token": TOKEN}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake",
                                                      "namespace": "default"}}],
            "current-context": "fake",
            "preferences": {},
        }
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(config, sort_keys=False))
        return target

    @property
    def faults_url(self) -> str:
        """The fault admin endpoint (`POST` a rule, `GET` them, `DELETE` them all)."""
        return self.url + ADMIN_PATH

    def api_client(self) -> kubernetes.client.ApiClient:
        """A real `ApiClient` pointed at this server (does not touch the global default)."""
        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        configuration.verify_ssl = False
        configuration.api_key = {"authorization": TOKEN}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return kubernetes.client.ApiClient(configuration)

    # Fault injection ----------------------------------------------------------------

    def fail_next(self, verb: str, resource: str, count: int = 1, status: int = 500, *,
                  name: str | None = None, hold: bool = False) -> None:
        """Answer the next `count` matching HTTP requests with a `status` Status error; with
        `hold`, every matching request until `clear_faults()`.

        `verb` and `resource` may be "*"; `resource` names a subresource as
        `pods/eviction`.  Only HTTP requests are affected, never in-process calls.  A client
        that retries takes some of `count` itself (docs/harness.md, Faults and retries).
        """
        self._check_fault_target(verb, resource)
        if status < 400:
            raise ValueError(f"an injected failure needs an error status, not {status}")
        if count < 1 and not hold:
            raise ValueError(f"count must be at least 1, not {count}")
        with self._lock:
            self._faults.append(_Fault(verb, resource, HELD if hold else count, status=status,
                                       name=name))

    def delay_next(self, verb: str, resource: str, seconds: float, count: int = 1) -> None:
        """Hold the next `count` matching HTTP requests for `seconds` before serving them."""
        self._check_fault_target(verb, resource)
        with self._lock:
            self._faults.append(_Fault(verb, resource, count, delay=seconds))

    def _check_fault_target(self, verb: str, resource: str) -> None:
        """Catch typos ("pod", "evict") that would otherwise silently never match."""
        if verb not in _VERBS:
            raise ValueError(f"unknown verb {verb!r}; expected one of {sorted(_VERBS)}")
        plural, _, sub = resource.partition("/")
        # A fault names a plural: it matches that plural in every group serving it.
        types = {rt.plural: rt for rt in self._types.values()}
        if resource != "*" and (plural not in types
                                or (sub and sub not in types[plural].subresources)):
            raise ValueError(f"unknown resource {resource!r}; served: {sorted(types)} "
                             "and their subresources, e.g. pods/eviction, deployments/scale")

    def set_eviction_blocked(self, namespace: str, name: str, blocked: bool) -> None:
        """Make evictions of one pod answer 429, as a PodDisruptionBudget would."""
        with self._lock:
            if blocked:
                self._eviction_blocked.add((namespace, name))
            else:
                self._eviction_blocked.discard((namespace, name))

    def clear_faults(self) -> None:
        """Forget pending injected failures and delays, held ones too."""
        with self._lock:
            self._faults.clear()

    def end_watches(self, resource: str) -> int:
        """End every open watch on `resource` now, as an API server restart or a load balancer's
        idle cut does; returns how many were open."""
        coll = self._collection(resource)
        with self._lock:
            open_watches = list(coll.watchers)
            for watcher in open_watches:
                watcher.closed = True
                watcher.wake()
        return len(open_watches)

    def wait_for_watchers(self, resource: str, count: int = 1, timeout: float = 10.0) -> bool:
        """Block until exactly `count` watches on `resource` are open (False on timeout).

        Lets a test write only once its watch is established, or check that a watch
        was closed, without sleeping.
        """
        coll = self._collection(resource)
        with self._changed:
            return bool(self._changed.wait_for(lambda: len(coll.watchers) == count, timeout))

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out."""
        with self._lock:
            return self._rv
