"""Whether this process may act now: the leader election's answer, asked before every claim.

Under leader election the ticker (`flows.ticker`) installs the elector's `may_act` here for the
life of its ticks; the one Lease writer of a tick (`tasks.steps.lease.write_lock`) asks it before
it claims a group, the last moment before anything is changed. A tick that began while this
process led, and whose lease ran out meanwhile (it was frozen, or could not renew), then claims
nothing and acts on nothing: the group's result says it lost the race. Without an election,
nothing is installed and every claim goes ahead, as before.
"""

from __future__ import annotations

from collections.abc import Callable

_guard: Callable[[], bool] | None = None


def install_acting_guard(guard: Callable[[], bool] | None) -> None:
    global _guard
    _guard = guard


def may_act() -> bool:
    guard = _guard
    return guard is None or guard()
