"""docs/plugin.md walks a flow of one's own from collecting to acting (issue 42 item 4): the
lock, the conflict and the order, as a runnable example that test_public_api.py executes on
the fake cluster; the words around it say what the code is."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import kube_elevator as ke
from benchmarks.deadlines import scaled
from tests.e2e.test_public_api import examples
from tests.locks import ROOT

APPROVAL = ROOT / "deployments" / "examples" / "approval_flow.py"


def test_the_plugin_guide_runs_an_acting_flow_with_the_lock_the_conflict_and_the_order() -> None:
    (code,) = [code for where, code in examples()
               if where.startswith("docs/plugin.md") and "write_lock" in code]
    assert "fake_cluster()" in code and "except ke.LeaseConflict" in code
    claim, removal, growth = (code.index(call) for call in (
        "ke.write_lock(", "ke.taint_and_remove(", "ke.untaint_or_increase("))
    assert claim < removal < growth  # claim first, then Escalator's order of the actions
    assert "plan.next_state" in code[:claim]


def test_write_locks_docstring_points_at_no_internal_module() -> None:
    doc = ke.write_lock.__doc__ or ""
    assert not re.search(r"\b(?:kube_elevator\.)?(?:tasks|flows|fakes)\.\w", doc), doc
    assert "LeaseConflict" in doc and "next_state" in doc


def test_simulate_is_called_a_function_where_it_is_one() -> None:
    from prefect import Flow

    assert not isinstance(ke.simulate, Flow)
    row = next(line for line in (ROOT / "docs" / "plugin.md").read_text().splitlines()
               if line.startswith("| `simulate` |"))
    assert "a function" in row
    flows = (ke.__doc__ or "")[(ke.__doc__ or "").index("**The flows**"):]
    assert "`simulate`" not in flows[:flows.index("plain functions")]


def test_the_approval_flow_honours_serve_and_refuses_the_rest() -> None:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    helped = subprocess.run([sys.executable, str(APPROVAL), "--help"], capture_output=True,
                            text=True, timeout=scaled(120), check=False, env=environment)
    assert helped.returncode == 0 and "--serve" in helped.stdout
    bare = subprocess.run([sys.executable, str(APPROVAL)], capture_output=True, text=True,
                          timeout=scaled(120), check=False, env=environment)
    assert bare.returncode == 2 and "give --serve" in bare.stderr
