"""`elevator watch` and `elevator serve` (issue "Run it the way Prefect users run things", items 2
and 3): the debounce on an injected clock, the pod watch against the fake API (resume, 410),
and, against a real `prefect server start`, a burst of pending pods raising the ASG through
the event, the trigger and the served deployment; and a clean stop on SIGTERM."""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from benchmarks.deadlines import scaled
from benchmarks.event_latency import (
    API_POLL_SECONDS,
    FREE_HEALTH_PORT,
    BurstCluster,
    Child,
    EventRig,
    InProcessRig,
    PrefectServer,
    ServeRig,
    elevator,
    fetch,
    health_url,
    wait_until,
)
from kube_elevator.fakes.aws import FakeAws
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.cli import serve as serve_module
from kube_elevator.flows.cli import watch as watch_module
from kube_elevator.flows.cli.watch import Changed, PodWatch, Relisted, run_watch
from kube_elevator.tasks.core.records import PodRecord
from kube_elevator.tasks.escalator.pending_bursts import (
    PENDING_EVENT,
    Debouncer,
    PendingByGroup,
    PendingPods,
    PendingPodsEvents,
    group_resource_id,
    is_pending_unscheduled,
)
from kube_elevator.tasks.node_group_file import parse_node_groups
from tests.builders import group_dict, make_pod
from tests.e2e.test_deployments import api
from tests.e2e.test_health_leader import samples

GROUPS = parse_node_groups({"node_groups": [
    group_dict(),
    group_dict(name="gpu", label_value="gpu", cloud_provider_group_name="gpu-asg"),
    group_dict(name="default", label_key="pool", label_value="default",
               cloud_provider_group_name="default-asg"),
]}, "test.yaml").node_groups


def pod(name: str, group: str = "batch", **fields: Any) -> PodRecord:
    fields.setdefault("node_selector", {"customer": group} if group != "default" else {})
    return make_pod(name, **fields)


# --- which groups wait --------------------------------------------------------------------------


def test_only_pending_pods_on_no_node_wait() -> None:
    assert is_pending_unscheduled(pod("a"))
    assert not is_pending_unscheduled(pod("b", node="node-1"))
    assert not is_pending_unscheduled(pod("c", phase="Running"))
    assert not is_pending_unscheduled(pod("d", scheduled=True))


def test_pending_pods_are_counted_per_group_with_escalators_matching() -> None:
    pending = PendingByGroup(GROUPS)
    assert pending.apply("ADDED", pod("a")) == ("batch",)
    assert pending.apply("ADDED", pod("b", group="gpu")) == ("gpu",)
    assert pending.apply("ADDED", pod("c", group="default")) == ("default",)
    assert pending.apply("MODIFIED", pod("a")) == ()  # already waiting: nothing new
    assert (pending.count("batch"), pending.count("gpu"), pending.count("default")) == (1, 1, 1)
    assert pending.apply("MODIFIED", pod("a", node="node-1")) == ()  # scheduled: no longer waits
    assert pending.apply("DELETED", pod("b", group="gpu")) == ()
    assert (pending.count("batch"), pending.count("gpu"), pending.count("default")) == (0, 0, 1)
    # Daemonset pods never belong to a group (Escalator); a pod of no group waits nowhere.
    assert pending.apply("ADDED", pod("d", owned_by_daemonset=True)) == ()
    assert pending.apply("ADDED", pod("e", group="nobody")) == ()


def test_a_relist_reports_only_groups_that_gained_a_pod() -> None:
    pending = PendingByGroup(GROUPS)
    assert pending.replace([pod("a"), pod("b", group="gpu")]) == ("batch", "gpu")
    assert pending.replace([pod("a"), pod("c")]) == ("batch",)  # c is new; b went away
    assert (pending.count("batch"), pending.count("gpu")) == (2, 0)
    assert pending.replace([pod("a")]) == ()


# --- the debounce, on an injected clock ------------------------------------------------------


