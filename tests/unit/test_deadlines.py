"""Every wait's deadline in the tests scales from one setting (issue 40: `make test` on a busy
machine failed waits that a quiet one passes, each deadline fixed per test)."""

from __future__ import annotations

import time

import pytest

from benchmarks.deadlines import DEFAULT_SCALE, VARIABLE, scaled
from benchmarks.event_latency import wait_until


def test_a_deadline_scales_from_the_one_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    assert scaled(120) == 120 * DEFAULT_SCALE and DEFAULT_SCALE > 1  # a busy machine passes
    monkeypatch.setenv(VARIABLE, "1")
    assert scaled(120) == 120
    monkeypatch.setenv(VARIABLE, "3.5")
    assert scaled(10) == 35


@pytest.mark.parametrize("text", ["fast", "0", "-1"])
def test_a_setting_that_is_not_a_positive_factor_is_refused_naming_it(
        monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(VARIABLE, text)
    with pytest.raises(ValueError, match=VARIABLE):
        scaled(1)


def test_the_shared_wait_waits_the_scaled_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """`wait_until`, which most of the suite's waits go through, gives up after the scaled
    deadline and says so: 0.1 s asked, 0.3 s waited at a scale of 3."""
    monkeypatch.setenv(VARIABLE, "3")
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"waiting for the probe"):
        wait_until(lambda: False, 0.1, "the probe", interval=0.01)
    assert time.monotonic() - started >= 0.3
