"""A burst of pending pods behind frozen watch connections (issue 26's acceptance).

`elevator watch` with its default settings (ticks in-process, schedule 1 h, silence limit and
freshness bound 45 s) against the fake API behind `fakes.freezing_proxy`, moto and a Prefect
server, as `benchmarks/event_latency.py` runs them. First `--healthy` bursts with the watch
healthy (each timed from creating the pods to the ASG's raised desired capacity, polled every
20 ms); then `--frozen` times: a pod change the watch hears (the worst moment: the silence
starts now), every connection open through the proxy frozen (the cache's three watches and the
idle ones beside them), a burst of pending pods created 1 s later, and the time from the burst
to SetDesiredCapacity. Before this work the frozen case took 326 s (the watch's read timeout).

    .venv/bin/python -m benchmarks.silent_watch --healthy 10 --frozen 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.event_latency import BurstCluster, InProcessRig, PrefectServer, wait_for_idle
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.freezing_proxy import FreezingProxy
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.tasks.escalator.pending_bursts import DEFAULT_DEBOUNCE_SECONDS

FREEZE_TO_BURST_SECONDS = 1.0  # the probe: the burst comes a second after the freeze
FROZEN_TIMEOUT_SECONDS = 150.0  # well past the 90 s the acceptance allows


def _quiet(started: float) -> None:
    """Let the debounce window of the last burst pass, so each starts from a quiet watch."""
    time.sleep(max(0.0, started + DEFAULT_DEBOUNCE_SECONDS - time.monotonic()))


def _frozen_burst(rig: InProcessRig, proxy: FreezingProxy, kube: FakeKubeApi, number: int,
                  pods: int) -> float:
    """Seconds from a burst created 1 s after every connection froze to the raised ASG."""
    # A change the pod watch hears right before the freeze: its silence is the longest.
    kube.create("pods", {"metadata": {"name": f"bystander-{number}", "namespace": "jobs"},
                         "spec": {"nodeName": "elsewhere", "containers": [
                             {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1m"}}}]},
                         "status": {"phase": "Running"}}, namespace="jobs")
    proxy.freeze()
    time.sleep(FREEZE_TO_BURST_SECONDS)
    return rig.measure_burst(pods, timeout=FROZEN_TIMEOUT_SECONDS)


def measure(healthy_bursts: int = 10, frozen_bursts: int = 3, pods: int = 10
            ) -> dict[str, list[float]]:
    """Latencies in seconds: `healthy` bursts, then `frozen` ones, of `pods` pods each."""
    scratch = Path(tempfile.mkdtemp(prefix="elevator-silent-watch-"))
    healthy: list[float] = []
    frozen: list[float] = []
    try:
        with FakeKubeApi() as kube, FakeAws() as aws, PrefectServer() as server, \
                FreezingProxy(kube.url) as proxy:
            cluster = BurstCluster(kube, aws, scratch)
            cluster.kubeconfig = kube.write_kubeconfig(scratch / "proxied", server=proxy.url)
            with InProcessRig(server, cluster, scratch) as rig:
                for number in range(healthy_bursts):
                    started = time.monotonic()
                    healthy.append(rig.measure_burst(pods))
                    print(f"healthy burst {number + 1}: {healthy[-1]:.2f} s", flush=True)
                    wait_for_idle(server)
                    _quiet(started)
                for number in range(frozen_bursts):
                    started = time.monotonic()
                    frozen.append(_frozen_burst(rig, proxy, kube, number, pods))
                    print(f"frozen burst {number + 1}: {frozen[-1]:.2f} s", flush=True)
                    wait_for_idle(server)
                    _quiet(started)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"healthy": healthy, "frozen": frozen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--healthy", type=int, default=10, help="bursts with a healthy watch")
    parser.add_argument("--frozen", type=int, default=3, help="bursts behind frozen watches")
    parser.add_argument("--pods", type=int, default=10, help="pending pods per burst")
    options = parser.parse_args()
    measured = measure(options.healthy, options.frozen, options.pods)
    healthy, frozen = measured["healthy"], measured["frozen"]
    if healthy:
        print(f"healthy watch, pod creation → SetDesiredCapacity: median "
              f"{statistics.median(healthy):.2f} s over {len(healthy)} bursts (max "
              f"{max(healthy):.2f} s)")
    if frozen:
        print(f"frozen watches, burst 1 s after the freeze → SetDesiredCapacity: max "
              f"{max(frozen):.2f} s over {len(frozen)} ({', '.join(f'{v:.1f}' for v in frozen)})")


if __name__ == "__main__":
    main()
