"""Prefect's own blocks for a cluster and its cloud (DESIGN.md §8): read by name, registered.

The cluster comes from prefect-kubernetes (a `KubernetesClusterConfig` block, or a
`KubernetesCredentials` block holding one), the AWS credentials from prefect-aws
(`AwsCredentials`, read in `tasks.adapters.cloud`). Both collections are the `blocks` extra:
imported only when a block is named, so a tick without blocks never pays their import (~3 s
for prefect-kubernetes). prefect-kubernetes' clients are asynchronous; the ticks use the
synchronous `kubernetes` client, so the block gives its kubeconfig and context, not a client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic_core import CoreSchema, core_schema

from kube_elevator.tasks.core.errors import InputError

if TYPE_CHECKING:
    from kube_elevator.tasks.adapters.kube import KubeClient

BLOCKS_EXTRA = "pip install 'kube-elevator[blocks]' (prefect-kubernetes and prefect-aws)"


class BlockChoice:
    """A flow parameter's type that makes the Prefect UI's run form offer the saved blocks of
    one type (a block picker; the parameter may also be a block's name, `str`).

    Prefect hands a block chosen in the form to the flow loaded (it resolves `{"$ref": ...}`
    parameters), so any value passes validation here, and `block_name` reads the name back.
    The schema is written out, with the block type's slug, so that the flow's module needs not
    import the collection (~3 s for prefect-kubernetes) to describe the parameter.

    Example:
        >>> issubclass(ke.ClusterBlock, ke.BlockChoice)
        True
    """

    title: ClassVar[str]
    slug: ClassVar[str]

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> CoreSchema:
        return core_schema.any_schema(ref=cls.title)  # a definition of its own, by $ref

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: CoreSchema, handler: Any) -> dict[str, Any]:
        # No property of its own: a block chosen is `{"$ref": ...}`, which the server must
        # find valid under its reference schema alone (a parameter's anyOf is checked oneOf).
        return {"title": cls.title, "type": "object", "block_type_slug": cls.slug,
                "block_schema_references": {}, "properties": {}, "additionalProperties": False}


class ClusterBlock(BlockChoice):
    """A prefect-kubernetes `KubernetesClusterConfig` block.

    Example:
        ```python
        from prefect import flow

        @flow
        def my_flow(cluster_block: ke.ClusterBlock | str | None = None) -> None:
            cluster = ke.block_name(cluster_block, "cluster_block")
            adapters = ke.make_adapters(None, "kube-system", None, cluster)
        ```
    """

    title = "KubernetesClusterConfig"
    slug = "kubernetes-cluster-config"


class AwsCredentialsBlock(BlockChoice):
    """A prefect-aws `AwsCredentials` block.

    Example:
        ```python
        from prefect import flow

        @flow
        def my_flow(aws: ke.AwsCredentialsBlock | str | None = None) -> None:
            adapters = ke.make_adapters(None, "kube-system", ke.block_name(aws, "aws"))
        ```
    """

    title = "AwsCredentials"
    slug = "aws-credentials"


def block_name(value: object, parameter: str) -> str | None:
    """The name of the block a flow parameter names or holds (the UI's block picker hands over
    the block itself, loaded); None for none.

    Example:
        >>> ke.block_name("prod-cluster", "cluster_block"), ke.block_name(None, "cluster_block")
        ('prod-cluster', None)
    """
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    name = getattr(value, "_block_document_name", None)
    if not isinstance(name, str) or not name:
        raise InputError([f"{parameter}: give a saved block, or the name of one "
                          f"(got an unsaved {type(value).__name__})"])
    return name


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
    from kube_elevator.tasks.adapters.kube import KubeClient

    kubeconfig, context = cluster_config_from_block(name)
    return KubeClient.from_config_dict(kubeconfig, context, f"cluster block {name!r}")


# The slugs of the block types the flows take by name (`register_block_types`).
BLOCK_TYPE_SLUGS = ("kubernetes-cluster-config", "kubernetes-credentials", "aws-credentials")


def register_block_types() -> list[str]:
    """Register the block types the flows take by name with the current Prefect server (what
    `prefect block register -m prefect_kubernetes` and `-m prefect_aws` do for these three),
    so its UI offers them under Blocks; their slugs. Without the `blocks` extra: none.

    A server that has all three already (a `prefect server start` registers the installed
    collections' at its start; an earlier serve did) is only asked: importing the collections
    was a second or two of CPU on every `serve` start. A block saved later registers its own
    schema as it saves (Prefect's `Block.save`), so a newer collection's is not lost.

    Example:
        ```python
        slugs = ke.register_block_types()   # with PREFECT_API_URL set to your server
        ```
    """
    import importlib.util

    if any(importlib.util.find_spec(name) is None
           for name in ("prefect_aws", "prefect_kubernetes")):
        return []
    if _server_has_block_types(BLOCK_TYPE_SLUGS):
        return list(BLOCK_TYPE_SLUGS)
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


def _server_has_block_types(slugs: tuple[str, ...]) -> bool:
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        for slug in slugs:
            try:
                client.read_block_type_by_slug(slug)
            except ObjectNotFound:
                return False
    return True
