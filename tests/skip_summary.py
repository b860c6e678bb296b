"""The end of `make test`: how many tests skipped for each reason, one line a reason, so a
machine with only Python 3.11 and make (README, "Two commands") sees what to install for the
rest (tests/tools.py words each reason) without re-running the suite with `-rs`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import pytest


def skip_reason(report: Any) -> str | None:
    """A skipped report's reason (pytest keeps it as `(path, line, "Skipped: reason")`)."""
    longrepr = getattr(report, "longrepr", None)
    if not getattr(report, "skipped", False) or not isinstance(longrepr, tuple):
        return None
    return str(longrepr[2]).removeprefix("Skipped: ")


def reason_lines(reports: Iterable[Any]) -> list[str]:
    """`    N skipped: reason`, the most frequent reason first."""
    counted = Counter(reason for report in reports
                      if (reason := skip_reason(report)) is not None)
    return [f"{count:5d} skipped: {reason}"
            for reason, count in counted.most_common()]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    lines = reason_lines(terminalreporter.stats.get("skipped", []))
    if lines:
        terminalreporter.write_sep("-", "skipped, by reason")
        for line in lines:
            terminalreporter.write_line(line)
