"""`elevator prefect-server status|stop`: the local Prefect server that commands without
PREFECT_API_URL share (tasks/adapters/prefect_server.py), shown or stopped now rather than when
it is idle."""

from __future__ import annotations

import typer

from kube_elevator.flows.cli.common import console, reports_input_errors

app = typer.Typer(help="The local Prefect server commands share without PREFECT_API_URL.",
                  no_args_is_help=True)


@app.command("status")
@reports_input_errors
def status() -> None:
    """Its URL and pid, and the processes using it; exit 1 when none runs."""
    from kube_elevator.tasks.adapters.prefect_server import (
        live_users,
        prefect_home,
        recorded_server,
    )

    home = prefect_home()
    server = recorded_server(home)
    if server is None:
        console.print(f"no local Prefect server runs for {home}", highlight=False, markup=False)
        raise typer.Exit(1)
    users = live_users(home)
    console.print(f"{server.url} (pid {server.pid}) for {home}; used by "
                  + (", ".join(f"pid {pid}" for pid in users) if users else "nothing")
                  + " (it stops itself when idle)", highlight=False, markup=False)


@app.command("stop")
@reports_input_errors
def stop() -> None:
    """Stop it now (the runs stay in PREFECT_HOME's database: `prefect server start` shows
    them)."""
    from kube_elevator.tasks.adapters.prefect_server import prefect_home, stop_shared_server

    home = prefect_home()
    pid = stop_shared_server(home)
    console.print(f"stopped the local Prefect server (pid {pid}) for {home}" if pid is not None
                  else f"no local Prefect server runs for {home}", highlight=False,
                  markup=False)


def register(main: typer.Typer) -> None:
    main.add_typer(app, name="prefect-server")
