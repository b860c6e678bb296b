"""A person in the loop: an autoscale tick that asks for approval in the Prefect UI before a
node group grows above a size you set (docs/plugin.md, "A person in the loop").

Composed only of kube-elevator's public API (`import kube_elevator`) and Prefect: the tick
decides without acting (`actuator=None`); when a group's plan takes its ASG above
`approve_above_nodes`, the run pauses with a form (approve, and a reason) that the UI shows on
the run's page; approved, the tick runs again and acts (deciding again from the cluster as it is
then); refused, nothing changes and the run's state says why. Unanswered within
`timeout_seconds`, `on_timeout` decides. A tick without such a scale-up acts at once.

Serve it from your own project (no work pool needed):

    python approval_flow.py --serve      # serves the `approved-autoscale` deployment
"""

from __future__ import annotations

import contextvars
import threading
from datetime import UTC, datetime
from logging import getLogger as get_logger
from typing import Any, Literal

from prefect import flow, get_run_logger, pause_flow_run, resume_flow_run
from prefect.context import FlowRunContext
from prefect.input import RunInput
from prefect.states import Completed, State

import kube_elevator as ke


class ScaleUpApproval(RunInput):
    """The form the paused run shows: approve the scale-up, and why."""

    approve: bool = False
    reason: str = ""


def _answer_later(context: FlowRunContext | None, after_seconds: float,
                  answer: ScaleUpApproval) -> threading.Timer:
    """Resume this paused run with `answer` after `after_seconds`, unless someone did."""
    assert context is not None and context.flow_run is not None
    run_id = context.flow_run.id
    settings = contextvars.copy_context()  # the thread talks to this run's server

    def resume() -> None:
        try:
            settings.run(resume_flow_run, run_id, run_input=answer.model_dump())
        except Exception as error:  # answered meanwhile: the run is no longer paused
            get_logger(__name__).info("not answered for the person: %s", error)

    timer = threading.Timer(after_seconds, resume)
    timer.daemon = True
    timer.start()
    return timer


def _large_scale_ups(results: list[ke.GroupResult], above_nodes: int) -> list[ke.ScalePlan]:
    """The plans that would take a group's ASG above `above_nodes`."""
    return [result.plan for result in results
            if result.plan.cloud_increase > 0 and result.plan.asg_desired > above_nodes]


@flow(name="approved-autoscale", persist_result=False, log_prints=False)
def approved_autoscale(
    nodegroups: str,
    approve_above_nodes: int,
    timeout_seconds: int = 3600,
    on_timeout: Literal["approve", "refuse"] = "refuse",
    kubeconfig: str | None = None,
    cluster_block: ke.ClusterBlock | str | None = None,
    aws_credentials_block: ke.AwsCredentialsBlock | str | None = None,
    lease_namespace: str = "kube-system",
    poll_seconds: int = 10,
) -> State[Any]:
    """One autoscale tick; a scale-up above `approve_above_nodes` waits for a person.

    Args:
        nodegroups: Path of the Escalator node-group file on the worker.
        approve_above_nodes: A scale-up that takes a group's ASG above this many nodes needs
            an approval in the UI first.
        timeout_seconds: How long the run waits for an answer.
        on_timeout: What an unanswered question means: approve or refuse.
        kubeconfig: kubeconfig path; empty for cluster_block, in-cluster or ~/.kube/config.
        cluster_block: A prefect-kubernetes KubernetesClusterConfig block, or its name.
        aws_credentials_block: A prefect-aws AwsCredentials block, or its name; empty for
            boto3's default chain.
        lease_namespace: Namespace of the elevator-<group> Leases.
        poll_seconds: How often the paused run asks the server whether it was answered.
    """
    logger = get_run_logger()
    groups = ke.load_node_groups(nodegroups).node_groups
    adapters = ke.make_adapters(kubeconfig or None, lease_namespace,
                                ke.block_name(aws_credentials_block, "aws_credentials_block"),
                                ke.block_name(cluster_block, "cluster_block"))
    source = ke.LiveSource(adapters)
    planned = ke.tick(ke.run_as_task, source, None, groups, datetime.now(UTC).timestamp())
    large = _large_scale_ups(planned, approve_above_nodes)
    if large:
        asked = "; ".join(f"{plan.name}: ASG {plan.asg_desired_before} -> {plan.asg_desired} "
                          f"nodes ({plan.reason})" for plan in large)
        description = (f"**Scale up above {approve_above_nodes} nodes?**\n\n{asked}\n\n"
                       f"Unanswered within {timeout_seconds} s: {on_timeout}.")
        logger.info("waiting for approval: %s", asked)
        # Unanswered, the run answers itself with `on_timeout` (Prefect fails a paused run
        # that outlives its own pause timeout, so that one is set a little later).
        unanswered = ScaleUpApproval(approve=on_timeout == "approve",
                                     reason=f"no answer within {timeout_seconds} s: {on_timeout}")
        timer = _answer_later(FlowRunContext.get(), timeout_seconds, unanswered)
        try:
            answer = pause_flow_run(
                wait_for_input=ScaleUpApproval.with_initial_data(description=description),
                timeout=timeout_seconds + 2 * poll_seconds + 60, poll_interval=poll_seconds)
        finally:
            timer.cancel()
        approved = answer.approve
        why = answer.reason or ("approved" if approved else "refused")
        if not approved:
            return Completed(message=f"scale-up refused ({why}): {asked}; nothing changed")
        logger.info("scale-up approved: %s", why)
    # The decision is made again now, and acted on: the cluster may have moved while waiting.
    results = ke.tick(ke.run_as_task, source, adapters, groups, datetime.now(UTC).timestamp())
    done = "; ".join(f"{result.plan.name}: {result.status}, ASG {result.plan.asg_desired}"
                     for result in results)
    failed = [result for result in results if result.status == "failed"]
    if failed:
        raise RuntimeError(f"the tick failed: {done}")
    return Completed(message=("approved: " if large else "") + done)


def main(arguments: list[str] | None = None) -> None:
    """`--serve`: serve the deployment until stopped (Ctrl-C); anything else is refused."""
    import argparse

    parser = argparse.ArgumentParser(description="An autoscale tick that asks a person before "
                                     "a large scale-up (docs/plugin.md).")
    parser.add_argument("--serve", action="store_true",
                        help="serve the `approved-autoscale` deployment (no work pool needed)")
    parser.add_argument("--name", default="approved-autoscale", help="the deployment's name")
    options = parser.parse_args(arguments)
    if not options.serve:
        parser.error("nothing to do: give --serve to serve the deployment")
    approved_autoscale.serve(name=options.name)


if __name__ == "__main__":
    main()
