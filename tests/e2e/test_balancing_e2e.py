"""--balance-similar-node-groups end to end (CA §1.5): the real tick on the simulator.

One ASG per availability zone, the layout the AWS README recommends with this flag: three groups
of m5.large whose nodes differ only by zone and by their Escalator group label.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kube_elevator.fakes.scenario import load_scenario
from kube_elevator.flows.simulation import simulate
from tests.e2e.test_cluster_autoscaler_e2e import ca_group, write

SIZES = {"a": 1, "b": 3, "c": 6}  # the proposal's worked example


def _zonal(tmp_path: Path, ca: dict[str, Any], waiting: int,
           labels: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """Groups a, b, c (zones 1a, 1b, 1c) with 1, 3 and 6 nodes, each node full with one
    1.5-CPU pod; `waiting` more such pods arrive at 30s, each needing a node of its own.
    `labels` adds node labels to a group's nodes.

    The pods select no group (no group is named "default"), so Escalator's own rules leave them
    to the CA scale-up; min_nodes keeps Escalator from scaling the idle groups down meanwhile.
    """
    groups = [ca_group(f"web-{g}", min_nodes=size, max_nodes=10) for g, size in SIZES.items()]
    asgs = [{"name": f"web-{g}-asg", "min": 0, "max": 10, "desired": size,
             "instance_type": "m5.large", "availability_zone": f"us-east-1{g}",
             "node_labels": {"customer": f"web-{g}", "pool": "web", **(labels or {}).get(g, {})},
             "boot_delay": "90s"}
            for g, size in SIZES.items()]
    workload = [{"name": "steady", "at": "0s", "count": sum(SIZES.values()), "cpu": "1500m",
                 "memory": "1Gi"},
                {"name": "burst", "at": "30s", "count": waiting, "cpu": "1500m",
                 "memory": "1Gi"}]
    path = write(tmp_path, groups, asgs, workload,
                 {"enabled": True, "random_seed": 1, **ca}, duration="4m")
    return simulate(load_scenario(path)).to_json()


def _desired(result: dict[str, Any], t: float) -> dict[str, int]:
    line = next(tick for tick in result["ticks"] if tick["t"] == t)
    return {name.removeprefix("web-"): group["asg_desired"]
            for name, group in line["node_groups"].items()}


def _added(result: dict[str, Any], t: float) -> dict[str, int]:
    return {g: n - SIZES[g] for g, n in _desired(result, t).items() if n != SIZES[g]}


def test_balancing_splits_the_new_nodes_smallest_group_first(tmp_path: Path) -> None:
    four = _zonal(tmp_path / "4", {"balance_similar_node_groups": True}, 4)
    assert _desired(four, 0) == SIZES  # nothing waits before the burst
    assert _added(four, 60) == {"a": 3, "b": 1}  # the first tick that sees the burst
    end = four["ticks"][-1]["node_groups"]
    assert {g: end[f"web-{g}"]["nodes"] for g in SIZES} == {"a": 4, "b": 4, "c": 6}
    assert four["summary"]["premature_terminations"] == 0

    one = _zonal(tmp_path / "1", {"balance_similar_node_groups": True}, 1)
    assert _added(one, 60) == {"a": 1}


def test_without_balancing_one_group_takes_every_new_node(tmp_path: Path) -> None:
    result = _zonal(tmp_path, {}, 4)  # the least-waste tie is broken at random, seeded
    assert list(_added(result, 60).values()) == [4]


def test_a_custom_label_opts_a_group_out_unless_it_is_ignored(tmp_path: Path) -> None:
    ssd = {"b": {"disk": "ssd"}}
    on = {"balance_similar_node_groups": True}
    # b's nodes carry a label the others lack: only a and c are similar; a (1) takes all 4
    assert _added(_zonal(tmp_path / "1", on, 4, ssd), 60) == {"a": 4}
    # --balancing-ignore-label disk: b is similar again, and the split is the worked example's
    ignored = {**on, "balancing_ignore_labels": ["disk"]}
    assert _added(_zonal(tmp_path / "2", ignored, 4, ssd), 60) == {"a": 3, "b": 1}
