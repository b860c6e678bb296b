"""The replay table: upstream integration cases the suite did not have, replayed over HTTP against
`elevator fake-cluster` (a real process, started as a user starts it) with the official client
and kubectl.

No kube-apiserver runs here, so each case's expected answer is what Kubernetes' own integration
tests assert a real API server (kube-apiserver with etcd) answers: the status code, reason,
message, warnings or the fields that matter. Each case names its upstream file and test; the
cases are re-expressed, never copied. `python -m tests.replay` prints the agreement per layer;
tests/contract/test_replay_upstream.py runs every case (those that still disagree are strict
xfails with the reason).
"""
