"""The end of `make test` counts its skips by reason (tests/skip_summary.py)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.skip_summary import reason_lines
from tests.tools import kubectl_missing


def test_skips_are_counted_by_reason_the_most_frequent_first(tmp_path: object) -> None:
    kubectl = kubectl_missing(path=str(tmp_path))
    assert kubectl is not None

    def skipped(reason: str) -> SimpleNamespace:
        return SimpleNamespace(skipped=True, longrepr=("tests/x.py", 3, f"Skipped: {reason}"))

    reports = [skipped(kubectl), skipped("Chromium is missing"), skipped(kubectl),
               SimpleNamespace(skipped=False, longrepr=None),  # a passed test
               SimpleNamespace(skipped=True, longrepr="xfail text")]  # not a skip's tuple
    assert reason_lines(reports) == [f"    2 skipped: {kubectl}",
                                     "    1 skipped: Chromium is missing"]
    assert reason_lines([]) == []
