"""`python -m flows.cli`: the same as the `elevator` command."""

from flows.cli import main

main()
