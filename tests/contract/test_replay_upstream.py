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
from tests.replay.model import LAYERS, Case
from tests.replay.table import CASES, THRESHOLD_PERCENT


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    with fake_cluster_process(Path(tmp_path_factory.mktemp("replay"))) as running:
        yield running


def _param(case: Case) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=case.disagrees)] if case.disagrees else []
    return pytest.param(case, id=case.id, marks=marks)


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
