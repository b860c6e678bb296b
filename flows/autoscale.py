"""The `autoscale` flow: one Escalator tick for every node group, against the live cluster.

The tick itself is `flows/tick.py`'s composition, read from the live API and cloud and acted
on through the same adapters; this module builds those and runs the tick as a flow run, each
step a recorded task run.

A group whose tick failed does not stop the others, but the run ends Failed, naming the groups
(`flows.run_state`). Every run's final state says in one line what each group did and why, and
its tags say what happened (`scaled-up`, `tainted`, `nodes-removed`, `nothing`, `failed`,
`group:<name>`), so the UI's run list answers "when did it scale, and why" without a click.
Call it through `flows.run_state.run_here`: the outcome comes from this process, not the server.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from logging import getLogger as get_logger
from typing import TYPE_CHECKING, Any

from prefect import flow, get_run_logger
from prefect.client.schemas.objects import State

from kube_elevator.flows import prefect_compat
from kube_elevator.flows.crash_detection import QUIET_CONSOLE_VARIABLE
from kube_elevator.flows.run_state import Results, final_state, tag_run
from kube_elevator.flows.tick import tick
from kube_elevator.tasks.adapters import cache_registry
from kube_elevator.tasks.adapters.blocks import AwsCredentialsBlock, ClusterBlock, block_name
from kube_elevator.tasks.cluster_autoscaler.config import ClusterAutoscalerConfig
from kube_elevator.tasks.core.errors import InputError, redacted
from kube_elevator.tasks.core.lease_state import DEFAULT_LEASE_NAMESPACE
from kube_elevator.tasks.core.step import Runner, run_as_task, run_plain
from kube_elevator.tasks.core.tick_timeout import TICK_TIMEOUT_SECONDS
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.node_group_file import load_node_groups
from kube_elevator.tasks.steps.node_groups import Adapters, GroupResult
from kube_elevator.tasks.steps.report import FAILED, outcome_line, outcome_tags, publish_tick
from kube_elevator.tasks.steps.source import (
    CachedSource,
    CacheReading,
    LiveSource,
    TickSource,
    cache_freshness,
)

if TYPE_CHECKING:
    from kube_elevator.tasks.adapters.kube_cache import ClusterCache

prefect_compat.install()  # Prefect's heartbeat join (3.8.8, 3.9.1) costs each flow run up to 1 s
# `elevator serve`'s runs' own processes (`--ticks runs`) write to serve's console: the house
# rule holds there too, a run that failed or was stopped (Ctrl-C reaches the whole process
# group) is its error line, its traceback in the run's logs on the server (issue 40).
if os.environ.get(QUIET_CONSOLE_VARIABLE) == "1":
    from kube_elevator.flows.console_logs import console_logs_without_tracebacks

    console_logs_without_tracebacks()
CACHE_SYNC_SECONDS = 60.0  # how long a tick waits for a starting cache before listing itself


def tick_source(run: Runner, adapters: Adapters, groups: Sequence[NodeGroupConfig],
                cache: ClusterCache | None) -> tuple[TickSource, CacheReading | None]:
    """Where a live tick reads the cluster: `cache` (pods, nodes, budgets) when the process
    keeps one of this cluster, dated first (`cache_freshness`: a kind past the bound is
    refreshed, or listed); else lists. The reading goes on the tick's report."""
    if cache is None:
        return LiveSource(adapters), None
    if not cache.wait_synced(CACHE_SYNC_SECONDS):  # still listing after a start or a 410
        get_logger(__name__).warning("watch cache not synced: the tick lists the cluster")
        return LiveSource(adapters), None
    # Dating a fresh cache is memory, no task run; a stale one is reconnected or listed (I/O).
    stale = cache.stale_kinds(cache.freshness())
    reading = (run if stale else run_plain)(cache_freshness, cache)
    return CachedSource(cache, adapters, tuple(groups), frozenset(reading.listed)), reading


