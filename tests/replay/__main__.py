"""`python -m tests.replay [-v]`: start `elevator fake-cluster`, replay every case, print the
agreement per layer (and, with -v, each case that disagrees and how)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.replay.cluster import fake_cluster_process
from tests.replay.table import CASES, agreement_lines


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    with tempfile.TemporaryDirectory() as folder, fake_cluster_process(Path(folder)) as cluster:
        outcomes = {case.id: cluster.replay(case)[1] for case in CASES}
    if verbose:
        for case in CASES:
            if outcomes[case.id]:
                print(f"DISAGREES {case.id} [{case.layer}]")
                for line in outcomes[case.id]:
                    print(f"    {line}")
    for line in agreement_lines(CASES, outcomes):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
