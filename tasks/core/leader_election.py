"""Leader election over a `coordination.k8s.io/v1` Lease: client-go's decisions, without I/O.

client-go's `tools/leaderelection/leaderelection.go` (`tryAcquireOrRenew`, `release`,
`isLeaseValid`, `NewLeaderElector`'s checks) and `resourcelock/leaselock.go` (the record as a
Lease's spec), as plain functions: given the record just read, what this process observed before,
its identity and its own clock, create the Lease, update it, or wait. The Lease I/O is
`tasks.adapters.kube_leader`; the loop that acquires and renews is `flows.leader`.

As in client-go, an observer never trusts the times written in the record (another machine's
clock): a lease is valid for `leaseDurationSeconds` of the observer's own clock from the moment
it saw the record change. Clock offsets between replicas do not matter; a difference in clock
*rate* is what the margin between the lease duration and the renew deadline allows for.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

# client-go's defaults (the Cluster Autoscaler's and Escalator's flags use them too).
DEFAULT_LEASE_DURATION_SECONDS = 15.0
DEFAULT_RENEW_DEADLINE_SECONDS = 10.0
DEFAULT_RETRY_PERIOD_SECONDS = 2.0
JITTER_FACTOR = 1.2  # leaderelection.go: an acquiring candidate waits retry * [1, 1 + 1.2)
RELEASED_LEASE_DURATION_SECONDS = 1  # leaderelection.go `release`: the next candidate at once


@dataclass(frozen=True)
class ElectionTimes:
    """The three durations of an election, checked as `NewLeaderElector` checks them."""

    lease_duration_seconds: float = DEFAULT_LEASE_DURATION_SECONDS
    renew_deadline_seconds: float = DEFAULT_RENEW_DEADLINE_SECONDS
    retry_period_seconds: float = DEFAULT_RETRY_PERIOD_SECONDS

    def problems(self) -> list[str]:
        """What `NewLeaderElector` refuses, one line each (empty when the times are usable).

        The record holds whole seconds (`leaseDurationSeconds` is an int32), so the lease
        duration must be one: a fraction would be cut off for every observer but this one.
        """
        lease, renew, retry = (self.lease_duration_seconds, self.renew_deadline_seconds,
                               self.retry_period_seconds)
        found = [f"{name} must be positive" for name, value in (
            ("the lease duration", lease), ("the renew deadline", renew),
            ("the retry period", retry)) if not value > 0]
        if found:
            return found
        if lease != int(lease):
            found.append(f"the lease duration ({lease:g}s) must be whole seconds")
        if lease <= renew:
            found.append(f"the lease duration ({lease:g}s) must be longer than the renew "
                         f"deadline ({renew:g}s)")
        if renew <= JITTER_FACTOR * retry:
            found.append(f"the renew deadline ({renew:g}s) must be longer than {JITTER_FACTOR:g} "
                         f"times the retry period ({retry:g}s)")
        return found


@dataclass(frozen=True)
class LeaderRecord:
    """client-go's `LeaderElectionRecord`, as a Lease's spec carries it (leaselock.go).

    The times are the MicroTime strings as written (informative only: nobody acts on them), so
    a record read back compares equal to the one written.
    """

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    lease_transitions: int = 0


@dataclass(frozen=True)
class Observed:
    """The record this process saw last, and when by its own clock it saw it change."""

    record: LeaderRecord
    since_seconds: float

    def valid(self, now: float) -> bool:
        """`isLeaseValid`: the holder's lease has not run out by this observer's clock."""
        return self.since_seconds + self.record.lease_duration_seconds > now

    def held_by(self, identity: str) -> bool:
        """`IsLeader`, for `identity`."""
        return self.record.holder_identity == identity


@dataclass(frozen=True)
class Write:
    """Write `record`: create the Lease (`create`), or update it at the version read."""

    record: LeaderRecord
    create: bool = False


@dataclass(frozen=True)
class Wait:
    """Another candidate holds a lease still valid by our clock: try again later."""

    holder: str


def micro_time(unix_seconds: float) -> str:
    """metav1.MicroTime on the wire: RFC 3339 in UTC with microseconds."""
    return datetime.fromtimestamp(unix_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def observe(previous: Observed | None, record: LeaderRecord, now: float) -> Observed:
    """The observation after reading `record`: its clock restarts only when the record changed
    (leaderelection.go compares the record it read with the one it saw before)."""
    if previous is not None and previous.record == record:
        return previous
    return Observed(record, now)


def _claim(identity: str, times: ElectionTimes, wall_now: float) -> LeaderRecord:
    stamp = micro_time(wall_now)
    return LeaderRecord(identity, int(times.lease_duration_seconds), stamp, stamp, 0)


def renewal(observed: Observed | None, identity: str, times: ElectionTimes, now: float,
            wall_now: float) -> LeaderRecord | None:
    """`tryAcquireOrRenew` step 1, the fast path: a leader whose lease is still valid renews from
    the record it last wrote, without reading first. None when this is not that case."""
    if observed is None or not observed.held_by(identity) or not observed.valid(now):
        return None
    return replace(_claim(identity, times, wall_now), acquire_time=observed.record.acquire_time,
                   lease_transitions=observed.record.lease_transitions)


def acquire_or_renew(observed: Observed | None, read: LeaderRecord | None, identity: str,
                     times: ElectionTimes, now: float, wall_now: float,
                     holder_gone: bool = False) -> tuple[Observed | None, Write | Wait]:
    """`tryAcquireOrRenew` steps 2 to 4, after reading the Lease (`read` None: there is none).

    Returns the observation to keep and what to do: create the Lease; wait, when another holds
    it and it has not expired by our clock; else update it, keeping the acquire time and the
    transition count when we hold it, counting one more transition when we take it over (an
    empty holder, as a release leaves, is free at once). `holder_gone`: the holder is known to
    be a process that no longer runs (`tasks.core.identity.holder_gone`), free at once too.
    """
    claim = _claim(identity, times, wall_now)
    if read is None:
        return observed, Write(claim, create=True)
    seen = observe(observed, read, now)
    if (read.holder_identity and seen.valid(now) and not seen.held_by(identity)
            and not holder_gone):
        return seen, Wait(read.holder_identity)
    if seen.held_by(identity):
        claim = replace(claim, acquire_time=read.acquire_time,
                        lease_transitions=read.lease_transitions)
    else:
        claim = replace(claim, lease_transitions=read.lease_transitions + 1)
    return seen, Write(claim)


def released(observed: Observed | None, identity: str, wall_now: float) -> LeaderRecord | None:
    """leaderelection.go `release` (ReleaseOnCancel): the record a leader writes when it stops
    cleanly, no holder and a one-second lease, so a follower takes over at its next try. None
    when we do not hold it."""
    if observed is None or not observed.held_by(identity):
        return None
    stamp = micro_time(wall_now)
    return LeaderRecord("", RELEASED_LEASE_DURATION_SECONDS, stamp, stamp,
                        observed.record.lease_transitions)


def may_act(observed: Observed | None, identity: str, renewed_at: float | None,
            times: ElectionTimes, now: float) -> bool:
    """Whether the leader may start acting now, by its own clock.

    `renewed_at` is when the last successful write of the record was *sent*: no other candidate
    can have seen that write before, so none takes over before `renewed_at + lease duration`.
    Acting stops earlier, at `renewed_at + renew deadline`, leaving the margin client-go leaves
    between giving up and the lease running out. A process that was frozen (SIGSTOP, a stalled
    VM) finds on waking that its clock ran past that, and does not act on a lease it may have
    lost meanwhile.
    """
    return (observed is not None and observed.held_by(identity) and renewed_at is not None
            and now < renewed_at + times.renew_deadline_seconds)