def test_a_burst_of_1000_pods_gives_one_event_once_it_settles() -> None:
    events = PendingPodsEvents(GROUPS, Debouncer(debounce=5.0, settle=1.0))
    for index in range(1000):
        events.observe("ADDED", pod(f"p{index}"), now=100.0 + index * 0.0005)
    assert events.due(100.9) == []
    assert events.next_due() == pytest.approx(100.4995 + 1.0)
    assert events.due(101.5) == [PendingPods("batch", 1000)]
    assert events.due(200.0) == []


def test_a_steady_trickle_gets_one_event_per_debounce_window() -> None:
    events = PendingPodsEvents(GROUPS, Debouncer(debounce=5.0, settle=1.0))
    sent: list[tuple[float, int]] = []
    for tick in range(200):  # a new pod every 0.1 s for 20 s: never quiet for 1 s
        now = tick * 0.1
        events.observe("ADDED", pod(f"p{tick}"), now)
        sent.extend((now, event.count) for event in events.due(now))
    # Each window opens with the first pod after the last event and closes 5 s later.
    assert [time for time, _ in sent] == pytest.approx([5.0, 10.1, 15.2])
    assert [count for _, count in sent] == [51, 102, 153]


def test_the_next_window_waits_for_the_debounce_after_the_last_event() -> None:
    debouncer = Debouncer(debounce=5.0, settle=1.0)
    debouncer.note("batch", 0.0)
    assert debouncer.due(1.0) == ["batch"]
    debouncer.note("batch", 1.5)  # settles at 2.5, but the last event was at 1.0
    assert debouncer.due(2.5) == []
    assert debouncer.next_due() == 6.0
    assert debouncer.due(6.0) == ["batch"]


def test_groups_are_debounced_independently_and_placed_pods_send_nothing() -> None:
    events = PendingPodsEvents(GROUPS, Debouncer(debounce=5.0, settle=1.0))
    events.observe("ADDED", pod("a"), 0.0)
    events.observe("ADDED", pod("b", group="gpu"), 0.5)
    events.observe("MODIFIED", pod("a", node="node-1"), 0.8)  # placed before the window closed
    assert events.due(1.0) == []
    assert events.due(1.5) == [PendingPods("gpu", 1)]
    event = PendingPods("gpu", 1)
    assert event.resource == {"prefect.resource.id": "elevator.node-group.gpu",
                              "prefect.resource.name": "gpu"}
    assert event.payload == {"pending_pods": 1}
    assert group_resource_id("gpu") == "elevator.node-group.gpu"


def test_the_debounce_rejects_non_positive_windows() -> None:
    with pytest.raises(ValueError, match="positive"):
        Debouncer(debounce=0.0)


# --- the pod watch against the fake API server ------------------------------------------------


def pending_pod(kube: FakeKubeApi, name: str, selector: str = "batch") -> None:
    kube.create("pods", {"metadata": {"name": name, "namespace": "jobs"},
                         "spec": {"nodeSelector": {"customer": selector},
                                  "containers": [{"name": "c", "image": "pause"}]},
                         "status": {"phase": "Pending"}}, namespace="jobs")


def take(items: queue.Queue[Changed | Relisted], count: int,
         timeout: float = 10.0) -> list[Changed | Relisted]:
    return [items.get(timeout=timeout) for _ in range(count)]


@pytest.fixture
def pod_watch(fake_kube: FakeKubeApi) -> Iterator[PodWatch]:
    watch = PodWatch(fake_kube.api_client(), timeout_seconds=30, page_size=2,
                     retry_seconds=0.05)
    yield watch
    watch.stop()


def test_the_watch_lists_then_streams_unscheduled_pending_pods(
        fake_kube: FakeKubeApi, pod_watch: PodWatch) -> None:
    for index in range(3):
        pending_pod(fake_kube, f"early-{index}")
    pod_watch.start()
    (listed,) = take(pod_watch.items, 1)
    assert isinstance(listed, Relisted)
    assert sorted(p.name for p in listed.pods) == ["early-0", "early-1", "early-2"]
    assert fake_kube.wait_for_watchers("pods", 1)
    pending_pod(fake_kube, "late")
    fake_kube.patch("pods", "early-0", {"spec": {"nodeName": "node-1"}}, "jobs")
    added, scheduled = take(pod_watch.items, 2)
    assert (added.type, added.pod.name) == ("ADDED", "late")  # type: ignore[union-attr]
    # Bound to a node: it leaves the watch's field selector, which the server sends as DELETED.
    assert (scheduled.type, scheduled.pod.name) == ("DELETED", "early-0")  # type: ignore[union-attr]
    lists = [r for r in fake_kube.requests if r.resource == "pods" and r.verb == "list"]
    assert len(lists) == 2  # paged: 3 pods, 2 a page
    assert all(r.query["fieldSelector"] == "spec.nodeName=,status.phase=Pending" for r in lists)


