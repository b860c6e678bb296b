"""moto in this process (`mock_aws`), behind the same helpers as `fakes.aws.FakeAws`.

`FakeAws` runs moto's threaded HTTP server, which another process can reach (a Prefect worker,
a CLI under test) and which costs a server start; `InProcessAws` patches botocore in this
process, as `moto.mock_aws` does, so boto3 clients made here with no `endpoint_url` reach moto
without a socket. Both hold moto's one per-process state; like `mock_aws`, starting an
`InProcessAws` resets it (each test starts with an empty AWS). Unlike `mock_aws`, it skips
moto's ~2,600 default AMIs unless asked (`load_default_amis=True`): they cost ~1 s a test.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config

from kube_elevator.fakes.aws import (
    FAKE_ACCESS_KEY_ID,
    FAKE_SECRET_ACCESS_KEY,
    FakeAws,
    boto3_session_on_shared_models,
    environ_set,
    extend_moto,
    moto_required,
)

# moto's EC2 loads ~2,600 default AMIs each time its state is reset (twice a test: ~1 s); the
# harness's launch templates name an image moto does not check, so by default they are skipped.
LOAD_AMIS = "MOTO_EC2_LOAD_DEFAULT_AMIS"
# The InProcessAws started and not stopped, outermost first: moto's state is one per process,
# so a nested one saves the outer's and gives it back when it stops.
_RUNNING: list[InProcessAws] = []
# A saved moto state: each service's backends by account and region, and each backend's
# attributes (copied), to put back into the same objects (moto caches them by region).
_SavedMoto = list[tuple[Any, list[tuple[str, Any, list[tuple[str, Any, dict[str, Any]]]]]]]


def _save_moto() -> _SavedMoto:
    from moto.core.base_backend import BackendDict

    services: list[Any] = list(BackendDict._instances)  # type: ignore[misc]
    # One backend refers to others (autoscaling to ec2): those references stay the live objects.
    memo: dict[int, Any] = {id(backend): backend for service in services
                            for by_region in dict.values(service)
                            for backend in dict.values(by_region)}
    saved: _SavedMoto = []
    for service in services:
        accounts = []
        for account, by_region in dict.items(service):
            regions = [(region, backend, copy.deepcopy(backend.__dict__, dict(memo)))
                       for region, backend in dict.items(by_region)]
            accounts.append((account, by_region, regions))
        saved.append((service, accounts))
    return saved


def _restore_moto(saved: _SavedMoto) -> None:
    """Forget moto's state now and put `saved` back in its place."""
    from moto.core.base_backend import BackendDict

    BackendDict.reset()
    for service, accounts in saved:
        for account, by_region, regions in accounts:
            dict.__setitem__(service, account, by_region)
            for region, backend, attributes in regions:
                backend.__dict__.clear()
                backend.__dict__.update(attributes)
                dict.__setitem__(by_region, region, backend)
        if service not in BackendDict._instances:  # type: ignore[misc]
            BackendDict._instances.append(service)  # type: ignore[misc]


# The modules whose `create_loader` `_share_loader_in_new_sessions` has replaced, and their own.
_REPLACED_LOADERS: dict[ModuleType, Any] = {}


def _loader_for_new_session(search_path_string: str | None = None) -> botocore.loaders.Loader:
    """What a botocore session made while an `InProcessAws` runs reads its models with: the
    process's one loader for the default data path (an `AWS_DATA_PATH` gets its own)."""
    from kube_elevator.tasks.adapters.cloud import service_models_loader

    return service_models_loader(search_path_string)


def _share_loader_in_new_sessions(on: bool) -> None:
    """Every botocore session made meanwhile (moto's own included), and moto's service models,
    share the process's one loader (`service_models_loader`).

    moto makes sessions of its own: three when `moto.ec2` is imported (its region and zone
    tables, `RegionsAndZonesBackend`) and one for its backends' region lists
    (`AccountSpecificBackend.get_session`). Each new session has a new loader, which parses
    `endpoints.json` and EC2's service model (~2 MB of JSON) again: ~0.9 s of CPU a process,
    measured (benchmarks/RESULTS.md). A botocore session looks its loader up as
    `botocore.session.create_loader` when first asked for it (`Session._register_data_loader`),
    so that name is what is replaced. moto parses each service's model once more for its
    answers, with a loader of its own that first lists every service botocore has (~10,000
    `stat` calls): `moto.core.utils.create_loader` once moto is imported (called again then),
    ~0.25 s of a cluster's first node group. The data is read-only once loaded, as the
    sessions of `InProcessAws.session()` already share it."""
    if not on:
        for module, original in _REPLACED_LOADERS.items():
            module.create_loader = original  # type: ignore[attr-defined]
        _REPLACED_LOADERS.clear()
        return
    for name in ("botocore.session", "moto.core.utils"):
        user = sys.modules.get(name)
        original = getattr(user, "create_loader", None)
        if user is not None and original is not None and user not in _REPLACED_LOADERS:
            _REPLACED_LOADERS[user] = original
            user.create_loader = _loader_for_new_session  # type: ignore[attr-defined]


