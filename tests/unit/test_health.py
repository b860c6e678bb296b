"""The health check (tasks/core/health.py) as the Cluster Autoscaler's liveness.go decides it,
its cases those of cluster-autoscaler/metrics/liveness_test.go, and the process metrics."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from kube_elevator.tasks.core.health import (
    HealthLimits,
    LoopHealth,
    LoopState,
    health_answer,
    liveness_problems,
    not_ready_reason,
    process_metrics,
)
from kube_elevator.tasks.escalator.metrics import EscalatorMetrics

ONE_SECOND = HealthLimits(1.0, 1.0)


def checked(health: LoopHealth, now: float, limits: HealthLimits = ONE_SECOND) -> int:
    return health_answer("ticking", liveness_problems(health.state(), now, limits))[0]


def test_ok_when_recent() -> None:  # TestOkServeHTTP
    assert checked(LoopHealth(100.0), 100.5) == 200


def test_fails_after_the_timeout() -> None:  # TestFailTimeoutServeHTTP
    health = LoopHealth(100.0)
    status, body = health_answer("ticking", liveness_problems(health.state(), 102.0,
                                                              ONE_SECOND))
    assert status == 500
    assert body == ("unhealthy (ticking): no tick finished for 2s (--max-inactivity 1s); "
                    "no tick succeeded for 2s (--max-failing-time 1s)\n")


def test_not_monitoring_is_healthy() -> None:  # TestMonitoringOff{After,Before}Timeout
    health = LoopHealth(100.0, monitoring=False)
    assert checked(health, 1000.0) == 200
    assert checked(health, 50.0) == 200


def test_activity_alone_does_not_make_it_healthy_when_nothing_succeeds() -> None:
    # TestUpdateLastActivity, and its converse: a failed tick is activity, not success.
    health = LoopHealth(100.0)
    health.finished(102.0, 0.0, False)
    assert liveness_problems(health.state(), 102.5, ONE_SECOND) == [
        "no tick succeeded for 2s (--max-failing-time 1s)"]
    health.finished(103.0, 0.0, True)
    assert checked(health, 103.5) == 200


def test_a_success_is_activity_too() -> None:  # TestUpdateActivityAtUpdateLastSuccessfulRun
    health = LoopHealth(100.0)
    health.finished(105.0, 5.0, True)
    state = health.state()
    assert (state.last_activity, state.last_success, state.succeeded_wall) == (105.0, 105.0, 5.0)


def test_monitoring_counts_from_when_it_starts() -> None:  # StartMonitoring
    health = LoopHealth(100.0, monitoring=False)
    health.start_monitoring(500.0)  # became the leader after following for 400 s
    assert checked(health, 500.5) == 200
    assert checked(health, 502.0) == 500
    health.stop_monitoring()  # following again
    assert checked(health, 600.0) == 200


def test_process_metrics_parse_with_escalators_as_one_exposition() -> None:
    escalator = EscalatorMetrics()
    escalator.add("run_count", 2)
    escalator.set("node_group_nodes", 3, node_group="batch")
    state = LoopState(True, 10.0, 9.0, finished_wall=1_700_000_010.5,
                      succeeded_wall=1_700_000_009.25, succeeded=4, failed=1)
    text = escalator.render() + process_metrics(state, leading=True, healthy=False)
    families = {family.name: family for family in text_string_to_metric_families(text)}
    samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
               for family in families.values() for sample in family.samples}
    assert samples[("elevator_leader", ())] == 1
    assert samples[("elevator_healthy", ())] == 0
    assert samples[("elevator_ticks_total", (("outcome", "succeeded"),))] == 4
    assert samples[("elevator_ticks_total", (("outcome", "failed"),))] == 1
    assert samples[("elevator_last_tick_timestamp_seconds", ())] == 1_700_000_010.5
    assert samples[("elevator_last_tick_success_timestamp_seconds", ())] == 1_700_000_009.25
    assert samples[("escalator_node_group_nodes", (("node_group", "batch"),))] == 3
    # Escalator's counter keeps its Go name; this parser shows its sample with `_total`.
    assert families["escalator_run_count"].type == "counter"
    assert [sample.value for sample in families["escalator_run_count"].samples] == [2]
    assert families["elevator_ticks"].type == "counter"


def test_no_tick_yet_has_no_timestamps() -> None:
    text = process_metrics(LoopState(False, 0.0, 0.0), leading=False, healthy=True)
    assert "elevator_last_tick" not in text and "elevator_leader 0" in text


# --- serve's /ready: a tick completed, and the check passes (issue 40) -------------------------


def test_ready_only_once_a_tick_completed_and_while_healthy() -> None:
    from kube_elevator.flows.cli.liveness import HealthPages

    clock = [100.0]
    health = LoopHealth(100.0)
    pages = HealthPages(lambda: health, lambda: True, HealthLimits(60.0, 60.0),
                        lambda: clock[0], role="serving", ticks_ready=True)
    assert pages.ready_page()[0::2] == (503, "not ready: no tick has completed since the start\n")
    health.finished(101.0, 1.0, succeeded=False)  # a tick that failed: not yet
    assert pages.ready_page()[0] == 503
    health.finished(102.0, 2.0, succeeded=True)
    assert pages.ready_page()[0::2] == (200, "ready\n")
    clock[0] = 200.0  # none completed since: the health check fails, and so does /ready
    status, _, body = pages.ready_page()
    assert status == 503 and body.startswith("not ready: no tick finished for 98s"), body
    # A process that does not tick (a follower) is ready: it waits.
    assert not_ready_reason(LoopHealth(100.0, monitoring=False).state(), []) is None
    # Without ticks_ready (the other commands), /ready is the cache's alone.
    assert HealthPages(lambda: LoopHealth(0.0), lambda: True, HealthLimits(1.0, 1.0),
                       lambda: 1000.0).ready_page()[0] == 200
