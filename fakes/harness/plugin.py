"""The pytest plugin of the `harness` extra (entry point `pytest11`, name `kube_elevator`).

Fixtures only, each opt-in (nothing autouse), each new per test and stopped after it:

* `fake_kube`: the fake Kubernetes API server (`FakeKubeApi`), started;
* `kubeconfig`: a kubeconfig file for it; `api_client`: the official client's `ApiClient` on it;
* `fake_aws`: moto in this process (`mock_aws`), with the `AWS_*` variables set;
* `fake_cluster`: the three together with the simulated cluster (`FakeCluster`), `KUBECONFIG`
  set; `@pytest.mark.fake_cluster(start_time=..., scheduler_profile=..., seed=...)` chooses;
* `fake_clock`: the fake cluster's clock (`fake_cluster.clock`).

Nothing is imported until a fixture is used: a session that uses none pays nothing, and a
project without the extra's packages can still run pytest with this installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import kubernetes.client

    from kube_elevator.fakes.aws import FakeAws
    from kube_elevator.fakes.harness.clock import ManualClock
    from kube_elevator.fakes.harness.cluster import FakeCluster
    from kube_elevator.fakes.kube_api.server import FakeKubeApi

MARKER = "fake_cluster"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(start_time=None, scheduler_profile='default', seed=1, "
        "field_validation=None, validation=True, defaulting=True, admission_defaults=True): "
        "options of the fake_cluster fixture (kube-elevator's harness); the last four also "
        "switch the fake_kube it shares")


@pytest.fixture
def fake_kube() -> Iterator[FakeKubeApi]:
    """A fresh fake Kubernetes API server on 127.0.0.1."""
    from kube_elevator.fakes.kube_api.server import FakeKubeApi

    with FakeKubeApi() as api:
        yield api


@pytest.fixture
def kubeconfig(fake_kube: FakeKubeApi, tmp_path: Path) -> Path:
    """A kubeconfig file (context `fake`) for `fake_kube`."""
    return fake_kube.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def api_client(fake_kube: FakeKubeApi) -> Iterator[kubernetes.client.ApiClient]:
    """The official client's `ApiClient` on `fake_kube` (the global default is untouched)."""
    with fake_kube.api_client() as api:
        yield api


@pytest.fixture
def fake_aws() -> Iterator[FakeAws]:
    """moto in this process, empty, as `mock_aws` gives it; `AWS_*` set for boto3's chain."""
    from kube_elevator.fakes.harness.aws import InProcessAws

    with InProcessAws() as aws, aws.environment():
        yield aws


@pytest.fixture
def fake_cluster(request: pytest.FixtureRequest, fake_kube: FakeKubeApi, fake_aws: FakeAws,
                 tmp_path: Path) -> Iterator[FakeCluster]:
    """`fake_kube` and `fake_aws` as one simulated cluster on a clock the test moves."""
    from kube_elevator.fakes.harness.cluster import FakeCluster

    marker = request.node.get_closest_marker(MARKER)
    options = dict(marker.kwargs) if marker is not None else {}
    with FakeCluster(kube=fake_kube, aws=fake_aws, workdir=tmp_path, **options) as cluster, \
            cluster.environment():
        yield cluster


@pytest.fixture
def fake_clock(fake_cluster: FakeCluster) -> ManualClock:
    """The fake cluster's clock: `fake_clock.now()`; `fake_cluster.advance(s)` moves it."""
    return fake_cluster.clock
