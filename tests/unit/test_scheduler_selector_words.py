"""Issue 42 item 8: the scheduler's label-selector errors in Kubernetes' words, not ours.

A pod's affinity selectors are parsed as kube-scheduler parses them (metav1.LabelSelectorAsSelector
for pod (anti-)affinity, component-helpers' nodeSelectorRequirementsAsSelector for node
affinity), and each problem is labels.NewRequirement's field error (apimachinery
pkg/labels/selector.go), its value Go-quoted and its detail pkg/util/validation's message
(IsQualifiedName, IsValidLabelValue, RegexError's two spaces before `or`); several are
utilerrors' aggregate, `[a, b]`. The cases are re-expressed from the rules of NewRequirement
and from TestNodeAffinityPriority's "invalid key" case (kubernetes
pkg/scheduler/framework/plugins/nodeaffinity/node_affinity_test.go)."""

from __future__ import annotations

from typing import Any

import pytest

from kube_elevator.tasks.core.selectors import (
    SelectorError,
    aggregated,
    parse_label_selector,
    requirement_errors,
)
from kube_elevator.tasks.scheduler.framework import filter_nodes, score_nodes
from kube_elevator.tasks.scheduler.objects import SchedulingError
from tests.builders import MakeNode, MakePod

QUALIFIED_NAME = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                  "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
                  "or '123-abc', regex used for validation is "
                  "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, "
               "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
               "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
               "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@pytest.mark.parametrize(("key", "operator", "values", "expected"), [
    ("app", "In", ["web"], []),
    ("invalid key", "In", ["web"], [f'key: Invalid value: "invalid key": {QUALIFIED_NAME}']),
    ("app", "In", [], ["values: Invalid value: []string{}: for 'in', 'notin' operators, "
                       "values set can't be empty"]),
    ("app", "NotIn", None, ["values: Invalid value: []string{}: for 'in', 'notin' operators, "
                            "values set can't be empty"]),
    ("app", "Exists", ["a", "b"], ['values: Invalid value: []string{"a", "b"}: values set must '
                                   "be empty for exists and does not exist"]),
    ("app", "In", ["-web"], [f'values[0][app]: Invalid value: "-web": {LABEL_VALUE}']),
    ("app", "In", ["ok", "x" * 64], [
        f'values[1][app]: Invalid value: "{"x" * 64}": must be no more than 63 characters']),
    ("app", "Gt", ["1"], ['"Gt" is not a valid label selector operator']),  # not a metav1 op
    ("bad/key/x", "Exists", None, [
        'key: Invalid value: "bad/key/x": a qualified name must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and "
        "'/' (e.g. 'example.com/MyName')"]),
])
def test_a_label_selector_requirement_in_new_requirements_words(
        key: str, operator: str, values: list[str] | None, expected: list[str]) -> None:
    assert requirement_errors(key, operator, values) == expected


@pytest.mark.parametrize(("operator", "values", "expected"), [
    ("Gt", ["1"], []),
    ("Lt", ["abc"], ['[0].matchExpressions[1].values[0]: Invalid value: "abc": for \'Gt\', '
                     "'Lt' operators, the value must be an integer"]),
    ("Gt", ["1", "2"], ['[0].matchExpressions[1].values: Invalid value: []string{"1", "2"}: for '
                        "'Gt', 'Lt' operators, exactly one value is required"]),
    ("Near", ["x"], ['[0].matchExpressions[1].operator: Unsupported value: "Near"']),
])
def test_a_node_selector_requirement_under_its_path(operator: str, values: list[str],
                                                    expected: list[str]) -> None:
    assert requirement_errors("size", operator, values, NODE_OPERATORS,
                              path="[0].matchExpressions[1]") == expected


def test_several_problems_are_utilerrors_aggregate() -> None:
    errors = requirement_errors("invalid key", "In", [])
    assert len(errors) == 2
    assert aggregated(errors) == f"[{errors[0]}, {errors[1]}]"
    assert aggregated([errors[0], errors[0]]) == errors[0]


def test_node_affinity_prescore_error_is_kube_schedulers_message() -> None:
    """TestNodeAffinityPriority ("invalid key"): the whole message, not only its start."""
    pod = MakePod().preferred_node_affinity([(2, [("invalid key", ["bar"])])]).obj()
    with pytest.raises(SchedulingError) as raised:
        score_nodes(pod, [MakeNode().name("node1").label("foo", "bar").obj()])
    assert str(raised.value) == (
        f'[0].matchExpressions[0].key: Invalid value: "invalid key": {QUALIFIED_NAME}')


def pod_with_anti_affinity(selector: dict[str, Any]) -> dict[str, Any]:
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector}
    return {"kind": "Pod", "metadata": {"name": "web-0", "namespace": "default",
                                        "labels": {"app": "web"}},
            "spec": {"containers": [], "affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [term]}}}}


NODE = {"kind": "Node", "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "status": {"allocatable": {"pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize(("selector", "where", "detail"), [
    ({"matchExpressions": [{"key": "invalid key", "operator": "Exists"}]},
     "labelSelector.matchExpressions[0]", f'key: Invalid value: "invalid key": {QUALIFIED_NAME}'),
    ({"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["web"]}]},
     "labelSelector.matchExpressions[0]", '"Equals" is not a valid label selector operator'),
    ({"matchLabels": {"app": "-web"}},
     "labelSelector.matchLabels", f'values[0][app]: Invalid value: "-web": {LABEL_VALUE}'),
])
def test_a_pod_affinity_selector_error_names_the_term_then_says_what_kubernetes_says(
        selector: dict[str, Any], where: str, detail: str) -> None:
    with pytest.raises(SchedulingError) as raised:
        filter_nodes(pod_with_anti_affinity(selector), [NODE])
    message = str(raised.value)
    assert message.endswith(f"{where}: {detail}"), message
    assert "'invalid key'" not in message and "'-web'" not in message  # no Python quoting


@pytest.mark.parametrize(("text", "expected"), [
    ("app=-web", f'values[0][app]: Invalid value: "-web": {LABEL_VALUE}'),
    # the set's values sorted, as NewRequirement gets them from a sets.String
    ("app in (z,-b)", f'values[0][app]: Invalid value: "-b": {LABEL_VALUE}'),
    # the parser validates a key under its own path, nil without options: `<nil>`
    ("a/b/c=1",
     '<nil>: Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters, '
     "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  "
     "or 'my.name',  or '123-abc', regex used for validation is "
     "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and "
     "'/' (e.g. 'example.com/MyName')"),
])
def test_a_selector_query_is_refused_in_labels_parse_words(text: str, expected: str) -> None:
    """The fake API server's `labelSelector=` 400: labels.Parse's `unable to parse
    requirement: ` and the same field errors."""
    with pytest.raises(SelectorError) as raised:
        parse_label_selector(text)
    assert str(raised.value) == f"unable to parse requirement: {expected}"
