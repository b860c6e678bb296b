"""Issue 34: `pods run`, the load watcher and the scheduler extender serve the health endpoint of
`serve` and `watch` (`/health-check` tied to their own loop, `/ready`, `/metrics`), over real
HTTP: the loop fails (or hangs) past the limit and the check turns unhealthy, then healthy again
once it works; and `/watcher` says why it has nothing to answer."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.event_latency import (
    FREE_HEALTH_PORT,
    Child,
    fetch,
    free_port,
    health_url,
    wait_until,
)
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.cli.liveness import kept_alive, liveness_options
from kube_elevator.flows.cli.services import extender_health, watcher_health
from kube_elevator.tasks.load_aware.extender import SchedulerExtender, WatcherCollector
from kube_elevator.tasks.load_aware.watcher import LoadWatcher, PrometheusProvider
from tests.e2e.test_load_services import (
    VECTORS,
    FakePrometheus,
    FakeWatcher,
    avg,
    serving,
    watcher_document,
)

REPO = Path(__file__).resolve().parents[2]
WPA_LIST = "/apis/datadoghq.com/v1alpha1/watermarkpodautoscalers"
# Short limits, so a loop that stopped working shows within seconds.
ONE_SECOND = liveness_options("127.0.0.1:0", "1s", "1s")


def elevator(*args: str) -> list[str]:
    """The command line of `elevator <args>`, every command of the CLI, in this interpreter."""
    return [sys.executable, "-m", "kube_elevator.flows.cli", *args]


def samples(text: str) -> dict[str, float]:
    return {sample.name + str(sorted(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


# --- pods run ---------------------------------------------------------------------------------


def test_pods_run_turns_unhealthy_while_its_cycles_fail_or_hang_and_healthy_again(
        prefect_server: None, fake_kube: FakeKubeApi, kubeconfig: Path, tmp_path: Path) -> None:
    from prefect.settings import PREFECT_API_URL

    fake_kube.register_custom_resource("datadoghq.com", "v1alpha1", "watermarkpodautoscalers",
                                       "WatermarkPodAutoscaler", short_names=("wpa",))
    fake_kube.install_crd(REPO / "deployments/kubernetes/base/memoryautoscaler-crd.yaml")
    prometheus = FakePrometheus({})
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    with serving(prometheus.app()) as prometheus_url:
        child = Child(elevator("pods", "run", "--prometheus", prometheus_url, "--kubeconfig",
                               str(kubeconfig), "--interval", "1s", "--metrics-port", "0",
                               "--max-inactivity", "5s", "--max-failing-time", "5s",
                               *FREE_HEALTH_PORT), env, tmp_path / "pods-run.log")
        try:
            url = health_url(child)
            wait_until(lambda: fetch(f"{url}/health-check") == (200, "ticking\n")
                       and fetch(f"{url}/ready")[0] == 200, 120, "a cycle, healthy and ready")
            found = samples(wait_until(lambda: (text := fetch(f"{url}/metrics")[1])
                                       and "elevator_ticks_total" in text and text, 30,
                                       "the metrics"))
            assert found["elevator_ticks_total[('outcome', 'succeeded')]"] >= 1
            assert found["elevator_healthy[]"] == 1

            # Each cycle fails: the list of autoscalers answers 500.
            fake_kube.faults.add("status", status=500, method="GET", path=WPA_LIST,
                                 count=None)
            _, body = wait_until(lambda: (answer := fetch(f"{url}/health-check"))[0] == 500
                                 and answer, 60, "the failing cycles to fail the check")
            assert body.startswith("unhealthy (ticking): no cycle succeeded for "), body
            assert "(--max-failing-time 5s)" in body and "no cycle finished" not in body
            fake_kube.faults.clear()
            wait_until(lambda: fetch(f"{url}/health-check") == (200, "ticking\n"), 60,
                       "healthy again once cycles succeed")

            # A cycle hangs: none finishes.
            fake_kube.faults.add("hang", method="GET", path=WPA_LIST, count=None)
            _, body = wait_until(lambda: (answer := fetch(f"{url}/health-check"))[0] == 500
                                 and answer, 60, "the hung cycle to fail the check")
            assert "no cycle finished for " in body and "(--max-inactivity 5s)" in body
            fake_kube.faults.clear()
            fake_kube.faults.release()
            wait_until(lambda: fetch(f"{url}/health-check") == (200, "ticking\n"), 60,
                       "healthy again once the cycle is released")
        finally:
            fake_kube.faults.rearm()
            code = child.stop()
    assert code == 0, child.output()[-3000:]
    assert "Traceback" not in child.output()


# --- the load watcher --------------------------------------------------------------------------


@contextmanager
def watcher_served(prometheus_url: str) -> Iterator[tuple[str, str, LoadWatcher]]:
    """The load watcher as its command serves it, fetching every 0.2 s: (its URL, its health
    endpoint's URL, the watcher)."""
    watcher = LoadWatcher(PrometheusProvider(prometheus_url), interval_seconds=0.2)
    with serving(watcher.app()) as url, \
            kept_alive(ONE_SECOND, watcher_health(watcher, ONE_SECOND), None) as health:
        assert health is not None
        yield url, health, watcher


def test_the_load_watcher_s_health_follows_its_fetches_and_watcher_says_why() -> None:
    prometheus = FakePrometheus({})  # no recording rules: every query answers nothing
    with serving(prometheus.app()) as prometheus_url, \
            watcher_served(prometheus_url) as (url, health, watcher):
        assert watcher.wait_for_fetches(3)
        answer = httpx.get(f"{url}/watcher")
        assert (answer.status_code, answer.headers["content-type"]) == (500, "application/json")
        error = answer.json()["error"]
        assert error.startswith("no metrics yet: the last fetch from Prometheus failed: ")
        assert "Prometheus has no series instance:node_cpu:ratio: the load watcher needs " \
               "kube-prometheus's recording rules instance:node_cpu:ratio and " \
               "instance:node_memory_utilisation:ratio" in error
        _, body = wait_until(lambda: (answer := fetch(f"{health}/health-check"))[0] == 500
                             and answer, 10, "failed fetches to fail the check")
        assert body.startswith("unhealthy (fetching): no fetch from Prometheus succeeded for ")
        status, body = fetch(f"{health}/ready")
        assert status == 503 and "recording rules" in body

        prometheus.vectors = VECTORS  # the rules are there now
        wait_until(lambda: fetch(f"{health}/health-check") == (200, "fetching\n"), 10,
                   "healthy again")
        assert fetch(f"{health}/ready") == (200, "ready\n")
        assert httpx.get(f"{url}/watcher").status_code == 200
        assert samples(fetch(f"{health}/metrics")[1])["elevator_healthy[]"] == 1


def test_watcher_names_an_unreachable_prometheus() -> None:
    with watcher_served(f"http://127.0.0.1:{free_port()}") as (url, _, watcher):
        assert watcher.wait_for_fetches(3)
        answer = httpx.get(f"{url}/watcher")
    assert answer.status_code == 500
    assert "Prometheus is unreachable: ConnectError" in answer.json()["error"]


def test_watcher_says_the_first_fetch_has_not_finished() -> None:
    prometheus = FakePrometheus(VECTORS)
    prometheus.gate.clear()  # answers wait
    with serving(prometheus.app()) as prometheus_url, \
            watcher_served(prometheus_url) as (url, health, _):
        answer = httpx.get(f"{url}/watcher")
        assert orjson.loads(answer.content) == {
            "error": "no metrics yet: the first fetch from Prometheus has not finished"}
        assert fetch(f"{health}/ready")[0] == 503
        prometheus.gate.set()


# --- the scheduler extender --------------------------------------------------------------------


def test_the_extender_s_health_follows_its_fetches_of_the_watcher() -> None:
    watcher = FakeWatcher(watcher_document({"n1": [avg("CPU", 30.0)]}))
    watcher.status = 500
    with serving(watcher.app()) as watcher_url:
        extender = SchedulerExtender(WatcherCollector(watcher_url), refresh_seconds=0.2)
        with serving(extender.app()), \
                kept_alive(ONE_SECOND, extender_health(extender, ONE_SECOND), None) as health:
            assert health is not None
            _, body = wait_until(lambda: (answer := fetch(f"{health}/health-check"))[0] == 500
                                 and answer, 10, "failed fetches to fail the check")
            assert body.startswith(
                "unhealthy (scoring): no fetch from the load watcher succeeded for ")
            status, body = fetch(f"{health}/ready")
            assert status == 503 and "received status code 500" in body

            watcher.status = 200
            wait_until(lambda: fetch(f"{health}/health-check") == (200, "scoring\n"), 10,
                       "healthy again")
            assert fetch(f"{health}/ready") == (200, "ready\n")


@pytest.mark.parametrize("command", ["load-watcher", "scheduler-extender"])
def test_the_services_print_and_serve_their_health_address(command: str, tmp_path: Path
                                                           ) -> None:
    """The commands' own wiring, in a process: the health line, its three pages."""
    target = f"http://127.0.0.1:{free_port()}"
    options = (["--prometheus", target] if command == "load-watcher"
               else ["--watcher-url", target, "--policy", "target-load-packing"])
    child = Child(elevator(command, *options, "--port", "0", *FREE_HEALTH_PORT), os.environ,
                  tmp_path / f"{command}.log")
    try:
        url = health_url(child)
        assert fetch(f"{url}/health-check")[0] == 200  # within the limits (10m, 15m)
        status, body = fetch(f"{url}/ready")
        assert status == 503 and body.startswith("not ready: no metrics")
        assert "elevator_healthy 1\n" in fetch(f"{url}/metrics")[1]
    finally:
        code = child.stop()
    assert code == 0, child.output()[-3000:]


def test_refresh_records_each_fetch() -> None:
    extender = SchedulerExtender(WatcherCollector(f"http://127.0.0.1:{free_port()}"))
    assert asyncio.run(extender.refresh()) is False
    state = extender.health.state()
    assert (state.succeeded, state.failed) == (0, 1)


# --- pods run: every "nothing" says why -------------------------------------------------------


def test_pods_run_without_the_crds_says_so_and_names_an_unreachable_prometheus(
        prefect_server: None, fake_kube: FakeKubeApi, kubeconfig: Path) -> None:
    """A cluster without the CRDs (the API answers 404) and a Prometheus nobody listens on:
    the cycle has nothing to scale, exits 0, and says why in one line each."""
    import typer
    from typer.testing import CliRunner

    from kube_elevator.flows.cli.pods import register

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """A bare app, as flows.cli's."""

    register(app)
    prometheus = f"http://127.0.0.1:{free_port()}"
    arguments = ["pods", "run", "--once", "--prometheus", prometheus, "--kubeconfig",
                 str(kubeconfig), "--metrics-port", "0"]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: the WatermarkPodAutoscaler CRD is not installed (the API answered 404 for "
        "watermarkpodautoscalers.datadoghq.com/v1alpha1): no WatermarkPodAutoscaler to scale; "
        "install it with DataDog's watermarkpodautoscaler Helm chart (or the CRD in that "
        "repository's config/crd)",
        "note: the MemoryAutoscaler CRD is not installed (the API answered 404 for "
        "memoryautoscalers.elevator.io/v1alpha1): no MemoryAutoscaler to scale; install it "
        "with kubectl apply -f deployments/kubernetes/base/memoryautoscaler-crd.yaml (or apply "
        "the Kustomize base: kubectl apply -k deployments/kubernetes/base)",
        f"note: Prometheus at {prometheus} is unreachable: ConnectionError: no autoscaler "
        "could read its metrics"], result.stderr

    # With the CRDs and a Prometheus that answers: nothing to say.
    fake_kube.register_custom_resource("datadoghq.com", "v1alpha1", "watermarkpodautoscalers",
                                       "WatermarkPodAutoscaler", short_names=("wpa",))
    fake_kube.install_crd(REPO / "deployments/kubernetes/base/memoryautoscaler-crd.yaml")
    with serving(FakePrometheus({}).app()) as prometheus_url:
        arguments[4] = prometheus_url
        result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    assert "note:" not in result.stderr
