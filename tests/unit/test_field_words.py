"""Bad values in kube-scheduler's words (issue 42): Go-quoted, never Python's '...'."""

from __future__ import annotations

import pytest

from kube_elevator.tasks.core.field_words import go_quoted, invalid_value
from kube_elevator.tasks.scheduler.profiles import LEAST_ALLOCATED, Profile


def test_a_string_is_quoted_as_gos_percent_q() -> None:
    assert go_quoted("invalid key") == '"invalid key"'
    assert go_quoted('say "hi"\n') == '"say \\"hi\\"\\n"'
    assert go_quoted("ü") == '"ü"'


def test_invalid_value_is_field_invalids_message() -> None:
    assert invalid_value("[0].matchExpressions[0].key", "invalid key", "bad name") == \
        '[0].matchExpressions[0].key: Invalid value: "invalid key": bad name'


def test_an_unknown_scoring_strategy_is_field_not_supporteds_message() -> None:
    with pytest.raises(ValueError) as refused:
        Profile("bad", "Balanced")
    assert str(refused.value).startswith(
        'scoringStrategy.type: Unsupported value: "Balanced": supported values: '
        f'"{LEAST_ALLOCATED}", ')
