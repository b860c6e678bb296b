"""prefect_compat installs each fix where Prefect shows the behaviour it fixes, never on a
version number (issue 40): a fix keyed to one release silently vanished on every other."""

from __future__ import annotations

import re
import textwrap
import types
from pathlib import Path

import prefect.flow_engine

from kube_elevator.flows.prefect_compat import heartbeat_loop_sleeps_in_slices

ROOT = Path(__file__).resolve().parents[2]

# Prefect's heartbeat (3.6.24 to 3.9.1, flow_engine.py `_send_heartbeats`) in the two shapes
# that matter: its loop sleeping in slices, and a loop that waits on its stop event.
_ENGINE = """
import threading, time
from contextlib import contextmanager
MINIMUM_HEARTBEAT_INTERVAL = 30
class FlowRunEngine:
    heartbeat_seconds = 30
    def _build_heartbeat_event_template(self): ...
    def _emit_flow_run_heartbeat(self, resource, related): ...
@contextmanager
def _send_heartbeats(engine, join_on_exit=True):
    stop_event = threading.Event()
    def heartbeat_loop():
        while not stop_event.is_set():
            {wait}
    yield
"""


def engine_module(wait: str) -> types.ModuleType:
    module = types.ModuleType("flow_engine")
    exec(textwrap.dedent(_ENGINE).replace("{wait}", wait), module.__dict__)
    return module


def test_a_heartbeat_loop_that_sleeps_in_slices_is_fixed_one_that_waits_is_left() -> None:
    assert heartbeat_loop_sleeps_in_slices(engine_module("time.sleep(1)"))
    assert not heartbeat_loop_sleeps_in_slices(engine_module("stop_event.wait(30)"))


def test_a_heartbeat_of_another_shape_keeps_prefects_own() -> None:
    moved = engine_module("time.sleep(1)")
    del moved.FlowRunEngine._emit_flow_run_heartbeat
    assert not heartbeat_loop_sleeps_in_slices(moved)
    assert not heartbeat_loop_sleeps_in_slices(types.ModuleType("flow_engine"))  # 3.6.21-23


def test_the_installed_prefect_is_recognised_where_its_loop_sleeps() -> None:
    """On the lock's release and on every release of CI's Prefect matrix: the detection reads
    the engine that is installed, not its version."""
    source = Path(prefect.flow_engine.__file__).read_text()
    sleeps = re.search(r"def heartbeat_loop\(\).*?(?=\n    \S)", source, re.S)
    expected = sleeps is not None and "time.sleep(" in sleeps.group(0)
    assert heartbeat_loop_sleeps_in_slices(prefect.flow_engine) == expected


def test_no_code_compares_prefects_version_to_a_fixed_release() -> None:
    """`prefect.__version__ != "3.8.8"` kept every fix off on every other release."""
    for package in ("flows", "tasks", "fakes"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text()
            assert not re.search(r"prefect\.__version__\s*[!=<>]=?", text), path
            assert not re.search(r"""__version__\s*[!=]=\s*["']3\.""", text), path
