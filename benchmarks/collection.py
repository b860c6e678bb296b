"""A live tick's collection at cluster scale: 150,000 pods listed over HTTP, paged.

The fake API server runs in its own process, as a real API server would. The floor is the time
the server takes to serve the same pages to a client that only reads the bytes; the figure is
`KubeClient.list_pods()`, which also decodes every page into records.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from kubernetes import client

from kube_elevator.tasks.adapters.kube import ACTIVE_PODS, DEFAULT_PAGE_SIZE, KubeClient

SERVER = """
import sys
from kube_elevator.fakes.kube_api import FakeKubeApi
from kube_elevator.fakes.snapshots import synthetic_items
from benchmarks.plan_scale import groups, NOW
api = FakeKubeApi().start()
for item in synthetic_items(groups(int(sys.argv[1]), int(sys.argv[2])), NOW):
    item["metadata"].pop("resourceVersion", None)  # a create must not carry one
    if item["kind"] == "Pod":
        api.create("pods", item, item["metadata"]["namespace"])
    else:
        api.create("nodes", item)
api.write_kubeconfig(sys.argv[3])
print("ready", flush=True)
sys.stdin.read()  # serve until the parent closes our stdin
"""


def read_bytes_only(kube: KubeClient) -> int:
    """The floor: the same paged requests, the answers read but not decoded."""
    core = client.CoreV1Api(kube.api)
    token: str | None = None
    total = 0
    while True:
        response = core.list_pod_for_all_namespaces(
            limit=kube.page_size, _continue=token, field_selector=ACTIVE_PODS,
            _preload_content=False)
        data = response.data
        total += len(data)
        # Only the continue token is looked at; it sits in the list metadata at the start.
        head = data[:400]
        marker = head.find(b'"continue":"')
        if marker < 0:
            return total
        start = marker + len(b'"continue":"')
        token = head[start:head.index(b'"', start)].decode()


def measure(pods: int = 150_000, nodes: int = 5_000, repeats: int = 3) -> dict[str, float]:
    kubeconfig = Path(__file__).parent / "data" / "collection-kubeconfig"
    kubeconfig.parent.mkdir(exist_ok=True)
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(pods), str(nodes),
                               str(kubeconfig)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError("the fake API server did not start")
        kube = KubeClient.from_config(kubeconfig)
        floor = ours = float("inf")
        count = 0
        for _ in range(repeats):
            start = time.perf_counter()
            read_bytes_only(kube)
            floor = min(floor, time.perf_counter() - start)
            start = time.perf_counter()
            count = len(kube.list_pods())
            ours = min(ours, time.perf_counter() - start)
        if count != pods:
            raise RuntimeError(f"listed {count} pods, expected {pods}")
        return {"floor_seconds": floor, "seconds": ours, "page_size": DEFAULT_PAGE_SIZE}
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=60)


if __name__ == "__main__":
    print(measure())
