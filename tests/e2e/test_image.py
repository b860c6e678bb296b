"""The image recipe (issue 28), without a Docker engine: the files the Dockerfile's build stage
copies, put in a temporary folder, and the install script its RUN line calls, with the same
arguments, into a new venv. Then, from a folder outside the checkout, `elevator --help` and
`elevator plan` on the shipped example: the same JSON as the checkout's. The installed files are
the wheel's, so a module or data file left out of the package fails here."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from benchmarks.deadlines import scaled
from tests.locks import ROOT, applicable

DOCKERFILE = ROOT / "Dockerfile"
EXAMPLES = ROOT / "deployments" / "examples"
PLAN = ["plan", "--nodegroups", str(EXAMPLES / "nodegroups.yaml"), "--cluster",
        str(EXAMPLES / "cluster.json"), "--asg", str(EXAMPLES / "asgs.json"),
        "--now", "2026-11-21T12:00:00Z", "--format", "json"]
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


def run_install(context: Path, arguments: list[str], wheel_dir: Path | None = None
                ) -> subprocess.CompletedProcess[str]:
    """install.sh with `arguments`; with `wheel_dir`, the wheel built there once is reused."""
    if not UV.exists():
        pytest.skip(f"uv is not in the test venv ({UV}): make installs it from requirements/")
    python = Path(sys.base_prefix) / "bin" / "python3"
    reuse = {"WHEEL_DIR": str(wheel_dir)} if wheel_dir is not None else {}
    return subprocess.run(["sh", *arguments], cwd=context, capture_output=True, text=True,
                          timeout=scaled(900), check=False,
                          env={**os.environ, "UV": str(UV), **reuse,
                               "PYTHON": str(python) if python.exists() else "python3"})


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory, build_context: Path,
          wheel_dir: Path) -> Iterator[Path]:
    """The build stage's install, run on its build context; yields the venv it made."""
    build, _ = stages(DOCKERFILE.read_text())
    script, venv, *rest = install_call(build)
    target = tmp_path_factory.mktemp("image") / Path(venv).name
    done = run_install(build_context, [script, str(target), *rest], wheel_dir)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    yield target


def outside(tmp_path: Path, program: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """A command of the installed venv, run from a folder that is not the checkout."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(program), *arguments], cwd=tmp_path, capture_output=True,
                          text=True, timeout=scaled(300), check=False,
                          env={**environment, "HOME": str(tmp_path),
                               "PREFECT_HOME": str(tmp_path / "prefect")})


def test_the_final_stage_holds_the_venv_and_runs_elevator_as_a_numeric_non_root_user() -> None:
    build, final = stages(DOCKERFILE.read_text())
    assert re.fullmatch(r"python:3\.11-slim[\w.-]*", build.base) and final.base == build.base
    _, venv, lock, extras = install_call(build)
    assert (lock, extras) == ("requirements/image.txt", "tune,blocks")
    assert final.copies == [([venv], venv, "build")] and final.runs == []  # no shell needed
    assert json.loads(final.instructions["ENTRYPOINT"]) == ["elevator"]
    user = final.instructions["USER"].split(":")
    assert all(part.isdigit() and int(part) >= 10000 for part in user)
    assert f"PATH={venv}/bin:" in final.instructions["ENV"]


def test_the_image_venv_holds_exactly_the_lock_and_the_wheel(image: Path) -> None:
    done = subprocess.run([str(UV), "pip", "list", "--format", "json", "--python",
                           str(image / "bin" / "python")],
                          capture_output=True, text=True, timeout=scaled(120), check=True)
    installed = {canonicalize_name(package["name"]): package["version"]
                 for package in json.loads(done.stdout)}
    assert installed.pop("kube-elevator") == "0.1.0"
    assert installed == applicable(ROOT / "requirements" / "image.txt")
    assert {"prefect-aws", "prefect-kubernetes", "optuna"} <= set(installed)  # blocks and tune


def test_the_wheel_carries_every_file_of_the_packages(image: Path, tmp_path: Path) -> None:
    listing = outside(tmp_path, image / "bin" / "python", "-c",
                      "import importlib.metadata as m, json; "
                      "print(json.dumps([str(f) for f in m.files('kube-elevator')]))")
    assert listing.returncode == 0, listing.stderr
    installed = set(json.loads(listing.stdout))
    shipped = {f"kube_elevator/{path.relative_to(ROOT)}" for package in ("flows", "tasks", "fakes")
               for path in (ROOT / package).rglob("*")
               if path.is_file() and "__pycache__" not in path.parts}
    assert shipped and shipped <= installed
    # One namespace: nothing else lands at the top of site-packages.
    top_level = {name.split("/")[0] for name in installed if not name.startswith("..")}
    assert {name for name in top_level if not name.endswith(".dist-info")} == {"kube_elevator"}


def test_elevator_from_the_image_venv_plans_as_the_checkout_does(image: Path,
                                                                 tmp_path: Path) -> None:
    helped = outside(tmp_path, image / "bin" / "elevator", "--help")
    assert helped.returncode == 0, helped.stderr
    assert {"plan", "serve", "watch", "pods", "load-watcher"} <= set(
        re.findall(r"│ ([a-z-]+) ", helped.stdout))
    where = outside(tmp_path, image / "bin" / "python", "-c",
                    "import kube_elevator.flows as f, kube_elevator.tasks as t; "
                    "print(f.__file__, t.__file__)")
    assert all(path.startswith(str(image)) for path in where.stdout.split()), where.stdout
    planned = outside(tmp_path, image / "bin" / "elevator", *PLAN)
    assert planned.returncode == 0, planned.stderr
    checkout = subprocess.run([str(Path(sys.executable).parent / "elevator"), *PLAN], cwd=ROOT,
                              capture_output=True, text=True, timeout=scaled(300), check=True)
    plan = json.loads(planned.stdout)
    assert plan == json.loads(checkout.stdout)
    assert plan["node_groups"] and plan["node_groups"][0]["delta"] != 0  # it decided something
    worker = outside(tmp_path, image / "bin" / "prefect", "--version")  # the worker's command
    locked = applicable(ROOT / "requirements" / "image.txt")["prefect"]
    assert worker.returncode == 0 and worker.stdout.startswith(locked), worker.stderr


def test_a_lock_that_misses_a_requirement_fails_the_install(tmp_path: Path) -> None:
    """The last step asks for kube-elevator[tune] with no index: the lock must hold it all."""
    build, _ = stages(DOCKERFILE.read_text())
    context = tmp_path / "context"
    lay_out_build_context(build, context)
    script, _, lock, extras = install_call(build)
    text = (context / lock).read_text()
    (context / lock).write_text(re.sub(r"(?ms)^optuna==.*?(?=^\S)", "", text))
    done = run_install(context, [script, str(tmp_path / "venv"), lock, extras])
    assert done.returncode != 0
    assert "optuna" in done.stderr