def _process_cache(kubeconfig: str | None) -> ClusterCache | None:
    """The watch cache this process keeps of `kubeconfig`'s cluster, if any. A run's own
    process keeps none, and learns it without importing the cache (issue 40: its start)."""
    if cache_registry.installed(kubeconfig) is None:
        return None
    from kube_elevator.tasks.adapters.kube_cache import process_cache

    return process_cache(kubeconfig)


def live_tick(
    run: Runner, adapters: Adapters, groups: Sequence[NodeGroupConfig], now: float,
    dry_run: bool = False, load_watcher_url: str | None = None,
    cluster_autoscaler: ClusterAutoscalerConfig | None = None,
    cache: ClusterCache | None = None, source: TickSource | None = None,
) -> list[GroupResult]:
    """The tick read from and acted on through `adapters` (a dry run acts on nothing); read
    from `source`, else as `tick_source` chooses.

    Example:
        ```python
        adapters = ke.make_adapters(kubeconfig=None, lease_namespace="kube-system",
                                    aws_credentials_block=None)
        results = ke.live_tick(ke.run_as_task, adapters, groups, now=time.time(), dry_run=True)
        ```
    """
    if source is None:
        source, _ = tick_source(run, adapters, groups, cache)
    return tick(run, source, None if dry_run else adapters, groups, now,
                load_watcher_url=load_watcher_url, cluster_autoscaler=cluster_autoscaler)


@functools.lru_cache(maxsize=8)
def make_adapters(kubeconfig: str | None, lease_namespace: str,
                  aws_credentials_block: str | None, cluster_block: str | None = None,
                  ) -> Adapters:
    """Clients for a tick, built once per process: boto3 loads its service models and both
    clients their TLS contexts on creation (~0.5 s), which every scheduled run would repeat.

    The cluster is `cluster_block` (a prefect-kubernetes block, by name) when given, else
    `kubeconfig` (a path; None: in-cluster, else ~/.kube/config); the cloud is the prefect-aws
    `aws_credentials_block` when given, else boto3's default chain. A block is read once per
    process and name: a block changed later is read by the next process.

    Example:
        ```python
        adapters = ke.make_adapters(kubeconfig="~/.kube/config", lease_namespace="kube-system",
                                    aws_credentials_block="prod-aws")   # a saved AwsCredentials block
        ```
    """
    from kube_elevator.tasks.adapters.cloud import AsgClient
    from kube_elevator.tasks.adapters.kube import KubeClient

    if cluster_block and kubeconfig:
        raise InputError(["cluster_block, kubeconfig: give one of the two, not both"])
    if cluster_block:
        from kube_elevator.tasks.adapters.blocks import kube_client_from_block

        kube = kube_client_from_block(cluster_block)
    else:
        kube = KubeClient.from_config(kubeconfig)
    return Adapters(kube, AsgClient.from_environment(aws_credentials_block=aws_credentials_block),
                    lease_namespace)


# Set by `elevator simulate` and the tests, whose fake cluster lives on a clock of their own:
# only there may a live tick take `now` (see `autoscale`).
SIMULATED_CLOCK = "ELEVATOR_SIMULATED_CLOCK"


# The docstring's Args are the descriptions the Prefect UI shows in the run form.
# Its timeout: a tick no longer than the liveness probe allows (`tasks.core.tick_timeout`).
@flow(name="autoscale", log_prints=False, persist_result=False,
      timeout_seconds=TICK_TIMEOUT_SECONDS)
