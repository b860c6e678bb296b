"""Leader election for the long-lived commands: client-go's `LeaderElector`, on one Lease.

client-go's `tools/leaderelection/leaderelection.go` (`Run`, `acquire`, `renew`,
`tryAcquireOrRenew`, `release`), with its decisions in `tasks.core.leader_election` and the
Lease I/O in `tasks.adapters.kube_leader`:

- acquire: try at once, then every retry period jittered by 1.2 (`wait.JitterUntil`), until the
  Lease is free (no holder, or not renewed for a lease duration by our clock) and our write of it
  succeeds;
- renew: every retry period, a round of tries, one each retry period, for at most the renew
  deadline (each call's timeout is what is left of it); a round that does not renew ends the
  leadership. Unlike client-go's `Run`, which returns then (the Cluster Autoscaler exits), the
  elector goes back to acquiring: the process follows, its cache still warm;
- release on a clean stop (`ReleaseOnCancel`), once the ticks it guarded have ended.

The ticker asks `may_act()` before every tick: our lease by our own clock (see
`tasks.core.leader_election.may_act`). Each node group's Lease claim, compared by
resourceVersion before any action, is the second guard: a leader frozen in the middle of a tick
whose group the new leader claimed meanwhile gets 409 and acts on nothing.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kube_elevator.tasks.adapters.kube_leader import LeaderLease
from kube_elevator.tasks.core.identity import holder_gone
from kube_elevator.tasks.core.leader_election import (
    JITTER_FACTOR,
    ElectionTimes,
    LeaderRecord,
    Observed,
    Wait,
    acquire_or_renew,
    may_act,
    released,
    renewal,
)

log = logging.getLogger(__name__)


def election_clock() -> float:
    """Seconds on a clock that keeps counting while the machine sleeps (CLOCK_BOOTTIME): a
    leader whose VM was suspended must find its lease gone by its own clock, as the others do."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):  # not Linux
        return time.monotonic()


@dataclass(frozen=True)
class ElectionStatus:
    """What the health endpoint shows of the election."""

    leading: bool  # between winning the Lease and failing to renew it
    holder: str  # the holder last seen ("" for none)
    observed_at: float | None  # our clock when the Lease was last read or written


