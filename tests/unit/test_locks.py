"""The locks (issue 28): every package pinned with the hashes of its files, the locks agreeing
with each other and with pyproject.toml's ranges, and the test venv holding exactly test.txt."""

from __future__ import annotations

import importlib.metadata
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.locks import LOCKS, REQUIREMENTS, ROOT, Pin, applicable, read_lock

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
    """runtime, sim and tune are compiled against test.txt (`make lock`): an image and the
    tests run the same version of every package they share."""
    development = {(pin.name, pin.marker): pin for pin in read_lock(REQUIREMENTS / "test.txt")}
    for name in LOCKS:
        for pin in read_lock(REQUIREMENTS / name):
            same: Pin | None = development.get((pin.name, pin.marker))
            assert same is not None and same.version == pin.version, (name, pin.name)


def test_pyproject_keeps_ranges_for_library_users() -> None:
    """`pip install kube-elevator` resolves as usual: only Prefect is pinned in pyproject.toml
    (3.9 needs a newer certifi than the registry serves); the exact versions live in the
    locks."""
    exact = [text for text in PROJECT["dependencies"]
             if any(spec.operator == "==" for spec in Requirement(text).specifier)]
    assert exact == ["prefect==3.8.8"]


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
