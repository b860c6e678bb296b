"""Issue 40, a user's flow on `fake_cluster()` in seconds: what the harness costs the user's own
process (benchmarks/RESULTS.md, "A user's flow on fake_cluster()"). Each check runs a user's
script in a process of its own, as `benchmarks/command_start.py`'s USER_FLOW does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_script(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


# botocore logs each JSON file it parses ("Loading JSON file: <path>", botocore/loaders.py).
PARSED_FILES = """
import json, logging
parsed = []
class Parsed(logging.Handler):
    def emit(self, record):
        if record.msg.startswith("Loading JSON file"):
            parsed.append(str(record.args[0]))
loader_log = logging.getLogger("botocore.loaders")
loader_log.setLevel(logging.DEBUG)
loader_log.addHandler(Parsed())
from kube_elevator.harness import fake_cluster
with fake_cluster(prefect_server=False) as cluster:
    cluster.add_node_group("workers", desired=2)
    assert len(cluster.nodes()) == 2
print(json.dumps(parsed))
"""


def test_moto_and_the_harness_parse_botocores_endpoints_and_ec2_model_once() -> None:
    """moto's own botocore sessions (three at `moto.ec2`'s import, one for its backends'
    regions) each parsed `endpoints.json` and EC2's service model anew: ~0.9 s of CPU. moto's
    answers read its own copy of a service's model, with its extras merged in
    (`moto.core.utils.get_service_model`): that second parse stays."""
    parsed: list[str] = json.loads(run_script(PARSED_FILES).stdout)
    endpoints = [path for path in parsed if Path(path).name.startswith("endpoints.json")]
    ec2_models = [path for path in parsed
                  if Path(path).parent.parent.name == "ec2"
                  and Path(path).name.startswith("service-2.json")]
    assert len(endpoints) == 1, parsed
    assert len(ec2_models) == 2, parsed  # boto3's clients' and moto's own


SESSION_AFTER = """
import botocore.loaders, botocore.session
from kube_elevator.harness import fake_cluster
with fake_cluster(prefect_server=False):
    during = botocore.session.get_session().get_component("data_loader")
    again = botocore.session.get_session().get_component("data_loader")
after = botocore.session.get_session().get_component("data_loader")
other = botocore.session.get_session().get_component("data_loader")
print(during is again, after is other, botocore.session.create_loader is botocore.loaders.create_loader)
"""


def test_botocore_sessions_made_after_the_cluster_have_loaders_of_their_own_again() -> None:
    assert run_script(SESSION_AFTER).stdout.split() == ["True", "False", "True"]
