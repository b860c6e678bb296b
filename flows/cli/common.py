"""What every command shares: the consoles, bad input as exit 2, --now, signals, the run loop."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, ParamSpec, TypeVar

import orjson
import typer
from rich.console import Console
from rich.markup import escape

from kube_elevator.flows.console_logs import (
    console_logs_without_tracebacks as console_logs_without_tracebacks,
)
from kube_elevator.tasks.adapters.prefect_server import TemporaryServerTimeout
from kube_elevator.tasks.core.errors import InputError
from kube_elevator.tasks.node_group_file import LoadedConfig

# Piped output (CI logs, files) gets room for the reason column instead of rich's 80 columns.
# Both consoles print user text (file paths, group, node and key names, error messages that
# quote a value): no emoji codes (`ba:x:tch` is no ❌), and user text is never rich markup:
# printed with `markup=False`, passed through `rich.markup.escape`, or as `rich.text.Text`.
console = Console(width=None if sys.stdout.isatty() else 160, emoji=False)


errors = Console(stderr=True, width=None if sys.stderr.isatty() else 160, emoji=False)


INPUT_ERROR_EXIT = 2


P = ParamSpec("P")


R = TypeVar("R")


def print_error(line: str) -> None:
    """`error: <line>` on stderr; the line is the user's text, never rich markup."""
    # escaped: a key path such as `clusters[c]` is no rich markup tag
    errors.print(f"[red]error:[/red] {escape(line)}", highlight=False, markup=True,
                 soft_wrap=True)


def reports_input_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn InputError into its problem lines on stderr and exit code 2; a temporary Prefect
    server that did not start, into the line saying what to do and exit code 1."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except InputError as error:
            print_warning_lines(error.warnings)
            for problem in error.problems:
                print_error(problem)
            raise typer.Exit(INPUT_ERROR_EXIT) from None
        except TemporaryServerTimeout as error:
            print_error(str(error))
            raise typer.Exit(1) from None

    return wrapper


class OutputFormat(StrEnum):
    table = "table"
    json = "json"


# `--format` for the output format on every command; `--output` kept, hidden, for old scripts.
FormatOption = Annotated[OutputFormat, typer.Option("--format", help="table or json.")]
DeprecatedOutputOption = Annotated[OutputFormat | None, typer.Option(
    "--output", hidden=True, help="The old spelling of --format (deprecated).")]


def chosen_format(output_format: OutputFormat, output: OutputFormat | None) -> OutputFormat:
    """`--format`, or the hidden `--output` it replaced (issue 42): still obeyed, with a warning
    on stderr, so a script keeps working while it says what to change (stdout stays the data)."""
    if output is None:
        return output_format
    print_warning_lines(["--output is deprecated for the output format: use --format "
                         f"{output.value} (tune's and scenario's --output name a file)"])
    return output


# --now's range: the times a datetime can show (years 1 to 9999), so the table can print it.
_EARLIEST_SECONDS = datetime(1, 1, 2, tzinfo=UTC).timestamp()


_LATEST_SECONDS = datetime(9999, 12, 30, tzinfo=UTC).timestamp()


def parse_now(text: str | None, option: str = "--now") -> float:
    """A time option (`--now`, or `option` such as `--start`): ISO 8601 or Unix seconds;
    default the current time. Bad text is an InputError naming `option`."""
    if text is None:
        return datetime.now(UTC).timestamp()
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InputError([f"{option}: {text!r} is neither ISO 8601 nor Unix seconds"]) \
                from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        seconds = moment.timestamp()
    if not _EARLIEST_SECONDS <= seconds <= _LATEST_SECONDS:  # also NaN and infinities
        raise InputError([f"{option}: {text!r} is not a time between the years 1 and 9999"])
    return seconds


def print_warnings(config: LoadedConfig) -> None:
    print_warning_lines(config.warnings)


def print_warning_lines(warnings: Sequence[str]) -> None:
    for warning in warnings:
        # escaped: an unknown key such as `[/foo]` is the file's text, no rich markup tag
        errors.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False,
                     markup=True, soft_wrap=True)


