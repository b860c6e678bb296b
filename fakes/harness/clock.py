"""The harness's clock: simulated time that moves only when the test moves it.

The simulated cluster reads it for everything that happens "after a while" (an instance's boot
delay, a node's creationTimestamp, how long a pod waited), so a test of code that waits for
nodes to join takes no wall-clock time. Code under test that takes its clock as an input (as
kube-elevator's own does) can be given `clock.now` too.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime


class ManualClock:
    """Unix seconds, moved forward by `advance` only; `clock()` is `clock.now()`.

    Example:
        >>> from kube_elevator.harness import ManualClock
        >>> clock = ManualClock(1795262400.0)
        >>> clock.advance(60)
        1795262460.0
        >>> clock.now()
        1795262460.0
    """

    def __init__(self, start: float) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    __call__ = now

    def datetime(self) -> datetime:
        """The current simulated time as an aware UTC datetime."""
        return datetime.fromtimestamp(self.now(), UTC)

    def advance(self, seconds: float) -> float:
        """Move forward by `seconds` (never back); returns the new time."""
        if seconds < 0:
            raise ValueError(f"a clock moves forward only, not by {seconds} seconds")
        with self._lock:
            self._now += seconds
            return self._now
