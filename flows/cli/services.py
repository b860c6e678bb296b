"""`elevator load-watcher` and `elevator scheduler-extender`: the load-aware placement services.

Each command checks its options (bad input: `error: ...` and exit 2), serves its Starlette app
with uvicorn in a thread, and stops cleanly (exit 0) on SIGTERM or SIGINT. Each also serves the
health endpoint of `flows.cli.liveness` on `--health-address`, its limits counting the service's
own loop: the load watcher's fetches from Prometheus, the extender's fetches from the load
watcher. `register(app)` adds both commands to the `elevator` typer app.
"""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kube_elevator.flows.cli.liveness import (
    EXTENDER_HEALTH_ADDRESS,
    WATCHER_HEALTH_ADDRESS,
    HealthPages,
    Liveness,
    with_health_options,
)
from kube_elevator.tasks.adapters.http_server import DEFAULT_HOST
from kube_elevator.tasks.adapters.http_server import ServiceThread as ServiceThread  # tests import it here
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.core.quantity import cpu_milli
from kube_elevator.tasks.load_aware.scoring import (
    DEFAULT_REQUESTS_CPU_MILLI,
    DEFAULT_SAFE_VARIANCE_MARGIN,
    DEFAULT_SAFE_VARIANCE_SENSITIVITY,
    DEFAULT_TARGET_UTILIZATION_PERCENT,
    MAX_REQUESTS_MULTIPLIER,
    MAX_TARGET_UTILIZATION_PERCENT,
    LoadVariationRiskBalancingArgs,
    TargetLoadPackingArgs,
)

if TYPE_CHECKING:
    from kube_elevator.tasks.load_aware.extender import KubeWatch, Policy, SchedulerExtender
    from kube_elevator.tasks.load_aware.watcher import LoadWatcher

# Kept here rather than imported, so that registering the commands does not load uvicorn,
# httpx and Starlette into every `elevator` command (they cost ~0.1 s).
WATCHER_PORT = 2020           # tasks.load_aware.watcher.DEFAULT_PORT, load-watcher's :2020
FETCH_INTERVAL_SECONDS = 60.0  # tasks.load_aware.watcher.FETCH_INTERVAL_SECONDS
# Each window re-runs 4 Prometheus queries per interval: below a second that is a busy loop
# against Prometheus (1e-9 s gave 414 failed fetches in 10 s), never a useful setting.
MIN_FETCH_INTERVAL_SECONDS = 1.0
EXTENDER_PORT = 8888

log = logging.getLogger(__name__)


# --- option checks ---------------------------------------------------------------------------


def http_url(text: str, option: str) -> str:
    """An absolute http(s) URL with a host; InputError naming the option otherwise."""
    import httpx

    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, TypeError) as error:
        raise InputError([f"{option}: {text!r} is not a URL: {error}"]) from None
    if url.scheme not in ("http", "https") or not url.host:
        raise InputError([f"{option}: {text!r} must be an http:// or https:// URL with a host"])
    return text.rstrip("/")


def tcp_port(value: int, option: str = "--port") -> int:
    if not 0 <= value <= 65535:
        raise InputError([f"{option}: {value} is out of range (0..65535; 0 picks a free port)"])
    return value


def positive_seconds(value: float, option: str, minimum: float = 0.0) -> float:
    """A finite number of seconds > 0 and >= `minimum`; InputError naming the option."""
    if not math.isfinite(value) or value <= 0:
        raise InputError([f"{option}: {value} must be a positive number of seconds"])
    if value < minimum:
        raise InputError([f"{option}: {value} is too short: at least {minimum:g} s"])
    return value


def policy(text: str) -> Policy:
    from kube_elevator.tasks.load_aware.extender import Policy

    try:
        return Policy(text)
    except ValueError:
        choices = ", ".join(member.value for member in Policy)
        raise InputError([f"--policy: unknown policy {text!r} (one of {choices})"]) from None


def _warn(message: str) -> None:
    from rich.markup import escape

    from kube_elevator.flows.cli.common import errors

    # escaped: the message quotes the user's option values, which are no rich markup
    errors.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False,
                 soft_wrap=True)


