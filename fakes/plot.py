"""A picture of a simulation: nodes, demand and pending pods over time, per node group."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_simulation(document: dict[str, Any], path: str | Path) -> Path:
    """Write a PNG with one panel per node group; returns its path."""
    import matplotlib

    matplotlib.use("Agg")  # no display: write files only
    import matplotlib.pyplot as plt

    ticks = document["ticks"]
    names = list(ticks[0]["node_groups"]) if ticks else []
    figure, axes = plt.subplots(len(names), 1, figsize=(10, 3.2 * max(len(names), 1)),
                                squeeze=False, sharex=True)
    minutes = [tick["t"] / 60 for tick in ticks]
    for axis, name in zip(axes[:, 0], names, strict=True):
        series = [tick["node_groups"][name] for tick in ticks]
        axis.step(minutes, [s["nodes"] for s in series], where="post", label="nodes",
                  color="tab:blue", linewidth=2)
        axis.step(minutes, [s["untainted"] for s in series], where="post",
                  label="untainted nodes", color="tab:cyan", linestyle="--")
        axis.step(minutes, [s["asg_desired"] for s in series], where="post",
                  label="ASG desired", color="tab:gray", linestyle=":")
        axis.step(minutes, [s["pending_pods"] for s in series], where="post",
                  label="pending pods", color="tab:red")
        axis.set_ylabel("count")
        axis.set_title(f"node group {name}")
        demand = axis.twinx()
        demand.plot(minutes, [s["cpu_percent"] if s["cpu_percent"] is not None else float("nan")
                              for s in series], color="tab:orange", alpha=0.6,
                    label="CPU requested (% of untainted)")
        demand.set_ylabel("CPU requested %")
        lines = axis.get_legend_handles_labels()
        extra = demand.get_legend_handles_labels()
        axis.legend(lines[0] + extra[0], lines[1] + extra[1], loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("simulated minutes")
    summary = document.get("summary", {})
    figure.suptitle(f"kube-elevator simulation: {summary.get('node_seconds', 0) / 3600:.1f} "
                    f"node-hours, {summary.get('pending_pod_seconds', 0) / 60:.0f} pending "
                    "pod-minutes")
    figure.tight_layout()
    target = Path(path)
    figure.savefig(target, dpi=100)
    plt.close(figure)
    return target
