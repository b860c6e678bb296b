"""A local AWS (moto's threaded server) for tests, plus AWS error injection via botocore events.

Why a server and not `moto.mock_aws`: the flows may run the ASG adapter in another process
(a Prefect worker, the CLI), which can only be pointed at an endpoint (`FakeAws.env()`).

Moto facts the tests rely on or work around:
* moto does NOT enforce an ASG's MinSize/MaxSize on SetDesiredCapacity (our adapter clamps);
* moto answers SetDesiredCapacity for an unknown ASG name, and TerminateInstanceInAutoScalingGroup
  for an instance in no ASG, with an HTML HTTP 500 (real AWS: a ValidationError);
* moto's state lives in this process, shared by every `FakeAws` and `mock_aws` in it: use
  unique names per test, or `reset()`.

Where moto lacks what the one-shot scale-up (EC2 Fleet) needs, `FakeAws` extends it in this
process, as AWS behaves (`extend_moto`): a CreateFleet with SpotOptions but no
AllocationStrategy takes AWS's default (`lowest-price`; moto answers 500), and a CreateFleet
repeating a ClientToken gets the first fleet's answer instead of a second fleet (moto ignores
the token). Moto also adds an instance AttachInstances already attached a second time
(`tasks.adapters.fleet` never sends one), and reports every running instance's status checks
`ok` (`fakes.aws_faults` can rewrite them).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
import urllib.request
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import boto3
import botocore.session
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.config import Config

if TYPE_CHECKING:
    from moto.server import ThreadedMotoServer
    from mypy_boto3_autoscaling import AutoScalingClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.literals import InstanceTypeType

# moto accepts any credentials; these only keep boto3's credential chain from looking further.
FAKE_ACCESS_KEY_ID = "testing"
FAKE_SECRET_ACCESS_KEY = "testing"
# An AMI id that moto ships in its default image list.
FAKE_IMAGE_ID = "ami-12c6146b"
# What moto's server mode imports (moto[server]); a fake AWS without one of them is the
# `harness` (or `sim`) extra not installed.
MOTO_MODULES = frozenset({"moto", "flask", "flask_cors", "werkzeug"})
# What moto's `mock_aws` in the user's process imports (moto installs werkzeug itself).
IN_PROCESS_MOTO_MODULES = frozenset({"moto"})


class MotoMissing(ModuleNotFoundError):
    """moto is not installed: the message names the extra that installs it."""


def moto_missing(module: str) -> MotoMissing:
    return MotoMissing(
        f"kube-elevator's fake AWS needs {module}, which kube-elevator installs with its "
        "'harness' extra: pip install 'kube-elevator[harness]'", name=module)


@contextmanager
def moto_required() -> Iterator[None]:
    """Around moto's import: the wheel without the `harness` extra is refused in one line that
    says what to install, not moto's bare `No module named 'moto'`."""
    try:
        yield
    except ModuleNotFoundError as error:
        if error.name is None or error.name.partition(".")[0] not in MOTO_MODULES:
            raise
        raise moto_missing(error.name.partition(".")[0]) from None


def require_moto(modules: Iterable[str]) -> None:
    """`moto_required`'s refusal before anything is started (a Prefect server takes 10-40 s),
    looked up without importing: the modules' import is the start's own work."""
    for module in sorted(modules):
        if importlib.util.find_spec(module) is None:
            raise moto_missing(module)


def boto3_session_on_shared_models(**options: Any) -> boto3.Session:
    """A new boto3 session (its own event hooks, credentials and region: `options`) on the
    ticks' botocore session (`tasks.adapters.cloud.session_on_shared_models`): AWS's service
    models parsed once a process, not again in every tick a test made clients for."""
    from kube_elevator.tasks.adapters.cloud import session_on_shared_models

    core = session_on_shared_models()
    session = boto3.Session(botocore_session=core, **options)
    # boto3 adds its own data folder to the loader's search path at every session: once will do.
    loader = core.get_component("data_loader")
    loader.search_paths[:] = list(dict.fromkeys(loader.search_paths))
    return session


