"""The one reader of user files (`tasks/core/documents.py`): its limits, exactly (issue 27)."""

from __future__ import annotations

import msgspec
import pytest

from kube_elevator.tasks.core.documents import (
    MAX_DEPTH,
    SELF_REFERENCE,
    TOO_DEEP,
    depth_limited,
    load_document,
    load_json_document,
)
from kube_elevator.tasks.core.errors import InputError


def nested(levels: int) -> bytes:
    """A document `levels` deep: `[[...]]` (an empty list is a level)."""
    return b"[" * levels + b"]" * levels


@pytest.mark.parametrize(("text", "where"), [
    (b"node_groups: &a [*a]\n", "line 1, column 14"),  # the file that hung `validate`
    (b"&a [*a]\n", "line 1, column 1"),
    (b"a: &a {b: *a}\n", "line 1, column 4"),
    (b"a: &a [1, {b: [2, *a]}]\n", "line 1, column 4"),  # through its children
    (b"a: &a\n  b: 1\n  <<: *a\n", "line 1, column 4"),  # a merge of itself
    (b"&a {*a : 1}\n", "line 1, column 1"),  # as its own key
])
def test_an_alias_inside_the_node_its_anchor_names_is_refused(text: bytes, where: str) -> None:
    with pytest.raises(InputError) as raised:
        load_document(text, "f.yaml")
    assert raised.value.problems == [f"f.yaml: {where}: {SELF_REFERENCE}"]


def test_an_alias_used_twice_is_no_self_reference() -> None:
    """A node shared through aliases (siblings, cousins) is walked once and read."""
    document = load_document(b"a: &a [1, {b: 2}]\nc: [*a, *a, {d: *a}]\n", "f.yaml")
    assert document["c"] == [[1, {"b": 2}], [1, {"b": 2}], {"d": [1, {"b": 2}]}]


def test_the_depth_limit_is_exact_in_json_and_yaml() -> None:
    assert load_document(nested(MAX_DEPTH), "f.yaml") is not None
    assert load_json_document(nested(MAX_DEPTH), "f.json") is not None
    for load in (load_document, load_json_document):
        with pytest.raises(InputError, match=TOO_DEEP):
            load(nested(MAX_DEPTH + 1), "f")


def test_an_alias_counts_the_depth_of_the_node_it_names() -> None:
    """60 levels under an anchor, named 50 levels down: 110 levels once expanded."""
    anchored = b"[" * 60 + b"]" * 60
    text = b"a: &a " + anchored + b"\nb: " + b"[" * 50 + b"*a" + b"]" * 50 + b"\n"
    with pytest.raises(InputError, match=TOO_DEEP):
        load_document(text, "f.yaml")


@pytest.mark.parametrize("levels", [1_025, 10_000, 100_000])
def test_past_the_parsers_own_limits_is_the_same_error(levels: int) -> None:
    """libyaml refuses past 1,000 levels and orjson past 1,024, each in its own words: the
    error is the same line as at 101 levels, naming where the parser stopped."""
    for load in (load_document, load_json_document):
        with pytest.raises(InputError) as raised:
            load(nested(levels), "f")
        assert raised.value.problems == [f"f: line 1, column 1001: {TOO_DEEP}"]


def test_msgspecs_recursion_error_is_the_depth_error() -> None:
    with pytest.raises(InputError) as raised, depth_limited("cluster.json"):
        msgspec.json.decode(nested(10_000))
    assert raised.value.problems == [f"cluster.json: {TOO_DEEP}"]
