"""The programs some tests drive for real that a machine with only Python 3.11 and make lacks
(README, "Two commands"): how a test finds each one, and the skip reason that names it and the
Debian package that brings it (.ci/run installs them all). A test that needs one skips without
it, saying what to install; it never errors. Each finder takes where to look as an argument
(a PATH string, a directory), so tests/unit/test_tools.py proves it on a machine without them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from benchmarks.prefect_overhead import POSTGRESQL_ROOT, postgresql_bin

# Where the UI test's browser is looked for: Debian's `chromium` installs it there (PostgreSQL's
# initdb and pg_ctl, under a versioned directory, are found by benchmarks.prefect_overhead).
CHROMIUM = Path("/usr/bin/chromium")
# Debian's package of each program, as .ci/run installs it and README's "Two commands" names it.
KUBECTL, PROMETHEUS, PUSHGATEWAY = "kubernetes-client", "prometheus", "prometheus-pushgateway"
POSTGRESQL, CHROMIUM_PACKAGE = "postgresql", "chromium"
PACKAGES = (PROMETHEUS, PUSHGATEWAY, POSTGRESQL, CHROMIUM_PACKAGE, KUBECTL)


def _reason(what: str, package: str) -> str:
    return f"{what} (Debian: apt-get install {package}; .ci/run installs it)"


def missing(commands: tuple[str, ...], package: str, path: str | None = None) -> str | None:
    """Why a test that needs every one of COMMANDS skips on PATH (None: all are there).

    `path` is a PATH string to search instead of the environment's."""
    absent = [command for command in commands if shutil.which(command, path=path) is None]
    if not absent:
        return None
    verb = "is" if len(absent) == 1 else "are"
    return _reason(f"{' and '.join(absent)} {verb} not on PATH", package)


def kubectl_missing(path: str | None = None) -> str | None:
    """Why the tests that run kubectl against the fake skip here (None: kubectl is there)."""
    return missing(("kubectl",), KUBECTL, path)


def prometheus_missing(commands: tuple[str, ...] = ("prometheus",),
                       path: str | None = None) -> str | None:
    """Why the tests that scrape or query a real Prometheus skip here (promtool comes with it)."""
    return missing(commands, PROMETHEUS, path)


def pushgateway(path: str | None = None) -> str | None:
    """The Pushgateway's program: Debian names it prometheus-pushgateway, upstream pushgateway."""
    return shutil.which("prometheus-pushgateway", path=path) or shutil.which("pushgateway",
                                                                             path=path)


def pushgateway_missing(path: str | None = None) -> str | None:
    if pushgateway(path) is not None:
        return None
    return _reason("prometheus-pushgateway (or pushgateway) is not on PATH",
                   PUSHGATEWAY)


def chromium_missing(binary: Path = CHROMIUM) -> str | None:
    """Why the UI test skips: Playwright drives Debian's Chromium at BINARY (no browser of its
    own is downloaded)."""
    if binary.is_file() and os.access(binary, os.X_OK):
        return None
    return _reason(f"Chromium is not installed ({binary} is missing or not executable)",
                   CHROMIUM_PACKAGE)


def postgresql_missing(root: Path = POSTGRESQL_ROOT) -> str | None:
    """Why the PostgreSQL-backed server's test skips (benchmarks.prefect_overhead.postgres
    starts one from ROOT's newest version)."""
    if postgresql_bin(root) is not None:
        return None
    return _reason(f"PostgreSQL is not installed (no {root}/*/bin/initdb)", POSTGRESQL)


_KUBECTL_MISSING = kubectl_missing()
# For a test or module that runs kubectl: skipped, saying what to install, where it is absent.
needs_kubectl = pytest.mark.skipif(_KUBECTL_MISSING is not None, reason=_KUBECTL_MISSING or "")
