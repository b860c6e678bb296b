"""Whether this process keeps a watch cache (`elevator watch`, `elevator serve` in-process), and
of which kubeconfig's cluster: `kube_cache.install_process_cache` records it here.

Apart from `kube_cache` so that a process that keeps none, such as a run's own process (`serve
--ticks runs`, a worker's), finds that out without importing the cache and its watches, which
it never uses (issue 40: the run's start). `kube_cache.process_cache` gives the cache, typed.
"""

from __future__ import annotations

_INSTALLED: tuple[str | None, object] | None = None


def install(cache: object | None, kubeconfig: str | None = None) -> None:
    global _INSTALLED
    _INSTALLED = None if cache is None else (kubeconfig, cache)


def installed(kubeconfig: str | None = None) -> object | None:
    """The cache this process keeps of the cluster `kubeconfig` names, if any."""
    if _INSTALLED is None or _INSTALLED[0] != kubeconfig:
        return None
    return _INSTALLED[1]
