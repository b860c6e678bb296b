"""Their own task: the group whose pods request the most CPU."""

from __future__ import annotations

from collections.abc import Mapping

import kube_elevator as ke


def hottest(usage: Mapping[str, ke.Utilization]) -> str:
    """The name of the group whose pods request the most CPU."""
    cpu_milli = {name: used.requests.cpu_milli for name, used in usage.items()}
    return max(cpu_milli, key=cpu_milli.__getitem__)
