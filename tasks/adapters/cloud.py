"""The AWS Auto Scaling Group adapter: Escalator's cloud provider (spec §10) on boto3.

Pure I/O: it reads ASGs into `AutoScalingGroup` records and sends the two writes the
controller needs (SetDesiredCapacity, TerminateInstanceInAutoScalingGroup), and for groups with
a launch template the EC2 Fleet calls of a one-shot scale-up (`tasks.adapters.fleet`). Every
write first re-reads the group, so a Prefect task retry of any method is safe: it re-decides
from what AWS says now, never from what the failed attempt believed.

Every failure is a `CloudError` saying whether retrying can help.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from kube_elevator.tasks.adapters.fleet import FleetCalls, RealClock, WaitClock
from kube_elevator.tasks.core.errors import CloudError
from kube_elevator.tasks.core.records import AsgInstance, AutoScalingGroup, NodeRecord, describe_to_asgs
from kube_elevator.tasks.core.retry import cloud_call_may_pass
from kube_elevator.tasks.core.timeouts import Timeouts, timeouts

if TYPE_CHECKING:
    import boto3
    import botocore.session
    from botocore.config import Config
    from botocore.loaders import Loader
    from mypy_boto3_autoscaling import AutoScalingClient
    from mypy_boto3_ec2 import EC2Client

    from kube_elevator.tasks.core.records import AsgTemplateSource

# Prefect task retries are our one retry layer: they are visible in the UI, bounded by the
# task's policy (tasks/core/retry.py), and re-run the whole method, which re-reads the ASG before
# writing. botocore retrying underneath would multiply the attempts (ours x its) and hide
# throttling from the run history, so it sends exactly one request per call:
# `total_max_attempts` counts the first request (1 = one request, no retry), whereas the
# older `max_attempts` counts retries only (1 = one retry, two requests). Every request has a
# connect and a read timeout (tasks/core/timeouts.py), so a hung endpoint fails the attempt
# instead of stalling the tick.


def client_config(limits: Timeouts | None = None) -> Config:
    """botocore's settings for our clients: one request per call, and timeouts."""
    from botocore.config import Config  # here: botocore's config imports much of botocore

    limits = limits or Timeouts()
    return Config(retries={"total_max_attempts": 1, "mode": "standard"},
                  connect_timeout=limits.connect_seconds, read_timeout=limits.read_seconds)


CLIENT_CONFIG = client_config()

# DescribeAutoScalingGroups takes at most 50 AutoScalingGroupNames by default (AWS API
# reference); MaxRecords defaults to 50 and may be at most 100.
MAX_NAMES_PER_CALL = 50
DEFAULT_PAGE_SIZE = 50

# Escalator's messages (spec §8, §10), kept verbatim.
MIN_SIZE_REACHED = "min sized reached, nodes will not be deleted"
WOULD_BREACH_MIN_SIZE = "terminating nodes will breach minimum node size"
EMPTY_PROVIDER_ID = "empty providerID, it may be set later by cloud controller"


# EC2 states of an instance that is gone or going: nothing left for us to terminate.
_GONE_STATES = frozenset({"shutting-down", "terminated"})






def _cloud_error(context: str, exc: ClientError | BotoCoreError) -> CloudError:
    return CloudError(f"{context}: {exc}", retryable=cloud_call_may_pass(exc))


def instance_id_from_provider_id(provider_id: str) -> str:
    """EC2 instance id from a node's providerID `aws:///<az>/<id>`: the 5th `/`-separated field.

    Escalator's providerIDToInstanceID, with its messages.
    """
    if not provider_id:
        raise CloudError(EMPTY_PROVIDER_ID, retryable=False)
    fields = provider_id.split("/")
    if len(fields) < 5:
        raise CloudError(
            f"malformed providerID {provider_id}: expected at least 4 slashes", retryable=False
        )
    return fields[4]


