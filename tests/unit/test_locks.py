"""The locks (issue 28): every package pinned with the hashes of its files, the locks agreeing
with each other and with pyproject.toml's ranges, and the test venv holding exactly test.txt."""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.locks import AWS_SDK, LOCKS, REQUIREMENTS, ROOT, Pin, applicable, read_lock

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
ALL_LOCKS = sorted(REQUIREMENTS.glob("*.txt"))


def requirements_of(extras: tuple[str, ...]) -> list[Requirement]:
    """kube-elevator's requirements with those extras, as pip evaluates them here."""
    listed = [*PROJECT["dependencies"],
              *(text for extra in extras for text in PROJECT["optional-dependencies"][extra])]
    found = [Requirement(text) for text in listed]
    return [r for r in found if r.marker is None or r.marker.evaluate({"extra": ""})]


def test_every_lock_pins_every_package_by_version_and_hashes() -> None:
    assert {path.name for path in ALL_LOCKS} >= {*LOCKS, "checkov.txt", "uv.txt", "build.txt"}
    for path in ALL_LOCKS:
        pins = read_lock(path)
        assert pins, path
        for pin in pins:
            assert pin.hashes and all(h.startswith("sha256:") for h in pin.hashes), (path, pin)


def test_each_lock_satisfies_pyproject_for_its_extras() -> None:
    for name, extras in LOCKS.items():
        pinned = applicable(REQUIREMENTS / name)
        for requirement in requirements_of(extras):
            version = pinned.get(canonicalize_name(requirement.name))
            assert version is not None, f"{name} does not pin {requirement}"
            assert requirement.specifier.contains(version, prereleases=True), (
                f"{name} pins {requirement.name}=={version}, outside {requirement}")


def test_the_locks_pin_each_package_at_one_version() -> None:
    """Every lock is compiled against test.txt (`make lock`): an image and the tests run the
    same version of every package they share, but for the AWS SDK where prefect-aws is not."""
    development_pins = read_lock(REQUIREMENTS / "test.txt")
    development = {(pin.name, pin.marker): pin for pin in development_pins}
    # A package test.txt needs everywhere (cel-python wants pendulum on every Python) may
    # carry a marker in a lock that needs it on some Pythons only: the version is what counts.
    names = [pin.name for pin in development_pins]
    unmarked = {pin.name: pin for pin in development_pins if names.count(pin.name) == 1}
    for name in LOCKS:
        pins = read_lock(REQUIREMENTS / name)
        with_prefect_aws = any(pin.name == "prefect-aws" for pin in pins)
        for pin in pins:
            same: Pin | None = development.get((pin.name, pin.marker)) or unmarked.get(pin.name)
            if pin.name in AWS_SDK and not with_prefect_aws:
                continue  # test_the_aws_sdk_is_the_newest_every_lock_allows
            assert same is not None and same.version == pin.version, (name, pin.name)


def test_every_extra_has_a_lock_and_so_every_extra_the_readme_names() -> None:
    """Issue 42 item 5: `pip install -r requirements/EXTRA.txt` for each extra (blocks and docs
    had none)."""
    extras = set(PROJECT["optional-dependencies"])
    named = set(re.findall(r"kube-elevator\[([a-z]+)\]", (ROOT / "README.md").read_text()))
    assert named and named <= extras
    for extra in extras - {"test"}:  # test.txt holds the test extra, with all the others
        assert LOCKS.get(f"{extra}.txt") == (extra,), extra
        assert (REQUIREMENTS / f"{extra}.txt").is_file(), extra
    assert {"blocks", "docs"} <= named  # the README says how to install them


def test_the_aws_sdk_is_the_newest_every_lock_allows() -> None:
    """Issue 42 item 5: prefect-aws's aiobotocore held boto3 and botocore back in every lock.
    Only the locks with prefect-aws keep what aiobotocore allows; the others agree on one
    release, newer than or the same as those."""
    newest: dict[str, set[str]] = {name: set() for name in AWS_SDK}
    held: dict[str, set[str]] = {name: set() for name in AWS_SDK}
    for lock in LOCKS:
        pins = applicable(REQUIREMENTS / lock)
        for name in AWS_SDK:
            if name in pins:
                (held if "prefect-aws" in pins else newest)[name].add(pins[name])
    assert "prefect-aws" not in applicable(REQUIREMENTS / "runtime.txt")
    for name in ("boto3", "botocore"):
        assert len(newest[name]) == 1 and len(held[name]) == 1, (name, newest, held)
        assert Version(*newest[name]) >= Version(*held[name]), name


def test_pyproject_keeps_ranges_for_library_users() -> None:
    """`pip install kube-elevator` resolves as usual: nothing is pinned in pyproject.toml, not
    even Prefect (issue 40: a user on 3.9.x, or on 3.6.x, keeps their own); the exact versions
    live in the locks."""
    exact = [text for text in PROJECT["dependencies"]
             if any(spec.operator == "==" for spec in Requirement(text).specifier)]
    assert exact == []


def test_the_installed_package_admits_a_range_of_prefect_3_releases() -> None:
    """Issue 40: the metadata pip reads (the installed kube-elevator's) admits Prefect from a
    floor below the lock's release (3.8.6, the first whose SQLite server `serve` does not stall)
    up to, not including, 4."""
    (prefect,) = [Requirement(text) for text in importlib.metadata.requires("kube-elevator") or []
                  if Requirement(text).name == "prefect" and Requirement(text).marker is None]
    locked = Version(applicable(REQUIREMENTS / "test.txt")["prefect"])
    assert prefect.specifier.contains(locked)
    assert prefect.specifier.contains("3.9.1") and not prefect.specifier.contains("4.0.0")
    assert prefect.specifier.contains("3.8.6") and not prefect.specifier.contains("2.20.0")
    # 3.8.4 and 3.8.5: their server's deferred SQLite transaction in `mark_deployments_ready`
    # stalls it for a minute under `serve --ticks runs` (docs/deploying.md, "Prefect releases").
    assert not prefect.specifier.contains("3.8.5") and not prefect.specifier.contains("3.8.4")


def test_the_blocks_extra_states_its_own_prefect_floor() -> None:
    """prefect-aws and prefect-kubernetes 0.7 need Prefect 3.8.4: the blocks extra says so, so
    a user on an older Prefect gets one resolver error rather than a Prefect upgrade."""
    (prefect,) = [Requirement(text) for text in PROJECT["optional-dependencies"]["blocks"]
                  if Requirement(text).name == "prefect"]
    assert not prefect.specifier.contains("3.8.3") and prefect.specifier.contains("3.8.4")


def test_the_test_venv_holds_exactly_the_test_lock() -> None:
    """`make` syncs .venv to requirements/test.txt: what the tests import is what is locked."""
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip(f"not running in the project's .venv (make test does): {sys.prefix}")
    pinned = applicable(REQUIREMENTS / "test.txt") | applicable(REQUIREMENTS / "uv.txt")
    installed = {canonicalize_name(dist.metadata["Name"]): dist.version
                 for dist in importlib.metadata.distributions()}
    installed.pop("kube-elevator")
    for seed in ("pip", "setuptools"):  # the venv's own, which uv leaves in place
        installed.pop(seed, None)
    assert installed == pinned
