"""Imports point down (docs/architecture.md): a test walks every module's imports, including
those inside functions and under TYPE_CHECKING, and fails on an upward import or a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("flows", "tasks", "fakes")
NAMESPACE = "kube_elevator"
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
            # Installed under one namespace: `kube_elevator.tasks` is the folder tasks/.
            imported = imported.removeprefix(NAMESPACE + ".")
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


def system_folder_cycles(root: Path) -> list[str]:
    """Cycles between system folders (tasks/<system>): one system may build on another, but
    never both on each other; what both need goes above them (tasks/node_group_file.py)."""
    known = modules(root)
    folder_graph: dict[str, set[str]] = {}
    for name, path in known.items():
        if layer(name) != "system" or name.count(".") < 1:
            continue
        home = name.split(".")[1]
        for target in imports_of(name, path, known):
            if layer(target) == "system" and target.count(".") >= 1 \
                    and target.split(".")[1] != home:
                folder_graph.setdefault(home, set()).add(target.split(".")[1])
    found = []
    for start, targets in sorted(folder_graph.items()):
        seen: set[str] = set()
        stack = list(targets)
        while stack:
            current = stack.pop()
            if current == start:
                found.append(f"tasks/{start} reaches itself through another system")
                break
            if current not in seen:
                seen.add(current)
                stack.extend(folder_graph.get(current, ()))
    return found


def test_no_two_systems_import_each_other() -> None:
    assert system_folder_cycles(ROOT) == []


def test_a_cycle_between_system_folders_is_found(tmp_path: Path) -> None:
    for relative, source in (("tasks/escalator/one.py", "from tasks.cluster_autoscaler.two import x\n"),
                             ("tasks/cluster_autoscaler/two.py", "x = 1\n"),
                             ("tasks/cluster_autoscaler/three.py", "from tasks.escalator.four import y\n"),
                             ("tasks/escalator/four.py", "y = 1\n")):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    assert system_folder_cycles(tmp_path) == [
        "tasks/cluster_autoscaler reaches itself through another system",
        "tasks/escalator reaches itself through another system"]


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


def test_every_import_of_ours_names_the_namespace() -> None:
    """A bare `import flows` works in the checkout only: in a user's venv their own `flows/`
    package answers, so every module (and every test) imports `kube_elevator.…`."""
    bare = []
    for folder in (*PACKAGES, "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if (ROOT / "tests" / "data") in path.parents:  # strangers' projects: their own
                continue                                   # flows/ and tasks/ packages
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""]
                else:
                    continue
                bare += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names
                         if name.split(".")[0] in PACKAGES]
    assert bare == []