class InProcessAws(FakeAws):
    """moto's `mock_aws` for the life of this object: boto3 in this process reaches moto.

    Example:
        ```python
        with InProcessAws() as aws:
            autoscaling = aws.client("autoscaling")
            print(autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"])   # []
        ```
    """

    def __init__(self, region: str = "us-east-1", *, load_default_amis: bool = False) -> None:
        super().__init__(region)
        self._mock: Any = None
        self._load_default_amis = load_default_amis
        self._saved_amis_setting: str | None = None
        self._saved_default_session: boto3.Session | None = None
        self._outer_moto: _SavedMoto | None = None

    def start(self) -> InProcessAws:
        if self._mock is not None:
            return self
        from kube_elevator.tasks.core.collector import gc_paused, keep_imports_out_of_collections

        _share_loader_in_new_sessions(True)  # before moto.ec2's import makes its sessions
        try:
            # moto's and its EC2 models' import (tasks/core/collector.py)
            with moto_required(), gc_paused():
                from moto import mock_aws

                extend_moto()
                keep_imports_out_of_collections()
            _share_loader_in_new_sessions(True)  # moto's, now imported
        except BaseException:
            _share_loader_in_new_sessions(bool(_RUNNING))
            raise
        self._saved_amis_setting = os.environ.get(LOAD_AMIS)
        if not self._load_default_amis:
            os.environ[LOAD_AMIS] = "false"
        if _RUNNING:  # nested: the outer's state is kept aside, this one starts empty
            self._outer_moto = _save_moto()
            self.reset()
        self._mock = mock_aws()
        self._mock.start()
        _RUNNING.append(self)
        # moto empties boto3's default session (its patch restores the old one at stop): the
        # new one reads its models through the shared loader, so `boto3.client(...)` in the
        # code under test costs ~0.01 s, not ~0.2 s, from the second cluster of a process on.
        self._saved_default_session = boto3.DEFAULT_SESSION
        boto3.DEFAULT_SESSION = self.session()
        return self

    def stop(self) -> None:
        if self._mock is not None:
            boto3.DEFAULT_SESSION = self._saved_default_session
            self._mock.stop()
            if self in _RUNNING:
                _RUNNING.remove(self)
            _share_loader_in_new_sessions(bool(_RUNNING))
            if self._outer_moto is not None:  # the outer block's ASGs, instances, templates
                _restore_moto(self._outer_moto)
                self._outer_moto = None
            if self._saved_amis_setting is None:
                os.environ.pop(LOAD_AMIS, None)
            else:
                os.environ[LOAD_AMIS] = self._saved_amis_setting
        self._mock = None
        self._shared_session = None
        self._helper_clients.clear()

    def session(self) -> boto3.Session:
        """A new boto3 session (its own event hooks) whose service models and endpoint data
        come from one loader per process: loading them anew costs ~0.3 s a session."""
        return boto3_session_on_shared_models(aws_access_key_id=FAKE_ACCESS_KEY_ID,
                                              aws_secret_access_key=FAKE_SECRET_ACCESS_KEY,
                                              region_name=self.region)

    def __enter__(self) -> InProcessAws:
        return self.start()

    def reset(self) -> None:
        """Forget every resource (moto's backends; affects all moto users in this process)."""
        from moto.core.base_backend import BackendDict

        BackendDict.reset()

    @property
    def endpoint_url(self) -> str:
        raise RuntimeError("moto runs in this process, with no endpoint: for code in another "
                           "process, use fake_cluster(aws='server')")

    def env(self) -> dict[str, str]:
        """The region and moto's dummy credentials (there is no endpoint to point at)."""
        return self._env()

    def _env(self) -> dict[str, str]:
        return {"AWS_DEFAULT_REGION": self.region, "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY_ID,
                "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_ACCESS_KEY}

    @contextmanager
    def environment(self) -> Iterator[None]:
        """`env()` in os.environ, and no `AWS_ENDPOINT_URL` (it would lead boto3 past moto)."""
        with environ_set({**self._env(), "AWS_ENDPOINT_URL": None}):
            yield

    def client(self, service: str, config: Config | None = None) -> Any:
        """A new boto3 client for `service`, reaching moto in this process."""
        if self._shared_session is None:
            self._shared_session = self.session()
        return self._shared_session.client(service, config=config)  # type: ignore[call-overload]