class FakeAws:
    """moto's `ThreadedMotoServer` on 127.0.0.1 on a free port.

    Example:
        ```python
        with FakeAws() as aws:                        # moto's server: other processes reach it too
            aws.create_asg("workers", min_size=0, max_size=5, desired=2)
            print(aws.env()["AWS_ENDPOINT_URL"], len(aws.instances("workers")))
        ```
    """

    def __init__(self, region: str = "us-east-1", port: int = 0) -> None:
        self.region = region
        self.port = port
        self._server: ThreadedMotoServer | None = None
        self._endpoint_url: str | None = None
        # Loading a service model costs ~0.1 s per session: `client()` reuses one session's
        # models (each client still has its own event hooks); the helpers below reuse clients
        # that nobody outside can hook.
        self._shared_session: boto3.Session | None = None
        self._helper_clients: dict[str, Any] = {}

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeAws:
        """Start the server; port 0 (the default) lets the OS pick a free one, read back after."""
        if self._server is not None:
            return self
        with moto_required():
            from moto.server import ThreadedMotoServer  # flask and werkzeug: ~0.3 s, here only

        extend_moto()
        # werkzeug logs every request to stderr; tests make hundreds.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        self._server = server
        self._endpoint_url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
        self._server = None
        self._endpoint_url = None
        self._shared_session = None
        self._helper_clients.clear()

    def __enter__(self) -> FakeAws:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget every resource (moto's reset API); affects all moto users in this process."""
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass

    # --- connection details ---------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        if self._endpoint_url is None:
            raise RuntimeError("FakeAws is not started")
        return self._endpoint_url

    def env(self) -> dict[str, str]:
        """Environment for a separate process: boto3's default chain then talks to this fake."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_ACCESS_KEY,
        }

    @contextmanager
    def environment(self) -> Iterator[None]:
        """`env()` in this process's os.environ for the duration (boto3's default chain and a
        Prefect flow then reach the fake), the previous values restored after."""
        with environ_set(self.env()):
            yield

    def session(self) -> boto3.Session:
        """A new boto3 session with the fake's region and dummy credentials.

        New each time, so hooks registered on it reach no other session's clients; AWS's
        service models from the process's one loader (`boto3_session_on_shared_models`).
        """
        return boto3_session_on_shared_models(
            aws_access_key_id=FAKE_ACCESS_KEY_ID,
            aws_secret_access_key=FAKE_SECRET_ACCESS_KEY,
            region_name=self.region,
        )

    @overload
    def client(
        self, service: Literal["autoscaling"], config: Config | None = None
    ) -> AutoScalingClient: ...

    @overload
    def client(self, service: Literal["ec2"], config: Config | None = None) -> EC2Client: ...

    @overload
    def client(self, service: str, config: Config | None = None) -> Any: ...

    def client(self, service: str, config: Config | None = None) -> Any:
        """A new boto3 client for `service` pointed at the fake (its own event hooks)."""
        if self._shared_session is None:
            self._shared_session = self.session()
        return self._shared_session.client(  # type: ignore[call-overload]
            service, endpoint_url=self.endpoint_url, config=config
        )

    def _helper(self, service: str) -> Any:
        if service not in self._helper_clients:
            self._helper_clients[service] = self.client(service)
        return self._helper_clients[service]

    # --- fixtures -------------------------------------------------------------------------

    def create_asg(
        self,
        name: str,
        min_size: int,
        max_size: int,
        desired: int,
        instance_type: str = "m5.large",
        availability_zones: tuple[str, ...] = ("us-east-1a",),
        tags: dict[str, str] | None = None,
        launch_template_id: str = "",
    ) -> None:
        """Create launch template `lt-<name>`, then the ASG using it.

        moto starts `desired` instances at once, spread over `availability_zones`. With
        `launch_template_id` (a one-shot group's `aws.launch_template_id`), the template gets
        that id and the ASG launches into the zones' default subnets (its VPCZoneIdentifier),
        as a fleet's overrides need.
        """
        ec2: EC2Client = self._helper("ec2")
        template_name = f"lt-{name}"
        created = ec2.create_launch_template(
            LaunchTemplateName=template_name,
            LaunchTemplateData={
                "ImageId": FAKE_IMAGE_ID,
                "InstanceType": cast("InstanceTypeType", instance_type),
            },
        )
        where: dict[str, Any] = {"AvailabilityZones": list(availability_zones)}
        if launch_template_id:
            self._rename_launch_template(created["LaunchTemplate"]["LaunchTemplateId"],
                                         launch_template_id)
            where = {"VPCZoneIdentifier": ",".join(self.default_subnets(availability_zones))}
        autoscaling: AutoScalingClient = self._helper("autoscaling")
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=name,
            MinSize=min_size,
            MaxSize=max_size,
            DesiredCapacity=desired,
            LaunchTemplate={"LaunchTemplateName": template_name, "Version": "$Latest"},
            **where,
            Tags=[
                {
                    "ResourceId": name,
                    "ResourceType": "auto-scaling-group",
                    "Key": key,
                    "Value": value,
                    "PropagateAtLaunch": True,
                }
                for key, value in (tags or {}).items()
            ],
        )

    def default_subnets(self, zones: tuple[str, ...]) -> list[str]:
        """The default VPC's subnet in each zone, in the zones' order."""
        ec2: EC2Client = self._helper("ec2")
        subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])
        by_zone = {subnet["AvailabilityZone"]: subnet["SubnetId"]
                   for subnet in subnets["Subnets"]}
        return [by_zone[zone] for zone in zones]

    def _rename_launch_template(self, current_id: str, wanted_id: str) -> None:
        """Give a launch template the id a node-group file names (moto draws a random one)."""
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.ec2.models import ec2_backends

        backend = ec2_backends[DEFAULT_ACCOUNT_ID][self.region]
        template = backend.launch_templates.pop(current_id)
        template.id = wanted_id
        backend.launch_templates[wanted_id] = template
        backend.launch_template_name_to_ids[template.name] = wanted_id
        order = backend.launch_template_insert_order
        order[order.index(current_id)] = wanted_id

    def instances(self, asg_name: str) -> list[dict[str, Any]]:
        """The ASG's `Instances` as DescribeAutoScalingGroups returns them ([] if no such ASG)."""
        autoscaling: AutoScalingClient = self._helper("autoscaling")
        answer = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])
        return [
            dict(instance)
            for group in answer["AutoScalingGroups"]
            for instance in group.get("Instances", [])
        ]

    def instance_state(self, instance_id: str) -> str:
        """EC2's state name for an instance (`running`, `terminated`, ...)."""
        ec2: EC2Client = self._helper("ec2")
        answer = ec2.describe_instances(InstanceIds=[instance_id])
        return answer["Reservations"][0]["Instances"][0]["State"]["Name"]


