"""The public API (issue 35 item 2): `kube_elevator`'s names load on first use and say where
they live, `import kube_elevator` imports neither Prefect nor the rest of the package, the API
reference builds with every public name in it, and the documentation's runnable examples run."""

from __future__ import annotations

import ast
import contextlib
import html
import importlib.util
import io
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import kube_elevator
from benchmarks.deadlines import scaled
from tests.locks import ROOT

# The documents whose examples are marked runnable, and the façade's docstring (all of its).
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = re.compile(r"<!-- runnable -->\n```python\n(.*?)```", re.S)
FENCED = re.compile(r"```python\n(.*?)```", re.S)


def examples() -> list[tuple[str, str]]:
    """(where, code) of every runnable example: `file:line`."""
    found = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for match in RUNNABLE.finditer(text):
            line = text[:match.start()].count("\n") + 1
            found.append((f"{document.relative_to(ROOT)}:{line}", match.group(1)))
    for match in FENCED.finditer(kube_elevator.__doc__ or ""):
        found.append(("kube_elevator.__doc__", match.group(1)))
    return found


def type_checking_imports() -> dict[str, str]:
    """What mypy sees: each name the façade's TYPE_CHECKING block imports, and from where."""
    tree = ast.parse((ROOT / "kube_elevator" / "__init__.py").read_text(encoding="utf-8"))
    (block,) = [node for node in tree.body if isinstance(node, ast.If)
                and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"]
    return {alias.name: node.module.removeprefix("kube_elevator.")
            for node in block.body if isinstance(node, ast.ImportFrom) and node.module
            for alias in node.names}


def test_every_public_name_loads_from_where_the_facade_says() -> None:
    homes = kube_elevator._HOMES
    assert sorted(homes) == kube_elevator.__all__
    assert type_checking_imports() == homes  # mypy sees what runs
    for name in kube_elevator.__all__:
        value = getattr(kube_elevator, name)
        assert value is getattr(sys.modules[f"kube_elevator.{homes[name]}"], name)
    assert set(kube_elevator.__all__) <= set(dir(kube_elevator))
    with pytest.raises(AttributeError, match="no attribute 'tick_all'"):
        kube_elevator.tick_all  # noqa: B018


def test_the_steps_are_typed_prefect_tasks() -> None:
    from prefect import Task

    for name in ("collect_pods", "filter_pods", "filter_nodes", "compute_utilization", "decide",
                 "write_lock", "untaint_or_increase", "taint_and_remove", "read_locks"):
        step = getattr(kube_elevator, name)
        assert isinstance(step, kube_elevator.Step) and isinstance(step.task, Task), name
        assert step.__doc__ and step.__wrapped__ is step.fn, name
        assert step.__name__ == name and step.task.name == name.replace("_", "-")


def test_import_kube_elevator_imports_neither_prefect_nor_the_package() -> None:
    code = ("import sys, kube_elevator; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('prefect', 'kubernetes', 'boto3', 'pydantic') "
            "or m.startswith('kube_elevator.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=scaled(60), check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"


def build_reference(output: Path) -> tuple[Path, list[str]]:
    """docs/api_reference.py's build, as `make docs` runs it; the page and pdoc's warnings."""
    spec = importlib.util.spec_from_file_location("api_reference",
                                                  ROOT / "docs" / "api_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        page = module.build(output)
    return page, [str(warning.message) for warning in caught]


def text_of(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]*>", "", page.read_text(encoding="utf-8")))


def test_the_api_reference_builds_with_every_public_name(tmp_path: Path) -> None:
    page, _ = build_reference(tmp_path / "api")
    html_text = page.read_text(encoding="utf-8")
    missing = [name for name in kube_elevator.__all__
               if f'<section id="{name}">' not in html_text]
    assert not missing, f"not in the API reference: {missing}"
    # A step shows its signature and docstring, as a function does.
    section = html_text[html_text.index('<section id="untaint_or_increase">'):]
    assert "ActionsDone" in section[:3000] and "Escalator §6" in section[:3000]
    assert "internal" in html_text  # the page says the rest is internal
    import kube_elevator.harness as harness

    harness_page = (tmp_path / "api" / "kube_elevator" / "harness.html").read_text(
        encoding="utf-8")
    assert [name for name in harness.__all__ if f'id="{name}"' not in harness_page] == []


def internal_types(page: Path) -> list[str]:
    """The internal types a reference page names: shown as their module path (an internal
    `kube_elevator.fakes.scenario.LoadedScenario`, or a private base such as `_Strict`), with no
    page to link to, where a public one shows as its public name."""
    return sorted(set(re.findall(r"kube_elevator\.(?:tasks|flows|fakes)\.[\w.]*?\.([A-Z_]\w*)",
                                 text_of(page))))


def test_the_reference_builds_without_warnings_and_names_no_internal_type(tmp_path: Path) -> None:
    """Issue 42 item 2: a public signature or field names only public types, in the façade's
    reference and in the harness's (whose classes named the fake API's internal bases, `class
    FakeKubeApi(kube_elevator.fakes.kube_api.http.KubeHttp)`, and types `install_crd`,
    `fail_next_calls` and `kube_faults` return), and pdoc resolves every annotation."""
    page, warned = build_reference(tmp_path / "api")
    assert warned == []
    assert internal_types(page) == [], "public signatures name internal types"
    harness_page = tmp_path / "api" / "kube_elevator" / "harness.html"
    assert internal_types(harness_page) == [], "the harness's reference names internal types"
    headers = {" ".join(header.split()) for header in re.findall(
        r"class\s+(?:FakeKubeApi|InProcessAws)\b[^:]*:", text_of(harness_page))}
    assert headers == {"class FakeKubeApi:", "class InProcessAws(kube_elevator.harness.FakeAws):"}


def test_an_internal_type_in_a_reference_page_is_seen(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text("<pre>class FakeKubeApi(kube_elevator.fakes.kube_api.http.KubeHttp):</pre>"
                    "<code>aws: kube_elevator.fakes.scenario._Strict</code>", encoding="utf-8")
    assert internal_types(page) == ["KubeHttp", "_Strict"]


def test_the_harness_reference_lists_its_whole_surface(tmp_path: Path) -> None:
    """Issue 42 item 2: FakeKubeApi's methods from the fake API's internal bases (its CRDs and
    its objects) are in the harness's reference, as docs/harness.md names them."""
    import kube_elevator.harness as harness

    build_reference(tmp_path / "api")
    page = tmp_path / "api" / "kube_elevator" / "harness.html"
    anchors = set(re.findall(r'id="FakeKubeApi\.(\w+)"', page.read_text(encoding="utf-8")))
    surface = [name for name in dir(harness.FakeKubeApi) if not name.startswith("_")]
    assert {"install_crd", "register_custom_resource", "create", "get", "list", "patch",
            "replace", "delete"} <= set(surface)
    assert sorted(set(surface) - anchors) == []
    shown = text_of(page)
    assert "Store and serve each CustomResourceDefinition" in shown


def test_every_public_name_has_a_docstring() -> None:
    undocumented = [name for name in kube_elevator.__all__
                    if not (getattr(kube_elevator, name).__doc__ or "").strip()]
    assert undocumented == []
    assert "Example" in (kube_elevator.collect_nodes.__doc__ or "")


@pytest.mark.parametrize(("where", "code"), examples(), ids=[w for w, _ in examples()])
def test_the_documentations_runnable_examples_run(
        where: str, code: str, prefect_server: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the examples name the shipped files by their checkout paths
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, where, "exec"), {"__name__": "__example__"})
    assert printed.getvalue() or "assert" in code, f"{where} shows nothing and checks nothing"


def test_the_examples_are_found() -> None:
    where = [w for w, _ in examples()]
    assert "kube_elevator.__doc__" in where
    assert sum(w.startswith("docs/plugin.md") for w in where) >= 2
