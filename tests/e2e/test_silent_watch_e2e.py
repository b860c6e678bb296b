"""`elevator watch` behind watch connections that froze (issue 26 §1, its acceptance, here with a
short silence limit so it runs fast; `benchmarks/silent_watch.py` measures the defaults): the
process, its in-process ticks, the fake API behind the freezing proxy, and moto, as
`benchmarks/event_latency.py` runs them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.event_latency import BurstCluster, InProcessRig, PrefectServer, wait_until
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.freezing_proxy import FreezingProxy
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.tasks.core.timeouts import WATCH_SILENCE_LIMIT_ENV

SILENCE_LIMIT_SECONDS = 3


def pod_lists(kube: FakeKubeApi) -> int:
    return sum(1 for request in kube.requests
               if request.resource == "pods" and request.verb == "list")


def latest_tick_artifact(server: PrefectServer) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: server.api_url}), \
            get_client(sync_client=True) as client:
        (artifact,) = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["autoscale-tick"])),
            sort=ArtifactSort.CREATED_DESC, limit=1)
    return artifact


def test_a_burst_behind_frozen_watches_is_acted_on_once_the_silence_limit_passes(
        fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path) -> None:
    with PrefectServer() as server, FreezingProxy(fake_kube.url) as proxy:
        cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
        cluster.kubeconfig = fake_kube.write_kubeconfig(tmp_path / "proxied", server=proxy.url)
        before = cluster.desired()
        with InProcessRig(server, cluster, tmp_path,
                          env={WATCH_SILENCE_LIMIT_ENV: str(SILENCE_LIMIT_SECONDS)}) as rig:
            assert rig.watch is not None
            lists_before = pod_lists(fake_kube)
            frozen = proxy.freeze()  # the cache's three watches, and whatever idles beside them
            time.sleep(1.0)  # the scenario: the burst comes a second after the freeze
            started = time.monotonic()
            cluster.burst(10)
            # The read timeout the watch had before this (300 + 30 s) is far past this wait.
            wait_until(lambda: cluster.desired() > before, 60,
                       "the ASG to grow past the frozen watch")
            latency = time.monotonic() - started
            rig.watch.wait_for("tick (batch: 10 pending pods): batch: acted", 120)
            artifact = latest_tick_artifact(server)
            codes = rig.stop()
        output = rig.watch.output()
    print(f"\nburst behind frozen watches → SetDesiredCapacity: {latency:.2f} s "
          f"(silence limit {SILENCE_LIMIT_SECONDS} s)")
    assert frozen >= 3
    assert "watch: nothing from the server for" in output
    assert pod_lists(fake_kube) == lists_before  # resumed from its resourceVersion, no list
    # 10 pods of 500m on 2 nodes of 1000m: 250% => scale up by ceil(2 × 180 / 70) = 6.
    assert cluster.desired() == before + 6
    assert codes == {"watch": 0}
    assert "Read from the watch cache" in artifact.description
    assert "pods " in artifact.description and "resourceVersion" in artifact.description
