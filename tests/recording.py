"""Every request our adapters send, recorded during the whole test session, and the checks of
those requests against the shipped RBAC rules and IAM policy (least privilege, both ways)."""

from __future__ import annotations

import sys
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parent.parent
POD_AUTOSCALER_MODULES = ("flows/pod_autoscale.py", "flows/pod_cycle.py", "flows/cli/pods.py")
POD_AUTOSCALER_FOLDERS = ("/tasks/pod_autoscalers/",)


@dataclass(frozen=True)
class KubeRequest:
    component: str  # "node-autoscaler" or "pod-autoscaler"
    verb: str
    api_group: str
    resource: str  # with its subresource: "pods/eviction"
    name: str
    namespace: str = ""  # "" for cluster-scoped objects and lists across all namespaces


@dataclass(frozen=True)
class AwsRequest:
    component: str
    action: str  # "autoscaling:SetDesiredCapacity"


KUBE_REQUESTS: list[KubeRequest] = []
AWS_REQUESTS: list[AwsRequest] = []


def _caller(*adapter_files: str) -> str | None:
    """The component on whose behalf an adapter call is made, or None if not from the adapter."""
    frame = sys._getframe(2)
    seen_adapter = False
    component = "node-autoscaler"
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.endswith(adapter_files):
            seen_adapter = True
        if filename.endswith(POD_AUTOSCALER_MODULES) or any(
                folder in filename for folder in POD_AUTOSCALER_FOLDERS):
            component = "pod-autoscaler"
        frame = frame.f_back  # type: ignore[assignment]
    return component if seen_adapter else None


def parse_kube_request(method: str, url: str) -> tuple[str, str, str, str]:
    """(verb, api group, resource[/subresource], name) of a Kubernetes REST call."""
    verb, group, resource, name, _ = parse_kube_request_in(method, url)
    return verb, group, resource, name


def parse_kube_request_in(method: str, url: str) -> tuple[str, str, str, str, str]:
    """(verb, api group, resource[/subresource], name, namespace) of a Kubernetes REST call;
    the namespace is "" for cluster-scoped objects and for lists across all namespaces."""
    parsed = urllib.parse.urlsplit(url)
    parts = [p for p in parsed.path.split("/") if p]
    query = urllib.parse.parse_qs(parsed.query)
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method.upper(), "get" if name else "list")
    if verb == "list" and query.get("watch", ["false"])[0] in ("true", "1"):
        verb = "watch"
    return verb, group, resource, name, namespace


