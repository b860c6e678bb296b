"""How the tests find the programs they drive for real (tests/tools.py), on a PATH and in
directories that lack them: a newcomer's machine with only Python 3.11 and make (README, "Two
commands") skips those tests with a reason that names the program and the Debian package."""

from __future__ import annotations

import re
from pathlib import Path

from tests.locks import ROOT
from tests.tools import (
    PACKAGES,
    chromium_missing,
    kubectl_missing,
    missing,
    postgresql_missing,
    prometheus_missing,
    pushgateway,
    pushgateway_missing,
)


def program(folder: Path, name: str, mode: int = 0o755) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


def test_kubectl_missing_from_the_path_names_debians_package(tmp_path: Path) -> None:
    reason = kubectl_missing(path=str(tmp_path))
    assert reason == ("kubectl is not on PATH (Debian: apt-get install kubernetes-client; "
                      ".ci/run installs it)")
    program(tmp_path, "kubectl", mode=0o644)  # there, but not a program
    assert kubectl_missing(path=str(tmp_path)) == reason
    program(tmp_path, "kubectl")
    assert kubectl_missing(path=str(tmp_path)) is None


def test_every_command_a_test_needs_is_looked_for_and_the_absent_ones_named(
        tmp_path: Path) -> None:
    both = ("prometheus", "promtool")
    assert prometheus_missing(path=str(tmp_path)) == (
        "prometheus is not on PATH (Debian: apt-get install prometheus; .ci/run installs it)")
    assert prometheus_missing(both, path=str(tmp_path)) == (
        "prometheus and promtool are not on PATH (Debian: apt-get install prometheus; "
        ".ci/run installs it)")
    program(tmp_path, "prometheus")
    assert missing(both, "prometheus", path=str(tmp_path)) == (
        "promtool is not on PATH (Debian: apt-get install prometheus; .ci/run installs it)")
    program(tmp_path / "other", "promtool")
    assert missing(both, "prometheus", path=f"{tmp_path}:{tmp_path / 'other'}") is None


def test_the_pushgateway_is_found_by_debians_name_or_upstreams(tmp_path: Path) -> None:
    assert pushgateway(path=str(tmp_path)) is None
    reason = pushgateway_missing(path=str(tmp_path))
    assert reason is not None and "apt-get install prometheus-pushgateway" in reason
    upstream = program(tmp_path / "upstream", "pushgateway")
    assert pushgateway(path=str(upstream.parent)) == str(upstream)
    debian = program(tmp_path / "debian", "prometheus-pushgateway")
    assert pushgateway(path=f"{upstream.parent}:{debian.parent}") == str(debian)
    assert pushgateway_missing(path=str(debian.parent)) is None


def test_chromium_and_postgresql_are_looked_for_where_debian_installs_them(
        tmp_path: Path) -> None:
    browser = tmp_path / "usr" / "bin" / "chromium"
    missing = (f"Chromium is not installed ({browser} is missing or not executable) (Debian: "
               "apt-get install chromium; .ci/run installs it)")
    assert chromium_missing(browser) == missing
    browser.parent.mkdir(parents=True)
    browser.write_text("")  # a file that cannot run (as a binary hidden by an empty one)
    assert chromium_missing(browser) == missing
    browser.unlink()
    program(browser.parent, "chromium")
    assert chromium_missing(browser) is None

    root = tmp_path / "usr" / "lib" / "postgresql"
    reason = postgresql_missing(root)
    assert reason is not None and "apt-get install postgresql" in reason
    (root / "15" / "lib").mkdir(parents=True)  # a client library alone is no server
    assert postgresql_missing(root) == reason
    program(root / "15" / "bin", "initdb")
    assert postgresql_missing(root) is None


def test_the_readme_and_ci_name_every_package_a_skip_asks_for() -> None:
    """README's "Two commands" tells a newcomer the one apt-get line; .ci/run installs the same
    packages, so CI skips none of these tests."""
    readme = (ROOT / "README.md").read_text()
    [line] = re.findall(r"apt-get\s+install\s+([a-z\s-]+)`", readme)
    assert set(line.split()) == set(PACKAGES)
    ci = (ROOT / ".ci" / "run").read_text()
    [always] = re.findall(r"^packages=\(([^)]*)\)", ci, re.MULTILINE)
    where_missing = re.findall(r"\|\| missing\+=\(([a-z-]+)\)", ci)  # kubectl: any on PATH
    assert sorted([*always.split(), *where_missing]) == sorted(PACKAGES)


def test_make_bench_says_first_that_postgresql_is_missing(tmp_path: Path) -> None:
    """`make bench` on a machine without PostgreSQL: one line before any figure, not a
    traceback from its Postgres-backed figures minutes in."""
    from benchmarks.__main__ import preflight

    assert preflight(tmp_path) == ("error: make bench measures a PostgreSQL-backed Prefect "
                                   "server: PostgreSQL is not installed (Debian: apt-get install "
                                   "postgresql)")
    program(tmp_path / "15" / "bin", "initdb")
    assert preflight(tmp_path) is None