@contextmanager
def environ_set(values: Mapping[str, str | None]) -> Iterator[None]:
    """os.environ with `values` (None: unset) for the duration, the previous values restored."""
    saved = {key: os.environ.get(key) for key in values}
    try:
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# --- moto, extended where the fleet path needs AWS's behaviour -----------------------------------

_EXTENDED = False


def extend_moto() -> None:
    """Patch this process's moto as the module docstring says (once; moto's reset keeps it)."""
    global _EXTENDED
    if _EXTENDED:
        return
    from moto.core.responses import ActionResult
    from moto.ec2.models.fleets import FleetsBackend
    from moto.ec2.responses.fleets import Fleets

    create_fleet_model = FleetsBackend.create_fleet
    create_fleet_answer = Fleets.create_fleet

    def create_fleet_with_defaults(backend: Any, on_demand_options: Any, spot_options: Any,
                                   *args: Any, **kwargs: Any) -> Any:
        # AWS EC2 Fleet: SpotOptions.AllocationStrategy defaults to lowest-price.
        if spot_options is not None:
            spot_options = {"AllocationStrategy": "lowest-price", **spot_options}
        return create_fleet_model(backend, on_demand_options, spot_options, *args, **kwargs)

    def create_fleet_once_per_token(responses: Any) -> Any:
        # AWS: "If you repeat a request with the same client token, the response is the same
        # as for the first" (Ensuring idempotency); a token lives per account and region.
        token = responses._get_param("ClientToken")
        backend = responses.ec2_backend
        seen: dict[str, str] = backend.__dict__.setdefault("_elevator_fleet_tokens", {})
        if token and token in seen:
            fleet = backend.get_fleet(seen[token])
            return ActionResult({"FleetId": fleet.id, "Instances": fleet.instances or []})
        before = set(backend.fleets)
        answer = create_fleet_answer(responses)
        if token:
            for fleet_id in set(backend.fleets) - before:
                seen[token] = fleet_id
        return answer

    FleetsBackend.create_fleet = create_fleet_with_defaults  # type: ignore[method-assign,assignment]
    Fleets.create_fleet = create_fleet_once_per_token  # type: ignore[method-assign,assignment]
    _EXTENDED = True


