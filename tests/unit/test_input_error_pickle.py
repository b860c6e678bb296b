"""An InputError crosses a process boundary whole (a Dask worker's comes back by pickle)."""

from __future__ import annotations

import pickle

import cloudpickle

from kube_elevator.tasks.core.errors import InputError


def test_an_input_error_unpickles_with_its_problems() -> None:
    error = InputError(["scenario.yaml: cannot read file: No such file or directory",
                        "nodegroups.yaml: node_groups[0].name: Field required"])
    for dumps in (pickle.dumps, cloudpickle.dumps):
        again = pickle.loads(dumps(error))
        assert isinstance(again, InputError)
        assert again.problems == error.problems
        assert str(again) == str(error)
