"""Whether a long-lived process still ticks: the Cluster Autoscaler's health check, and its metrics.

The Cluster Autoscaler's `cluster-autoscaler/metrics/liveness.go` (`HealthCheck`): the check
fails when no loop finished within `--max-inactivity` (10 min) or none succeeded within
`--max-failing-time` (15 min). Both times count from the start: at first, and again when the
process starts monitoring (`StartMonitoring`, which CA's main.go calls when it starts its loop,
after winning the election), the last activity and the last success are "now". A process that
does not run the loop (a follower: CA's main.go never calls `StartMonitoring` there) is healthy.
A successful loop is activity too (`UpdateLastSuccessfulRun`).

Here a "loop" is a tick (a flow run; it succeeded when the run ended Completed), or what the
process does instead of ticking (`flows.ticker`): a finished one, never a look for work that
found none. Times are passed in: the clock is an input.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

# The Cluster Autoscaler's defaults (its --max-inactivity and --max-failing-time).
DEFAULT_MAX_INACTIVITY = "10m"
DEFAULT_MAX_FAILING_TIME = "15m"


@dataclass(frozen=True)
class HealthLimits:
    max_inactivity_seconds: float
    max_failing_seconds: float


@dataclass(frozen=True)
class LoopState:
    """A snapshot of what a loop recorded (monotonic seconds; wall times for the metrics)."""

    monitoring: bool
    last_activity: float
    last_success: float
    finished_wall: float | None = None  # Unix time the last loop finished
    succeeded_wall: float | None = None  # ... and the last that succeeded
    succeeded: int = 0
    failed: int = 0


class LoopHealth:
    """What a loop records for its health check, safe to read from the HTTP server's thread."""

    def __init__(self, now: float, monitoring: bool = True) -> None:
        self._lock = threading.Lock()
        self._state = LoopState(monitoring, now, now)

    def start_monitoring(self, now: float) -> None:
        """`StartMonitoring`: the loop starts (or this process became the leader); both times
        count from now."""
        with self._lock:
            state = self._state
            self._state = LoopState(True, max(state.last_activity, now),
                                    max(state.last_success, now), state.finished_wall,
                                    state.succeeded_wall, state.succeeded, state.failed)

    def stop_monitoring(self) -> None:
        """This process no longer runs the loop (it follows): the ticks' limits do not apply."""
        with self._lock:
            state = self._state
            self._state = LoopState(False, state.last_activity, state.last_success,
                                    state.finished_wall, state.succeeded_wall, state.succeeded,
                                    state.failed)

    def finished(self, now: float, wall_now: float, succeeded: bool) -> None:
        """A loop finished: it succeeded or failed. A look that ran nothing is no loop and
        is not recorded (`flows.ticker`): it would keep the liveness clock going while no
        tick runs at all."""
        with self._lock:
            state = self._state
            self._state = LoopState(
                state.monitoring, max(state.last_activity, now),
                max(state.last_success, now) if succeeded else state.last_success,
                wall_now, wall_now if succeeded else state.succeeded_wall,
                state.succeeded + int(succeeded), state.failed + int(not succeeded))

    def state(self) -> LoopState:
        with self._lock:
            return self._state


def liveness_problems(state: LoopState, now: float, limits: HealthLimits,
                      loop: str = "tick") -> list[str]:
    """Why the process is not healthy (empty: it is), as liveness.go's `ServeHTTP` decides;
    `loop` names what the process counts (a tick, `pods run`'s cycle, the load watcher's
    fetch)."""
    if not state.monitoring:
        return []
    found = []
    idle = now - state.last_activity
    if idle > limits.max_inactivity_seconds:
        found.append(f"no {loop} finished for {idle:.0f}s (--max-inactivity "
                     f"{limits.max_inactivity_seconds:g}s)")
    failing = now - state.last_success
    if failing > limits.max_failing_seconds:
        found.append(f"no {loop} succeeded for {failing:.0f}s (--max-failing-time "
                     f"{limits.max_failing_seconds:g}s)")
    return found


def not_ready_reason(state: LoopState, problems: Sequence[str], loop: str = "tick"
                     ) -> str | None:
    """Why a process that runs the loop is not ready (None: it is): no loop of it completed
    since it started (a run that holds the concurrency slot cancels every tick, a tick that
    cannot start: a started or cancelled one is no tick), or its health check fails
    (`problems`). A process that does not run the loop (a follower) is ready: it waits."""
    if not state.monitoring:
        return None
    if state.succeeded == 0:
        return f"no {loop} has completed since the start"
    if problems:
        return "; ".join(problems)
    return None


def health_answer(role: str, problems: Sequence[str]) -> tuple[int, str]:
    """`/health-check`'s status and body: 200 and the role (leading, following, ticking), or
    500 and every reason."""
    if problems:
        return 500, f"unhealthy ({role}): " + "; ".join(problems) + "\n"
    return 200, f"{role}\n"


def process_metrics(state: LoopState, leading: bool, healthy: bool) -> str:
    """The `elevator_*` process metrics, Prometheus text exposition 0.0.4."""
    lines = [
        "# HELP elevator_leader 1 while this process runs the ticks (it leads, or no election "
        "runs), else 0",
        "# TYPE elevator_leader gauge",
        f"elevator_leader {int(leading)}",
        "# HELP elevator_healthy 1 while /health-check answers 200, else 0",
        "# TYPE elevator_healthy gauge",
        f"elevator_healthy {int(healthy)}",
        "# HELP elevator_ticks_total ticks this process finished, by outcome",
        "# TYPE elevator_ticks_total counter",
        f'elevator_ticks_total{{outcome="succeeded"}} {state.succeeded}',
        f'elevator_ticks_total{{outcome="failed"}} {state.failed}',
    ]
    for name, value, text in (
            ("elevator_last_tick_timestamp_seconds", state.finished_wall,
             "Unix time the last tick finished"),
            ("elevator_last_tick_success_timestamp_seconds", state.succeeded_wall,
             "Unix time the last tick that succeeded finished")):
        if value is not None:
            lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge", f"{name} {value!r}"]
    return "\n".join(lines) + "\n"
