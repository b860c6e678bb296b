"""Files the user names (`--output`, `--plot`): checked before the work, written whole."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.deadlines import scaled
from kube_elevator.tasks.core.output_files import unplottable, unwritable, write_atomically


def test_a_file_is_replaced_whole_and_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "tuned.yaml"
    target.write_text("old\n")
    target.chmod(0o640)
    write_atomically(target, b"new\n", "--output")
    assert target.read_text() == "new\n" and (target.stat().st_mode & 0o777) == 0o640
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tuned.yaml"]


def test_a_write_that_fails_leaves_the_previous_file_and_no_temporary(tmp_path: Path) -> None:
    """A full disk, as a file-size limit (RLIMIT_FSIZE) makes it: one line, the old file."""
    target = tmp_path / "tuned.yaml"
    target.write_text("ORIGINAL\n")
    program = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from kube_elevator.tasks.core.errors import InputError\n"
        "from kube_elevator.tasks.core.output_files import write_atomically\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))\n"
        "try:\n"
        f"    write_atomically(Path({str(target)!r}), b'x' * 100_000, '--output')\n"
        "except InputError as error:\n"
        "    print(error)\n"
        "    sys.exit(2)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=scaled(60), check=False, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 2, done.stderr
    assert done.stdout == f"--output: {target}: cannot write: File too large\n"
    assert target.read_text() == "ORIGINAL\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tuned.yaml"]


def test_what_cannot_be_written_is_named_before_the_work(tmp_path: Path) -> None:
    assert unwritable(tmp_path / "new.yaml", "--output") == ""
    assert unwritable(tmp_path, "--output") == f"--output: {tmp_path} is a directory; give a file name"
    assert unwritable(Path("/dev/full"), "--output") == \
        "--output: /dev/full is not a regular file; give a file name"
    missing = tmp_path / "nope" / "x.yaml"
    assert unwritable(missing, "--output") == \
        f"--output: {missing}: the folder {missing.parent} does not exist"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert "is not a regular file" in unwritable(fifo, "--output")


@pytest.mark.parametrize(("name", "ok"), [("front.png", True), ("front.SVG", True),
                                          ("front.pdf", True), ("front.txt", False),
                                          ("front", False)])
def test_a_plot_needs_a_name_that_says_its_format(tmp_path: Path, name: str, ok: bool) -> None:
    """matplotlib refuses `.txt` after the work is done, and writes `front.png` for `front`."""
    problem = unplottable(tmp_path / name, "--plot")
    assert (problem == "") is ok
    if not ok:
        assert problem.startswith(f"--plot: {tmp_path / name}: give a file name ending .png")
    assert unplottable(tmp_path, "--plot").endswith("is a directory; give a file name")

