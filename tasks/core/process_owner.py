"""Which process owns a flow run, written so another process on the same host can tell whether
that owner still lives.

Prefect's process worker records a run's process in its `infrastructure_pid` as `host:pid`.
A pid alone is not a process: once its process has exited the kernel gives the number to the
next one, so a run owned by a dead process could look owned by a live one for good. The mark
here adds the process's start time (`/proc/<pid>/stat`'s `starttime`, clock ticks since boot):
`host:pid:start`. A process is the owner when its pid answers and it started at that time.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessMark:
    """`host:pid[:start]`, as `infrastructure_pid` holds it."""

    host: str
    pid: int
    start: int | None = None  # clock ticks since boot; None where /proc is not there

    def __str__(self) -> str:
        tail = "" if self.start is None else f":{self.start}"
        return f"{self.host}:{self.pid}{tail}"


def host_name(proc: Path = PROC) -> str:
    """This host's name, and the pid namespace its pids count in (`/proc/self/ns/pid`): two
    containers given one host name (host networking) count pids apart, and a pid of one is
    not a process of the other."""
    try:
        namespace = os.readlink(proc / "self" / "ns" / "pid")  # pid:[4026531836]
    except OSError:
        return socket.gethostname()
    return f"{socket.gethostname()}/{namespace.removeprefix('pid:').strip('[]')}"


def process_start_ticks(pid: int, proc: Path = PROC) -> int | None:
    """The process's start time (field 22 of `/proc/<pid>/stat`); None when it is gone or
    there is no /proc."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = stat.rpartition(")")[2].split()
    try:
        return int(fields[19])  # field 22, counted from field 3
    except (IndexError, ValueError):
        return None


def mark_of(pid: int | None = None) -> ProcessMark:
    """The mark of `pid` (default: this process) on this host."""
    pid = os.getpid() if pid is None else pid
    return ProcessMark(host_name(), pid, process_start_ticks(pid))


def parse_mark(text: str | None) -> ProcessMark | None:
    """The mark in an `infrastructure_pid`; None when it is none of ours or a process worker's
    (a Kubernetes worker's job name, nothing at all)."""
    if not text:
        return None
    parts = text.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return ProcessMark(parts[0], int(parts[1]), int(parts[2]))
    host, _, pid = text.rpartition(":")
    if host and pid.isdigit():
        return ProcessMark(host, int(pid))
    return None


def lives(mark: ProcessMark, proc: Path = PROC) -> bool:
    """Whether the marked process (on this host) still runs: its pid answers, and, when the
    mark has a start time, the process of that pid started then (not a later one given the
    same number). A zombie has ended."""
    try:
        os.kill(mark.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    try:
        state = (proc / str(mark.pid) / "stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True  # no /proc to say more: the pid answers
    if state == "Z":
        return False
    return mark.start is None or process_start_ticks(mark.pid, proc) == mark.start
