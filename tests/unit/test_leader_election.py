"""Leader election's decisions (tasks/core/leader_election.py) against client-go's
leaderelection.go: what a candidate does given the record it read, what it saw before, and its
own clock. Times are plain numbers: an observer's clock, and the wall clock it stamps records
with (informative only)."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid

import pytest

from benchmarks.deadlines import scaled
from kube_elevator.tasks.core.identity import boot_id, holder_gone, process_identity
from kube_elevator.tasks.core.leader_election import (
    ElectionTimes,
    LeaderRecord,
    Observed,
    Wait,
    Write,
    acquire_or_renew,
    may_act,
    micro_time,
    observe,
    released,
    renewal,
)
from kube_elevator.tasks.core.process_owner import mark_of

TIMES = ElectionTimes()  # 15 s, 10 s, 2 s
WALL = 1_700_000_000.0
STAMP = micro_time(WALL)
EARLIER = micro_time(WALL - 100)
A = LeaderRecord("a", 15, EARLIER, EARLIER, 3)


def test_client_gos_defaults_and_checks() -> None:
    assert (TIMES.lease_duration_seconds, TIMES.renew_deadline_seconds,
            TIMES.retry_period_seconds) == (15, 10, 2)
    assert TIMES.problems() == []
    assert ElectionTimes(10, 10, 2).problems() == [
        "the lease duration (10s) must be longer than the renew deadline (10s)"]
    assert ElectionTimes(15, 2.4, 2).problems() == [
        "the renew deadline (2.4s) must be longer than 1.2 times the retry period (2s)"]
    assert ElectionTimes(15.5, 10, 2).problems() == [
        "the lease duration (15.5s) must be whole seconds"]
    assert ElectionTimes(0, 10, 2).problems() == ["the lease duration must be positive"]


def test_micro_time_is_rfc3339_with_microseconds_in_utc() -> None:
    assert micro_time(0.25) == "1970-01-01T00:00:00.250000Z"


@pytest.mark.parametrize(("observed", "read", "now", "expected"), [
    # No Lease: create it, holding it, no transition yet.
    (None, None, 0.0, Write(LeaderRecord("me", 15, STAMP, STAMP, 0), create=True)),
    # Held by another and seen just now: wait.
    (None, A, 0.0, Wait("a")),
    # Seen unchanged for less than the lease duration by our clock: wait.
    (Observed(A, 100.0), A, 114.9, Wait("a")),
    # ... for the lease duration: expired, take it over (one more transition).
    (Observed(A, 100.0), A, 115.0, Write(LeaderRecord("me", 15, STAMP, STAMP, 4))),
    # The record changed (renewed) since we looked: its clock starts again, whatever its
    # renewTime says (another machine's clock is never trusted).
    (Observed(A, 100.0), LeaderRecord("a", 15, EARLIER, STAMP, 3), 200.0, Wait("a")),
    # Released (no holder): free at once, whatever its duration.
    (None, LeaderRecord("", 1, EARLIER, EARLIER, 3), 0.0,
     Write(LeaderRecord("me", 15, STAMP, STAMP, 4))),
    # Ours: renew, keeping the acquire time and the transitions.
    (None, LeaderRecord("me", 15, EARLIER, EARLIER, 3), 0.0,
     Write(LeaderRecord("me", 15, EARLIER, STAMP, 3))),
    # Another's lease of 1 s (a record written with a shorter duration) runs out after 1 s.
    (Observed(LeaderRecord("a", 1, EARLIER, EARLIER, 0), 0.0),
     LeaderRecord("a", 1, EARLIER, EARLIER, 0), 1.0,
     Write(LeaderRecord("me", 15, STAMP, STAMP, 1))),
])
def test_try_acquire_or_renew(observed: Observed | None, read: LeaderRecord | None, now: float,
                              expected: Write | Wait) -> None:
    _, step = acquire_or_renew(observed, read, "me", TIMES, now, WALL)
    assert step == expected


def test_a_holder_known_to_be_gone_is_taken_over_at_once() -> None:
    """A valid lease whose holder is a process of this host that has ended: nobody renews it,
    so it is taken now (one more transition), not after the lease duration."""
    _, step = acquire_or_renew(None, A, "me", TIMES, 0.0, WALL, holder_gone=True)
    assert step == Write(LeaderRecord("me", 15, STAMP, STAMP, 4))
    # ours, whatever the check said: renewed as ours, no transition
    _, step = acquire_or_renew(None, LeaderRecord("me", 15, EARLIER, EARLIER, 3), "me", TIMES,
                               0.0, WALL, holder_gone=True)
    assert step == Write(LeaderRecord("me", 15, EARLIER, STAMP, 3))


def test_an_identity_names_its_process_so_this_host_can_tell_it_has_ended() -> None:
    mine = process_identity()
    assert mine.startswith(f"{socket.gethostname()}")  # client-go's: the host name first
    assert mine == process_identity()  # one per process
    assert not holder_gone(mine)
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    theirs = f"{mark_of(child.pid)}_{boot_id()}"
    assert not holder_gone(theirs)  # alive
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=scaled(60))
    if mark_of().start is None:
        pytest.skip("no /proc: a holder's end cannot be told")
    assert holder_gone(theirs)
    # anything else is never taken for one of this host's ended processes
    mark = mark_of(child.pid)
    for other in [f"another-host/{mark.host.partition('/')[2]}:{mark.pid}:1_{boot_id()}",
                  f"{mark.host}:{child.pid}:{mark_of().start}_another-boot",
                  f"{socket.gethostname()}_{uuid.uuid4()}",  # client-go's own form
                  "a", ""]:
        assert not holder_gone(other), other


def test_the_observation_restarts_only_when_the_record_changes() -> None:
    seen = observe(None, A, 10.0)
    assert observe(seen, A, 20.0) is seen  # unchanged: still since 10
    assert observe(seen, LeaderRecord("a", 15, EARLIER, STAMP, 3), 20.0).since_seconds == 20.0
    assert Observed(A, 10.0).valid(24.9) and not Observed(A, 10.0).valid(25.0)


def test_the_leader_renews_without_reading_while_its_lease_is_valid() -> None:
    mine = Observed(LeaderRecord("me", 15, EARLIER, EARLIER, 2), 100.0)
    assert renewal(mine, "me", TIMES, 114.0, WALL) == LeaderRecord("me", 15, EARLIER, STAMP, 2)
    assert renewal(mine, "me", TIMES, 115.0, WALL) is None  # expired by our clock: read first
    assert renewal(Observed(A, 100.0), "me", TIMES, 101.0, WALL) is None  # not ours
    assert renewal(None, "me", TIMES, 0.0, WALL) is None


def test_release_empties_the_holder_for_one_second() -> None:
    mine = Observed(LeaderRecord("me", 15, EARLIER, EARLIER, 2), 0.0)
    assert released(mine, "me", WALL) == LeaderRecord("", 1, STAMP, STAMP, 2)
    assert released(Observed(A, 0.0), "me", WALL) is None
    assert released(None, "me", WALL) is None


@pytest.mark.parametrize(("renewed_at", "now", "acts"), [
    (100.0, 100.0, True),
    (100.0, 109.9, True),
    (100.0, 110.0, False),  # the renew deadline after the last renewal sent: stop acting
    (100.0, 130.0, False),  # woken from a SIGSTOP: the clock ran on
    (None, 0.0, False),
])
def test_the_leader_acts_only_within_the_renew_deadline_of_its_last_renewal(
        renewed_at: float | None, now: float, acts: bool) -> None:
    mine = Observed(LeaderRecord("me", 15, EARLIER, EARLIER, 0), 100.0)
    assert may_act(mine, "me", renewed_at, TIMES, now) is acts


def test_a_follower_never_acts() -> None:
    assert not may_act(Observed(A, 0.0), "me", 0.0, TIMES, 1.0)
    assert not may_act(None, "me", 0.0, TIMES, 1.0)


def test_a_leader_stops_acting_before_any_follower_may_take_over() -> None:
    """A follower cannot see a renewal before it was sent, and waits a lease duration from when
    it saw it; the leader stops acting a renew deadline after sending it: 5 s apart at least."""
    sent_at = 100.0
    renewed = LeaderRecord("me", 15, EARLIER, STAMP, 0)
    mine = Observed(renewed, sent_at + 0.05)  # the answer came back 50 ms later
    moments = [t / 100 for t in range(10_000, 13_000)]
    last_acting = max(t for t in moments if may_act(mine, "me", sent_at, TIMES, t))
    for seen_after in (0.0, 0.5, 2.4):  # the follower read the record this long after it was sent
        follower = Observed(renewed, sent_at + seen_after)
        first_takeover = min(t for t in moments if not follower.valid(t))
        assert first_takeover - last_acting >= 5.0
