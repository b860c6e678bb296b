"""`elevator serve`: the `autoscale` and `plan` deployments served from one process.

For users without a work pool: the same two deployments as `deployments/prefect.yaml` (the
scheduled tick, concurrency 1 cancelling the new run, triggered by `elevator watch`'s
pending-pods event; and the manual dry run), made with `flow.to_deployment` and run by a
Prefect `Runner` in this process, as `prefect.serve` does, but with our own SIGTERM handling:
one SIGTERM stops it cleanly, no new run starts after it, the run in flight finishes (or is
cancelled after a grace period), and the exit code is 0.

Also the `prefect.yaml` pull step `set_project_directory`, so a worker finds the entrypoint
wherever kube-elevator is installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tasks.core.duration import positive_duration_option
from tasks.core.errors import InputError
from tasks.core.lease_state import DEFAULT_LEASE_NAMESPACE
from tasks.escalator.pending_bursts import PENDING_EVENT, RESOURCE_PREFIX

if TYPE_CHECKING:
    from prefect.client.schemas.objects import ConcurrencyLimitConfig
    from prefect.deployments.runner import RunnerDeployment
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger
    from prefect.runner import Runner

AUTOSCALE_DEPLOYMENT = "autoscale"
PLAN_DEPLOYMENT = "plan"
DEFAULT_INTERVAL = "60s"
# How often the served process asks for runs to start; an event-triggered run waits for it.
DEFAULT_POLL = "2s"
# After SIGTERM the run in flight may finish for this long, then it is cancelled: well inside
# Kubernetes' default 30 s terminationGracePeriodSeconds.
STOP_GRACE_SECONDS = 20.0
PROJECT_DIRECTORY = Path(__file__).resolve().parents[2]  # the folder holding `flows/`


def set_project_directory() -> dict[str, str]:
    """`prefect.yaml` pull step: work in the directory holding the installed `flows` package.

    With an editable install that is the checkout; with a regular one, site-packages, which
    holds `flows/autoscale.py` too. Either way the entrypoint resolves, on any worker, without
    the deploying machine's path baked into the deployment.
    """
    os.chdir(PROJECT_DIRECTORY)
    return {"directory": str(PROJECT_DIRECTORY)}


def tick_concurrency() -> ConcurrencyLimitConfig:
    """One tick at a time; a tick due while one runs is cancelled, never queued behind it."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy

    return ConcurrencyLimitConfig(limit=1,
                                  collision_strategy=ConcurrencyLimitStrategy.CANCEL_NEW)


def pending_pods_trigger() -> DeploymentEventTrigger:
    """Run the tick when `elevator watch` reports pending pods in any node group."""
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    return DeploymentEventTrigger(
        name="autoscale on pending pods",
        description="elevator watch saw pods of a node group pending: tick now.",
        expect={PENDING_EVENT},
        match={"prefect.resource.id": f"{RESOURCE_PREFIX}*"},
    )


def served_deployments(nodegroups: Path, interval_seconds: float,
                       kubeconfig: Path | None = None,
                       lease_namespace: str = DEFAULT_LEASE_NAMESPACE,
                       pushgateway: str | None = None) -> list[RunnerDeployment]:
    """`autoscale` (scheduled, triggered, concurrency 1) and `plan` (manual, dry run)."""
    from prefect.deployments.runner import RunnerDeployment

    from flows.autoscale import autoscale

    parameters: dict[str, Any] = {
        "nodegroups": str(nodegroups.resolve()),
        "lease_namespace": lease_namespace,
        "kubeconfig": str(kubeconfig.resolve()) if kubeconfig else None,
        "pushgateway": pushgateway,
    }
    # `to_deployment` is async-dispatched: called from sync code it returns the deployment.
    scheduled = autoscale.to_deployment(
        AUTOSCALE_DEPLOYMENT, interval=timedelta(seconds=interval_seconds),
        parameters={**parameters, "dry_run": False},
        concurrency_limit=tick_concurrency(), triggers=[pending_pods_trigger()],
        description="One Escalator tick for every node group, on a schedule and when "
                    "elevator watch reports pending pods.",
        tags=["kube-elevator"])
    manual = autoscale.to_deployment(
        PLAN_DEPLOYMENT, parameters={**parameters, "dry_run": True},
        description="What one tick would do now, changing nothing: for manual runs.",
        tags=["kube-elevator"])
    assert isinstance(scheduled, RunnerDeployment) and isinstance(manual, RunnerDeployment)
    return [scheduled, manual]