def test_the_watch_resumes_from_the_last_resource_version(fake_kube: FakeKubeApi) -> None:
    watch = PodWatch(fake_kube.api_client(), timeout_seconds=1, retry_seconds=0.05)
    try:
        watch.start()
        take(watch.items, 1)
        assert fake_kube.wait_for_watchers("pods", 1)
        pending_pod(fake_kube, "a")
        take(watch.items, 1)
        seen = str(fake_kube.resource_version)
        # The server ends each watch after 1 s; the next one starts where this one stopped.
        wait_until(lambda: any(r.verb == "watch" and r.query.get("resourceVersion") == seen
                               for r in fake_kube.requests), 10, "a resumed watch")
        pending_pod(fake_kube, "b")
        (added,) = take(watch.items, 1)
        assert isinstance(added, Changed) and added.pod.name == "b"
        assert [r.verb for r in fake_kube.requests if r.resource == "pods"].count("list") == 1
    finally:
        watch.stop()


def test_the_watch_lists_again_on_410_gone(fake_kube: FakeKubeApi, pod_watch: PodWatch) -> None:
    fake_kube.fail_next("watch", "pods", status=410)
    pending_pod(fake_kube, "a")
    pod_watch.start()
    first, second = take(pod_watch.items, 2)
    assert isinstance(first, Relisted) and isinstance(second, Relisted)
    assert [p.name for p in second.pods] == ["a"]


def test_an_unreadable_pod_is_skipped_not_retried_forever(
        fake_kube: FakeKubeApi, pod_watch: PodWatch) -> None:
    pod_watch.start()
    take(pod_watch.items, 1)
    assert fake_kube.wait_for_watchers("pods", 1)
    fake_kube.layers.validation = False  # a pod no real server would take, as an old one may
    fake_kube.create("pods", {"metadata": {"name": "bad", "namespace": "jobs"},
                              "spec": {"containers": [{"name": "c", "image": "pause", "resources": {
                                  "requests": {"cpu": "lots"}}}]},
                              "status": {"phase": "Pending"}}, namespace="jobs")
    pending_pod(fake_kube, "good")
    (added,) = take(pod_watch.items, 1)
    assert isinstance(added, Changed) and added.pod.name == "good"
    assert str(fake_kube.resource_version) == pod_watch.resource_version


def test_an_expired_resource_version_in_the_stream_lists_again() -> None:
    with FakeKubeApi(history_size=5) as kube:
        for index in range(20):
            pending_pod(kube, f"p{index}")
        watch = PodWatch(kube.api_client(), retry_seconds=0.05)
        watch.resource_version = "2"  # older than the 5 events the server remembers
        try:
            watch.start()
            (listed,) = take(watch.items, 1)  # the ERROR 410 in the stream, then a list
            assert isinstance(listed, Relisted) and len(listed.pods) == 20
            assert any(r.verb == "watch" and r.query.get("resourceVersion") == "2"
                       for r in kube.requests)
        finally:
            watch.stop()


def test_a_real_burst_of_1000_pods_emits_one_event(fake_kube: FakeKubeApi) -> None:
    groups = parse_node_groups({"node_groups": [group_dict()]}, "test.yaml").node_groups
    watch = PodWatch(fake_kube.api_client(), retry_seconds=0.05)
    emitted: list[PendingPods] = []
    stop = threading.Event()
    # The burst is this test's 1000 back-to-back creates, so it settles once none came for
    # `settle`: 0.5 s split it under load (a first event of 400 pods, the creates paused by
    # the machine, s55); 3 s is a pause no burst of the test's own has, and still one event
    # long before the 30 s debounce would close the window anyway.
    loop = threading.Thread(target=run_watch, args=(
        watch.items, PendingPodsEvents(groups, Debouncer(debounce=30.0, settle=3.0)),
        emitted.append, stop))
    watch.start()
    loop.start()
    try:
        assert fake_kube.wait_for_watchers("pods", 1)
        for index in range(1000):
            pending_pod(fake_kube, f"burst-{index}")
        wait_until(lambda: emitted, 30, "the pending-pods event")
        assert emitted == [PendingPods("batch", 1000)]
    finally:
        stop.set()
        loop.join(timeout=scaled(5))
        watch.stop()
    assert emitted == [PendingPods("batch", 1000)]  # and nothing more while it stopped


