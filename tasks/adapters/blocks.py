"""Prefect's own blocks for a cluster and its cloud (DESIGN.md §8): read by name, registered.

The cluster comes from prefect-kubernetes (a `KubernetesClusterConfig` block, or a
`KubernetesCredentials` block holding one), the AWS credentials from prefect-aws
(`AwsCredentials`, read in `tasks.adapters.cloud`). Both collections are the `blocks` extra:
imported only when a block is named, so a tick without blocks never pays their import (~3 s
for prefect-kubernetes). prefect-kubernetes' clients are asynchronous; the ticks use the
synchronous `kubernetes` client, so the block gives its kubeconfig and context, not a client.
"""

from __future__ import annotations

from typing import Any

from kube_elevator.tasks.adapters.kube import KubeClient
from kube_elevator.tasks.core.errors import InputError

BLOCKS_EXTRA = "pip install 'kube-elevator[blocks]' (prefect-kubernetes and prefect-aws)"


def _cluster_block_types() -> tuple[Any, Any]:
    try:
        from prefect_kubernetes.credentials import KubernetesClusterConfig, KubernetesCredentials
    except ImportError:
        raise InputError([f"cluster_block: needs prefect-kubernetes, which is not installed: "
                          f"{BLOCKS_EXTRA}"]) from None
    return KubernetesClusterConfig, KubernetesCredentials


def cluster_config_from_block(name: str) -> tuple[dict[str, Any], str | None]:
    """(kubeconfig mapping, context) of the block `name`: a `KubernetesClusterConfig` block,
    else a `KubernetesCredentials` block's `cluster_config`; an InputError names what is
    missing."""
    cluster_config, credentials = _cluster_block_types()
    try:
        block = cluster_config.load(name)
    except ValueError as not_found:
        try:
            held = credentials.load(name).cluster_config
        except ValueError:
            raise InputError([f"cluster_block: no KubernetesClusterConfig or "
                              f"KubernetesCredentials block named {name!r} ({not_found})"]) \
                from None
        if held is None:
            raise InputError([f"cluster_block: the KubernetesCredentials block {name!r} holds "
                              "no cluster_config"]) from None
        block = held
    return dict(block.config), block.context_name or None


def kube_client_from_block(name: str) -> KubeClient:
    """The tick's Kubernetes client for the cluster the block `name` describes."""
    kubeconfig, context = cluster_config_from_block(name)
    return KubeClient.from_config_dict(kubeconfig, context, f"cluster block {name!r}")


def register_block_types() -> list[str]:
    """Register the block types the flows take by name with the current Prefect server (what
    `prefect block register -m prefect_kubernetes` and `-m prefect_aws` do for these three),
    so its UI offers them under Blocks; their slugs. Without the `blocks` extra: none."""
    try:
        from prefect_aws import AwsCredentials
        from prefect_kubernetes.credentials import KubernetesClusterConfig, KubernetesCredentials
    except ImportError:
        return []
    registered = []
    for block_type in (KubernetesClusterConfig, KubernetesCredentials, AwsCredentials):
        block_type.register_type_and_schema()
        registered.append(block_type.get_block_type_slug())
    return registered
