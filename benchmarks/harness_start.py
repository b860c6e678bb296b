"""How fast the harness starts (issue 36 item 6): a cluster per test must be affordable.

1. `ready`: a fresh `fake_cluster()` (the fake API, in-process moto, the simulated cluster) from
   entering the `with` to a first answer of each side: the official client's `list_node` and
   boto3's `DescribeAutoScalingGroups`; in a warm process (the imports and moto's first loads
   paid once, as in a test session after its first test), median of `--clusters`. Target:
   under 0.5 s. Also the same first time in a fresh process, imports included (`cold`).
2. `session`: a generated file of `--tests` small tests, each taking the plugin's
   `fake_cluster` fixture (a node group of one node, a pod bound to it, read back with the
   official client), run by pytest in a subprocess from an empty folder: the wall time of the
   whole session, the first test (which pays the imports), and the median of the others
   (setup + call + teardown, from pytest's durations).

    .venv/bin/python -m benchmarks.harness_start --clusters 20 --tests 50
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

READY_TARGET_SECONDS = 0.5

TEST_FILE = '''
from kubernetes import client


def test_cluster_{index}(fake_cluster):
    fake_cluster.add_node_group("workers", desired=1, labels={{"pool": "workers"}})
    core = client.CoreV1Api(fake_cluster.api_client())
    core.create_namespaced_pod("default", {{"metadata": {{"name": "p"}}, "spec": {{
        "nodeSelector": {{"pool": "workers"}},
        "containers": [{{"name": "c", "image": "busybox"}}]}}}})
    fake_cluster.step()
    assert core.read_namespaced_pod("p", "default").spec.node_name == "workers-001"
'''

COLD = """
import time
started = time.perf_counter()
import boto3
from kubernetes import client
from kube_elevator.harness import fake_cluster
with fake_cluster() as cluster:
    client.CoreV1Api(cluster.api_client()).list_node()
    boto3.client("autoscaling").describe_auto_scaling_groups()
    print(time.perf_counter() - started)
"""


def ready_seconds() -> float:
    """One fresh cluster, entered to both first answers."""
    import boto3
    from kubernetes import client

    from kube_elevator.harness import fake_cluster

    started = time.perf_counter()
    with fake_cluster() as cluster:
        with cluster.api_client() as api:
            client.CoreV1Api(api).list_node()
        boto3.client("autoscaling").describe_auto_scaling_groups()
        return time.perf_counter() - started


def measure(clusters: int = 20, tests: int = 50) -> dict[str, object]:
    ready_seconds()  # the imports and moto's first loads, paid once
    ready = [ready_seconds() for _ in range(clusters)]
    cold = float(subprocess.run([sys.executable, "-c", COLD], capture_output=True, text=True,
                                check=True, timeout=300).stdout.strip())
    with tempfile.TemporaryDirectory(prefix="harness-bench-") as folder:
        path = Path(folder) / "test_many.py"
        path.write_text("".join(textwrap.dedent(TEST_FILE).format(index=index)
                                for index in range(tests)))
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "--durations=0", "--durations-min=0", str(path)], cwd=folder,
                              capture_output=True, text=True, check=False, timeout=900)
        session = time.perf_counter() - started
    if done.returncode != 0 or not re.search(rf"\b{tests} passed\b", done.stdout):
        raise RuntimeError("the generated session failed:\n" + done.stdout[-3000:])
    reported = float(re.findall(r"passed in ([\d.]+)s", done.stdout)[-1])
    per_test = [0.0] * tests  # setup + call + teardown, from pytest's durations
    for seconds, index in re.findall(r"([\d.]+)s (?:setup|call|teardown)\s+\S+::test_cluster_(\d+)",
                                     done.stdout):
        per_test[int(index)] += float(seconds)
    return {"ready": ready, "cold": cold, "session_seconds": session,
            "pytest_seconds": reported, "tests": tests, "first_test": per_test[0],
            "later_tests": per_test[1:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--tests", type=int, default=50)
    arguments = parser.parse_args()
    measured = measure(arguments.clusters, arguments.tests)
    ready = measured["ready"]
    assert isinstance(ready, list)
    print(f"ready for a first request, warm process: median {statistics.median(ready):.3f} s, "
          f"max {max(ready):.3f} s over {len(ready)} clusters (target < "
          f"{READY_TARGET_SECONDS} s)")
    print(f"ready for a first request, fresh process (imports included): "
          f"{measured['cold']:.2f} s")
    later = measured["later_tests"]
    assert isinstance(later, list)
    print(f"pytest session of {measured['tests']} tests, a cluster each: "
          f"{measured['session_seconds']:.1f} s wall ({measured['pytest_seconds']:.1f} s by "
          f"pytest); the first test {measured['first_test']:.2f} s (the imports), the others "
          f"median {statistics.median(later):.3f} s, max {max(later):.3f} s (setup + call + "
          "teardown)")


if __name__ == "__main__":
    main()
