"""Bad values in kube-scheduler's words (issue 42): Go-quoted, never Python's '...'."""

from __future__ import annotations

from kube_elevator.tasks.core.field_words import go_quoted, invalid_value


def test_a_string_is_quoted_as_gos_percent_q() -> None:
    assert go_quoted("invalid key") == '"invalid key"'
    assert go_quoted('say "hi"\n') == '"say \\"hi\\"\\n"'
    assert go_quoted("ü") == '"ü"'


def test_invalid_value_is_field_invalids_message() -> None:
    assert invalid_value("[0].matchExpressions[0].key", "invalid key", "bad name") == \
        '[0].matchExpressions[0].key: Invalid value: "invalid key": bad name'