def wait_for_stop_signal() -> threading.Event:
    """An event set by SIGTERM or SIGINT, so loops stop cleanly between ticks."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def one_line(text: str, limit: int = 400) -> str:
    """An error message on one line: a Kubernetes ApiException's text carries the response
    headers and body on lines of their own; the headers say nothing to an operator."""
    kept = [line for line in text.splitlines()
            if not line.startswith("HTTP response headers:")]
    flat = " ".join(" ".join(kept).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def describe_failure(error: BaseException) -> str:
    """`Type: message` on one line; a Kubernetes error by its status and `Status` message."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(error, ApiException):
        try:
            message = str(orjson.loads(error.body or b"{}").get("message") or "")
        except (orjson.JSONDecodeError, AttributeError):
            message = ""
        text = f"the Kubernetes API answered {error.status} {error.reason or ''}".rstrip()
        return f"{type(error).__name__}: {text}" + (f": {one_line(message)}" if message else "")
    return f"{type(error).__name__}: {one_line(str(error))}"


def say_as(command: str) -> Callable[[str], None]:
    """A line of `command`'s progress on stdout, flushed (a supervisor reads it live)."""
    def say(line: str) -> None:
        console.print(f"{command}: {line}", highlight=False, markup=False, soft_wrap=True)
        sys.stdout.flush()

    return say


def note_lines(result: dict[str, Any]) -> str:
    """A group's notes (what its tick left out, and why), a line each under its result."""
    return "".join(f"\n  note: {note}" for note in result.get("notes") or ())


def print_tick_results(why: str, results: Sequence[dict[str, Any]]) -> None:
    """A line per node group of an in-process tick's results."""
    for result in results:
        console.print(f"tick ({why}): {result['name']}: {result['status']} "
                      f"(delta {result['delta']:+d}) {result['reason']}{note_lines(result)}",
                      highlight=False, markup=False, soft_wrap=True)
    sys.stdout.flush()


def run_until_stopped(cycle: Callable[[], list[dict[str, Any]]],
                      line: Callable[[dict[str, Any]], str], output: OutputFormat, once: bool,
                      period: float,
                      failures: Callable[[Sequence[dict[str, Any]]], list[str]] | None = None,
                      ) -> None:
    """`run`'s loop: a cycle every `period` seconds until SIGTERM/SIGINT, each result printed
    as a JSON line or as `line` says.

    A cycle that fails, or whose results `failures` finds failed, is reported on stderr, one
    line each and no traceback; with `once` the command then exits 1 (bad input: 2), otherwise
    the loop goes on to the next cycle.
    """
    from kube_elevator.flows.prefect_compat import one_client_for_runs

    stop = wait_for_stop_signal()
    console_logs_without_tracebacks()
    with one_client_for_runs():
        while not stop.is_set():
            problems = run_cycle(cycle, line, output, once, failures)
            if once:
                if problems:
                    raise typer.Exit(1)
                break
            stop.wait(period)


def run_cycle(cycle: Callable[[], list[dict[str, Any]]], line: Callable[[dict[str, Any]], str],
              output: OutputFormat, once: bool,
              failures: Callable[[Sequence[dict[str, Any]]], list[str]] | None = None,
              ) -> list[str]:
    """One cycle of `run`, its results printed and its problems on stderr; the problems (none:
    it succeeded). Bad input raises with `once`, else it is a problem like the others."""
    try:
        results = cycle()
    except InputError as error:
        if once:
            raise
        problems = error.problems
    except Exception as error:  # a failed cycle is reported, never a traceback
        problems = [f"the tick failed: {describe_failure(error)}"]
    else:
        if output is OutputFormat.json:
            sys.stdout.buffer.write(orjson.dumps(results) + b"\n")
            sys.stdout.flush()
        else:
            for result in results:
                console.print(line(result), highlight=False, markup=False, soft_wrap=True)
        problems = failures(results) if failures is not None else []
    for problem in problems:
        errors.print(f"[red]error:[/red] {escape(problem)}", highlight=False, markup=True,
                     soft_wrap=True)
    return problems


def _installed(module: str) -> bool:
    """Whether `module` can be imported (a module set to None in sys.modules cannot)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails, or a module without a spec
        return False


def require_extra(extra: str, *modules: str) -> None:
    """Exit 2 with the install line when an optional dependency is missing (no traceback).

    Found, not imported (`importlib.util.find_spec`): importing moto to see that it is there
    cost `simulate --fast`, which never uses it, a fifth of its CPU (0.3 s; issue 40)."""
    missing = [module for module in modules if not _installed(module)]
    if missing:
        message = (f"this command needs {', '.join(missing)}, which kube-elevator installs "
                   f"with its '{extra}' extra: pip install 'kube-elevator[{extra}]'")
        errors.print(f"[red]error:[/red] {escape(message)}", highlight=False, markup=True,
                     soft_wrap=True)
        raise typer.Exit(INPUT_ERROR_EXIT)