def target_load_packing_args(target_utilization: int, default_requests_cpu: str,
                             default_requests_multiplier: str) -> TargetLoadPackingArgs:
    """TLP args as the plugin defaults them (trimaran.md §2), warning where it substitutes.

    A target above 100 % is treated as one ≤ 0 is (warning, then 40), not refused: this command
    substitutes for out-of-range scoring args as Trimaran does, and refuses what it cannot parse.
    """
    if target_utilization <= 0:
        _warn(f"--target-utilization {target_utilization} is not positive: using "
              f"{DEFAULT_TARGET_UTILIZATION_PERCENT} (as Trimaran does)")
    elif target_utilization > MAX_TARGET_UTILIZATION_PERCENT:
        _warn(f"--target-utilization {target_utilization} is above "
              f"{MAX_TARGET_UTILIZATION_PERCENT} %: using {DEFAULT_TARGET_UTILIZATION_PERCENT}")
    try:
        request_milli = cpu_milli(default_requests_cpu)
    except ValueError:
        raise InputError([f"--default-requests-cpu: {default_requests_cpu!r} is not a CPU "
                          "quantity (like 1000m or 1)"]) from None
    try:
        multiplier = float(default_requests_multiplier)
    except ValueError:
        multiplier = math.nan
    if not math.isfinite(multiplier):
        # Trimaran: "unable to parse DefaultRequestsMultiplier" fails the plugin's start.
        raise InputError([f"--default-requests-multiplier: unable to parse "
                          f"{default_requests_multiplier!r} as a number"])
    if not 0 < multiplier <= MAX_REQUESTS_MULTIPLIER:
        # Ours (Trimaran takes any float): ≤ 0 predicts no load, a huge one overflows the
        # prediction to inf and every /prioritize with a request-only pod failed with a 500.
        raise InputError([f"--default-requests-multiplier: {default_requests_multiplier} must "
                          f"be above 0 and at most {MAX_REQUESTS_MULTIPLIER:g}"])
    return TargetLoadPackingArgs(target_utilization_percent=target_utilization,
                                 default_requests_cpu_milli=request_milli,
                                 default_requests_multiplier=multiplier)


def load_variation_args(margin: float, sensitivity: float) -> LoadVariationRiskBalancingArgs:
    """LVRB args as the plugin defaults them (trimaran.md §2): negatives become 1."""
    for option, value in (("--safe-variance-margin", margin),
                          ("--safe-variance-sensitivity", sensitivity)):
        if not math.isfinite(value):
            raise InputError([f"{option}: {value} must be a finite number"])
        if value < 0:
            _warn(f"{option} {value} is negative: using 1 (as Trimaran does)")
    return LoadVariationRiskBalancingArgs(safe_variance_margin=margin,
                                          safe_variance_sensitivity=sensitivity)


def _configure_logging() -> None:
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _serve_until_signal(service: ServiceThread, what: str, liveness: Liveness,
                        pages: HealthPages) -> None:
    from kube_elevator.flows.cli.common import console, wait_for_stop_signal
    from kube_elevator.flows.cli.liveness import kept_alive

    stop = wait_for_stop_signal()
    with service:
        console.print(f"{what}: serving on {service.url}", highlight=False, soft_wrap=True)
        sys.stdout.flush()  # a supervisor (or test) reading a pipe learns the port now
        with kept_alive(liveness, pages, None):
            stop.wait()
    console.print(f"{what}: stopped", highlight=False)


def watcher_health(watcher: LoadWatcher, liveness: Liveness) -> HealthPages:
    """The load watcher's health: its fetch cycles (every window's); ready once `/watcher`
    has metrics to answer with."""
    return HealthPages(lambda: watcher.health, lambda: watcher.latest() is not None,
                       liveness.limits, watcher.monotonic, role="fetching",
                       loop=f"fetch from {watcher.provider.name}",
                       not_ready=watcher.unavailable, metrics=lambda: "")


def extender_health(extender: SchedulerExtender, liveness: Liveness) -> HealthPages:
    """The extender's health: its fetches of the load watcher's document; ready once it has
    one (without, every node scores the minimum)."""
    collector = extender.collector

    def not_ready() -> str:
        why = f": {collector.last_error}" if collector.last_error else ""
        return f"no metrics from the load watcher yet{why}"

    return HealthPages(lambda: extender.health, lambda: collector.document is not None,
                       liveness.limits, extender.monotonic, role="scoring",
                       loop="fetch from the load watcher", not_ready=not_ready,
                       metrics=lambda: "")



# --- the commands ------------------------------------------------------------------------------


