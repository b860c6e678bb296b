"""Issue 27's hostile shapes anywhere in every reader's file, each object kind included: a YAML
alias inside the node its anchor names (a document that contains itself), nesting past the
limit, a billion laughs, and a value of the wrong type at any key path. Exit 0, or exit 2 with
one line per problem naming the file; never a traceback, never a hang (the readers and helpers
of `test_fuzz_inputs.py`). `test_hostile_probe.py` runs the same shapes by the hundred, each in
a process of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kube_elevator.tasks.core.documents import SELF_REFERENCE, TOO_DEEP
from tests.e2e.test_fuzz_inputs import READERS, assert_clean, copy_examples, elevator, mutated
from tests.hostile_shapes import (
    WRONG_TYPES,
    billion_laughs,
    deep_text,
    key_paths,
    object_first_key_path,
    recursive_alias,
    replaced,
    with_text,
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return copy_examples(tmp_path_factory.mktemp("examples"))


@pytest.mark.parametrize("as_yaml", [False, True])
@pytest.mark.parametrize("path", [("metadata", "labels", "deep"), ("unknownField",)])
def test_a_value_nested_10000_deep_in_a_snapshot_is_one_error_line(
        path: tuple[str, ...], as_yaml: bool, files: dict[str, Path]) -> None:
    """Issue 27: msgspec's decoder raised RecursionError on a label (or a field it skips)
    nested 10,000 deep; it is the depth error of every other reader now."""
    document = json.loads(files["cluster"].read_text())
    index = next(index for index, item in enumerate(document["items"])
                 if item["kind"] == "Pod" and item["metadata"].get("labels"))
    bad = mutated(files, "cluster", with_text(document, ("items", index, *path),
                                              deep_text(10_000), as_yaml), "deep")
    code, output = elevator("plan", "--nodegroups", str(files["nodegroups"]), "--cluster",
                            str(bad), "--now", "0")
    assert code == 2 and TOO_DEEP in output, output
    assert_clean(code, output, str(bad))


def _one_of_each_kind(which: str, files: dict[str, Path]) -> Any:
    """The reader's file parsed; a List cut to one object of each kind, so that the key paths
    drawn reach every kind (the autoscalers sit past the first items of `pods plan`'s file)."""
    parsed = yaml.safe_load(files[which].read_bytes())
    if isinstance(parsed, dict) and isinstance(parsed.get("items"), list):
        first: dict[str, Any] = {}
        for item in parsed["items"]:
            first.setdefault(item["kind"], item)
        parsed = {**parsed, "items": list(first.values())}
    return parsed


@st.composite
def hostile_shapes(draw: st.DrawFn, parsed: Any) -> tuple[bytes, str, int]:
    """At a random key path: an alias inside the node its anchor names (or one of its
    ancestors), nesting past the limit (JSON or YAML, a list or a mapping), or a billion laughs.
    The file, the rule its error must name, and the levels nested (0: not a depth)."""
    path = draw(st.sampled_from(list(key_paths(parsed))))
    shape = draw(st.sampled_from(["alias", "deep", "laughs"]))
    if shape == "alias":
        up = draw(st.integers(0, len(path)))
        return recursive_alias(parsed, path, up), SELF_REFERENCE, 0
    if shape == "laughs":
        laughs = replaced(parsed, path, billion_laughs())
        return yaml.safe_dump(laughs).encode(), "its aliases expand to more than", 0
    levels = draw(st.sampled_from([101, 1025, 10_000]))
    text = deep_text(levels, mapping=draw(st.booleans()))
    return with_text(parsed, path, text, as_yaml=draw(st.booleans())), TOO_DEEP, levels


@pytest.mark.parametrize("reader", list(READERS))
def test_hostile_shapes_anywhere_in_every_reader(reader: str, files: dict[str, Path]) -> None:
    which, command = READERS[reader]
    parsed = _one_of_each_kind(which, files)

    @settings(max_examples=20, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(hostile_shapes(parsed))
    def check(shape: tuple[bytes, str, int]) -> None:
        data, rule, levels = shape
        bad = mutated(files, which, data, "hostile")
        code, output = elevator(*command(files, bad))
        assert_clean(code, output, str(bad))
        if reader == "plan --cluster" and data.lstrip()[:1] in (b"{", b"["):
            # A JSON snapshot is decoded, not walked first: its structs have a fixed depth,
            # and a value msgspec skips is refused past msgspec's limit (~1,000 levels).
            assert code == 2 or levels < 1000, output
        else:
            assert code == 2 and rule in output, output

    check()


@st.composite
def object_key_paths(draw: st.DrawFn, parsed: Any) -> tuple[str | int, ...]:
    return object_first_key_path(parsed, lambda options: draw(st.sampled_from(options)))


@pytest.mark.parametrize("reader", list(READERS))
def test_a_wrong_type_at_any_key_path_of_each_object_kind(reader: str,
                                                          files: dict[str, Path]) -> None:
    """`metadata` a string, `spec` a list, a count a string ... at any key path of any object
    kind the reader reads: exit 0, or exit 2 with one line per problem naming the file."""
    which, command = READERS[reader]
    parsed = _one_of_each_kind(which, files)

    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(object_key_paths(parsed), st.sampled_from(WRONG_TYPES))
    def check(path: tuple[str | int, ...], value: Any) -> None:
        bad = mutated(files, which, json.dumps(replaced(parsed, path, value)).encode(), "typed")
        code, output = elevator(*command(files, bad))
        assert_clean(code, output, str(bad))

    check()