def _terminating(lifecycle_state: str) -> bool:
    """An ASG instance already on its way out (`Terminating`, `Terminating:Wait`, `Terminated`...).

    Real AWS keeps listing such instances for a while after TerminateInstanceInAutoScalingGroup,
    with DesiredCapacity already decremented: a retry must not terminate (or decrement) again.
    """
    return lifecycle_state.startswith("Terminat")


def _not_found(exc: ClientError) -> bool:
    """AWS's answer to terminating an instance the ASG no longer manages.

    `ValidationError: Instance Id not found - No managed instance found for instance ID i-...`
    """
    error = exc.response.get("Error", {})
    message = error.get("Message", "").lower()
    return error.get("Code") == "ValidationError" and "not found" in message


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


class AsgClient(FleetCalls):
    """Escalator's AWS node-group operations on one autoscaling (and ec2) client.

    Example:
        ```python
        import boto3

        cloud = ke.AsgClient(boto3.client("autoscaling"), boto3.client("ec2"))
        asgs = cloud.describe(["batch-asg"])
        ```
    """

    def __init__(
        self,
        autoscaling: AutoScalingClient,
        ec2: EC2Client,
        *,
        names_per_call: int = MAX_NAMES_PER_CALL,
        page_size: int = DEFAULT_PAGE_SIZE,
        clock: WaitClock | None = None,
    ) -> None:
        self.autoscaling = autoscaling
        # EC2: to tell an instance we already terminated from one of another group, and the
        # one-shot scale-up's fleets.
        self.ec2 = ec2
        self.names_per_call = names_per_call
        self.page_size = page_size
        self.clock: WaitClock = clock or RealClock()  # a fleet's readiness wait runs on it

    @classmethod
    def from_environment(
        cls, region: str | None = None, aws_credentials_block: str | None = None
    ) -> AsgClient:
        """Clients from boto3's default chain (honours AWS_ENDPOINT_URL, AWS_DEFAULT_REGION,
        profiles, instance roles), or from a prefect-aws `AwsCredentials` block by name."""
        endpoint_url: str | None = None
        make_client: Any
        if aws_credentials_block:
            session, endpoint_url, block_region = _session_from_block(aws_credentials_block)
            region = region or block_region or session.region_name
            make_client = session.client
        else:
            chain = session_on_shared_models()
            region = region or chain.get_config_variable("region")
            make_client = chain.create_client
        if not region:
            raise CloudError(
                "no AWS region: pass a region or set AWS_DEFAULT_REGION", retryable=False
            )
        # endpoint_url=None leaves botocore's own lookup (AWS_ENDPOINT_URL...) in charge.
        settings = client_config(timeouts())
        autoscaling = make_client(
            "autoscaling", region_name=region, endpoint_url=endpoint_url, config=settings
        )
        ec2 = make_client("ec2", region_name=region, endpoint_url=endpoint_url, config=settings)
        return cls(autoscaling, ec2)

    # --- reads ------------------------------------------------------------------------------

    def describe(self, names: Sequence[str]) -> dict[str, AutoScalingGroup]:
        """The named ASGs, in the order asked; names AWS does not return are simply absent.

        Escalator registers node groups from one DescribeAutoScalingGroups for all names; AWS
        caps the names per request, so we send one paged request per `names_per_call` names.
        """
        wanted = _unique(names)
        found: dict[str, AutoScalingGroup] = {}
        paginator = self.autoscaling.get_paginator("describe_auto_scaling_groups")
        try:
            for start in range(0, len(wanted), self.names_per_call):
                chunk = wanted[start : start + self.names_per_call]
                pages = paginator.paginate(
                    AutoScalingGroupNames=chunk, PaginationConfig={"PageSize": self.page_size}
                )
                for page in pages:
                    for group in describe_to_asgs({"AutoScalingGroups": page["AutoScalingGroups"]}):
                        found[group.name] = group
        except (ClientError, BotoCoreError) as exc:
            raise _cloud_error("failed to describe auto scaling groups", exc) from exc
        return {name: found[name] for name in wanted if name in found}

    def launch_times(self, provider_ids: Sequence[str]) -> dict[str, float]:
        """EC2's LaunchTime of these nodes' instances (Escalator's `InstantiationTime`, for the
        node registration lag); a filter (not InstanceIds) so an unknown id is not an error."""
        by_instance = {instance_id: provider_id for provider_id in provider_ids
                       if (instance_id := _instance_id_or_none(provider_id)) is not None}
        ids = list(by_instance)
        if not ids:
            return {}
        launched: dict[str, float] = {}
        paginator = self.ec2.get_paginator("describe_instances")
        try:
            for page in paginator.paginate(Filters=[{"Name": "instance-id", "Values": ids}]):
                for reservation in page.get("Reservations", []):
                    for instance in reservation.get("Instances", []):
                        provider_id = by_instance.get(instance.get("InstanceId", ""))
                        launch_time = instance.get("LaunchTime")
                        if provider_id is not None and launch_time is not None:
                            launched[provider_id] = launch_time.timestamp()
        except (ClientError, BotoCoreError) as exc:
            raise _cloud_error("failed to describe instances", exc) from exc
        return launched

    def group(self, name: str) -> AutoScalingGroup:
        """A fresh description of one ASG; CloudError (not retryable) if AWS does not know it."""
        group = self.describe([name]).get(name)
        if group is None:
            raise CloudError(f"auto scaling group {name} not found", retryable=False)
        return group

    def template_sources(self, names: Sequence[str]) -> dict[str, AsgTemplateSource]:
        """What CA reads of each ASG to imagine a node of a group with none (scale from zero):
        its tags, zones and instance type (the launch template's, or the first override of a
        MixedInstancesPolicy, as CA does). Groups whose instance type cannot be read are absent.
        """
        from kube_elevator.tasks.core.records import AsgTemplateSource

        sources: dict[str, AsgTemplateSource] = {}
        try:
            answer = self.autoscaling.describe_auto_scaling_groups(
                AutoScalingGroupNames=_unique(names))
            for group in answer["AutoScalingGroups"]:
                raw: dict[str, Any] = dict(group)
                overrides = ((raw.get("MixedInstancesPolicy") or {}).get("LaunchTemplate")
                             or {}).get("Overrides") or []
                instance_type = next((str(o["InstanceType"]) for o in overrides
                                      if o.get("InstanceType")), "")
                template = raw.get("LaunchTemplate") or ((raw.get("MixedInstancesPolicy") or {})
                                                         .get("LaunchTemplate") or {}
                                                         ).get("LaunchTemplateSpecification")
                if not instance_type and template:
                    instance_type = self._launch_template_instance_type(template)
                if not instance_type:
                    continue
                sources[raw["AutoScalingGroupName"]] = AsgTemplateSource(
                    raw["AutoScalingGroupName"], instance_type,
                    {str(tag["Key"]): str(tag.get("Value", "")) for tag in raw.get("Tags", [])},
                    tuple(raw.get("AvailabilityZones", [])))
        except (ClientError, BotoCoreError) as exc:
            raise _cloud_error("failed to describe auto scaling groups", exc) from exc
        return sources

    def _launch_template_instance_type(self, spec: Mapping[str, Any]) -> str:
        query: dict[str, Any] = {"Versions": [str(spec.get("Version") or "$Default")]}
        if spec.get("LaunchTemplateId"):
            query["LaunchTemplateId"] = spec["LaunchTemplateId"]
        else:
            query["LaunchTemplateName"] = spec.get("LaunchTemplateName", "")
        versions = self.ec2.describe_launch_template_versions(**query)["LaunchTemplateVersions"]
        data: Mapping[str, Any] = versions[0].get("LaunchTemplateData", {}) if versions else {}
        return str(data.get("InstanceType", ""))

    # --- writes -----------------------------------------------------------------------------

    def set_desired_capacity(self, group: AutoScalingGroup, target: int) -> int:
        """Set DesiredCapacity to `target` clamped into the ASG's [MinSize, MaxSize]; return it.

        Clamps against a fresh description (the record may be a tick old, and moto, unlike AWS,
        accepts any value). An increase never lowers the group: it sends nothing if the group
        already has that capacity or more, so a retry after a lost answer is a no-op, and so is
        a late retry that a later tick's increase overtook. Escalator's IncreaseSize:
        SetDesiredCapacity with HonorCooldown=false (our own cool-down/lock decides when).
        """
        fresh = self.group(group.name)
        clamped = min(max(target, fresh.min_size), fresh.max_size)
        if fresh.desired_capacity >= clamped:
            return fresh.desired_capacity
        try:
            self.autoscaling.set_desired_capacity(
                AutoScalingGroupName=fresh.name, DesiredCapacity=clamped, HonorCooldown=False
            )
        except (ClientError, BotoCoreError) as exc:
            raise _cloud_error(
                f"failed to set desired capacity of {fresh.name} to {clamped}", exc
            ) from exc
        return clamped

    def terminate_instances(self, group_name: str, nodes: Sequence[NodeRecord]) -> list[str]:
        """Escalator's DeleteNodes: terminate the nodes' instances, decrementing DesiredCapacity.

        Returns the instance ids of the batch that are terminated (now or by an earlier attempt).
        Retry-safe: an instance of the batch that is already terminating or terminated (the ASG
        lists it as Terminating*, or no longer lists it and EC2 says shutting-down/terminated)
        counts as done and is neither terminated nor counted against MinSize again, so a retry
        after a partial batch finishes the rest without decrementing twice.
        """
        if not nodes:
            return []
        batch = unique_batch(nodes)
        group = self.group(group_name)
        members = {instance.provider_id: instance for instance in group.instances}
        gone = self._gone(node.provider_id for node in batch if node.provider_id not in members)
        terminated: list[str] = []
        for step in termination_plan(group, batch, members, gone):
            step.check()
            if step.member is not None:
                try:
                    self.autoscaling.terminate_instance_in_auto_scaling_group(
                        InstanceId=step.member.instance_id, ShouldDecrementDesiredCapacity=True
                    )
                except ClientError as exc:
                    # Gone between our describe and this call: the goal is met, nothing
                    # decremented.
                    if not _not_found(exc):
                        raise _cloud_error("failed to terminate instance. err", exc) from exc
                except BotoCoreError as exc:
                    raise _cloud_error("failed to terminate instance. err", exc) from exc
            terminated.append(step.instance_id)
        return terminated

    def _gone(self, provider_ids: Iterable[str]) -> frozenset[str]:
        """Ids among these nodes' instances that EC2 reports shutting-down or terminated.

        Only asked about nodes the ASG does not list, i.e. on a retry after a partial batch or
        for a node of another group; a filter (not InstanceIds) so unknown ids are not an error.
        """
        ids = _unique(
            instance_id
            for provider_id in provider_ids
            if (instance_id := _instance_id_or_none(provider_id)) is not None
        )
        if not ids:
            return frozenset()
        gone: set[str] = set()
        paginator = self.ec2.get_paginator("describe_instances")
        try:
            for page in paginator.paginate(Filters=[{"Name": "instance-id", "Values": ids}]):
                for reservation in page.get("Reservations", []):
                    for instance in reservation.get("Instances", []):
                        state = instance.get("State", {}).get("Name", "")
                        if state in _GONE_STATES:
                            gone.add(instance.get("InstanceId", ""))
        except (ClientError, BotoCoreError) as exc:
            raise _cloud_error("failed to describe instances", exc) from exc
        return frozenset(gone)


