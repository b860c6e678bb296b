"""Least privilege: the shipped RBAC rules and IAM policy allow exactly what the adapters send.

Runs last (the file name sorts last), over every request the adapters sent during the session:
each must be allowed, and each grant must have been used. Run alone, it has nothing to check.
"""

from __future__ import annotations

import json

import pytest

from tests import recording

NODE_RBAC = recording.ROOT / "deployments" / "kubernetes" / "rbac.yaml"
POD_RBAC = recording.ROOT / "deployments" / "kubernetes" / "pod-autoscaler-rbac.yaml"
IAM_POLICY = recording.ROOT / "deployments" / "aws" / "iam-policy.json"


def node_autoscaler_kube() -> list[recording.KubeRequest]:
    requests = [r for r in recording.KUBE_REQUESTS if r.component == "node-autoscaler"]
    if len(requests) < 20:
        pytest.skip("run with the whole suite: only the end-to-end tests send requests")
    return requests


def node_autoscaler_aws() -> list[recording.AwsRequest]:
    requests = [r for r in recording.AWS_REQUESTS if r.component == "node-autoscaler"]
    if len(requests) < 5:
        pytest.skip("run with the whole suite: only the end-to-end tests send requests")
    return requests


def test_rbac_allows_exactly_what_the_node_autoscaler_sends() -> None:
    assert recording.rbac_problems(node_autoscaler_kube(),
                                   recording.rbac_rules(NODE_RBAC)) == []


def test_removing_any_rbac_grant_breaks_the_suite() -> None:
    requests = node_autoscaler_kube()
    rules = recording.rbac_rules(NODE_RBAC)
    for index, rule in enumerate(rules):
        for verb in rule.verbs:
            narrowed = [*rules[:index], recording.Rule(
                rule.source, rule.api_groups, rule.resources,
                tuple(v for v in rule.verbs if v != verb)), *rules[index + 1:]]
            assert any(p.startswith("not allowed") for p in
                       recording.rbac_problems(requests, narrowed)), (rule.source, verb)


def test_iam_policy_allows_exactly_what_the_cloud_adapter_sends() -> None:
    policy = json.loads(IAM_POLICY.read_text())
    assert recording.iam_problems(node_autoscaler_aws(), recording.iam_actions(policy)) == []


def test_removing_any_iam_action_breaks_the_suite() -> None:
    requests = node_autoscaler_aws()
    granted = recording.iam_actions(json.loads(IAM_POLICY.read_text()))
    for action in granted:
        assert f"not allowed: {action}" in recording.iam_problems(requests, granted - {action})


def test_scaling_actions_are_limited_to_tagged_groups() -> None:
    policy = json.loads(IAM_POLICY.read_text())
    for statement in policy["Statement"]:
        writes = [a for a in statement["Action"] if not a.split(":")[1].startswith("Describe")]
        if writes:
            assert statement["Condition"]["StringEquals"] == {
                "autoscaling:ResourceTag/k8s.io/atlassian-escalator/enabled": "true"}


def test_the_checks_catch_an_unexpected_request_and_an_unused_grant() -> None:
    rules = [recording.Rule("r", ("",), ("nodes",), ("get", "list"))]
    sent = [recording.KubeRequest("node-autoscaler", "get", "", "nodes", "n1"),
            recording.KubeRequest("node-autoscaler", "delete", "", "pods", "p")]
    assert recording.rbac_problems(sent, rules) == [
        "granted but never used: r: list nodes", "not allowed: delete core/pods"]


def test_rbac_allows_exactly_what_the_pod_autoscaler_sends() -> None:
    requests = [r for r in recording.KUBE_REQUESTS if r.component == "pod-autoscaler"]
    if len(requests) < 10:
        pytest.skip("run with the whole suite: only the end-to-end tests send requests")
    assert recording.rbac_problems(requests, recording.rbac_rules(POD_RBAC)) == []
