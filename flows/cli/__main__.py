"""`python -m flows.cli`: the same as the `elevator` command."""

from kube_elevator.flows.cli import main

main()
