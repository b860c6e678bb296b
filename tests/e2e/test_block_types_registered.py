"""`register_block_types` (serve calls it at every start) asks the server first: one that has
the three block types already is only read, sparing the import of prefect-aws and
prefect-kubernetes (a second or two of CPU a start); one that lacks any gets them registered."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks.deadlines import scaled
from kube_elevator.tasks.adapters.blocks import BLOCK_TYPE_SLUGS
from tests.e2e.test_approval_flow import needs_blocks

# A process of its own: what its registration returned, and which collections it imported.
REGISTRATION = """
import json, sys
from kube_elevator.tasks.adapters.blocks import register_block_types
slugs = register_block_types()
print(json.dumps([slugs, sorted(name for name in ("prefect_aws", "prefect_kubernetes")
                                 if name in sys.modules)]))
"""


def registration(api_url: str) -> tuple[list[str], list[str]]:
    done = subprocess.run([sys.executable, "-c", REGISTRATION], capture_output=True, text=True,
                          env={**os.environ, "PREFECT_API_URL": api_url},
                          timeout=scaled(120), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    slugs, imported = json.loads(done.stdout.splitlines()[-1])
    return slugs, imported


@needs_blocks
def test_a_server_with_the_block_types_is_only_read_and_one_without_gets_them(
        prefect_server: None) -> None:
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL

    api_url = PREFECT_API_URL.value()
    with get_client(sync_client=True) as client:
        for slug in BLOCK_TYPE_SLUGS:  # the server's start registered the installed ones
            client.read_block_type_by_slug(slug)
    assert registration(api_url) == (list(BLOCK_TYPE_SLUGS), [])

    with get_client(sync_client=True) as client:
        client.delete_block_type(client.read_block_type_by_slug("kubernetes-credentials").id)
        with pytest.raises(ObjectNotFound):
            client.read_block_type_by_slug("kubernetes-credentials")
    assert registration(api_url) == (list(BLOCK_TYPE_SLUGS),
                                     ["prefect_aws", "prefect_kubernetes"])
    with get_client(sync_client=True) as client:
        assert client.read_block_type_by_slug("kubernetes-credentials").slug == \
            "kubernetes-credentials"
