"""The image's build stage read from the Dockerfile, and the wheel built as its install script
builds it: shared by the image test and the stranger's-project test, which build the wheel once a
session (`tests/conftest.py`, `kube_elevator_wheel`)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.locks import ROOT

DOCKERFILE = ROOT / "Dockerfile"
UV = Path(sys.executable).parent / "uv"


@dataclass(frozen=True)
class Stage:
    base: str
    workdir: str
    copies: list[tuple[list[str], str, str]]  # (sources, destination, --from stage or "")
    runs: list[str]
    instructions: dict[str, str]  # the last of each other instruction: USER, ENTRYPOINT, ENV


def stages(text: str) -> list[Stage]:
    """The Dockerfile's stages, continuation lines joined, comments dropped."""
    found: list[Stage] = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        keyword, _, rest = line.strip().partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            found.append(Stage(rest.split()[0], "/", [], [], {}))
        elif keyword == "WORKDIR":
            found[-1] = Stage(found[-1].base, rest, found[-1].copies, found[-1].runs,
                              found[-1].instructions)
        elif keyword == "COPY":
            words = shlex.split(rest)
            origin = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), "")
            paths = [w for w in words if not w.startswith("--")]
            found[-1].copies.append((paths[:-1], paths[-1], origin))
        elif keyword == "RUN":
            found[-1].runs.append(rest)
        else:
            found[-1].instructions[keyword] = rest
    return found


def install_call(stage: Stage) -> list[str]:
    """`deployments/image/install.sh VENV LOCK EXTRAS` as the build stage's RUN line calls it."""
    (call,) = [re.search(r"sh (deployments/image/install\.sh(?: [^&;|]+)?)", run)
               for run in stage.runs if "install.sh" in run]
    assert call is not None
    return shlex.split(call.group(1))


def lay_out_build_context(stage: Stage, into: Path) -> None:
    """The files the stage's COPY lines put in its WORKDIR, from the checkout."""
    for sources, destination, origin in stage.copies:
        assert not origin
        for source in sources:
            target = into / destination if destination not in ("./", ".") else into
            if destination.endswith("/"):
                target = target / Path(source).name
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, target,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(ROOT / source, target)


def build_context(into: Path) -> Path:
    """The Dockerfile's build context for its build stage, laid out in `into`."""
    build, _ = stages(DOCKERFILE.read_text())
    lay_out_build_context(build, into)
    return into


def build_wheel(context: Path, out: Path) -> Path:
    """The wheel of the build context, as deployments/image/install.sh builds it (the locked
    build backend, hashes checked)."""
    subprocess.run([str(UV), "build", "--quiet", "--wheel", "--out-dir", str(out),
                    "--build-constraint", "requirements/build.txt", "--require-hashes", "."],
                   cwd=context, check=True, capture_output=True, text=True, timeout=600)
    (wheel,) = out.glob("kube_elevator-*.whl")
    return wheel
