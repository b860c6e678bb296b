"""Issue 40, finding 5: which run of a served deployment is abandoned (`flows.abandoned_runs`),
what a process mark says (`tasks.core.process_owner`), and what counts as a tick for the
health check (`flows.served_ticks`). The real processes and the Prefect server are in
tests/e2e/test_serve_abandoned_runs.py."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from kube_elevator.flows.abandoned_runs import Bounds, why_abandoned, why_stray
from kube_elevator.flows.served_ticks import ServedTicks, tick_outcome
from kube_elevator.tasks.core.health import LoopHealth
from kube_elevator.tasks.core.process_owner import (
    ProcessMark,
    host_name,
    lives,
    mark_of,
    parse_mark,
    process_start_ticks,
)

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
HOST = "here"
BOUNDS = Bounds(lost_submit=timedelta(seconds=60), foreign_pending=timedelta(minutes=15),
                foreign_running=timedelta(minutes=12), heartbeat_grace=timedelta(seconds=90))


def judged(state: str, age_seconds: float, owner: str | None, alive: bool = True,
           silent_seconds: float | None = None) -> str | None:
    """`silent_seconds`: how long ago the run's last heartbeat was (None: it sent none)."""
    beat = None if silent_seconds is None else NOW - timedelta(seconds=silent_seconds)
    return why_abandoned(state, NOW - timedelta(seconds=age_seconds), owner, NOW, HOST,
                         lambda _mark: alive, BOUNDS, beat)


@pytest.mark.parametrize(("state", "age", "owner", "alive", "abandoned"), [
    # This host's process: its life decides, at once and never by age.
    pytest.param("PENDING", 1, "here:42:7", False, True, id="pending-owner-here-dead"),
    pytest.param("RUNNING", 1, "here:42:7", False, True, id="running-owner-here-dead"),
    pytest.param("CANCELLING", 1, "here:42", False, True, id="cancelling-owner-here-dead"),
    pytest.param("RUNNING", 86_400, "here:42:7", True, False, id="running-owner-here-alive"),
    pytest.param("PENDING", 86_400, "here:42:7", True, False, id="pending-owner-here-alive"),
    # No owner yet: a claim lost mid-submit, once older than a live claimer takes to mark it.
    pytest.param("PENDING", 59, None, True, False, id="unmarked-pending-young"),
    pytest.param("PENDING", 61, None, True, True, id="unmarked-pending-lost"),
    pytest.param("PENDING", 61, "", True, True, id="empty-owner-pending-lost"),
    # Another host's (a replica, a worker's job): only age, with room for an image pull.
    pytest.param("PENDING", 61, "there:42:7", False, False, id="pending-elsewhere-young"),
    pytest.param("PENDING", 901, "there:42:7", True, True, id="pending-elsewhere-old"),
    pytest.param("PENDING", 600, "uid:jobs:elevator-abc12", True, False, id="worker-job-young"),
    # Running without a visible owner and no heartbeat: past the flow's timeout and slack
    # (12 min), no live engine is behind it (before: an hour).
    pytest.param("RUNNING", 719, None, True, False, id="unmarked-running-young"),
    pytest.param("RUNNING", 721, None, True, True, id="unmarked-running-past-the-timeout"),
    pytest.param("RUNNING", 721, "there:42", True, True, id="running-elsewhere-old"),
    pytest.param("CANCELLING", 721, "uid:jobs:x", True, True, id="cancelling-foreign-old"),
])
def test_which_run_is_abandoned(state: str, age: float, owner: str | None, alive: bool,
                                abandoned: bool) -> None:
    why = judged(state, age, owner, alive)
    assert (why is not None) == abandoned, why
    if why is not None and owner and owner.startswith("here:"):
        assert why.startswith("its process here:42 is gone")


@pytest.mark.parametrize(("state", "age", "owner", "silent", "abandoned"), [
    # A run that sent heartbeats: they decide, whatever its age (Prefect's zombie-flow recipe).
    pytest.param("RUNNING", 120, None, 91, True, id="unmarked-silent-past-the-grace"),
    pytest.param("RUNNING", 120, None, 89, False, id="unmarked-beating"),
    pytest.param("RUNNING", 120, "there:42:7", 91, True, id="another-replica-silent"),
    # Another replica (leader election): its live process beats, and a long tick is its own.
    pytest.param("RUNNING", 86_400, "there:42:7", 10, False, id="another-replica-beating"),
    pytest.param("CANCELLING", 300, None, 200, True, id="cancelling-silent"),
    # This host's owner: its process decides; a heartbeat never keeps a dead one's run.
    pytest.param("RUNNING", 120, "here:42:7", 1, True, id="owner-here-dead-though-beating"),
    # A Pending run has no engine yet: heartbeats do not apply.
    pytest.param("PENDING", 61, None, 1, True, id="pending-lost-mid-submit"),
])
def test_a_heartbeat_speaks_for_a_run_whose_owner_is_not_seen(
        state: str, age: float, owner: str | None, silent: float, abandoned: bool) -> None:
    why = judged(state, age, owner, alive=False, silent_seconds=silent)
    assert (why is not None) == abandoned, why
    if why is not None and not owner and state != "PENDING":
        assert f"no heartbeat for {silent:g} s (over 90 s)" in why


def test_the_heartbeat_is_read_only_where_it_decides() -> None:
    from kube_elevator.flows.abandoned_runs import needs_heartbeat

    assert needs_heartbeat("RUNNING", None, HOST)
    assert needs_heartbeat("CANCELLING", "there:42:7", HOST)
    assert needs_heartbeat("RUNNING", "uid:jobs:elevator-abc12", HOST)
    assert not needs_heartbeat("RUNNING", "here:42:7", HOST)
    assert not needs_heartbeat("PENDING", None, HOST)


