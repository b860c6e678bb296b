"""Leader election against the fake API with the real client (flows/leader.py,
tasks/adapters/kube_leader.py): the Lease as client-go writes it, takeover, renewal at the
resourceVersion read, release, and a hung API bounded by the renew deadline. The candidates'
clocks are injected, so a lease runs out when the test says, without waiting for it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import kubernetes.client
import pytest

from benchmarks.deadlines import scaled
from benchmarks.event_latency import wait_until
from kube_elevator.fakes.kube_api.server import FakeKubeApi
from kube_elevator.flows.leader import LeaderElector
from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.adapters.kube_leader import LeaderLease
from kube_elevator.tasks.core.acting import install_acting_guard
from kube_elevator.tasks.core.errors import LeaseConflict
from kube_elevator.tasks.core.identity import boot_id, process_identity
from kube_elevator.tasks.core.leader_election import ElectionTimes
from kube_elevator.tasks.core.lease_state import GroupState
from kube_elevator.tasks.core.process_owner import mark_of
from kube_elevator.tasks.steps.lease import write_lock

NAMESPACE, NAME = "kube-system", "elevator-leader"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{NAME}"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def candidate(api_client: kubernetes.client.ApiClient, identity: str,
              clock: Clock) -> LeaderElector:
    return LeaderElector(LeaderLease(api_client, NAMESPACE, NAME), identity, ElectionTimes(),
                         clock=clock, wall_clock=lambda: 1_700_000_000.0 + clock.now)


def spec(fake_kube: FakeKubeApi) -> dict[str, object]:
    return dict(fake_kube.get("leases", NAME, NAMESPACE)["spec"])


def lease_calls(fake_kube: FakeKubeApi) -> list[str]:
    return [f"{r.method} {r.status}" for r in fake_kube.requests if r.path == LEASE_PATH
            or r.path == LEASE_PATH.rsplit("/", 1)[0]]


@pytest.fixture
def second_client(fake_kube: FakeKubeApi) -> Iterator[kubernetes.client.ApiClient]:
    with fake_kube.api_client() as api:
        yield api


def test_the_first_candidate_creates_the_lease_as_client_go_writes_it(
        fake_kube: FakeKubeApi, api_client: kubernetes.client.ApiClient) -> None:
    clock = Clock()
    a = candidate(api_client, "a", clock)
    assert not a.may_act()
    assert a.try_acquire_or_renew(10.0)
    written = spec(fake_kube)
    assert written == {"holderIdentity": "a", "leaseDurationSeconds": 15,
                       "acquireTime": "2023-11-14T22:30:00.000000Z",
                       "renewTime": "2023-11-14T22:30:00.000000Z", "leaseTransitions": 0}
    assert a.may_act()
    assert lease_calls(fake_kube) == ["GET 404", "POST 201"]
    clock.now += 2
    assert a.try_acquire_or_renew(10.0)  # renewed without reading first (the fast path)
    assert lease_calls(fake_kube)[2:] == ["PUT 200"]
    renewed = spec(fake_kube)
    assert renewed["renewTime"] == "2023-11-14T22:30:02.000000Z"
    assert renewed["acquireTime"] == written["acquireTime"]
    clock.now += 10  # no renewal for the renew deadline: it stops acting, by its own clock
    assert not a.may_act()


Pair = tuple[Clock, LeaderElector, LeaderElector]


@pytest.fixture
def leader_and_follower(api_client: kubernetes.client.ApiClient,
                        second_client: kubernetes.client.ApiClient) -> Pair:
    """`a` created the Lease; `b` read it just after, and waits."""
    clock = Clock()
    a, b = candidate(api_client, "a", clock), candidate(second_client, "b", clock)
    assert a.try_acquire_or_renew(10.0)
    assert not b.try_acquire_or_renew(10.0)  # held, and just seen
    assert b.status().holder == "a" and not b.may_act()
    return clock, a, b


def test_a_follower_takes_over_a_lease_not_renewed_for_its_duration(
        fake_kube: FakeKubeApi, leader_and_follower: Pair) -> None:
    clock, a, b = leader_and_follower
    clock.now += 10
    assert a.try_acquire_or_renew(10.0)  # a renews: b's clock for it starts again
    clock.now += 10
    assert not b.try_acquire_or_renew(10.0)  # b sees the renewal now: its clock restarts
    clock.now += 14.9  # a stopped renewing (killed)
    assert not b.try_acquire_or_renew(10.0)
    clock.now += 0.1  # 15 s since b saw the record change
    assert b.try_acquire_or_renew(10.0)
    taken = spec(fake_kube)
    assert (taken["holderIdentity"], taken["leaseTransitions"]) == ("b", 1)
    assert taken["acquireTime"] == taken["renewTime"]
    assert b.may_act() and not a.may_act()
    # a comes back (it was frozen): its lease ran out by its own clock, so it reads first,
    # sees b's, and writes nothing.
    before = len(lease_calls(fake_kube))
    assert not a.try_acquire_or_renew(10.0)
    assert lease_calls(fake_kube)[before:] == ["GET 200"]
    assert spec(fake_kube)["holderIdentity"] == "b" and a.status().holder == "b"


def test_a_lease_whose_holder_was_a_process_here_that_ended_is_taken_at_once(
        fake_kube: FakeKubeApi, api_client: kubernetes.client.ApiClient,
        second_client: kubernetes.client.ApiClient) -> None:
    """A serve killed and started again on the same host (a laptop, a VM): the Lease's holder
    is the killed process, whose identity says which it was; the new one takes the Lease at its
    first try, not a lease duration later. While that process lives, it waits as ever."""
    clock = Clock()
    holder = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                              stdin=subprocess.PIPE)
    killed = candidate(api_client, f"{mark_of(holder.pid)}_{boot_id()}", clock)
    assert killed.try_acquire_or_renew(10.0)
    said: list[str] = []
    restarted = LeaderElector(LeaderLease(second_client, NAMESPACE, NAME), process_identity(),
                              ElectionTimes(), clock=clock, say=said.append,
                              wall_clock=lambda: 1_700_000_000.0 + clock.now)
    assert not restarted.try_acquire_or_renew(10.0)  # its holder lives: a lease to wait out
    holder.kill()
    holder.wait(timeout=scaled(30))
    if mark_of().start is None:
        pytest.skip("no /proc: a holder's end cannot be told")
    assert restarted.try_acquire_or_renew(10.0)  # the same instant by the clock
    taken = spec(fake_kube)
    assert (taken["holderIdentity"], taken["leaseTransitions"]) == (process_identity(), 1)
    assert restarted.may_act()
    assert any("has ended: taking the Lease" in line for line in said), said


def test_a_renewal_refused_for_its_resource_version_reads_and_gives_way(
        fake_kube: FakeKubeApi, api_client: kubernetes.client.ApiClient) -> None:
    """The optimistic renewal carries the resourceVersion of our last write: when the Lease
    changed meanwhile (here an operator handed it over), it gets 409, and the slow path reads
    the new record and leaves it alone."""
    clock = Clock()
    a = candidate(api_client, "a", clock)
    assert a.try_acquire_or_renew(10.0)
    fake_kube.patch("leases", NAME, {"spec": {"holderIdentity": "operator"}}, NAMESPACE)
    clock.now += 2
    before = len(lease_calls(fake_kube))
    assert not a.try_acquire_or_renew(10.0)
    assert lease_calls(fake_kube)[before:] == ["PUT 409", "GET 200"]
    assert spec(fake_kube)["holderIdentity"] == "operator" and not a.may_act()


def test_a_released_lease_is_taken_at_once(fake_kube: FakeKubeApi,
                                           leader_and_follower: Pair) -> None:
    _, a, b = leader_and_follower
    assert a.release()
    assert spec(fake_kube)["holderIdentity"] == "" and spec(fake_kube)["leaseDurationSeconds"] == 1
    assert not a.may_act()
    assert b.try_acquire_or_renew(10.0)  # no holder: free, no wait
    assert (spec(fake_kube)["holderIdentity"], spec(fake_kube)["leaseTransitions"]) == ("b", 1)
    assert b.release() and a.release()  # a holds nothing: nothing to do


def test_a_hung_api_fails_the_try_within_its_timeout(
        fake_kube: FakeKubeApi, api_client: kubernetes.client.ApiClient) -> None:
    a = LeaderElector(LeaderLease(api_client, NAMESPACE, NAME), "a", ElectionTimes())
    fake_kube.faults.add("hang", count=None, path_prefix=LEASE_PATH.rsplit("/", 1)[0])
    started = time.monotonic()
    try:
        assert not a.try_acquire_or_renew(1.0)
    finally:
        fake_kube.faults.release()
    assert time.monotonic() - started < 5  # not the 30 s read timeout of other calls


def test_two_running_electors_hand_over_on_a_clean_stop(
        fake_kube: FakeKubeApi, api_client: kubernetes.client.ApiClient,
        second_client: kubernetes.client.ApiClient) -> None:
    """`run` in threads with short times on the real clock: one leads, the other follows; the
    leader's clean stop releases the Lease and the follower leads at its next try."""
    times = ElectionTimes(3, 2, 0.2)
    electors = [LeaderElector(LeaderLease(client, NAMESPACE, NAME), name, times)
                for client, name in ((api_client, "a"), (second_client, "b"))]
    stops = [threading.Event(), threading.Event()]
    threads = [threading.Thread(target=elector.run, args=(stop,), daemon=True)
               for elector, stop in zip(electors, stops, strict=True)]
    try:
        for thread in threads:
            thread.start()
        leader = wait_until(lambda: next((e for e in electors if e.may_act()), None), 10,
                            "a leader")
        follower = electors[1 - electors.index(leader)]
        wait_until(lambda: follower.status().holder == leader.identity, 10, "a follower")
        assert not follower.may_act() and not follower.status().leading
        stops[electors.index(leader)].set()
        threads[electors.index(leader)].join(timeout=scaled(10))
        wait_until(follower.may_act, 5, "the follower to lead")  # well before the 3 s lease
        assert spec(fake_kube)["holderIdentity"] == follower.identity
        assert spec(fake_kube)["leaseTransitions"] == 1
    finally:
        for stop in stops:
            stop.set()
        for thread in threads:
            thread.join(timeout=scaled(10))
    assert spec(fake_kube)["holderIdentity"] == ""  # released on the way out


def test_a_process_that_no_longer_leads_claims_no_group(kubeconfig: object) -> None:
    kube = KubeClient.from_config(str(kubeconfig))
    install_acting_guard(lambda: False)
    try:
        with pytest.raises(LeaseConflict, match="no longer leads"):
            write_lock.fn(kube, NAMESPACE, "batch", GroupState(), 0.0)
    finally:
        install_acting_guard(None)
    assert write_lock.fn(kube, NAMESPACE, "batch", GroupState(), 0.0).resource_version
