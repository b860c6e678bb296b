"""The simulation's picture (issue 42 item 8): the CPU axis starts at 0 %, not at the run's
lowest value, and the count axis shows whole numbers only."""

from __future__ import annotations

from typing import Any

import pytest


def document() -> dict[str, Any]:
    line = {"nodes": 1, "untainted": 1, "asg_desired": 1, "pending_pods": 0}
    return {"ticks": [{"t": t * 60.0, "node_groups": {"batch": {
        **line, "nodes": 1 + t % 2, "cpu_percent": 50.0 + t}}} for t in range(6)],
        "summary": {"node_seconds": 3600, "pending_pod_seconds": 0}}


def test_cpu_starts_at_zero_and_counts_are_whole() -> None:
    pytest.importorskip("matplotlib")
    from kube_elevator.fakes.plot import simulation_figure

    figure = simulation_figure(document())
    count, cpu = figure.axes[0], figure.axes[1]
    assert cpu.get_ylim()[0] == 0
    assert count.get_ylim()[0] == 0
    figure.canvas.draw()
    assert all(float(tick).is_integer() for tick in count.get_yticks())