def test_the_default_running_bound_is_the_flows_timeout_and_its_slack() -> None:
    """Shorter than the hour it was, never shorter than a live tick may run."""
    from kube_elevator.flows.autoscale import autoscale
    from kube_elevator.tasks.core.tick_timeout import TIMEOUT_SLACK_SECONDS

    assert autoscale.timeout_seconds is not None
    assert Bounds().foreign_running == timedelta(
        seconds=autoscale.timeout_seconds + TIMEOUT_SLACK_SECONDS)
    assert Bounds().foreign_running < timedelta(hours=1)
    assert why_abandoned("RUNNING", NOW - Bounds().foreign_running, None, NOW, HOST,
                         lambda _mark: True) is None


def test_a_lost_submit_says_so() -> None:
    assert judged("PENDING", 90, None) == (
        "Pending for 90 s (over 60 s) and no process ever took it (lost mid-submit)")


def test_a_mark_is_host_pid_and_start() -> None:
    mine = mark_of()
    assert mine.host == host_name() and mine.start == process_start_ticks(mine.pid)
    assert parse_mark(str(mine)) == mine
    assert parse_mark("worker-1:1234") == ProcessMark("worker-1", 1234)  # a process worker's
    assert parse_mark("a:b:1234:99") == ProcessMark("a:b", 1234, 99)
    for other in (None, "", "uid:jobs:elevator-abc12", "1234"):
        assert parse_mark(other) is None


def test_a_mark_lives_while_its_process_does() -> None:
    assert lives(mark_of())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    mark = mark_of(child.pid)
    child.wait()
    assert not lives(mark)  # reaped: the pid answers no more
    if mark_of().start is not None:  # /proc: a pid given to a later process is not the owner
        assert not lives(ProcessMark(HOST, mark_of().pid, (mark_of().start or 0) + 1))


# --- what a tick is -------------------------------------------------------------------------


@pytest.mark.parametrize(("states", "outcome"), [
    pytest.param([], None, id="nothing-ran"),
    pytest.param(["CANCELLED"], None, id="cancelled-by-the-limit"),
    pytest.param(["CRASHED", "CANCELLED"], None, id="crashed-and-cancelled"),
    pytest.param(["COMPLETED"], True, id="completed"),
    pytest.param(["COMPLETED", "CANCELLED"], True, id="completed-and-a-cancelled"),
    pytest.param(["FAILED", "COMPLETED"], False, id="one-failed"),
])
def test_only_runs_that_ran_are_ticks(states: list[str], outcome: bool | None) -> None:
    assert tick_outcome(states) is outcome


def test_served_ticks_count_each_run_that_ran_once() -> None:
    clock = [0.0]
    health = LoopHealth(0.0)
    ticks = ServedTicks(health, uuid4(), NOW, lambda: clock[0])
    before, done, failed, cancelled = uuid4(), uuid4(), uuid4(), uuid4()
    later = NOW + timedelta(seconds=30)
    clock[0] = 40.0
    assert ticks.record([(before, "COMPLETED", NOW - timedelta(seconds=1)),
                         (cancelled, "CANCELLED", later), (failed, "FAILED", later)]) == 1
    state = health.state()
    assert (state.last_activity, state.last_success, state.failed) == (40.0, 0.0, 1)
    clock[0] = 50.0
    assert ticks.record([(failed, "FAILED", later), (done, "COMPLETED", later)]) == 1
    assert ticks.record([(failed, "FAILED", later), (done, "COMPLETED", later)]) == 0
    state = health.state()
    assert (state.last_success, state.succeeded, state.failed) == (50.0, 1, 1)
    assert state.succeeded_wall == later.timestamp()


# --- runs left Scheduled past their time ------------------------------------------------------


@pytest.mark.parametrize(("late_seconds", "abandoned"), [
    pytest.param(0, False, id="due-now"),
    pytest.param(34, False, id="within-the-interval-and-slack"),
    pytest.param(35, False, id="at-the-bound"),
    pytest.param(36, True, id="past-the-bound"),
    pytest.param(86_400, True, id="a-day-late"),
])
def test_which_scheduled_run_is_abandoned_as_late(late_seconds: float, abandoned: bool) -> None:
    from kube_elevator.flows.abandoned_runs import why_late

    why = why_late(NOW - timedelta(seconds=late_seconds), NOW, timedelta(seconds=35))
    assert (why is not None) == abandoned, why
    if why is not None:
        assert f"{late_seconds} s late (over 35 s)" in why and "no serve took it" in why


@pytest.mark.parametrize(("owner", "alive", "abandoned"), [
    pytest.param(f"{HOST}:41:7", False, True, id="this-hosts-process-gone"),
    pytest.param(f"{HOST}:41:7", True, False, id="this-hosts-process-lives"),
    pytest.param("elsewhere:41:7", False, False, id="another-hosts"),
    pytest.param(None, False, False, id="no-mark-anyones-own-call"),
    pytest.param("not a mark", False, False, id="a-workers-own-id"),
])
def test_which_run_outside_the_deployments_is_abandoned(owner: str | None, alive: bool,
                                                        abandoned: bool) -> None:
    """A run of the flow of no deployment (a killed follower's warm-up) is ended only on its
    own mark: a process of this host that is gone."""
    why = why_stray(owner, HOST, lambda _mark: alive)
    assert (why is not None) == abandoned, why
    if abandoned:
        assert why == f"its process {HOST}:41 is gone (the serve that ran it stopped or was killed)"
