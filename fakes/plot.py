"""Pictures of simulations: nodes, demand and pending pods over time, per node group; and
`elevator tune`'s trials against the Pareto front."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kube_elevator.tasks.core.output_files import write_atomically


def plot_simulation(document: dict[str, Any], path: str | Path, option: str = "--plot") -> Path:
    """Write a picture (PNG, or the format the name says) with one panel per node group;
    returns its path."""
    return _saved(simulation_figure(document), Path(path), option, dpi=100)


def simulation_figure(document: dict[str, Any]) -> Any:
    """The simulation's matplotlib figure: a panel per node group, one legend below them."""
    import matplotlib

    matplotlib.use("Agg")  # no display: write files only
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

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
        # Nodes and pods come whole, and from none: integer ticks from 0 (issue 42 item 8).
        axis.yaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_ylim(bottom=0)
        axis.set_title(f"node group {name}")
        demand = axis.twinx()
        demand.plot(minutes, [s["cpu_percent"] if s["cpu_percent"] is not None else float("nan")
                              for s in series], color="tab:orange", alpha=0.6,
                    label="CPU requested (% of untainted)")
        demand.set_ylabel("CPU requested %")
        demand.set_ylim(bottom=0)  # a percentage from 0 %, not from the run's lowest
        lines = axis.get_legend_handles_labels()
        extra = demand.get_legend_handles_labels()
        legend = (lines[0] + extra[0], lines[1] + extra[1])
    axes[-1, 0].set_xlabel("simulated minutes")
    summary = document.get("summary", {})
    figure.suptitle(f"kube-elevator simulation: {summary.get('node_seconds', 0) / 3600:.1f} "
                    f"node-hours, {summary.get('pending_pod_seconds', 0) / 60:.0f} pending "
                    "pod-minutes")
    # One legend for every panel (the same lines), below them: inside a panel it hid the lines
    # it names, wherever they ran.
    legend_inches = 0.45
    if names:
        figure.legend(*legend, loc="lower center", ncol=5, fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, legend_inches / figure.get_figheight(), 1, 1))
    return figure


def plot_front(result: Any, path: str | Path, option: str = "--plot") -> Path:
    """Every trial, the Pareto front, the file as it is and the chosen setting."""
    return _saved(front_figure(result), Path(path), option)


def front_figure(result: Any) -> Any:
    """`plot_front`'s matplotlib figure, its legend beside the axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10.5, 5), dpi=110)
    points = [(e.node_seconds, e.pending_pod_seconds, ok) for _, e, ok in result.trials]
    axes.scatter([p[0] for p in points if p[2]], [p[1] for p in points if p[2]], s=12,
                 color="#9aa5b1", label="trial within the limits (waits, pods cut short)")
    axes.scatter([p[0] for p in points if not p[2]], [p[1] for p in points if not p[2]], s=12,
                 color="#f0b8b8", label="trial over a limit")
    front = [points[i] for i in result.front]
    axes.plot([p[0] for p in front], [p[1] for p in front], "-o", color="#1f77b4", ms=4,
              label="Pareto front")
    default = points[0]
    axes.scatter([default[0]], [default[1]], marker="s", s=60, color="black",
                 label="the file as it is")
    chosen = next(e for k, e, _ in result.trials if k == result.chosen)
    axes.scatter([chosen.node_seconds], [chosen.pending_pod_seconds], marker="*", s=160,
                 color="#d62728", label="chosen")
    axes.set_xlabel("node-seconds (mean over the search seeds)")
    axes.set_ylabel("pending pod-seconds")
    axes.set_title("elevator tune: cost against waiting")
    # Beside the axes, not over the trials: the front runs corner to corner.
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    figure.tight_layout()
    return figure


def _saved(figure: Any, path: Path, option: str, dpi: float | None = None) -> Path:
    """The figure in the format its file name says, written whole (`write_atomically`)."""
    import io

    import matplotlib.pyplot as plt

    image = io.BytesIO()
    figure.savefig(image, format=path.suffix.lstrip(".").lower() or "png", dpi=dpi)
    plt.close(figure)
    return write_atomically(path, image.getvalue(), option)
