"""How long one tick of a deployment may run: the `autoscale` flow's own timeout.

A tick that runs longer than the liveness probe allows (`--max-inactivity`, the Cluster
Autoscaler's 10 min, `tasks.core.health`) gets its process restarted by the kubelet anyway, and
meanwhile holds the deployment's one concurrency slot: every tick due is cancelled (cancel-new).
So the flow times out there (Prefect's `timeout_seconds`: the engine ends the run Failed,
"TimedOut", and frees the slot), and a run Running longer than the timeout and
`TIMEOUT_SLACK_SECONDS` has no live engine behind it (`flows.abandoned_runs`): the slack is a
call in flight when the timeout fires (Prefect interrupts a flow in a thread between bytecodes,
not inside a socket read, and every adapter call has a request timeout well under it) and a
loaded machine's write of the final state.
"""

from __future__ import annotations

TICK_TIMEOUT_SECONDS = 600.0  # DEFAULT_MAX_INACTIVITY's 10 min
TIMEOUT_SLACK_SECONDS = 120.0
