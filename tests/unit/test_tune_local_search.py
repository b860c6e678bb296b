"""The tuner's local search, on a stand-in workload whose cost is known: it moves one knob at a
time to the cheapest step that keeps every seed's wait, stops when a pass moves nothing, and
spends no more trials than its budget."""

from __future__ import annotations

from pathlib import Path

import yaml

from kube_elevator.flows.tune import refine
from kube_elevator.tasks.core.duration import parse_go_duration
from kube_elevator.tasks.tuning.space import Evaluation, Knobs, Limits, current_knobs
from tests.builders import group_dict, make_group

GROUPS = [make_group(name="batch")]
FILE = {"batch": current_knobs(GROUPS[0])}
LIMITS = Limits((500.0, 400.0), (0, 0))


def stand_in(knobs: Knobs) -> Evaluation:
    """Faster removal and a shorter soft grace save nodes and keep the waits; a higher
    scale-up threshold saves more, but makes the second workload's pods wait past its limit;
    a hard grace period of 5 minutes saves more still, but cuts a running pod short."""
    batch = knobs["batch"]
    rate = int(str(batch["fast_node_removal_rate"]))
    soft = parse_go_duration(str(batch["soft_delete_grace_period"]))
    hard = parse_go_duration(str(batch["hard_delete_grace_period"]))
    threshold = int(str(batch["scale_up_threshold_percent"]))
    node_seconds = (10_000 - 100 * min(rate, 10) - (300 if soft <= 30 else 0) - 20 * threshold
                    - (500 if hard <= 300 else 0))
    waits = (450.0, 390.0 + (50.0 if threshold > 70 else 0.0))
    return Evaluation(node_seconds, 1_000.0, waits, (0, 1 if hard <= 300 else 0))


def test_the_local_search_moves_to_the_cheapest_setting_that_keeps_every_wait() -> None:
    tried: list[Knobs] = []

    def run(settings: list[Knobs]) -> list[Evaluation]:
        tried.extend(settings)
        return [stand_in(knobs) for knobs in settings]

    best, evaluation = refine(GROUPS, FILE, stand_in(FILE), LIMITS, 500, run)
    assert best["batch"]["fast_node_removal_rate"] == 10  # 16 saves no more than 10: not taken
    assert best["batch"]["soft_delete_grace_period"] == "30s"
    assert best["batch"]["scale_up_threshold_percent"] == 70  # cheaper, but a wait too long
    assert best["batch"]["hard_delete_grace_period"] == "10m"  # cheaper, but a pod cut short
    assert evaluation == stand_in(best)
    changed = {knob for knob, value in best["batch"].items() if value != FILE["batch"][knob]}
    assert changed == {"fast_node_removal_rate", "soft_delete_grace_period"}
    # a higher threshold and a shorter hard grace were tried, and refused
    assert any(int(str(knobs["batch"]["scale_up_threshold_percent"])) > 70 for knobs in tried)
    assert any(knobs["batch"]["hard_delete_grace_period"] == "5m" for knobs in tried)
    assert len({repr(knobs) for knobs in tried}) == len(tried)  # no setting tried twice


def test_the_local_search_spends_no_more_than_its_budget() -> None:
    tried: list[Knobs] = []

    def run(settings: list[Knobs]) -> list[Evaluation]:
        tried.extend(settings)
        return [stand_in(knobs) for knobs in settings]

    refine(GROUPS, FILE, stand_in(FILE), LIMITS, 3, run)
    assert len(tried) == 3


def test_the_front_shows_settings_that_did_the_same_once() -> None:
    from kube_elevator.flows.tune import TuneResult

    same = Evaluation(100.0, 10.0, (50.0,), (0,))
    result = TuneResult((), trials=[
        (FILE, Evaluation(120.0, 5.0, (50.0,), (0,)), True),
        ({"batch": {"slow_node_removal_rate": 2}}, same, True),
        ({"services": {"slow_node_removal_rate": 3}}, same, True),  # changed nothing here
        ({"batch": {"slow_node_removal_rate": 4}}, Evaluation(130.0, 20.0, (60.0,), (0,)),
         True),
    ])
    assert result.front == [1, 0]  # cheapest first; the twin (2) and the beaten (3) left out


