"""`FakeCluster`: the fake Kubernetes API, moto's AWS and the simulated cluster, on a test's clock.

One object a test (or a script, through `fake_cluster()`) holds: `kube` is the fake API server
(`fakes.kube_api`), real clients reach it over HTTP; `aws` is moto (in this process by default,
or its HTTP server for code in other processes); `world` is the simulated cluster
(`fakes.cluster.SimulatedCluster`), which turns an ASG's new instances into Nodes after their
boot delay, drops the Nodes of terminated instances, and binds pending pods with the
kube-scheduler model (`tasks.scheduler`). Nothing moves on its own: `advance(seconds)` moves
the clock and then steps the world, so a test decides when nodes join and pods are bound.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

import kubernetes.client

from kube_elevator.fakes.aws import FakeAws, environ_set, fail_next_calls
from kube_elevator.fakes.cluster import SimulatedCluster, simulated_scheduler
from kube_elevator.fakes.faults import FaultInjector
from kube_elevator.fakes.freezing_proxy import FreezingProxy
from kube_elevator.fakes.harness.aws import InProcessAws
from kube_elevator.fakes.harness.clock import ManualClock
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.fakes.scenario import AsgSpec, DaemonSetSpec
from kube_elevator.tasks.core.collector import no_collections_at_exit
from kube_elevator.tasks.escalator.config import NodeGroupConfig
from kube_elevator.tasks.scheduler.profiles import DEFAULT_PROFILE

AwsMode = Literal["in-process", "server"]
_T = TypeVar("_T")


class FakeCluster:
    """A fake cluster for one test: `start()`/`stop()`, or a context manager.

    `kube` and `aws` may be given already started (the pytest fixtures share theirs); those
    the cluster starts itself it also stops. `start_time` is the clock's first reading (unix
    seconds; default: the wall clock at `start()`). `field_validation=False` stores what HTTP
    writes send, unknown fields included (docs/harness.md, Field validation). `validation`,
    `defaulting` and `admission_defaults` switch the fake API's write layers (docs/harness.md,
    Validation and defaulting); None leaves a given `kube`'s as they are (all on for one made here).

    Example:
        ```python
        with FakeCluster(start_time=1795262400.0) as cluster:
            cluster.add_node_group("workers", desired=2)
            cluster.step()
            print([node["metadata"]["name"] for node in cluster.nodes()])
        ```
    """

    def __init__(self, *, aws: AwsMode | FakeAws = "in-process", kube: FakeKubeApi | None = None,
                 region: str = "us-east-1", start_time: float | None = None,
                 scheduler_profile: str = DEFAULT_PROFILE, seed: int = 1,
                 workdir: Path | None = None, field_validation: bool | None = None,
                 validation: bool | None = None, defaulting: bool | None = None,
                 admission_defaults: bool | None = None) -> None:
        if isinstance(aws, str) and aws not in ("in-process", "server"):
            raise ValueError(f"aws must be 'in-process' or 'server', not {aws!r}")
        self._aws_option = aws
        self._given_kube = kube
        self.region = region
        self._start_time = start_time
        self._profile = scheduler_profile
        self._seed = seed
        self._workdir = workdir
        # The fake API's field validation (fakes/kube_api/field_validation.py); None: as it is.
        self._field_validation = field_validation
        self._layers = {"validation": validation, "defaulting": defaulting,
                        "admission_defaults": admission_defaults}
        self._stack: ExitStack | None = None
        self._kube: FakeKubeApi | None = None
        self._aws: FakeAws | None = None
        self._world: SimulatedCluster | None = None
        self._kubeconfig: Path | None = None
        self.clock = ManualClock(0.0 if start_time is None else start_time)

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeCluster:
        if self._stack is not None:
            return self
        # The process ends without the collector's passes over the cluster, moto and the
        # code under test (tasks/core/collector.py): ~1 s of a user's script.
        no_collections_at_exit()
        with ExitStack() as stack:
            kube = self._given_kube
            if kube is None:
                kube = stack.enter_context(FakeKubeApi())
            if self._field_validation is not None:
                kube.field_validation = self._field_validation
            for layer, on in self._layers.items():
                if on is not None:
                    setattr(kube.layers, layer, on)
            if isinstance(self._aws_option, FakeAws):
                aws = self._aws_option
            elif self._aws_option == "server":
                aws = stack.enter_context(FakeAws(self.region))
            else:
                aws = stack.enter_context(InProcessAws(self.region))
            workdir = self._workdir
            if workdir is None:
                made = Path(tempfile.mkdtemp(prefix="fake-cluster-"))
                stack.callback(shutil.rmtree, made, ignore_errors=True)
                workdir = made
            self.clock = ManualClock(time.time() if self._start_time is None
                                     else self._start_time)
            self._kube, self._aws = kube, aws
            self._kubeconfig = kube.write_kubeconfig(workdir / "kubeconfig")
            self._world = SimulatedCluster(kube, aws, [], [], adopt_pods=True,
                                           scheduler=simulated_scheduler(self._profile,
                                                                         self._seed))
            self._stack = stack.pop_all()
        return self

    def stop(self) -> None:
        stack, self._stack = self._stack, None
        self._world = self._kube = self._aws = self._kubeconfig = None
        if stack is not None:
            stack.close()

    def __enter__(self) -> FakeCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # --- the parts ------------------------------------------------------------------------

    @property
    def kube(self) -> FakeKubeApi:
        """The fake Kubernetes API server (store access, `fail_next`, `delay_next`, `faults`)."""
        return _started(self._kube)

    @property
    def aws(self) -> FakeAws:
        """moto, with `client(service)`, `env()`, `create_asg`, `instances`."""
        return _started(self._aws)

    @property
    def world(self) -> SimulatedCluster:
        """The simulated cluster: what kubelets and the scheduler would do. Internal (the
        simulator's own model, which may change): `step`, `advance`, `nodes` and `pods` are its
        public face. @private"""
        return _started(self._world)

    @property
    def kubeconfig(self) -> Path:
        """A kubeconfig file for the fake API (context `fake`, namespace `default`)."""
        return _started(self._kubeconfig)

    @property
    def url(self) -> str:
        return self.kube.url

    def api_client(self) -> kubernetes.client.ApiClient:
        """A new official-client `ApiClient` on the fake API (close it, or use `with`)."""
        return self.kube.api_client()

    def boto3_client(self, service: str) -> Any:
        """A new boto3 client for `service` (`autoscaling`, `ec2`) on this cluster's moto."""
        return self.aws.client(service)

    def env(self) -> dict[str, str]:
        """What a program needs to find this cluster: `KUBECONFIG` and the `AWS_*` variables
        (`AWS_ENDPOINT_URL` with `aws='server'`; in-process moto serves this process only)."""
        return {"KUBECONFIG": str(self.kubeconfig), **self.aws.env()}

    @contextmanager
    def environment(self) -> Iterator[None]:
        """`env()` in os.environ for the duration (kubectl, `load_kube_config()` and boto3's
        default chain then find the fakes), the previous values restored after.

        The official client reads `KUBECONFIG` once, when `kubernetes.config` is imported, into
        `KUBE_CONFIG_DEFAULT_LOCATION`: that default is pointed at the fake meanwhile too.
        """
        import kubernetes.config
        import kubernetes.config.kube_config

        modules: tuple[Any, ...] = (kubernetes.config, kubernetes.config.kube_config)
        defaults = [module.KUBE_CONFIG_DEFAULT_LOCATION for module in modules]
        for module in modules:
            module.KUBE_CONFIG_DEFAULT_LOCATION = str(self.kubeconfig)
        try:
            with environ_set({"KUBECONFIG": str(self.kubeconfig)}), self.aws.environment():
                yield
        finally:
            for module, default in zip(modules, defaults, strict=True):
                module.KUBE_CONFIG_DEFAULT_LOCATION = default

    # --- the world ------------------------------------------------------------------------

    def add_node_group(self, name: str, *, min_size: int = 0, max_size: int = 10,
                       desired: int = 0, instance_type: str = "m5.large",
                       labels: Mapping[str, str] | None = None,
                       boot_delay_seconds: float = 60.0, zone: str = "us-east-1a",
                       daemonsets: Sequence[Mapping[str, str]] = ()) -> AsgSpec:
        """An ASG `name` with launch template `lt-<name>` in moto; its `desired` instances are
        Nodes at once (labelled `labels`), later instances join `boot_delay_seconds` after they
        appear. `daemonsets` are `{"name", "cpu", "memory"}`: a pod of each on every node."""
        spec = AsgSpec(name=name, min=min_size, max=max_size, desired=desired,
                       instance_type=instance_type, node_labels=dict(labels or {}),
                       boot_delay=boot_delay_seconds, availability_zone=zone,
                       daemonsets=[DaemonSetSpec(**dict(d)) for d in daemonsets])
        return self.add_asg(spec)

    def add_asg(self, spec: AsgSpec, node_groups: Sequence[NodeGroupConfig] = ()) -> AsgSpec:
        """An ASG as a scenario file describes it (`fakes.scenario.AsgSpec`); `node_groups` are
        kube-elevator node groups whose one-shot launch templates it should carry."""
        world = self.world
        self._check_node_group(spec)
        world.groups = [*world.groups, *node_groups]
        world.add_asg(spec, self.clock.now())
        return spec

    def _check_node_group(self, spec: AsgSpec) -> None:
        """Refuse, naming the group and the rule, what moto would refuse in its own words
        (`No default subnet for availability zone`, `Launch template name already in use`)."""
        ec2 = self.aws.client("ec2")
        zones = sorted(zone["ZoneName"] for zone in
                       ec2.describe_availability_zones()["AvailabilityZones"])
        if spec.availability_zone not in zones:
            raise ValueError(f"node group {spec.name!r}: availability zone "
                             f"{spec.availability_zone!r} is not in the cluster's region "
                             f"{self.region}; zones allowed: {', '.join(zones)}")
        groups = self.aws.client("autoscaling").describe_auto_scaling_groups()
        asgs = sorted(g["AutoScalingGroupName"] for g in groups["AutoScalingGroups"])
        templates = {t["LaunchTemplateName"] for t in
                     ec2.describe_launch_templates()["LaunchTemplates"]}
        if spec.name in asgs or f"lt-{spec.name}" in templates:
            raise ValueError(f"node group {spec.name!r}: the name is taken (each group is an "
                             f"Auto Scaling group of that name with launch template "
                             f"'lt-{spec.name}'); names taken: {', '.join(asgs) or 'none'}")

    def advance(self, seconds: float = 0.0) -> float:
        """Move the clock `seconds` forward and step the world: instances that appeared since
        the last step start booting now, the ones past their boot delay become Nodes, Nodes of
        terminated instances go, pending pods are bound. Returns the new time."""
        world = self.world
        world.reconcile_instances(self.clock.now())  # the boot delay counts from here
        now = self.clock.advance(seconds)
        world.advance(now)
        return now

    def step(self) -> float:
        """Step the world without moving the clock (`advance(0)`)."""
        return self.advance(0.0)

    def nodes(self) -> list[dict[str, Any]]:
        """The Node objects as stored (copies)."""
        return self.kube.list("nodes")

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """The Pod objects as stored (copies), of one namespace or all."""
        return self.kube.list("pods", namespace=namespace)

    # --- faults ---------------------------------------------------------------------------

    @property
    def kube_faults(self) -> FaultInjector:
        """The fake API's fault rules (`add("status", status=503, path_prefix="/api/v1/nodes")`,
        drop, apply_then_drop, delay, hang, freeze; see `fakes.faults`)."""
        return self.kube.faults

    def fail_next(self, verb: str, resource: str, count: int = 1, status: int = 500, *,
                  name: str | None = None, hold: bool = False) -> None:
        """The next `count` HTTP requests `verb` (`get`, `list`, `update`, ...) on `resource`
        (`nodes`, `pods/eviction`) answer `status` (409 for a conflict, 429, 500, ...); with
        `hold`, every one does until `clear_faults()`. A client that retries (the official
        one retries a 429 and a 503 three times) needs `count` above its retries, or `hold`,
        for the fault to reach the code under test (docs/harness.md, Faults and retries)."""
        self.kube.fail_next(verb, resource, count, status, name=name, hold=hold)

    def clear_faults(self) -> None:
        """End every fault `fail_next` and `delay_next` set, held ones too."""
        self.kube.clear_faults()

    def fail_next_aws_calls(self, target: Any, operation: str, count: int = 1,
                            code: str = "Throttling", http_status: int = 400) -> Any:
        """The next `count` calls of an AWS `operation` made through `target` (a boto3 client,
        or a session for the clients it makes after) fail with `code`."""
        return fail_next_calls(target, operation, count, code, http_status)

    @contextmanager
    def freezing_proxy(self) -> Iterator[tuple[FreezingProxy, Path]]:
        """A TCP proxy in front of the fake API and a kubeconfig through it: `proxy.freeze()`
        silences every connection open at that moment (a watch that hears nothing more)."""
        with FreezingProxy(self.url) as proxy:
            path = self.kube.write_kubeconfig(self.kubeconfig.with_name("kubeconfig-proxied"),
                                              server=proxy.url)
            yield proxy, path


def _started(value: _T | None) -> _T:
    if value is None:
        raise RuntimeError("the fake cluster is not started: use it as a context manager, or "
                           "call start()")
    return value