def autoscale(
    nodegroups: str,
    now: datetime | None = None,
    dry_run: bool = False,
    lease_namespace: str = DEFAULT_LEASE_NAMESPACE,
    kubeconfig: str | None = None,
    aws_credentials_block: AwsCredentialsBlock | str | None = None,
    pushgateway: str | None = None,
    load_watcher_url: str | None = None,
    cluster_block: ClusterBlock | str | None = None,
) -> State[Any]:
    """One Escalator tick for every node group in `nodegroups`.

    Args:
        nodegroups: Path of the Escalator node-group file (YAML or JSON) on the worker.
        now: The tick's time; empty for now. Set it, with dry_run, to replay a past moment
            (a live tick takes the real time, unless the worker runs a simulated clock).
        dry_run: Decide and report only: no taint, no ASG change, no Lease write.
        lease_namespace: Namespace of the `elevator-<group>` Leases that hold each group's state.
        kubeconfig: kubeconfig path; empty for in-cluster config (or ~/.kube/config).
        aws_credentials_block: A prefect-aws AwsCredentials block, or its name; empty for
            boto3's default chain.
        pushgateway: Prometheus Pushgateway URL to push Escalator's metrics to; empty: none.
        load_watcher_url: Load watcher URL, for groups with `scale_down_selection: least_loaded`.
        cluster_block: A prefect-kubernetes KubernetesClusterConfig block, or the name of one
            (or of a KubernetesCredentials block), in place of kubeconfig; empty: kubeconfig.

    Example:
        ```python
        state = ke.autoscale("nodegroups.yaml", dry_run=True)     # one tick, deciding only
        ke.autoscale.serve(name="autoscale", interval=60)         # or every minute, as a deployment
        ```
    """
    # The run form sends "" for a field left empty: that is "not given".
    kubeconfig, pushgateway = kubeconfig or None, pushgateway or None
    load_watcher_url = load_watcher_url or None
    try:
        # A block chosen in the UI's form arrives loaded; the tick reads blocks by name.
        credentials_name = block_name(aws_credentials_block, "aws_credentials_block")
        results = _tick(nodegroups, now, dry_run, lease_namespace, kubeconfig, credentials_name,
                        pushgateway, load_watcher_url,
                        block_name(cluster_block, "cluster_block"))
    except BaseException:
        tag_run([FAILED])  # bad input, or every group stopped: the run fails
        raise
    tag_run(outcome_tags(results, dry_run))
    returned: Results = [result.to_json() for result in results]
    failures = [(result.plan.name, result.message or result.plan.reason)
                for result in results if result.status == "failed"]
    return final_state("node groups", failures, len(results), returned, outcome_line(results))


def _tick(nodegroups: str, now: datetime | None, dry_run: bool, lease_namespace: str,
          kubeconfig: str | None, aws_credentials_block: str | None, pushgateway: str | None,
          load_watcher_url: str | None, cluster_block: str | None = None) -> list[GroupResult]:
    if not nodegroups.strip():
        raise InputError(["nodegroups: give the path of the node-group file on the worker"])
    if now is not None and not dry_run and os.environ.get(SIMULATED_CLOCK) != "1":
        # A live tick at another time writes that time into taints and scale locks: a past one
        # makes the next tick delete nodes before their grace periods, a future one holds them.
        raise InputError(["now: a tick at another time than now must be a dry run "
                          f"(set dry_run; on a fake cluster, {SIMULATED_CLOCK}=1)"])
    config = load_node_groups(nodegroups)
    moment = (now.replace(tzinfo=now.tzinfo or UTC) if now else datetime.now(UTC)).timestamp()
    adapters = make_adapters(kubeconfig, lease_namespace, aws_credentials_block, cluster_block)
    # The process's watch cache follows a kubeconfig: a tick of a cluster block lists.
    cache = None if cluster_block else _process_cache(kubeconfig)
    source, reading = tick_source(run_as_task, adapters, config.node_groups, cache)
    results = live_tick(run_as_task, adapters, config.node_groups, moment, dry_run,
                        load_watcher_url, config.cluster_autoscaler, source=source)
    logger = get_run_logger()
    try:
        publish_tick(run_as_task, results, pushgateway, dry_run, reading)
    except OSError as error:  # the tick has acted: an unreachable Pushgateway is no failure of it
        logger.warning("metrics not pushed to %s: %s", redacted(pushgateway or ""), error)
    for result in results:  # a group with nothing to do is in the state message alone
        if result.status != "nothing to do":
            logger.info("%s: %s (delta %+d): %s", result.plan.name, result.status,
                        result.plan.delta, result.plan.reason)
    # What the groups' decisions leave out (pods no group takes, nodes kept), once a tick even
    # when every group had nothing to do: a quiet tick says why it was quiet.
    for note in dict.fromkeys(note for result in results for note in result.plan.notes):
        logger.info("note: %s", note)
    return results
