"""Types for a stranger's mypy (issue 42 item 1): the wheel says it is typed (PEP 561's
`py.typed`), so a user's project, type-checked with `mypy --strict` against the INSTALLED wheel
(not this checkout), sees every public name with its type, never `Any`.

The project is tests/data/stranger_project (its own `flows/` and `tasks/`); its flow composes
the public steps and is checked with `--disallow-any-expr`, which fails on any expression whose
type mypy could only take as `Any`. Every name of `__all__` is revealed too."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import kube_elevator as ke
from benchmarks.deadlines import scaled
from tests.locks import ROOT

PROJECT = ROOT / "tests" / "data" / "stranger_project"
MYPY = Path(sys.executable).parent / "mypy"
REVEALED = re.compile(r'^reveal\.py:(\d+): note: Revealed type is "(.*)"$', re.MULTILINE)


def mypy(venv: Path, root: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`mypy --strict --disallow-any-expr` from the project's folder, reading packages from the
    stranger's venv (`--python-executable`): the installed wheel, never this checkout. The same
    options in every call, so the second reads the first's cache (mypy's cache is kept per set
    of options: a second call with other options took ~60 s of CPU again, analysing Prefect)."""
    return subprocess.run([str(MYPY), "--strict", "--disallow-any-expr",
                           "--python-executable", str(venv / "bin" / "python"),
                           "--cache-dir", str(root / ".mypy_cache"), "--no-error-summary",
                           *arguments], cwd=root, capture_output=True, text=True, timeout=scaled(900),
                          check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(root)})


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("typed") / "their-project"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("__pycache__", "test_*"))
    names = "\n".join(f"reveal_type(ke.{name})" for name in ke.__all__)
    (root / "reveal.py").write_text(f"import kube_elevator as ke\n{names}\n")
    return root


def test_the_wheel_carries_py_typed(stranger_venv: Path, wheel_dir: Path) -> None:
    (wheel,) = wheel_dir.glob("kube_elevator-*.whl")
    assert "kube_elevator/py.typed" in zipfile.ZipFile(wheel).namelist()


def test_a_strangers_flow_type_checks_strictly_with_no_any(stranger_venv: Path,
                                                         project: Path) -> None:
    if not MYPY.exists():
        pytest.skip(f"mypy is not in the test venv ({MYPY})")
    done = mypy(stranger_venv, project, "flows", "tasks")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_every_public_name_reaches_mypy_with_its_type(stranger_venv: Path, project: Path) -> None:
    if not MYPY.exists():
        pytest.skip(f"mypy is not in the test venv ({MYPY})")
    done = mypy(stranger_venv, project, "reveal.py")
    revealed = {ke.__all__[int(line) - 2]: shown for line, shown in REVEALED.findall(done.stdout)}
    assert set(revealed) == set(ke.__all__), done.stdout[-4000:]
    assert [name for name, shown in revealed.items() if shown == "Any"] == []
    # The steps keep their parameters and values, as the checkout's mypy sees them.
    assert re.fullmatch(r"kube_elevator\.[\w.]*Step\[\[source: [\w.]*TickSource\], "
                        r"list\[[\w.]*PodRecord\]\]", revealed["collect_pods"]), revealed
    assert "now: float" in revealed["decide"] and "ScalePlan" in revealed["decide"]
