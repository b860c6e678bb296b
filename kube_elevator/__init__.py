"""kube-elevator: Kubernetes node-group and pod autoscaling as Prefect flows.

Everything installs under this one namespace: `kube_elevator.flows` (the flows and the CLI),
`kube_elevator.tasks` (the steps and the pure logic they wrap) and `kube_elevator.fakes` (the
fake cluster). In the checkout these are the top-level folders `flows/`, `tasks/` and `fakes/`,
linked here, so the code reads the same in the repository and in a user's venv.
"""

__version__ = "0.1.0"
