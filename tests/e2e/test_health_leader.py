"""Issue 26 §2 and §3 with real processes: `elevator watch` and `run --interval` against the fake
API, moto and the session's Prefect server: the health check fails while the API hangs and
passes again after; `/metrics` parsed by prometheus_client and scraped by a real Prometheus; two
replicas with `--leader-elect`, where the follower says it follows, takes over a frozen
(SIGSTOP) leader and a killed (kill -9) one, and no tick of the two ever claims a node group
while the other leads (the fake API's request log, by User-Agent, in the order it served)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
import typer
import yaml
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from benchmarks.deadlines import scaled
from benchmarks.event_latency import (
    FREE_HEALTH_PORT,
    BurstCluster,
    Child,
    elevator,
    fetch,
    free_port,
    health_url,
    identity,
    wait_until,
)
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.policy import RecordedRequest
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.cli import watch as watch_module
from tests.builders import group_dict
from tests.tools import prometheus_missing

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
LEADER_LEASE = f"{LEASES}/elevator-leader"
GROUP_LEASE = f"{LEASES}/elevator-batch"
# Short times, so a takeover takes seconds (the defaults' figure: benchmarks/leader_takeover.py).
SHORT_ELECTION = ("--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
                  "--leader-elect-retry-period", "1s")


@pytest.fixture
def env(prefect_server: None, fake_aws: FakeAws) -> dict[str, str]:
    """A child's environment: the session's Prefect server (started anyway), moto."""
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, **fake_aws.env(), "PREFECT_API_URL": str(PREFECT_API_URL.value())}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def watch(cluster: BurstCluster, env: dict[str, str], log: Path, *options: str) -> Child:
    return Child(elevator("watch", "--nodegroups", str(cluster.nodegroups), "--kubeconfig",
                          str(cluster.kubeconfig), *FREE_HEALTH_PORT, *options), env, log)


# --- the health check follows the ticks -------------------------------------------------------


def test_the_health_check_fails_while_the_api_hangs_and_passes_again_after(
        env: dict[str, str], fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    child = watch(cluster, env, tmp_path / "watch.log", "--no-leader-elect", "--interval",
                  "1s", "--max-inactivity", "8s", "--max-failing-time", "8s")
    try:
        url = health_url(child)
        wait_until(lambda: fetch(f"{url}/ready")[0] == 200, 120, "the cache to sync")
        wait_until(lambda: fetch(f"{url}/health-check") == (200, "ticking\n"), 120,
                   "a healthy tick")
        metrics = wait_until(lambda: (text := fetch(f"{url}/metrics")[1]) and samples(text).get(
            ("elevator_ticks_total", (("outcome", "succeeded"),)), 0) >= 1 and text, 60,
            "a tick in the metrics")
        found = samples(metrics)
        assert found[("escalator_node_group_nodes", (("node_group", "batch"),))] == 2
        assert found[("elevator_leader", ())] == 1 and found[("elevator_healthy", ())] == 1
        assert abs(found[("elevator_last_tick_success_timestamp_seconds", ())]
                   - time.time()) < 60

        fake_kube.faults.add("hang", count=None)  # every new request: the open watches go on
        _, body = wait_until(lambda: (answer := fetch(f"{url}/health-check"))[0] == 500
                                  and answer, 60, "the health check to fail")
        assert body.startswith("unhealthy (ticking): no tick finished for ")
        assert "(--max-inactivity 8s)" in body
        assert samples(fetch(f"{url}/metrics")[1])[("elevator_healthy", ())] == 0

        fake_kube.faults.clear()
        fake_kube.faults.release()  # the hung requests fail now; the tick's retries pass
        wait_until(lambda: fetch(f"{url}/health-check") == (200, "ticking\n"), 120,
                   "the health check to pass again")
    finally:
        fake_kube.faults.rearm()
        code = child.stop()
    assert code == 0, child.output()[-3000:]


# --- /metrics for a real Prometheus -------------------------------------------------------------


@pytest.fixture
def prometheus_binary() -> str:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip(prometheus_missing() or "")
    return binary


@contextlib.contextmanager
def scraping(binary: str, target: str, home: Path) -> Iterator[str]:
    """A real Prometheus scraping `target` every second; its URL."""
    config = home / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: elevator\n"
                      "    scrape_interval: 1s\n    scrape_timeout: 900ms\n"
                      f"    static_configs:\n      - targets: ['{target}']\n")
    port = free_port()
    process = Child([binary, f"--config.file={config}", f"--storage.tsdb.path={home / 'data'}",
                     f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"], {},
                    home / "prometheus.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: fetch(f"{url}/-/ready")[0] == 200, 60, "Prometheus to be ready")
        yield url
    finally:
        process.stop()


def query(prometheus: str, expression: str) -> list[dict[str, Any]]:
    status, body = fetch(f"{prometheus}/api/v1/query?query={urllib.parse.quote(expression)}")
    if status != 200:
        return []
    result: list[dict[str, Any]] = orjson.loads(body)["data"]["result"]
    return result


def test_a_real_prometheus_scrapes_run_intervals_metrics(
        env: dict[str, str], fake_kube: FakeKubeApi, fake_aws: FakeAws, tmp_path: Path,
        prometheus_binary: str) -> None:
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    run = Child([sys.executable, "-m", "kube_elevator.flows.cli", "run", "--nodegroups",
                 str(cluster.nodegroups), "--kubeconfig", str(cluster.kubeconfig), "--interval",
                 "2s", *FREE_HEALTH_PORT], env, tmp_path / "run.log")
    try:
        url = health_url(run)
        assert fetch(f"{url}/ready")[0] == 200  # no cache to wait for
        target = urllib.parse.urlsplit(url).netloc
        with scraping(prometheus_binary, target, tmp_path) as prometheus:
            nodes = wait_until(lambda: query(prometheus, 'escalator_node_group_nodes'
                                             '{node_group="batch"}'), 90, "a scrape")
            assert nodes[0]["value"][1] == "2"
            assert query(prometheus, 'up{job="elevator"}')[0]["value"][1] == "1"
            wait_until(lambda: query(prometheus, "elevator_ticks_total"
                                     '{outcome="succeeded"} > 0'), 60, "ticks scraped")
            assert query(prometheus, "elevator_leader")[0]["value"][1] == "1"
        assert fetch(f"{url}/health-check") == (200, "ticking\n")
    finally:
        code = run.stop()
    assert code == 0, run.output()[-3000:]


# --- two replicas ------------------------------------------------------------------------------


def claims_outside_leadership(requests: Sequence[RecordedRequest]) -> tuple[int, list[str]]:
    """(node-group claims seen, those made by a process other than the one that last wrote the
    leader Lease before it), in the order the API server applied them. A claim is a replace of
    the group's Lease (its creation, by the first leader's first tick, is a POST to the
    collection, as the leader Lease's is: the first POST is the election's)."""
    claims, found, leader = 0, [], None
    for request in requests:
        if request.method not in ("PUT", "POST") or request.status not in (200, 201):
            continue
        if request.path == LEADER_LEASE or (request.path == LEASES and leader is None):
            leader = request.user_agent
        elif request.path == GROUP_LEASE:
            claims += 1
            if request.user_agent != leader:
                found.append(f"{request.method} by {request.user_agent} while {leader} led")
    return claims, found


def role(url: str) -> str:
    status, body = fetch(f"{url}/health-check")
    assert status == 200, body
    return body.strip()


def test_a_follower_takes_over_a_frozen_leader_and_a_killed_one_never_both_acting(
        env: dict[str, str], fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    children = [watch(cluster, env, tmp_path / f"{name}.log", "--interval", "1h",
                      *SHORT_ELECTION) for name in ("a", "b")]
    try:
        urls = {id(child): health_url(child) for child in children}
        names = {id(child): identity(child) for child in children}

        def leader_and_follower() -> tuple[Child, Child] | None:
            roles = [role(urls[id(child)]) for child in children]
            if sorted(roles) == sorted(["leading", f"following {names[id(children[0])]}"]):
                return children[0], children[1]
            if sorted(roles) == sorted(["leading", f"following {names[id(children[1])]}"]):
                return children[1], children[0]
            return None

        leader, follower = wait_until(leader_and_follower, 120, "one leader, one follower")
        leader.wait_for("tick (leading)", 120)  # the leader ticked at start; nobody else did
        assert "tick (" not in follower.output()
        # The follower says it follows (200) and keeps its cache warm: it is ready too.
        assert role(urls[id(follower)]) == f"following {names[id(leader)]}"
        wait_until(lambda: fetch(f"{urls[id(follower)]}/ready")[0] == 200, 60, "its cache")
        assert samples(fetch(f"{urls[id(follower)]}/metrics")[1])[("elevator_leader", ())] == 0

        # Freeze the leader: the follower takes over and acts on a burst.
        before = cluster.desired()
        leader.process.send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        burst = cluster.burst(10)
        wait_until(lambda: cluster.desired() > before, 60, "the follower to scale up")
        print(f"\nSIGSTOP of the leader → the follower's SetDesiredCapacity: "
              f"{time.monotonic() - frozen_at:.1f} s (lease 4 s)")
        assert role(urls[id(follower)]) == "leading"
        resumed_output = len(leader.output())
        leader.process.send_signal(signal.SIGCONT)
        wait_until(lambda: role(urls[id(leader)]) == f"following {names[id(follower)]}", 30,
                   "the old leader to follow")
        assert "tick (" not in leader.output()[resumed_output:]
        assert claims_outside_leadership(fake_kube.requests)[1] == []

        # Kill the new leader: the old one takes over and acts on the next burst.
        cluster.delete(burst)
        cluster.aws.client("autoscaling").set_desired_capacity(
            AutoScalingGroupName=cluster.asg, DesiredCapacity=before, HonorCooldown=False)
        follower.process.send_signal(signal.SIGKILL)
        follower.process.wait(timeout=scaled(30))
        killed_at = time.monotonic()
        cluster.burst(10)
        wait_until(lambda: cluster.desired() > before, 60, "the old leader to scale up")
        took = time.monotonic() - killed_at
        print(f"kill -9 of the leader → the follower's SetDesiredCapacity: {took:.1f} s "
              "(lease 4 s; the defaults' figure: python -m benchmarks.leader_takeover)")
        assert took < 20
        assert role(urls[id(leader)]) == "leading"
        claims, outside = claims_outside_leadership(fake_kube.requests)
        assert outside == [] and claims >= 2  # the two takeovers' ticks claimed the group
        # Stopped between ticks (a SIGTERM fails the tick in flight): its takeover tick ended.
        wait_until(lambda: "tick (leading): batch: acted" in leader.output()[resumed_output:],
                   120, "the takeover tick to end")
    finally:
        for child in children:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGCONT)
        codes = [child.stop() for child in children]
    assert codes[children.index(leader)] == 0, leader.output()[-3000:]
    # The survivor released the Lease as it stopped.
    assert fake_kube.get("leases", "elevator-leader", "kube-system")["spec"][
        "holderIdentity"] == ""


def test_a_bad_health_address_or_election_times_exit_2(tmp_path: Path) -> None:
    app = typer.Typer()
    watch_module.register(app)
    nodegroups = tmp_path / "nodegroups.yaml"
    nodegroups.write_text(yaml.safe_dump({"node_groups": [group_dict(name="leader")]}))
    answer = CliRunner().invoke(app, [
        "--nodegroups", str(nodegroups), "--health-address", "8085",
        "--leader-elect-renew-deadline", "20s", "--max-inactivity", "0s"])
    assert answer.exit_code == 2, answer.output
    assert "--health-address: '8085' must be HOST:PORT" in answer.output
    assert "--max-inactivity: '0s' must be positive" in answer.output
    assert "the lease duration (15s) must be longer than the renew deadline (20s)" in answer.output
    # a group named `leader` has the Lease elevator-leader: the election needs another name
    answer = CliRunner().invoke(app, ["--nodegroups", str(nodegroups)])
    assert answer.exit_code == 2, answer.output
    assert "--leader-elect-lease-name: 'elevator-leader' is a node group's Lease" in answer.output
