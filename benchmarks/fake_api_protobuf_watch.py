"""A protobuf watch of pod events against the same watch in JSON, from the fake API server
(issue 41).

Creates N pods (fake_api_listing.make_pod, ~1.3 KB of JSON each) through the in-process API, then
opens watches from resourceVersion 0 (N ADDED events, then the stream ends: the server is set to
end watches once they have sent what they owe) over HTTP, as client-go's typed clients ask
(`Accept: application/vnd.kubernetes.protobuf,application/json`) and as JSON, reading the bytes
only. Each stored version's encoding is made once (fakes/kube_api/protobuf_lists.py) and shared by
every later watcher and list: the first protobuf watch pays it, the steady figure is every
later one (another informer, a re-watch, a list). Target: the steady protobuf watch within 1.5x
the JSON watch's time. Not a test: run it by hand,

    .venv/bin/python -m benchmarks.fake_api_protobuf_watch [--pods 1000] [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx

from benchmarks.fake_api_listing import make_pod
from benchmarks.fake_api_protobuf_listing import PROTOBUF_ACCEPT
from kube_elevator.fakes.kube_api.server import FakeKubeApi


def timed_watch(client: httpx.Client, url: str, accept: str) -> tuple[float, int]:
    """Seconds for one whole watch of the initial events, and its size in bytes."""
    started = time.perf_counter()
    with client.stream("GET", url, headers={"Accept": accept},
                       params={"watch": "true", "resourceVersion": "0"}) as response:
        response.raise_for_status()
        size = sum(len(chunk) for chunk in response.iter_bytes())
    return time.perf_counter() - started, size


def measure(pods: int = 1_000, runs: int = 15) -> dict[str, float]:
    """Medians of `runs` interleaved whole watches in each content type, and the first protobuf
    watch's time (seconds; sizes in bytes)."""
    api = FakeKubeApi()
    for i in range(pods):
        api.create("pods", make_pod(i))
    api.watches_end_at_once = True
    with api, httpx.Client(timeout=120) as client:
        url = api.url + "/api/v1/pods"
        timed_watch(client, url, "application/json")  # warm the connection
        cold_s, protobuf_bytes = timed_watch(client, url, PROTOBUF_ACCEPT)
        json_runs, protobuf_runs = [], []
        json_bytes = 0
        for _ in range(runs):  # interleaved, so load on the machine hits both alike
            seconds, json_bytes = timed_watch(client, url, "application/json")
            json_runs.append(seconds)
            protobuf_runs.append(timed_watch(client, url, PROTOBUF_ACCEPT)[0])
    return {"pods": pods, "json_seconds": statistics.median(json_runs),
            "protobuf_seconds": statistics.median(protobuf_runs), "cold_seconds": cold_s,
            "json_bytes": json_bytes, "protobuf_bytes": protobuf_bytes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    m = measure(args.pods, args.runs)
    ratio = m["protobuf_seconds"] / m["json_seconds"]
    print(f"pod events: {args.pods:,}; JSON {m['json_bytes'] / 2**10:,.0f} KiB, "
          f"protobuf {m['protobuf_bytes'] / 2**10:,.0f} KiB")
    print(f"JSON watch, median of {args.runs}: {m['json_seconds'] * 1e3:.1f} ms")
    print(f"protobuf watch, median of {args.runs}: {m['protobuf_seconds'] * 1e3:.1f} ms "
          f"({ratio:.2f}x JSON; target <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'})")
    print(f"first protobuf watch (encodes every pod once): {m['cold_seconds'] * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