class LeaderElector:
    """Acquires and renews one Lease for `identity`; `run` in a thread, `may_act` anywhere."""

    def __init__(self, lease: LeaderLease, identity: str, times: ElectionTimes, *,
                 clock: Callable[[], float] = election_clock,
                 wall_clock: Callable[[], float] = time.time,
                 jitter: Callable[[], float] = random.random,
                 say: Callable[[str], None] = log.info,
                 gone: Callable[[str], bool] = holder_gone) -> None:
        """`gone`: whether a holder's identity names a process of this host that has ended."""
        self.lease = lease
        self.identity = identity
        self.times = times
        self.clock = clock
        self.wall_clock = wall_clock
        self.jitter = jitter
        self.say = say
        self.gone = gone
        self.on_started_leading: Callable[[], None] = lambda: None
        self.on_stopped_leading: Callable[[], None] = lambda: None
        self._lock = threading.Lock()
        self._observed: Observed | None = None
        self._renewed_at: float | None = None  # when the last write that succeeded was sent
        self._observed_at: float | None = None
        self._leading = False
        self._reported_holder: str | None = None

    # --- what the ticker and the health endpoint read -------------------------------------------

    def may_act(self) -> bool:
        with self._lock:
            return may_act(self._observed, self.identity, self._renewed_at, self.times,
                           self.clock())

    def status(self) -> ElectionStatus:
        with self._lock:
            holder = self._observed.record.holder_identity if self._observed else ""
            return ElectionStatus(self._leading, holder, self._observed_at)

    # --- one try -------------------------------------------------------------------------------

    def try_acquire_or_renew(self, timeout_seconds: float) -> bool:
        """`tryAcquireOrRenew`, every call within `timeout_seconds`; True when we hold the Lease
        now (created, taken over or renewed)."""
        deadline = self.clock() + timeout_seconds
        with self._lock:
            observed = self._observed
        fast = renewal(observed, self.identity, self.times, self.clock(), self.wall_clock())
        if fast is not None:
            sent_at = self.clock()
            try:
                self.lease.update(fast, self._left(deadline))
            except Exception as error:  # a conflict, a timeout, the API down
                log.warning("leader election: failed to renew %s optimistically (%s); reading "
                            "it", self.lease.describe(), error)
            else:
                self._wrote(fast, sent_at)
                return True
        try:
            read = self.lease.get(self._left(deadline))
        except Exception as error:
            log.warning("leader election: cannot read %s: %s", self.lease.describe(), error)
            return False
        # A holder that was a process of this host and has ended (killed, crashed) renews
        # nothing: its Lease is taken now, not after its lease runs out (a restart on a laptop
        # or a VM acts at once; another host's or container's holder is waited out as ever).
        holder = read.holder_identity if read is not None else ""
        gone = bool(holder) and holder != self.identity and self.gone(holder)
        with self._lock:
            seen, step = acquire_or_renew(self._observed, read, self.identity, self.times,
                                          self.clock(), self.wall_clock(), holder_gone=gone)
            self._observed, self._observed_at = seen, self.clock()
            if gone:
                self._reported_holder = holder  # not followed: taken below
        self._report_holder()
        if isinstance(step, Wait):
            return False
        if gone:
            self.say(f"the Lease {self.lease.describe()}'s holder {holder}, a process of this "
                     "host, has ended: taking the Lease without waiting out its lease")
        sent_at = self.clock()
        try:
            if step.create:
                self.lease.create(step.record, self._left(deadline))
            else:
                self.lease.update(step.record, self._left(deadline))
        except Exception as error:
            log.warning("leader election: failed to write %s: %s", self.lease.describe(), error)
            return False
        self._wrote(step.record, sent_at)
        return True

    def release(self, timeout_seconds: float | None = None) -> bool:
        """`release`: give the Lease up if we hold it (no holder, a one-second lease)."""
        with self._lock:
            record = released(self._observed, self.identity, self.wall_clock())
        if record is None:
            return True
        try:
            self.lease.update(record, timeout_seconds or self.times.renew_deadline_seconds)
        except Exception as error:
            log.warning("leader election: failed to release %s: %s", self.lease.describe(),
                        error)
            return False
        with self._lock:
            self._observed = Observed(record, self.clock())
            self._renewed_at = None
        self.say(f"released the Lease {self.lease.describe()}")
        return True

    def _left(self, deadline: float) -> float:
        left = deadline - self.clock()
        if left <= 0:
            raise TimeoutError("the renew deadline passed")
        return left

    def _wrote(self, record: LeaderRecord, sent_at: float) -> None:
        with self._lock:
            now = self.clock()
            self._observed, self._observed_at, self._renewed_at = (
                Observed(record, now), now, sent_at)
        self._report_holder()

    def _report_holder(self) -> None:
        """`maybeReportTransition`: a line when the holder we see changes."""
        holder = self.status().holder
        if holder == self._reported_holder:
            return
        self._reported_holder = holder
        if holder and holder != self.identity:
            self.say(f"following {holder} (Lease {self.lease.describe()})")

    # --- the loop ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Acquire, renew until a round fails, and again, until `stop`; then release."""
        self.say(f"electing a leader on the Lease {self.lease.describe()} as {self.identity}")
        while not stop.is_set():
            if not self._acquire(stop):
                break
            with self._lock:
                self._leading = True
            self.say(f"leading (Lease {self.lease.describe()})")
            self.on_started_leading()
            lost = self._renew(stop)
            with self._lock:
                self._leading = False
            if lost:
                self.say(f"stopped leading: the Lease {self.lease.describe()} was not renewed "
                         f"within {self.times.renew_deadline_seconds:g}s")
            self.on_stopped_leading()
        self.release()

    def _acquire(self, stop: threading.Event) -> bool:
        retry = self.times.retry_period_seconds
        while not stop.is_set():
            if self.try_acquire_or_renew(self.times.renew_deadline_seconds):
                return True
            stop.wait(retry + self.jitter() * JITTER_FACTOR * retry)  # wait.Jitter
        return False

    def _renew(self, stop: threading.Event) -> bool:
        """Rounds of renewal until one fails (True) or `stop` (False)."""
        retry = self.times.retry_period_seconds
        while not stop.is_set():
            deadline = self.clock() + self.times.renew_deadline_seconds
            renewed = False
            while not stop.is_set() and (left := deadline - self.clock()) > 0:
                if self.try_acquire_or_renew(left):
                    renewed = True
                    break
                stop.wait(min(retry, max(0.0, deadline - self.clock())))
            if stop.is_set():
                return False
            if not renewed:
                return True
            stop.wait(retry)
        return False
