"""The load watcher read a tick makes for `least_loaded` groups (after Trimaran's load watcher)."""

from __future__ import annotations

from kube_elevator.tasks.core.step import step
from kube_elevator.tasks.escalator.node_selection import cpu_load_from_watcher


@step
def read_node_load(watcher_url: str) -> dict[str, float]:
    """The tick step for `least_loaded` groups: one GET of the load watcher's `/watcher`."""
    import httpx

    from kube_elevator.tasks.core.timeouts import timeouts

    limits = timeouts()
    url = f"{watcher_url.rstrip('/')}/watcher"
    response = httpx.get(url, timeout=httpx.Timeout(limits.read_seconds,
                                                    connect=limits.connect_seconds))
    response.raise_for_status()
    return cpu_load_from_watcher(response.content, url)