def install() -> Callable[[], None]:
    """Wrap the two clients' call points; returns the function that unwraps them."""
    from botocore.client import BaseClient
    from kubernetes.client import ApiClient

    from kube_elevator.tasks.adapters import kube_pages

    original_call_api = ApiClient.call_api
    original_make_api_call = BaseClient._make_api_call
    original_send_page = kube_pages._ConnectionFetch.send

    def call_api(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        # The adapter, and `elevator watch`'s pod watch (a stream the adapter does not wrap).
        component = _caller("tasks/adapters/kube.py", "tasks/adapters/kube_watch.py", "flows/cli/watch.py",
                            "tasks/adapters/kube_leader.py")
        if component is not None:
            verb, group, resource, name, namespace = parse_kube_request_in(method, url)
            KUBE_REQUESTS.append(KubeRequest(component, verb, group, resource, name,
                                             namespace))
        return original_call_api(self, method, url, *args, **kwargs)

    def send_page(self: Any, token: str | None) -> None:
        # A list's pages asked on the client's connection (tasks/adapters/kube_pages.py).
        component = _caller("tasks/adapters/kube.py", "tasks/adapters/kube_watch.py",
                            "tasks/adapters/kube_pages.py")
        if component is not None:
            verb, group, resource, name, namespace = parse_kube_request_in("GET", self.path)
            KUBE_REQUESTS.append(KubeRequest(component, verb, group, resource, name,
                                             namespace))
        original_send_page(self, token)

    def make_api_call(self: Any, operation_name: str, api_params: Any) -> Any:
        component = _caller("tasks/adapters/cloud.py", "tasks/adapters/fleet.py")
        if component is not None:
            prefix = self.meta.service_model.signing_name
            AWS_REQUESTS.append(AwsRequest(component, f"{prefix}:{operation_name}"))
        return original_make_api_call(self, operation_name, api_params)

    ApiClient.call_api = call_api  # type: ignore[method-assign]
    BaseClient._make_api_call = make_api_call  # type: ignore[method-assign]
    kube_pages._ConnectionFetch.send = send_page  # type: ignore[method-assign]

    def uninstall() -> None:
        ApiClient.call_api = original_call_api  # type: ignore[method-assign]
        kube_pages._ConnectionFetch.send = original_send_page  # type: ignore[method-assign]
        BaseClient._make_api_call = original_make_api_call  # type: ignore[method-assign]

    return uninstall


DUMP_ENV = "ELEVATOR_RECORDED_REQUESTS"


def dump_if_asked() -> None:
    """At the end of a session run by the least-privilege tests: write what was recorded."""
    import json
    import os

    target = os.environ.get(DUMP_ENV)
    if target:
        Path(target).write_text(json.dumps({
            "kube": [vars(request) for request in KUBE_REQUESTS],
            "aws": [vars(request) for request in AWS_REQUESTS]}))


def load_dump(path: Path) -> tuple[list[KubeRequest], list[AwsRequest]]:
    import json

    document = json.loads(path.read_text())
    return ([KubeRequest(**item) for item in document["kube"]],
            [AwsRequest(**item) for item in document["aws"]])


@contextmanager
def needs_its_own_grant(resource: str, name: str) -> Iterator[None]:
    """Requests for one object a configuration names and the shipped RBAC deliberately leaves
    out (its comments say to grant it): they are not held against the shipped rules."""
    start = len(KUBE_REQUESTS)
    yield
    KUBE_REQUESTS[start:] = [request for request in KUBE_REQUESTS[start:]
                             if (request.resource, request.name) != (resource, name)]


# --- the checks -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    source: str
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()
    # Where the rule grants: None everywhere (a ClusterRole bound by a ClusterRoleBinding),
    # else only to requests in that namespace (a Role, or a ClusterRole bound by a RoleBinding).
    namespace: str | None = None

    def allows(self, request: KubeRequest) -> bool:
        return (request.api_group in self.api_groups and request.resource in self.resources
                and request.verb in self.verbs
                and (not self.resource_names or request.name in self.resource_names)
                and (self.namespace is None or request.namespace == self.namespace))


def rbac_rules(path: Path) -> list[Rule]:
    """The rules of a file's Roles and ClusterRoles, each where Kubernetes applies it: a Role in
    its namespace only; a ClusterRole everywhere when a ClusterRoleBinding binds it, else in
    the namespace of each RoleBinding that binds it. A role no binding of the file binds is
    taken as bound (everywhere, or a Role in its namespace)."""
    documents = [document for document in yaml.safe_load_all(path.read_text()) if document]
    bindings: dict[tuple[str, str], list[str | None]] = {}
    for document in documents:
        if document["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            ref = document["roleRef"]
            where = (None if document["kind"] == "ClusterRoleBinding"
                     else document["metadata"].get("namespace", "default"))
            bindings.setdefault((ref["kind"], ref["name"]), []).append(where)
    rules = []
    for document in documents:
        kind, name = document["kind"], document["metadata"]["name"]
        if kind not in ("ClusterRole", "Role"):
            continue
        if kind == "Role":
            namespaces: list[str | None] = [document["metadata"].get("namespace", "default")]
        else:
            bound = bindings.get((kind, name), [None])
            namespaces = [None] if None in bound else sorted(set(bound), key=str)
        for namespace in namespaces:
            where = "" if kind == "Role" or namespace is None else f" (in {namespace})"
            for index, rule in enumerate(document["rules"]):
                rules.append(Rule(f"{kind} {name} rules[{index}]{where}",
                                  tuple(rule["apiGroups"]), tuple(rule["resources"]),
                                  tuple(rule["verbs"]), tuple(rule.get("resourceNames", ())),
                                  namespace))
    return rules


def rbac_problems(requests: Iterable[KubeRequest], rules: Sequence[Rule]) -> list[str]:
    """Requests no rule allows, and grants (rule, resource, verb) no request used."""
    problems = []
    used: set[tuple[str, str, str]] = set()
    for request in set(requests):
        allowing = [rule for rule in rules if rule.allows(request)]
        if not allowing:
            problems.append(f"not allowed: {request.verb} {request.api_group or 'core'}/"
                            f"{request.resource}"
                            + (f" in namespace {request.namespace}" if request.namespace
                               else ""))
        for rule in allowing:
            used.add((rule.source, request.resource, request.verb))
    for rule in rules:
        for resource in rule.resources:
            for verb in rule.verbs:
                if (rule.source, resource, verb) not in used:
                    problems.append(f"granted but never used: {rule.source}: {verb} {resource}")
    return sorted(problems)


def iam_actions(policy: Mapping[str, Any]) -> set[str]:
    actions: set[str] = set()
    for statement in policy["Statement"]:
        listed = statement["Action"]
        actions.update([listed] if isinstance(listed, str) else listed)
    return actions


# What AWS authorizes besides the action itself, for calls as the adapters send them. An
# instant EC2 Fleet launches its instances with the caller's ec2:RunInstances, tags them on
# create with ec2:CreateTags (our instance tags: always), and hands the launch template's
# instance profile to EC2 with iam:PassRole (a node's template has one) - the EC2 Fleet
# prerequisites in the EC2 user guide. moto checks none of these, so the tests infer them.
IMPLIED_ACTIONS: dict[str, frozenset[str]] = {
    "ec2:CreateFleet": frozenset({"ec2:RunInstances", "ec2:CreateTags", "iam:PassRole"}),
}


def iam_problems(requests: Iterable[AwsRequest], granted: set[str]) -> list[str]:
    sent = {request.action for request in requests}
    sent |= {implied for action in list(sent) for implied in IMPLIED_ACTIONS.get(action, ())}
    return sorted([f"not allowed: {action}" for action in sent - granted]
                  + [f"granted but never used: {action}" for action in granted - sent])