# --- the commands' bad input ------------------------------------------------------------------


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    serve_module.register(app)
    watch_module.register(app)
    return app


def test_watch_and_serve_report_bad_options_with_exit_2(cli: typer.Typer, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    nodegroups = tmp_path / "nodegroups.yaml"
    nodegroups.write_text("node_groups: []\n")
    runner = CliRunner()
    answer = runner.invoke(cli, ["watch", "--nodegroups", str(nodegroups), "--debounce", "5"])
    assert answer.exit_code == 2 and "--debounce: '5' is not a Go duration" in answer.output
    answer = runner.invoke(cli, ["serve", "--nodegroups", str(nodegroups), "--interval", "0s"])
    assert answer.exit_code == 2 and "--interval: '0s' must be positive" in answer.output
    answer = runner.invoke(cli, ["serve", "--nodegroups", str(nodegroups), "--kubeconfig",
                                 str(tmp_path / "missing")])
    assert answer.exit_code == 2 and "no such file" in answer.output
    answer = runner.invoke(cli, ["serve", "--nodegroups", str(nodegroups), "--pushgateway",
                                 "pushgateway:9091"])
    assert answer.exit_code == 2 and "--pushgateway: 'pushgateway:9091' must be" in answer.output
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        answer = runner.invoke(cli, ["watch", "--nodegroups", str(nodegroups), "--ticks", "events"])
    assert answer.exit_code == 2 and "PREFECT_API_URL is not set" in answer.output


# --- against a real Prefect server ------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[PrefectServer]:
    with PrefectServer() as running:
        yield running


def test_serve_builds_the_scheduled_tick_and_the_manual_plan(tmp_path: Path) -> None:
    nodegroups = tmp_path / "nodegroups.yaml"
    autoscale, plan = serve_module.served_deployments(nodegroups, 60.0)
    assert (autoscale.name, plan.name) == ("autoscale", "plan")
    assert autoscale.concurrency_limit == 1
    assert autoscale.concurrency_options is not None
    assert autoscale.concurrency_options.collision_strategy.value == "CANCEL_NEW"
    assert [s.schedule.interval.total_seconds() for s in autoscale.schedules] == [60.0]
    (trigger,) = autoscale.triggers
    assert trigger.expect == {PENDING_EVENT}
    assert plan.schedules == [] and plan.triggers == []
    assert plan.parameters["dry_run"] is True and autoscale.parameters["dry_run"] is False
    assert plan.parameters["nodegroups"] == str(nodegroups.resolve())


def test_a_burst_of_pending_pods_raises_the_asg_through_the_event(
        server: PrefectServer, fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    before = cluster.desired()
    with EventRig(server, cluster, tmp_path) as rig:
        latency = rig.measure_burst(pods=10, timeout=scaled(90))
        assert rig.watch is not None and rig.serve is not None
        rig.watch.wait_for(f"batch: 10 pending pods → {PENDING_EVENT}", 10)
        # The watch leads (it sends the events); serve --ticks runs checks its serving loop.
        assert fetch(f"{health_url(rig.watch)}/health-check") == (200, "leading\n")
        assert fetch(f"{health_url(rig.watch)}/ready")[0] == 200
        assert fetch(f"{health_url(rig.serve)}/health-check") == (200, "serving\n")
    print(f"\npod creation → SetDesiredCapacity: {latency:.2f} s "
          f"(median of 10: python -m benchmarks.event_latency)")
    # 10 pods of 500m on 2 nodes of 1000m: 250% => scale up by ceil(2 × 180 / 70) = 6.
    assert cluster.desired() == before + 6
    assert latency < 60  # the schedule is 1 h: only the event can have started the tick
    codes = rig.stop()
    assert codes == {"watch": 0, "serve": 0}
    runs = flow_runs(server, "autoscale")
    assert [run.state_type.value for run in runs] == ["COMPLETED"]
    assert runs[0].created_by is not None and runs[0].created_by.type == "AUTOMATION"


def test_a_burst_of_pending_pods_raises_the_asg_in_the_watching_process(
        server: PrefectServer, fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    before = cluster.desired()
    with InProcessRig(server, cluster, tmp_path) as rig:
        latency = rig.measure_burst(pods=10, timeout=scaled(90))
        assert rig.watch is not None
        rig.watch.wait_for("batch: 10 pending pods → tick", 10)
        # The ASG is raised; the run still records its last task runs and its end, which a
        # Prefect server on SQLite under a loaded machine can hold up for tens of seconds.
        rig.watch.wait_for("tick (batch: 10 pending pods): batch: acted", 120)
        codes = rig.stop()
    print(f"\npod creation → SetDesiredCapacity in the watching process: {latency:.2f} s "
          f"(python -m benchmarks.event_latency)")
    # 10 pods of 500m on 2 nodes of 1000m: 250% => scale up by ceil(2 × 180 / 70) = 6.
    assert cluster.desired() == before + 6
    assert codes == {"watch": 0}
    # every tick a flow run of its own on the server: the one at start, the burst's
    runs = [run for run in autoscale_runs(server) if run.deployment_id is None]
    assert [run.state_type.value for run in runs] == ["COMPLETED", "COMPLETED"]


def test_serve_runs_the_autoscale_deployment_in_process_from_its_cache(
        server: PrefectServer, fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    """Issue 16: `elevator serve` keeps the watch cache and runs the deployment's runs itself:
    the burst's run and a run started as from the UI read the cache, not a list of pods."""
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from kube_elevator.flows.deployment_runs import BURST_TAG

    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    before = cluster.desired()
    earlier = {run.id for run in flow_runs(server, "autoscale")}
    with ServeRig(server, cluster, tmp_path) as rig:
        assert rig.serve is not None
        pod_lists = pod_lists_served(fake_kube)  # the cache's own list, once
        # The tick a new leader runs at once ends first (no pods: it taints one of the two
        # nodes). A burst created while that tick is still queued becomes its tick, begun
        # whenever it begins: on a busy machine with 9 of the 10 pods created (+5), and the
        # burst's own tick then finds the scale lock held.
        rig.serve.wait_for("tick (leading): batch: acted (delta -2)", 120)
        latency = rig.measure_burst(pods=10, timeout=scaled(90))
        rig.serve.wait_for("tick (batch: 10 pending pods): batch: acted", 120)
        with temporary_settings({PREFECT_API_URL: server.api_url}):
            from_ui = run_deployment("autoscale/autoscale", timeout=0)
        done = wait_until(lambda: read_run(server, from_ui.id).state_type.value in (
            "COMPLETED", "FAILED", "CRASHED", "CANCELLED"), 90, "the run from the UI to end",
            API_POLL_SECONDS)
        assert done, rig.serve.output()[-3000:]
        assert pod_lists_served(fake_kube) == pod_lists  # every tick read the cache
        # Its health endpoint: it leads (an election of one), and /metrics has its ticks.
        url = health_url(rig.serve)
        assert fetch(f"{url}/health-check") == (200, "leading\n")
        assert fetch(f"{url}/ready")[0] == 200
        metrics = samples(fetch(f"{url}/metrics")[1])
        assert metrics[("escalator_node_group_nodes", (("node_group", "batch"),))] == 2
        assert metrics[("elevator_ticks_total", (("outcome", "succeeded"),))] >= 2
        said = rig.serve.output()
        codes = rig.stop()
    print(f"\npod creation → SetDesiredCapacity, elevator serve in-process: {latency:.2f} s")
    # 10 pods of 500m on the one untainted node of 1000m: 500% => scale up by
    # ceil(1 × 430 / 70) = 7, the tainted node untainted first and the cloud asked for 6.
    assert "untaint 1, ask the cloud for 6" in said, said[-4000:]
    assert cluster.desired() == before + 6, said[-4000:]
    assert codes == {"serve": 0}
    runs = {run.id: run for run in flow_runs(server, "autoscale") if run.id not in earlier}
    assert runs[from_ui.id].state_type.value == "COMPLETED"
    burst = [run for run in runs.values() if BURST_TAG in run.tags]
    assert len(burst) == 1 and burst[0].state_type.value == "COMPLETED"
    # Every run that ran completed. The server's scheduler may still add a run of the hourly
    # schedule while the deployment is paused at stop (the pause deletes those it finds, and
    # one made a moment before can land after): never run, and never run while paused.
    left = [(run.name, run.state_name, run.auto_scheduled, run.run_count, run.tags)
            for run in runs.values() if run.state_type.value != "COMPLETED"]
    assert all(auto and count == 0 and state == "Scheduled"
               for _, state, auto, count, _ in left), left
    with api(server) as client:  # paused until the next start: no runs pile up
        assert client.read_deployment_by_name("autoscale/autoscale").paused


def test_a_run_another_process_claimed_is_never_run_here(server: PrefectServer) -> None:
    """`elevator serve` runs a deployment run only once the server let it go Pending for this
    process: a run a worker (or a second serve) claimed first is left to it."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Pending
    from prefect.utilities.engine import propose_state_sync

    from kube_elevator.flows.autoscale import autoscale
    from kube_elevator.flows.deployment_runs import DeploymentRuns

    with temporary_settings({PREFECT_API_URL: server.api_url}), \
            get_client(sync_client=True) as client:
        deployment_id = autoscale.to_deployment(
            "claimed-elsewhere", parameters={"nodegroups": "/nowhere.yaml"}).apply()
        runs = DeploymentRuns(autoscale, deployment_id, client)
        run_id = runs.start_now("a burst")
        assert runs.due() == [run_id]
        propose_state_sync(client, Pending(), flow_run_id=run_id)  # another process took it
        assert runs.due() == []
        assert runs.execute(run_id) is None
        assert client.read_flow_run(run_id).state_type.value == "PENDING"  # not run here


def test_of_the_schedules_late_runs_only_the_newest_is_due(server: PrefectServer) -> None:
    """After a stall, the ticks missed are not made up one after another: the newest scheduled
    run is due, the older ones are skipped (Cancelled, saying why); a run asked for by hand
    is never skipped."""
    from datetime import UTC, datetime, timedelta

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from kube_elevator.flows.autoscale import autoscale
    from kube_elevator.flows.deployment_runs import DeploymentRuns

    with temporary_settings({PREFECT_API_URL: server.api_url}), \
            get_client(sync_client=True) as client:
        deployment_id = autoscale.to_deployment(
            "late-ticks", parameters={"nodegroups": "/nowhere.yaml"},
            interval=timedelta(seconds=10)).apply()
        now = datetime.now(UTC)
        # The schedule's runs of the last minute, every 10 s, as the scheduler makes them.
        answer = client._client.post(f"/deployments/{deployment_id}/schedule", json={
            "start_time": (now - timedelta(seconds=55)).isoformat(),
            "end_time": (now - timedelta(seconds=1)).isoformat(),
            "min_time": 0, "min_runs": 6, "max_runs": 6})
        answer.raise_for_status()
        runs = DeploymentRuns(autoscale, deployment_id, client)
        by_hand = runs.start_now("by hand")
        scheduled = client.get_scheduled_flow_runs_for_deployments([deployment_id],
                                                                   scheduled_before=now)
        late = sorted((run for run in scheduled if run.auto_scheduled),
                      key=lambda run: run.next_scheduled_start_time or now)
        assert len(late) >= 2
        due = runs.due()
        assert set(due) == {late[-1].id, by_hand}
        for skipped in late[:-1]:
            state = client.read_flow_run(skipped.id).state
            assert state is not None and state.type.value == "CANCELLED"
            assert state.message == "skipped: a later scheduled tick was due"


def pod_lists_served(fake_kube: FakeKubeApi) -> int:
    return sum(1 for request in fake_kube.requests
               if request.resource == "pods" and request.verb == "list")


def autoscale_runs(server: PrefectServer) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: server.api_url}), \
            get_client(sync_client=True) as client:
        return list(client.read_flow_runs(flow_filter=FlowFilter(
            name=FlowFilterName(any_=["autoscale"]))))


def flow_runs(server: PrefectServer, deployment: str) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: server.api_url}), \
            get_client(sync_client=True) as client:
        return list(client.read_flow_runs(deployment_filter=DeploymentFilter(
            name=DeploymentFilterName(any_=[deployment]))))


def run_plan(server: PrefectServer, parameters: dict[str, Any]) -> Any:
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: server.api_url}):
        return run_deployment("autoscale/plan", parameters=parameters, timeout=0)


def read_run(server: PrefectServer, run_id: Any) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: server.api_url}), \
            get_client(sync_client=True) as client:
        return client.read_flow_run(run_id)


def test_serve_stops_on_sigterm_letting_the_run_in_flight_finish(
        server: PrefectServer, fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    serve = Child(elevator("serve", "--nodegroups", str(cluster.nodegroups), "--kubeconfig",
                           str(cluster.kubeconfig), "--interval", "1h", "--poll", "1s",
                           "--ticks", "runs", *FREE_HEALTH_PORT),
                  server.env(**fake_aws.env()), tmp_path / "serve.log")
    try:
        serve.wait_for("serving autoscale/autoscale", 120)
        fake_kube.delay_next("list", "pods", seconds=4)  # the tick in flight takes a while
        in_flight = run_plan(server, {})
        wait_until(lambda: read_run(server, in_flight.id).state_type.value == "RUNNING", 60,
                   "the plan run to start", interval=0.1)
        serve.process.send_signal(signal.SIGTERM)
        after = run_plan(server, {})  # asked for after the signal: must not start
        assert serve.process.wait(timeout=scaled(60)) == 0, serve.output()[-3000:]
    finally:
        serve.stop()
    assert read_run(server, in_flight.id).state_type.value == "COMPLETED", serve.output()
    assert read_run(server, after.id).state_type.value == "SCHEDULED"
    assert "serve: stopped" in serve.output()


def test_watch_stops_on_sigterm_while_its_cache_lists_a_big_cluster(
        server: PrefectServer, fake_kube: FakeKubeApi, fake_aws: FakeAws,
        tmp_path: Path) -> None:
    """A SIGTERM while the cache's first list is on its way (seconds, on a cluster of 150,000
    pods) ends the process at the next page, exit 0: the rest of the list is not read, and the
    watch does not start ticking first."""
    cluster = BurstCluster(fake_kube, fake_aws, tmp_path)
    for index in range(1_100):  # three pages of 500
        cluster.pending_pod(f"waiting-{index}")
    fake_kube.faults.add("delay", method="GET", path="/api/v1/pods", delay_seconds=0.01)
    second_page = fake_kube.faults.add("delay", method="GET", path="/api/v1/pods",
                                       delay_seconds=3)
    # Counted as each request arrives: the server records a request only once it has answered.
    later_pages = fake_kube.faults.add("delay", count=None, method="GET", path="/api/v1/pods",
                                       delay_seconds=0.001)
    watch = Child(elevator("watch", "--nodegroups", str(cluster.nodegroups), "--kubeconfig",
                           str(cluster.kubeconfig), "--interval", "1h", *FREE_HEALTH_PORT),
                  server.env(**fake_aws.env()), tmp_path / "watch.log")
    try:
        assert fake_kube.faults.wait_fired(second_page, timeout=scaled(120)), watch.output()[-3000:]
        watch.process.send_signal(signal.SIGTERM)
        assert watch.process.wait(timeout=scaled(60)) == 0, watch.output()[-3000:]
    finally:
        fake_kube.faults.release()
        watch.stop()
    assert "watching the cluster" not in watch.output()
    assert second_page.fired == 1 and later_pages.fired == 0  # no third page, no watch


def test_launcher_runs_the_registered_commands() -> None:
    done = subprocess.run(elevator("watch", "--help"), capture_output=True, text=True,
                          check=False, timeout=scaled(60))
    assert done.returncode == 0 and "--debounce" in done.stdout
