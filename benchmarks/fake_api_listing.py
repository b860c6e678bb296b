"""How fast the fake API server serves big pod lists to the real client.

Creates N small pods (~1.3 KB of JSON each) through the in-process API, then lists them
all over HTTP with the real `kubernetes` client in pages (`_preload_content=False`, reading
the bytes only, as a lister that decodes lazily would).  Not a test: run it by hand,

    .venv/bin/python benchmarks/fake_api_listing.py [--pods 150000] [--page 5000]
"""

from __future__ import annotations

import argparse
import re
import resource
import time
from typing import Any

import orjson
from kubernetes import client

from kube_elevator.fakes.kube_api.server import FakeKubeApi

_CONTINUE = re.compile(rb'"continue":"([^"]+)"')


def make_pod(i: int) -> dict[str, Any]:
    """A pod shaped like a real scheduled workload pod, ~1.3 KB once stored."""
    node = f"ip-10-0-{i // 250 % 256}-{i % 250}.ec2.internal"
    return {
        "metadata": {
            "name": f"worker-{i:06d}",
            "namespace": f"team-{i % 20:02d}",
            "labels": {"app": "worker", "pod-template-hash": "5d8f7c9b6d",
                       "team": f"team-{i % 20:02d}"},
            "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
                            "prometheus.io/scrape": "true"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": "worker-5d8f7c9b6d", "uid": f"rs-{i % 20:04d}",
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "default-scheduler",
            "containers": [{
                "name": "worker", "image": "registry.example.com/worker:1.4.2",
                "resources": {"requests": {"cpu": "250m", "memory": "512Mi"},
                              "limits": {"cpu": "1", "memory": "1Gi"}},
                "env": [{"name": "MODE", "value": "batch"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "batch",
                             "effect": "NoSchedule"}],
            "nodeSelector": {"node-group": "batch"},
        },
        "status": {
            "phase": "Running",
            "podIP": f"10.1.{i // 256 % 256}.{i % 256}",
            "hostIP": f"10.0.{i // 250 % 256}.{i % 250}",
            "startTime": "2026-11-21T11:00:00Z",
            "conditions": [{"type": "Ready", "status": "True",
                            "lastTransitionTime": "2026-11-21T11:00:05Z"},
                           {"type": "PodScheduled", "status": "True",
                            "lastTransitionTime": "2026-11-21T11:00:00Z"}],
            "qosClass": "Burstable",
        },
    }


def rss_mib() -> float:
    """Current resident memory (Linux), to size the store; 0 where unavailable."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:
        return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--page", type=int, default=5_000)
    args = parser.parse_args()

    api = FakeKubeApi()
    bodies = [make_pod(i) for i in range(args.pods)]
    before_mib = rss_mib()
    started = time.perf_counter()
    for body in bodies:
        api.create("pods", body)
    create_s = time.perf_counter() - started
    store_mib = rss_mib() - before_mib
    del bodies
    sample = len(orjson.dumps(api.list("pods", "team-00")[0]))

    with api, api.api_client() as api_client:
        core = client.CoreV1Api(api_client)
        core.list_pod_for_all_namespaces(limit=1)  # warm the connection and the sort
        started = time.perf_counter()
        token: str | None = None
        pages = total_bytes = 0
        while True:
            # Typed as the model, but `_preload_content=False` returns the raw response.
            resp: Any = core.list_pod_for_all_namespaces(limit=args.page, _continue=token,
                                                         _preload_content=False)
            data = resp.data
            pages += 1
            total_bytes += len(data)
            found = _CONTINUE.search(data, 0, 4096)
            token = found.group(1).decode() if found else None
            if token is None:
                break
        list_s = time.perf_counter() - started
        started = time.perf_counter()
        typed = core.list_pod_for_all_namespaces(limit=args.page)
        typed_s = time.perf_counter() - started
    assert len(typed.items) == min(args.page, args.pods)

    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"pods: {args.pods:,}, one stored pod: {sample:,} bytes of JSON")
    print(f"in-process create: {create_s:.2f} s ({create_s / args.pods * 1e6:.1f} us/pod), "
          f"store grew RSS by {store_mib:,.0f} MiB")
    print(f"HTTP list, pages of {args.page:,}: {list_s:.2f} s for {pages} pages, "
          f"{total_bytes / 2**20:,.0f} MiB ({total_bytes / 2**20 / list_s:,.0f} MiB/s)")
    print(f"one typed page of {args.page:,} (client deserialises models): {typed_s:.2f} s")
    print(f"peak RSS: {peak_mib:,.0f} MiB (includes the {args.pods:,} pre-built request bodies)")


if __name__ == "__main__":
    main()