def _instance_id_or_none(provider_id: str) -> str | None:
    try:
        return instance_id_from_provider_id(provider_id)
    except CloudError:
        return None


def unique_batch(nodes: Sequence[NodeRecord]) -> list[NodeRecord]:
    """The same node twice would decrement twice; Escalator never sends that, we dedupe."""
    return list({node.provider_id or f"<{node.name}>": node for node in nodes}.values())


@dataclass(frozen=True)
class Termination:
    """One node of a batch: its instance, and the member to terminate (None: already done)."""

    instance_id: str
    member: AsgInstance | None = None
    refused: str = ""  # Escalator's NodeNotInNodeGroup: the batch stops here, with this error

    def check(self) -> None:
        if self.refused:
            raise CloudError(self.refused, retryable=False)


def termination_plan(group: AutoScalingGroup, batch: Sequence[NodeRecord],
                     members: Mapping[str, AsgInstance], gone: Collection[str],
                     ) -> list[Termination]:
    """Escalator's DeleteNodes, decided, in the batch's order (the executor stops at a refused
    node: instances terminated before it stay terminated, as Escalator's do).

    An instance already terminating (the ASG still lists it) or gone (EC2 says so) counts as
    done, and is not counted against MinSize again; MinSize refuses the whole batch (spec §8).
    """
    def done_before(node: NodeRecord) -> bool:
        member = members.get(node.provider_id)
        if member is not None:
            return _terminating(member.lifecycle_state)
        return _instance_id_or_none(node.provider_id) in gone

    pending = sum(1 for node in batch if not done_before(node))
    if pending == 0:
        return [Termination(instance_id_from_provider_id(node.provider_id)) for node in batch]
    if group.desired_capacity <= group.min_size:
        raise CloudError(MIN_SIZE_REACHED, retryable=False)
    if group.desired_capacity - pending < group.min_size:
        raise CloudError(WOULD_BREACH_MIN_SIZE, retryable=False)
    plan: list[Termination] = []
    for node in batch:
        member = members.get(node.provider_id)
        if member is None:
            instance_id = instance_id_from_provider_id(node.provider_id)
            if instance_id not in gone:
                plan.append(Termination(instance_id, refused=(
                    f"node {node.name}, {node.provider_id} belongs in a different node group "
                    f"than {group.name}")))
                break
            plan.append(Termination(instance_id))
        elif _terminating(member.lifecycle_state):
            plan.append(Termination(member.instance_id))
        else:
            plan.append(Termination(member.instance_id, member))
    return plan