# --- error injection -------------------------------------------------------------------------


class _EmptyBody:
    """The raw body of an injected response; read only by handlers that look at the bytes."""

    def stream(self, **kwargs: Any) -> list[bytes]:
        return [b""]


class InjectedFailures:
    """Handle on an injected failure: how many are left, and a way to take it back.

    Example:
        ```python
        failures = fail_next_calls(autoscaling, "SetDesiredCapacity", count=2)
        ...                                           # the code under test retries
        assert failures.injected == 2 and failures.remaining == 0
        ```
    """

    def __init__(
        self,
        emitter: Any,
        event_name: str,
        count: int,
        after: int,
        code: str,
        http_status: int,
        message: str,
    ) -> None:
        self.remaining = count
        self.passed = 0
        self.injected = 0
        self._to_pass = after
        self._code = code
        self._http_status = http_status
        self._message = message
        self._lock = threading.Lock()
        self._emitter = emitter
        self._event_name = event_name
        self._unique_id = f"kube-elevator-fail-{uuid.uuid4()}"
        emitter.register(event_name, self._before_call, unique_id=self._unique_id)

    def remove(self) -> None:
        """Stop injecting, even if some failures are left."""
        self._emitter.unregister(self._event_name, unique_id=self._unique_id)
        self.remaining = 0

    def _before_call(self, **kwargs: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        # `before-call` handlers may return (http_response, parsed_response); botocore's
        # `_make_api_call` then skips the request and raises from the parsed error as for a real
        # answer (protocol-independent, and never retried by botocore, so "next N calls" means
        # N API calls, not N HTTP attempts).
        with self._lock:
            if self._to_pass > 0:
                self._to_pass -= 1
                self.passed += 1
                return None
            if self.remaining <= 0:
                return None
            self.remaining -= 1
            self.injected += 1
        request_id = str(uuid.uuid4())
        headers = HTTPHeaders()
        headers["x-amzn-requestid"] = request_id
        http = AWSResponse("http://fake-aws.invalid/", self._http_status, headers, _EmptyBody())
        parsed = {
            "Error": {
                "Code": self._code,
                "Message": self._message,
                "Type": "Receiver" if self._http_status >= 500 else "Sender",
            },
            "ResponseMetadata": {
                "RequestId": request_id,
                "HTTPStatusCode": self._http_status,
                "HTTPHeaders": {"x-amzn-requestid": request_id},
                "RetryAttempts": 0,
            },
        }
        return http, parsed


def fail_next_calls(
    target: Any,
    operation_name: str,
    count: int = 1,
    code: str = "Throttling",
    http_status: int = 400,
    *,
    message: str | None = None,
    after: int = 0,
    service: str | None = None,
) -> InjectedFailures:
    """Make the next `count` calls of `operation_name` (e.g. "SetDesiredCapacity") fail.

    `target` is a boto3 client (only that client is affected), or a boto3 / botocore session
    (clients it creates afterwards are affected: a client copies its session's handlers when it
    is created). `after` lets that many calls through first, to fail in the middle of a batch.
    `service` is botocore's hyphenated service id (`auto-scaling`, `ec2`); by default the
    client's own, or every service for a session.

    Example:
        ```python
        autoscaling = boto3.client("autoscaling")
        fail_next_calls(autoscaling, "SetDesiredCapacity", count=2)   # Throttling, then it works
        ```
    """
    if count < 0 or after < 0:
        raise ValueError("count and after must not be negative")
    if isinstance(target, boto3.Session):
        emitter: Any = target.events
        service_id = service or "*"
    elif isinstance(target, botocore.session.Session):
        emitter = target.get_component("event_emitter")
        service_id = service or "*"
    else:
        emitter = target.meta.events
        service_id = service or target.meta.service_model.service_id.hyphenize()
    return InjectedFailures(
        emitter=emitter,
        event_name=f"before-call.{service_id}.{operation_name}",
        count=count,
        after=after,
        code=code,
        http_status=http_status,
        message=message or f"injected {code} by fakes.aws.fail_next_calls",
    )