def serve(
    nodegroups: Annotated[Path, typer.Option(help="Escalator node-group file.")],
    interval: Annotated[str, typer.Option(
        help="Time between scheduled ticks (Go duration).")] = DEFAULT_INTERVAL,
    kubeconfig: Annotated[Path | None, typer.Option(
        help="kubeconfig file (default: in-cluster config, else ~/.kube/config).")] = None,
    lease_namespace: Annotated[str, typer.Option(
        help="Namespace of the elevator-<group> Leases.")] = DEFAULT_LEASE_NAMESPACE,
    pushgateway: Annotated[str | None, typer.Option(
        help="Prometheus Pushgateway URL each tick pushes its metrics to.")] = None,
    poll: Annotated[str, typer.Option(
        help="How often to ask the Prefect server for runs to start (Go duration).")] =
        DEFAULT_POLL,
) -> None:
    """Serve the autoscale and plan deployments from this process (no work pool needed)."""
    from tasks.escalator.config import load_node_groups

    load_node_groups(nodegroups)  # bad input fails here, before anything is registered
    period = positive_duration_option(interval, "--interval")
    poll_seconds = positive_duration_option(poll, "--poll")
    if kubeconfig is not None and not kubeconfig.is_file():
        raise InputError([f"--kubeconfig: {kubeconfig}: no such file"])
    if pushgateway is not None:
        from flows.cli.services import http_url

        pushgateway = http_url(pushgateway, "--pushgateway")
    from flows.crash_detection import heartbeat_environment

    heartbeat_environment()  # before Prefect reads its settings: the runs it starts inherit it
    from prefect.runner import Runner

    from flows.cli.common import console
    from flows.crash_detection import ensure_crash_detection

    ensure_crash_detection()  # a tick whose process dies ends Crashed, its slot freed
    runner = Runner(name="kube-elevator", query_seconds=poll_seconds, limit=None)
    deployments = served_deployments(nodegroups, period, kubeconfig, lease_namespace,
                                     pushgateway)
    for deployment in deployments:
        runner.add_deployment(deployment)
    console.print("serving " + ", ".join(f"autoscale/{d.name}" for d in deployments),
                  highlight=False)
    sys.stdout.flush()
    asyncio.run(run_until_signal(runner))
    console.print("serve: stopped", highlight=False)


async def run_until_signal(runner: Runner, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
    """Run `runner` until SIGTERM or SIGINT, then stop it gently.

    Prefect's own SIGTERM handler calls `sys.exit` inside the runner's event loop (3.8.8): the
    exit code is 0 but the run in flight is left Running. Instead: stop polling (no new run
    starts), give the run in flight `grace_seconds` to finish, cancel it if it has not (it
    ends Cancelled), and let the runner shut down (it pauses the schedules until the next
    start).
    """
    loop = asyncio.get_running_loop()
    signalled = asyncio.Event()
    started = asyncio.ensure_future(runner.start())
    await asyncio.sleep(0)  # Runner.start installs Prefect's SIGTERM handler first: replace it
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, signalled.set)
    waiting = asyncio.ensure_future(signalled.wait())
    await asyncio.wait({started, waiting}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if started.done():
        await started  # the runner ended by itself: raise what it raised
        return
    poller = getattr(runner, "_scheduled_run_poller", None)
    if poller is not None:
        poller.stopping = True
    processes = getattr(runner, "_process_manager", None)
    deadline = loop.time() + grace_seconds
    while processes is not None and processes.flow_run_ids() and loop.time() < deadline:
        await asyncio.sleep(0.1)
    await runner.astop()  # cancels what still runs
    with contextlib.suppress(asyncio.CancelledError):
        await started


def register(app: typer.Typer) -> None:
    """Add `serve` to the `elevator` app."""
    from flows.cli.common import reports_input_errors

    app.command("serve")(reports_input_errors(serve))
