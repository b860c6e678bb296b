"""Counts in words (issue 42 item 8): "1 node", never "1 nodes"."""

from __future__ import annotations

from kube_elevator.tasks.core.words import counted


def test_one_is_singular_and_the_rest_plural() -> None:
    assert [counted(n, "node") for n in (0, 1, 2)] == ["0 nodes", "1 node", "2 nodes"]
    assert counted(1, "autoscaler") == "1 autoscaler"
    assert counted(3, "node group") == "3 node groups"
    assert counted(2, "policy", "policies") == "2 policies"
