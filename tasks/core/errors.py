"""The one error type for bad input: it names the file, the key path and the rule."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def one_line(text: str) -> str:
    """A message on one line: a parser's multi-line report joined with spaces."""
    return _LINE_BREAKS.sub(" ", text).strip()


class InputError(Exception):
    """Bad input at the edge (config, snapshot, API object).

    Each problem is one line ``<file>: <key path>: <rule>``; the CLI prints them and exits 2.
    `warnings` are what the same input would be warned about if it had no problem (an unknown
    key, maybe the misspelt key a problem comes from): the CLI prints them first.

    Example:
        >>> try:
        ...     ke.load_node_groups("deployments/examples/scenario.yaml")
        ... except ke.InputError as error:
        ...     print(error.problems[0].split(":")[0])
        deployments/examples/scenario.yaml
    """

    def __init__(self, problems: list[str], warnings: tuple[str, ...] | list[str] = ()) -> None:
        self.problems = [one_line(problem) for problem in problems]
        self.warnings = tuple(one_line(warning) for warning in warnings)
        super().__init__("\n".join(self.problems))

    def __reduce__(self) -> tuple[type[InputError], tuple[list[str], tuple[str, ...]]]:
        # Rebuilt from its problems, not from the joined message (Exception's default): one
        # raised on a Dask worker came back a problem per character.
        return InputError, (self.problems, self.warnings)


def shown(value: Any, limit: int = 80) -> str:
    """A value as an error line shows it: short, and never a Python repr that fails."""
    if isinstance(value, date):  # YAML read an unquoted 2001-12-14 as a date
        return f"the date {value.isoformat()} (quote it for a string)"
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit conversion limit
        return "a number of more than 4,300 digits"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def redacted(url: str) -> str:
    """A URL fit for a log line or a status: a password in it (`http://user:secret@host`)
    is replaced by `***`."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    except ValueError:  # an unparsable port: say nothing of what follows the scheme
        return url.split("://", 1)[0] + "://***"
    return urlunsplit(parts._replace(netloc=netloc))


def join_location(source: str, path: str, message: str) -> str:
    """``nodegroups.yaml: node_groups[1] (batch): message``, skipping empty parts."""
    return one_line(": ".join(part for part in (source, path, message) if part))


class LeaseConflict(Exception):
    """Another tick wrote the group's Lease first: this tick lost the race and does nothing.

    Example:
        ```python
        try:
            ke.write_lock(adapters.kube, "kube-system", plan.name, plan.next_state, now)
        except ke.LeaseConflict:
            pass                                      # another tick won the race: act on nothing
        ```
    """


class NodeChanged(Exception):
    """A node kept changing under us through every conflict retry."""


class EvictionBlocked(Exception):
    """The API server refused an eviction with 429: a PodDisruptionBudget is at its limit.

    Not retryable within a tick (it is no `ApiException`, so `tasks.core.retry.is_retryable` says
    no): the budget frees up only when another pod becomes Ready, which takes longer than a
    retry back-off. The drain leaves the pod running and tries again on a later tick.
    """

    def __init__(self, pod: str, message: str) -> None:
        self.pod = pod  # "<namespace>/<name>"
        self.message = message
        super().__init__(f"eviction of pod {pod} blocked: {message}")


class CloudError(Exception):
    """A failed cloud operation; `retryable` tells a Prefect retry policy whether to try again."""

    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable

    def __repr__(self) -> str:
        return f"CloudError({self.message!r}, retryable={self.retryable})"
