"""`tasks.adapters.prefect_busy.retried_while_busy`: which answers are sent again, how often,
and for how long, on a clock the test moves."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from kube_elevator.tasks.adapters.prefect_busy import (
    BUSY_RETRY_SECONDS,
    BUSY_WITHIN_SECONDS,
    retried_while_busy,
)

URL = "http://127.0.0.1:4200/api/deployments/1"


def answer(status: int) -> httpx.HTTPStatusError:
    request = httpx.Request("PATCH", URL)
    return httpx.HTTPStatusError(f"{status}", request=request,
                                 response=httpx.Response(status, request=request))


class Server:
    """Answers each call with the next of `answers` (an error raised), then "done"; the clock
    moves only as the retry sleeps."""

    def __init__(self, *answers: Exception) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.now = 0.0
        self.sleeps: list[float] = []

    def call(self) -> str:
        self.calls += 1
        if self.answers:
            raise self.answers.pop(0)
        return "done"

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def retried(self, *, idempotent: bool = False, every_seconds: float = BUSY_RETRY_SECONDS,
                within_seconds: float = BUSY_WITHIN_SECONDS) -> Callable[[], str]:
        return lambda: retried_while_busy(
            self.call, idempotent=idempotent, every_seconds=every_seconds,
            within_seconds=within_seconds, clock=lambda: self.now, sleep=self.sleep)


@pytest.mark.parametrize("status", [408, 429, 502, 503])
def test_a_busy_answer_is_sent_again_after_a_short_pause(status: int) -> None:
    server = Server(answer(status), answer(status))
    assert server.retried()() == "done"
    assert server.calls == 3
    assert server.sleeps == [BUSY_RETRY_SECONDS, BUSY_RETRY_SECONDS]


@pytest.mark.parametrize("status", [400, 404, 409, 422, 500])
def test_an_answer_that_may_have_acted_or_never_will_is_raised_at_once(status: int) -> None:
    server = Server(answer(status))
    with pytest.raises(httpx.HTTPStatusError):
        server.retried()()
    assert (server.calls, server.sleeps) == (1, [])


@pytest.mark.parametrize(("idempotent", "calls"), [(False, 1), (True, 2)])
def test_a_transport_error_is_sent_again_only_for_an_idempotent_call(idempotent: bool,
                                                                     calls: int) -> None:
    server = Server(httpx.ReadError("connection reset"))
    if idempotent:
        assert server.retried(idempotent=True)() == "done"
    else:
        with pytest.raises(httpx.ReadError):
            server.retried()()
    assert server.calls == calls


def test_a_server_busy_past_the_time_allowed_raises_its_last_answer() -> None:
    server = Server(*(answer(503) for _ in range(100)))
    with pytest.raises(httpx.HTTPStatusError, match="503"):
        server.retried(every_seconds=1.0, within_seconds=5.0)()
    assert server.calls == 6  # at 0, 1, ..., 5 s: a sixth pause would pass the 5 s
    assert server.now == 5.0
