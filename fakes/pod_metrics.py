"""A fake cAdvisor: per-pod container series on `/metrics` for a real Prometheus to scrape.

The pod autoscalers read CPU and memory the way they do on a real cluster, from
`container_cpu_usage_seconds_total` (a counter: Prometheus takes its `rate`) and
`container_memory_working_set_bytes` (a gauge), labelled `namespace`, `pod`, `container`.
The simulator (or a test) sets each pod's current usage; the CPU counter then grows at that
rate on the server's clock, so a rate over any window is the usage, as on a kubelet.
Arbitrary series (`set_series`) stand in for what a WPA's External metrics would query.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType

from starlette.types import Receive, Scope, Send

from kube_elevator.tasks.adapters.http_server import ServiceThread

__all__ = ["CPU_SERIES", "MEMORY_SERIES", "PodMetricsServer"]

CPU_SERIES = "container_cpu_usage_seconds_total"
MEMORY_SERIES = "container_memory_working_set_bytes"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[tuple[str, str], ...]


@dataclass
class _Container:
    """One container's CPU counter (integrated lazily) and memory gauge."""

    cpu_cores: float
    memory_bytes: float
    cpu_seconds: float  # counter value at `since`
    since: float

    def counter_at(self, now: float) -> float:
        return self.cpu_seconds + self.cpu_cores * max(now - self.since, 0.0)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels_text(labels: Labels) -> str:
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in labels) + "}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class PodMetricsServer:
    """HTTP server on 127.0.0.1 (a free port by default) serving `/metrics`, run by uvicorn in a
    thread (`flows.http_service`).

    `clock` gives the time the CPU counters integrate over (default: the wall clock, which
    is also what Prometheus stamps its scrapes with).  Use as a context manager or with
    `start()`/`stop()`; the setters work either way.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0,
                 clock: Callable[[], float] = time.time) -> None:
        self.host = host
        self.port = port
        self.clock = clock
        self._lock = threading.Lock()
        self._containers: dict[tuple[str, str, str], _Container] = {}
        self._series: dict[str, dict[Labels, float]] = {}
        self._service: ServiceThread | None = None
        self.scrapes = 0

    # --- usage -----------------------------------------------------------------------------

    def set_usage(self, namespace: str, pod: str, cpu_cores: float, memory_bytes: float,
                  container: str = "main") -> None:
        """Set a pod's current CPU rate (cores) and memory working set (bytes).

        The CPU counter keeps what it accumulated so far and grows at the new rate from now on.
        """
        if cpu_cores < 0 or memory_bytes < 0:
            raise ValueError("usage cannot be negative")
        now = self.clock()
        key = (namespace, pod, container)
        with self._lock:
            current = self._containers.get(key)
            counted = current.counter_at(now) if current is not None else 0.0
            self._containers[key] = _Container(cpu_cores, memory_bytes, counted, now)

    def remove(self, namespace: str, pod: str) -> None:
        """Forget a pod (all its containers): its series disappear from the next scrape."""
        with self._lock:
            for key in [k for k in self._containers if k[:2] == (namespace, pod)]:
                del self._containers[key]

    def usage(self, namespace: str, pod: str) -> tuple[float, float] | None:
        """The pod's (cpu cores, memory bytes) summed over its containers, None if unknown."""
        with self._lock:
            found = [c for k, c in self._containers.items() if k[:2] == (namespace, pod)]
        if not found:
            return None
        return sum(c.cpu_cores for c in found), sum(c.memory_bytes for c in found)

    # --- arbitrary series (External metrics) -----------------------------------------------

    def set_series(self, name: str, labels: Mapping[str, str], value: float) -> None:
        """Expose the gauge `name{labels} value` (NaN allowed) until removed."""
        key = tuple(sorted((str(k), str(v)) for k, v in labels.items()))
        with self._lock:
            self._series.setdefault(name, {})[key] = float(value)

    def remove_series(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        """Remove one series of `name`, or all of them when `labels` is None."""
        with self._lock:
            if labels is None:
                self._series.pop(name, None)
            else:
                key = tuple(sorted((str(k), str(v)) for k, v in labels.items()))
                self._series.get(name, {}).pop(key, None)

    # --- exposition --------------------------------------------------------------------------

    def render(self) -> str:
        """The Prometheus text exposition of every series, as served on `/metrics`."""
        now = self.clock()
        with self._lock:
            containers = sorted(self._containers.items())
            series = {name: dict(values) for name, values in sorted(self._series.items())}
        lines = [f"# HELP {CPU_SERIES} Cumulative cpu time consumed in seconds.",
                 f"# TYPE {CPU_SERIES} counter"]
        for (namespace, pod, container), state in containers:
            labels = (("container", container), ("namespace", namespace), ("pod", pod))
            lines.append(f"{CPU_SERIES}{_labels_text(labels)} {_number(state.counter_at(now))}")
        lines += [f"# HELP {MEMORY_SERIES} Current working set in bytes.",
                  f"# TYPE {MEMORY_SERIES} gauge"]
        for (namespace, pod, container), state in containers:
            labels = (("container", container), ("namespace", namespace), ("pod", pod))
            lines.append(f"{MEMORY_SERIES}{_labels_text(labels)} {_number(state.memory_bytes)}")
        for name, values in series.items():
            lines.append(f"# TYPE {name} gauge")
            lines.extend(f"{name}{_labels_text(labels)} {_number(value)}"
                         for labels, value in sorted(values.items()))
        return "\n".join(lines) + "\n"

    # --- lifecycle ---------------------------------------------------------------------------

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        """GET `/metrics` (any query); else 501 for the method or 404, as http.server did."""
        if scope["type"] != "http":
            return
        if scope["method"] != "GET":
            status, body, content_type = 501, b"Unsupported method", "text/plain"
        elif scope["path"] != "/metrics":
            status, body, content_type = 404, b"Not Found", "text/plain"
        else:
            status, body, content_type = 200, self.render().encode(), CONTENT_TYPE
            self.scrapes += 1
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", content_type.encode()),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    @property
    def url(self) -> str:
        if self._service is None:
            raise RuntimeError("PodMetricsServer is not running: call start() first")
        return self._service.url

    @property
    def address(self) -> str:
        """`host:port`, the form a Prometheus scrape target takes."""
        return self.url.removeprefix("http://")

    def start(self) -> PodMetricsServer:
        """Serve `/metrics` from a daemon thread; OSError if the port cannot be bound."""
        if self._service is not None:
            raise RuntimeError("PodMetricsServer is already running")
        self._service = ServiceThread(
            self._asgi, self.host, self.port, "fake-pod-metrics", startup_timeout=30,
            lifespan="off", graceful_shutdown_timeout=2, stop_timeout=5,
            bind_option=None).start()
        return self

    def stop(self) -> None:
        if self._service is not None:
            self._service.stop()
            self._service = None

    def __enter__(self) -> PodMetricsServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
