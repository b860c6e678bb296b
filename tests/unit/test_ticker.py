"""The ticker (flows/ticker.py) as the one owner of "should this process tick now": it ticks only
while the election says it may, at once when it starts leading, and records for the health
check what each tick's outcome was."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from benchmarks.deadlines import scaled
from benchmarks.event_latency import wait_until
from kube_elevator.flows.ticker import TickLoop, run_ticks
from kube_elevator.tasks.core import acting


class Ticks:
    """A tick function whose outcome the test sets; it records why each tick ran."""

    def __init__(self) -> None:
        self.whys: list[str] = []
        self.outcome: bool | Exception | None = True

    def __call__(self, why: str) -> bool | None:
        self.whys.append(why)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def started(loop: TickLoop, stop: threading.Event) -> threading.Thread:
    thread = threading.Thread(target=run_ticks, args=(loop, stop), daemon=True)
    thread.start()
    return thread


def test_without_an_election_it_ticks_and_records_each_outcome(stop: threading.Event) -> None:
    ticks = Ticks()
    loop = TickLoop(ticks, interval=3600.0)
    assert loop.health.state().monitoring  # it runs the ticks from the start
    thread = started(loop, stop)
    wait_until(lambda: loop.health.state().succeeded == 1, 10, "the first tick")
    assert ticks.whys == ["schedule"]
    ticks.outcome = False  # its flow run ended Failed
    loop.request("batch: 3 pending pods")
    wait_until(lambda: loop.health.state().failed == 1, 10, "a failed tick")
    ticks.outcome = RuntimeError("the Prefect server is gone")
    loop.request("again")
    wait_until(lambda: loop.health.state().failed == 2, 10, "a tick that raised")
    state = loop.health.state()
    assert state.last_success < state.last_activity  # failures are activity, not success
    assert ticks.whys == ["schedule", "batch: 3 pending pods", "again"]
    stop.set()
    thread.join(timeout=scaled(5))


def test_it_ticks_only_while_it_leads(stop: threading.Event) -> None:
    ticks = Ticks()
    leads = threading.Event()
    warmed: list[str] = []
    loop = TickLoop(ticks, interval=3600.0, may_act=leads.is_set,
                    warm_up=lambda: warmed.append("dry run"))
    assert not loop.health.state().monitoring  # a follower is not held to the ticks' limits
    thread = started(loop, stop)
    wait_until(lambda: warmed, 5, "a follower's warm-up")
    assert acting.may_act() is False  # the claims ask the same election
    loop.request("batch: 10 pending pods")  # a follower drops it: the leader saw them too
    wait_until(lambda: not loop._requested.is_set(), 5, "the request to be dropped")
    assert ticks.whys == []
    leads.set()
    wait_until(lambda: ticks.whys == ["leading"], 5, "a tick as it starts leading")
    assert loop.health.state().monitoring and acting.may_act()
    leads.clear()  # its lease ran out
    wait_until(lambda: not loop.health.state().monitoring, 5, "it to stop monitoring")
    loop.request("batch: 1 pending pod")
    wait_until(lambda: not loop._requested.is_set(), 5, "the request to be dropped")
    assert ticks.whys == ["leading"]
    assert warmed == ["dry run"]  # once, not again as it follows again
    stop.set()
    thread.join(timeout=scaled(5))
    assert acting.may_act()  # no election installed once the ticks ended


def test_it_knows_its_role_only_once_it_asked_the_election(stop: threading.Event) -> None:
    """Until the loop has asked, its health reads as a follower's (not monitoring): a serve whose
    cache synced before its loop started must not be ready on that (`run_cached_ticks` reads
    `looked`; issue 40: /ready said 200 for a leader that had not ticked)."""
    asked = threading.Event()

    def may_act() -> bool:
        asked.set()
        return True

    assert TickLoop(Ticks(), interval=3600.0).looked  # no election: it leads from the start
    loop = TickLoop(Ticks(), interval=3600.0, may_act=may_act)
    assert not loop.looked and not loop.health.state().monitoring
    assert not loop.ready()  # the health pages' readiness, until something else says more
    started(loop, stop)
    wait_until(lambda: loop.looked, scaled(5), "the loop to ask the election")
    assert loop.ready()
    assert asked.is_set() and loop.health.state().monitoring


def test_a_look_that_ran_nothing_is_no_tick_for_the_health_check(stop: threading.Event) -> None:
    """Issue 34 item 2: `serve` looks for due runs every --poll; a look that found none is no
    tick. Under --max-inactivity the probe fails once no tick finished for that long, however
    often it looked, and the tick metrics stay where the last real tick left them."""
    from kube_elevator.flows.cli.liveness import HealthPages
    from kube_elevator.tasks.core.health import HealthLimits

    now = [100.0]
    looks: list[str] = []

    def look(why: str) -> bool | None:
        looks.append(why)
        now[0] += 10.0  # each look, ten seconds later: 50 s of looks that ran nothing
        if len(looks) == 5:
            stop.set()
        return None

    loop = TickLoop(look, interval=0.0, clock=lambda: now[0], wall_clock=lambda: now[0])
    pages = HealthPages(lambda: loop.health, lambda: True, HealthLimits(45.0, 600.0),
                        lambda: now[0])
    run_ticks(loop, stop)
    assert len(looks) == 5 and loop.ticks == 0
    state = loop.health.state()
    assert (state.last_activity, state.finished_wall, state.succeeded, state.failed) == (
        100.0, None, 0, 0)
    status, _, body = pages.health_check()
    assert (status, body) == (500, "unhealthy (ticking): no tick finished for 50s "
                                   "(--max-inactivity 45s)\n")
    metrics = pages.metrics()[2]
    assert "elevator_last_tick_timestamp_seconds" not in metrics
    assert 'elevator_ticks_total{outcome="succeeded"} 0' in metrics
