"""The fake cluster as a harness for anyone's tests (docs/harness.md).

    from kube_elevator.harness import fake_cluster

    with fake_cluster() as cluster:                 # or @fake_cluster() on a function
        cluster.add_node_group("workers", max_size=5, labels={"pool": "workers"})
        ...                                         # the code under test: kubectl, the
        cluster.advance(60)                         # official client, boto3
        assert len(cluster.nodes()) == ...

`fake_cluster()` (context.py) starts a `FakeCluster` (cluster.py) for the duration of a `with`
block or of each call of a decorated function (async ones too), with `KUBECONFIG` and the
`AWS_*` variables pointing at it meanwhile, as moto's `mock_aws` does for AWS alone; `current()`
is the innermost one active (for code inside a decorated function). The pytest plugin
(plugin.py, the `pytest11` entry point of the `harness` extra) offers the same as fixtures.

The public names are `kube_elevator.harness`'s. This package's own import is empty on purpose:
the plugin lives in it, and pytest imports the plugin in every session of a venv that has the
package, which must cost nothing until a fixture is used.
"""
