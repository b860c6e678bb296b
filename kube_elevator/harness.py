"""kube-elevator's fake cluster as a test harness for anyone's code (docs/harness.md).

`fake_cluster()` (a context manager and decorator, as moto's `mock_aws`) and the pytest plugin
of the `harness` extra (`pip install 'kube-elevator[harness]'`: fixtures `fake_cluster`,
`fake_kube`, `kubeconfig`, `api_client`, `fake_aws`, `fake_clock`). Versioned with the package
(`kube_elevator.__version__`); the implementation lives in `kube_elevator.fakes.harness`.
Every type the harness's signatures name is public here too: `FakeAws` (`cluster.aws`), the
fault rules (`FaultInjector`, `Fault`, `RequestInfo`), `InjectedFailures` (`fail_next_calls`),
`RecordedRequest` (`FakeKubeApi.requests`) and `ResourceType` (`install_crd`). Each name's
docstring ends with an example (`>>>` ones run as they stand; the tests run them).
"""

from __future__ import annotations

from kube_elevator.fakes.aws import FakeAws, InjectedFailures, fail_next_calls
from kube_elevator.fakes.faults import Fault, FaultInjector, RequestInfo
from kube_elevator.fakes.freezing_proxy import FreezingProxy
from kube_elevator.fakes.harness.aws import InProcessAws
from kube_elevator.fakes.harness.clock import ManualClock
from kube_elevator.fakes.harness.cluster import FakeCluster
from kube_elevator.fakes.harness.context import current, fake_cluster
from kube_elevator.fakes.kube_api.policy import RecordedRequest
from kube_elevator.fakes.kube_api.resources import ResourceType
from kube_elevator.fakes.kube_api.server import FakeKubeApi

__all__ = ["FakeAws", "FakeCluster", "FakeKubeApi", "Fault", "FaultInjector", "FreezingProxy",
           "InProcessAws", "InjectedFailures", "ManualClock", "RecordedRequest", "RequestInfo",
           "ResourceType", "current", "fail_next_calls", "fake_cluster"]