def test_a_search_that_found_nothing_says_so_and_leaves_the_file_as_it_was(
        tmp_path: Path) -> None:
    from kube_elevator.flows.tune import TuneResult, tuned_file

    original = tmp_path / "nodegroups.yaml"
    original.write_text(f"# ours\n{yaml.safe_dump({'node_groups': [group_dict()]})}")
    result = TuneResult(tuple(GROUPS), trials=[(FILE, stand_in(FILE), True)], chosen=FILE)
    written = tuned_file(tmp_path / "tuned.yaml", original.read_text(), result).read_text()
    head, rest = written.split("\n", 1)
    assert head == ("# Tuned by `elevator tune` (0 trials): no setting tried stayed within the "
                    "limits with fewer node-seconds; the file is as it was.")
    assert yaml.safe_load(rest) == yaml.safe_load(original.read_text())
    assert rest.startswith("# ours\n")


def test_a_knob_shared_through_a_yaml_anchor_is_changed_for_the_tuned_group_only(
        tmp_path: Path) -> None:
    """Real node-group files share settings with an anchor and merge keys (`<<: *defaults`):
    the tuned group gets its own value, the other groups keep the shared one."""
    from kube_elevator.flows.tune import TuneResult, tuned_file

    shared = {key: value for key, value in group_dict().items()
              if key in ("fast_node_removal_rate", "soft_delete_grace_period")}
    first = {key: value for key, value in group_dict().items() if key not in shared}
    second = {**first, "name": "services", "label_value": "services"}
    original = "defaults: &defaults\n" + "".join(f"  {k}: {v}\n" for k, v in shared.items()) \
        + "node_groups:\n" + "".join(
            "  - <<: *defaults\n" + "".join(f"    {k}: {v}\n" for k, v in group.items())
            for group in (first, second))
    groups = [make_group(), make_group(name="services", label_value="services")]
    chosen = {group.name: current_knobs(group) for group in groups}
    chosen["batch"]["fast_node_removal_rate"] = 16
    result = TuneResult(tuple(groups), trials=[(chosen, stand_in(chosen), True)], chosen=chosen)
    written = yaml.safe_load(tuned_file(tmp_path / "tuned.yaml", original, result).read_text())
    by_name = {group["name"]: group for group in written["node_groups"]}
    assert by_name["batch"]["fast_node_removal_rate"] == 16
    assert by_name["services"]["fast_node_removal_rate"] == shared["fast_node_removal_rate"]
    assert written["defaults"] == shared
    assert "<<: *defaults" in (tmp_path / "tuned.yaml").read_text()


def test_a_knob_the_file_leaves_out_is_written_in_only_when_it_changes(tmp_path: Path) -> None:
    """A file without `slow_node_removal_rate` runs with Escalator's 0: the tuned file does not
    list "None -> 0" as a change nor write the 0 in; a real change says the key was not set."""
    from kube_elevator.flows.tune import TuneResult, tuned_file

    left_out = {key: value for key, value in group_dict().items()
                if key != "slow_node_removal_rate"}
    original = yaml.safe_dump({"node_groups": [left_out]}, sort_keys=False)
    groups = [make_group(slow_node_removal_rate=0)]
    chosen = {"batch": current_knobs(groups[0])}
    assert chosen["batch"]["slow_node_removal_rate"] == 0
    result = TuneResult(tuple(groups), trials=[(chosen, stand_in(chosen), True)], chosen=chosen)
    written = tuned_file(tmp_path / "same.yaml", original, result).read_text()
    assert "slow_node_removal_rate" not in written and "no setting tried" in written

    chosen["batch"]["slow_node_removal_rate"] = 2
    written = tuned_file(tmp_path / "tuned.yaml", original, result).read_text()
    assert "#   batch.slow_node_removal_rate: 0 (not set) -> 2" in written
    assert yaml.safe_load(written)["node_groups"][0]["slow_node_removal_rate"] == 2
