"""The replay table (tests/replay/): upstream integration cases the suite had not ported,
replayed over HTTP against `elevator fake-cluster` started as a user starts it, each compared
with the answer upstream's integration test asserts a real API server gives. A case the fake
still answers otherwise is a strict xfail naming why; `python -m tests.replay` prints the
agreement per layer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.replay.cluster import RunningCluster, fake_cluster_process
from tests.replay.model import KUBECTL, LAYERS, Case
from tests.replay.table import CASES, THRESHOLD_PERCENT
from tests.tools import kubectl_missing


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    with fake_cluster_process(Path(tmp_path_factory.mktemp("replay"))) as running:
        yield running


def _marks(case: Case, no_kubectl: str | None) -> list[pytest.MarkDecorator]:
    """A case that runs kubectl skips where it is missing (NO_KUBECTL says why), as every
    kubectl test does; a case the fake still answers otherwise is a strict xfail."""
    if no_kubectl is not None and any(step.kubectl for step in case.steps):
        return [pytest.mark.skip(reason=no_kubectl)]
    return [pytest.mark.xfail(strict=True, reason=case.disagrees)] if case.disagrees else []


def _param(case: Case) -> object:
    return pytest.param(case, id=case.id, marks=_marks(case, kubectl_missing()))


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_the_fake_answers_as_upstream_asserts_a_real_server_does(cluster: RunningCluster,
                                                                 case: Case) -> None:
    _answer, differences = cluster.replay(case)
    assert not differences, f"{case.source} {case.test}: " + "; ".join(differences)


def test_every_layer_agrees_on_at_least_95_percent_of_its_cases() -> None:
    """The acceptance of issue 41. The strict xfails above keep each count true: a case
    counted as agreeing passes, one counted as disagreeing fails."""
    for layer in LAYERS:
        cases = [case for case in CASES if case.layer == layer]
        if cases:
            agree = sum(1 for case in cases if not case.disagrees)
            assert 100.0 * agree / len(cases) >= THRESHOLD_PERCENT, (layer, agree, len(cases))


def test_each_case_names_its_upstream_source_and_a_unique_id() -> None:
    assert len({case.id for case in CASES}) == len(CASES)
    for case in CASES:
        assert case.source.endswith(("_test.go", ".sh")) and case.test, case.id
        assert case.layer in LAYERS, case.id


def test_a_kubectl_case_skips_saying_what_to_install_where_kubectl_is_missing(
        tmp_path: Path) -> None:
    """On a machine with only Python and make (README, "Two commands") the kubectl cases skip,
    naming the package; the HTTP cases run; with kubectl on the PATH nothing skips."""
    kubectl_cases = [case for case in CASES if case.layer == KUBECTL]
    http_case = next(case for case in CASES if case.layer != KUBECTL and not case.disagrees)
    assert kubectl_cases and all(any(step.kubectl for step in case.steps)
                                 for case in kubectl_cases)
    no_kubectl = kubectl_missing(path=str(tmp_path))
    assert no_kubectl is not None and "apt-get install kubernetes-client" in no_kubectl
    for case in kubectl_cases:
        (mark,) = _marks(case, no_kubectl)
        assert mark.name == "skip" and mark.kwargs["reason"] == no_kubectl
    assert _marks(http_case, no_kubectl) == []
    program = tmp_path / "kubectl"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    assert kubectl_missing(path=str(tmp_path)) is None
    for case in kubectl_cases:
        kept = [mark.name for mark in _marks(case, kubectl_missing(path=str(tmp_path)))]
        assert kept == (["xfail"] if case.disagrees else []), case.id