def session_on_shared_models() -> botocore.session.Session:
    """A new botocore session on the default chain (the environment, profile, credentials and
    endpoint read afresh: every tick makes one) that reads AWS's service models through the
    process's one loader: a new session parsed EC2's model again (several MB of JSON), 0.2-0.4 s
    of CPU in every tick's clients. For these two services boto3's session adds nothing to
    botocore's clients (its customizations are S3's and the resources')."""
    import botocore.session

    session = botocore.session.Session()
    session.register_component("data_loader",
                               service_models_loader(session.get_config_variable("data_path")))
    return session


@functools.cache
def service_models_loader(data_path: str | None = None) -> Loader:
    """The process's one loader of AWS's service models (it keeps what it parsed) for a data
    path (AWS_DATA_PATH; None, botocore's own), as botocore would make each session's. What it
    holds is read-only once loaded, so sessions share it."""
    from botocore.loaders import create_loader

    return create_loader(data_path)


def _session_from_block(name: str) -> tuple[boto3.Session, str | None, str | None]:
    """(session, endpoint_url, region) from a prefect-aws `AwsCredentials` block."""
    try:
        from prefect_aws import AwsCredentials
    except ImportError as exc:
        raise CloudError(
            f"aws_credentials_block {name!r} needs the prefect-aws package, which is not "
            "installed; install it (pip install prefect-aws) or use the default AWS "
            "credential chain (environment, profile, instance role)",
            retryable=False,
        ) from exc
    try:
        credentials: Any = AwsCredentials.load(name)
    except ValueError as exc:
        raise CloudError(
            f"cannot load AwsCredentials block {name!r}: {exc}", retryable=False
        ) from exc
    session: boto3.Session = credentials.get_boto3_session()
    parameters = getattr(credentials, "aws_client_parameters", None)
    endpoint_url = getattr(parameters, "endpoint_url", None)
    return session, endpoint_url, getattr(credentials, "region_name", None)
