"""Issue 42 ("every public name has a docstring with an example"): each name of
`kube_elevator.__all__` and of the harness's `kube_elevator.harness.__all__` (docs/harness.md)
shows how it is used, and the examples are kept true: a `>>>` example runs here as a doctest
(from the checkout's root, `ke` being `kube_elevator`, as the façade's docstring says); one that
needs a cluster, a server or AWS is a fenced ```python block, which must at least compile."""

from __future__ import annotations

import doctest
import inspect
import re
import textwrap
from collections.abc import Iterator

import pytest

import kube_elevator
import kube_elevator.harness as harness
from tests.locks import ROOT

FENCED = re.compile(r"```python\n(.*?)```", re.S)


def public_names() -> Iterator[tuple[str, object]]:
    """(dotted name, value) of every documented public name."""
    for module in (kube_elevator, harness):
        for name in module.__all__:
            yield f"{module.__name__}.{name}", getattr(module, name)


def docstring(value: object) -> str:
    return inspect.cleandoc(getattr(value, "__doc__", None) or "")


NAMES = dict(public_names())
DOCTESTED = [name for name, value in NAMES.items() if ">>>" in docstring(value)]


def test_every_public_name_has_an_example() -> None:
    without = [name for name, value in NAMES.items()
               if ">>>" not in docstring(value) and not FENCED.search(docstring(value))]
    assert without == [], f"public names without an example in their docstring: {without}"


def test_the_check_sees_a_name_without_an_example() -> None:
    """The rule above reads the docstrings pdoc renders: a bare summary is no example."""
    def bare() -> None:
        """Only a summary."""

    assert ">>>" not in docstring(bare) and not FENCED.search(docstring(bare))
    assert FENCED.search(docstring(kube_elevator.collect_nodes))


def test_most_examples_run() -> None:
    """Pure functions and records show examples that run; a fence is for what needs a cluster."""
    assert len(DOCTESTED) >= 70, len(DOCTESTED)


@pytest.mark.parametrize("name", DOCTESTED)
def test_the_example_runs(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the examples name the shipped files by their checkout paths
    test = doctest.DocTestParser().get_doctest(
        docstring(NAMES[name]), {"ke": kube_elevator}, name, None, 0)
    assert test.examples, name
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    result = runner.run(test, out=report.append)
    assert result.failed == 0, "".join(report)


@pytest.mark.parametrize("name", [name for name, value in NAMES.items()
                                  if FENCED.search(docstring(value))])
def test_the_fenced_example_compiles(name: str) -> None:
    for code in FENCED.findall(docstring(NAMES[name])):
        compile(textwrap.dedent(code), name, "exec")