@with_health_options(WATCHER_HEALTH_ADDRESS, "fetch from Prometheus")
def load_watcher(
    prometheus: Annotated[str, typer.Option(
        help="Prometheus base URL, e.g. http://prometheus-k8s.monitoring:9090.")],
    port: Annotated[int, typer.Option(help="Port to serve /watcher on (0: any).")] =
        WATCHER_PORT,
    state: Annotated[Path | None, typer.Option(
        help="JSON file keeping the latest metrics, so a restart answers at once.")] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = DEFAULT_HOST,
    interval: Annotated[str, typer.Option(
        help="Time between two fetches of each window: a duration (90s, 5m) as every other "
             "interval, or plain seconds.")] = f"{FETCH_INTERVAL_SECONDS:g}s",
    *, liveness: Liveness,
) -> None:
    """Serve load-watcher's GET /watcher from Prometheus node CPU and memory (15m/10m/5m)."""
    from kube_elevator.tasks.core.duration import seconds_option
    from kube_elevator.tasks.load_aware.watcher import LoadWatcher, PrometheusProvider

    url = http_url(prometheus, "--prometheus")
    tcp_port(port)
    period = positive_seconds(seconds_option(interval, "--interval"), "--interval",
                              MIN_FETCH_INTERVAL_SECONDS)
    watcher = LoadWatcher(PrometheusProvider(url), state, interval_seconds=period)
    watcher.load_state()  # a malformed state file is bad input: exit 2 before serving
    _configure_logging()
    _serve_until_signal(ServiceThread(watcher.app(), host, port, "load-watcher"),
                        "load-watcher", liveness, watcher_health(watcher, liveness))


@with_health_options(EXTENDER_HEALTH_ADDRESS, "fetch from the load watcher")
def scheduler_extender(
    watcher_url: Annotated[str, typer.Option(
        help="load-watcher base URL (GET {url}/watcher), e.g. http://load-watcher:2020.")],
    policy_name: Annotated[str, typer.Option(
        "--policy", help="target-load-packing or load-variation-risk-balancing.")],
    target_utilization: Annotated[int, typer.Option(
        help="TargetLoadPacking: target CPU utilisation percent.")] =
        DEFAULT_TARGET_UTILIZATION_PERCENT,
    default_requests_cpu: Annotated[str, typer.Option(
        help="TargetLoadPacking: predicted CPU of a container without requests or limits.")] =
        f"{DEFAULT_REQUESTS_CPU_MILLI}m",
    default_requests_multiplier: Annotated[str, typer.Option(
        help="TargetLoadPacking: predicted CPU = request × this, without a limit.")] = "1.5",
    safe_variance_margin: Annotated[float, typer.Option(
        help="LoadVariationRiskBalancing: multiplier of the standard deviation.")] =
        DEFAULT_SAFE_VARIANCE_MARGIN,
    safe_variance_sensitivity: Annotated[float, typer.Option(
        help="LoadVariationRiskBalancing: root power of the standard deviation.")] =
        DEFAULT_SAFE_VARIANCE_SENSITIVITY,
    port: Annotated[int, typer.Option(help="Port to serve the extender on (0: any).")] =
        EXTENDER_PORT,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = DEFAULT_HOST,
    kubeconfig: Annotated[Path | None, typer.Option(
        help="Watch pods (recently bound ones count as load) and nodes with this kubeconfig. "
             "Off by default.")] = None,
    *, liveness: Liveness,
) -> None:
    """Serve kube-scheduler's extender protocol (POST /prioritize, /filter) with Trimaran scores."""
    from kube_elevator.tasks.load_aware.extender import KubeWatch, SchedulerExtender, WatcherCollector

    url = http_url(watcher_url, "--watcher-url")
    chosen = policy(policy_name)
    tcp_port(port)
    tlp = target_load_packing_args(target_utilization, default_requests_cpu,
                                   default_requests_multiplier)
    lvrb = load_variation_args(safe_variance_margin, safe_variance_sensitivity)
    extender = SchedulerExtender(WatcherCollector(url), chosen, tlp, lvrb)
    watch: KubeWatch | None = None
    if kubeconfig is not None:
        from kube_elevator.tasks.adapters.kube import KubeClient

        try:
            kube = KubeClient.from_config(kubeconfig)
        except InputError as error:  # `check_kubeconfig`'s lines name the file already
            raise InputError([f"--kubeconfig: {problem}" for problem in error.problems]) \
                from None
        except Exception as error:  # the client raises ConfigException, OSError, YAML errors
            raise InputError([f"--kubeconfig: {kubeconfig}: {error}"]) from None
        watch = KubeWatch(extender, kube.api)
    _configure_logging()
    if watch is not None:
        watch.start()
    try:
        _serve_until_signal(ServiceThread(extender.app(), host, port, "scheduler-extender"),
                            "scheduler-extender", liveness, extender_health(extender, liveness))
    finally:
        if watch is not None:
            watch.stop()


def register(app: typer.Typer) -> None:
    """Add `load-watcher` and `scheduler-extender` to the `elevator` app."""
    from kube_elevator.flows.cli.common import reports_input_errors

    app.command("load-watcher")(reports_input_errors(load_watcher))
    app.command("scheduler-extender")(reports_input_errors(scheduler_extender))
