"""Nothing taken from another repository is committed to this one (issue 42 item 10): the real
`kubectl` dumps live beside the clone, in ../shared/real_dumps, and the tests read them from
there, skipping with a line that says where they looked."""

from __future__ import annotations

import subprocess

import pytest

from benchmarks.deadlines import scaled
from tests.locks import ROOT


def test_no_real_dump_is_committed() -> None:
    tracked = subprocess.run(["git", "ls-files", "tests/data/real"], cwd=ROOT, capture_output=True,
                             text=True, timeout=scaled(60), check=True).stdout.split()
    assert tracked == []
    assert not (ROOT / "tests" / "data" / "real").exists()


def test_an_absent_dump_skips_saying_where_it_looked(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: object) -> None:
    from tests.contract import test_real_objects

    monkeypatch.setattr(test_real_objects, "SHARED", test_real_objects.Path(str(tmp_path)))
    with pytest.raises(pytest.skip.Exception, match=r"real dump 'gemyang-init' absent: .* is not "
                       r"there \(the real dumps live beside the clone in \.\./shared/real_dumps"):
        test_real_objects.dump_files("gemyang-init")
