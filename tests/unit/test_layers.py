"""Imports point down (docs/architecture.md): a test walks every module's imports, including
those inside functions and under TYPE_CHECKING, and fails on an upward import or a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("flows", "tasks", "fakes")
SYSTEMS = ("escalator", "cluster_autoscaler", "pod_autoscalers", "load_aware")


def modules(root: Path) -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Our modules this one imports, each resolved to the module file it lands in."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for imported in names:
            while imported and imported not in known:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
    return targets


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "tasks":
        return parts[0]
    if len(parts) > 1 and parts[1] in ("core", "adapters", "steps"):
        return parts[1]
    return "system"


def problems(root: Path) -> list[str]:
    known = modules(root)
    graph = {name: imports_of(name, path, known) for name, path in known.items()}
    found = []
    allowed = {
        "core": {"core"},
        "adapters": {"core", "adapters"},
        "system": {"core", "adapters", "system"},
        "steps": {"core", "adapters", "system", "steps"},
        "fakes": {"core", "adapters", "system", "fakes"},
        "flows": {"core", "adapters", "system", "steps", "fakes", "flows"},
    }
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            if layer(target) not in allowed[layer(name)]:
                found.append(f"{name} -> {target}")
    # cycles: a module that can reach itself
    for start in graph:
        seen: set[str] = set()
        stack = list(graph[start])
        while stack:
            current = stack.pop()
            if current == start:
                found.append(f"cycle through {start}")
                break
            if current not in seen:
                seen.add(current)
                stack.extend(graph.get(current, ()))
    return found


def test_every_import_points_down_and_none_goes_round() -> None:
    assert problems(ROOT) == []


def test_every_system_has_its_folder() -> None:
    for system in SYSTEMS:
        assert (ROOT / "tasks" / system / "__init__.py").is_file(), system


@pytest.mark.parametrize(("module", "source", "expected"), [
    ("fakes/bad.py", "from flows.tick import tick\n", "fakes.bad -> flows.tick"),
    ("tasks/core/bad.py", "def f():\n    from tasks.adapters.kube import KubeClient\n",
     "tasks.core.bad -> tasks.adapters.kube"),
    ("tasks/adapters/bad.py", "from tasks.escalator.decide import decide\n",
     "tasks.adapters.bad -> tasks.escalator.decide"),
    ("tasks/escalator/bad.py", "from tasks.steps.lease import write_lock\n",
     "tasks.escalator.bad -> tasks.steps.lease"),
])
def test_the_walk_finds_an_upward_import(tmp_path: Path, module: str, source: str,
                                         expected: str) -> None:
    for package in ("flows", "fakes", "tasks/core", "tasks/adapters", "tasks/escalator",
                    "tasks/steps"):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    for leaf in ("flows/tick.py", "tasks/adapters/kube.py", "tasks/escalator/decide.py",
                 "tasks/steps/lease.py"):
        (tmp_path / leaf).write_text("")
    (tmp_path / module).write_text(source)
    assert problems(tmp_path) == [expected]


def test_the_walk_finds_a_cycle(tmp_path: Path) -> None:
    (tmp_path / "tasks" / "core").mkdir(parents=True)
    for package in ("tasks", "tasks/core"):
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "tasks/core/a.py").write_text("from tasks.core import b\n")
    (tmp_path / "tasks/core/b.py").write_text("def f():\n    import tasks.core.a\n")
    assert problems(tmp_path) == ["cycle through tasks.core.a", "cycle through tasks.core.b"]
