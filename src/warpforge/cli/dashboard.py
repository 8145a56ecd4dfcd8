"""``warpforge dashboard``: serve the read-only web dashboard (and optuna-dashboard on its own port).

A database that is missing, unreachable or at an older schema is one line on stderr and exit code 1
before any server starts. The server binds 127.0.0.1 unless ``--host`` says otherwise.

Example::

    $ warpforge dashboard --db sqlite:///wf.db --port 8787 --optuna-port 8788
    dashboard on http://127.0.0.1:8787 (read-only: sqlite:///wf.db); optuna-dashboard on http://127.0.0.1:8788
"""

from __future__ import annotations

import json
import sys

import typer

from warpforge.errors import UsageError


def dashboard(
    host: str = typer.Option("127.0.0.1", "--host", help="interface to bind (default: this machine only)"),
    port: int = typer.Option(8787, "--port", min=1, max=65535, help="port of the dashboard"),
    db: str | None = typer.Option(
        None, "--db", help="database URL (default: $WARPFORGE_DB, else the SQLite file in the user data)"
    ),
    optuna_port: int | None = typer.Option(
        None, "--optuna-port", min=1, max=65535, help="also serve optuna-dashboard on this port (it cannot share ours)"
    ),
    check: bool = typer.Option(
        False, "--check", help="only check the database and exit (0 usable, 1 not now, 2 no database at that URL)"
    ),
    json_out: bool = typer.Option(False, "--json", help="print the start-up status as JSON"),
) -> None:
    """Serve the web dashboard: campaigns, leaderboard, variants, charts, plans (read-only)."""
    from warpforge.db.health import check_database
    from warpforge.db.session import default_url

    url = db or default_url()
    status = check_database(url)
    if optuna_port is not None and optuna_port == port:
        raise UsageError(f"--optuna-port {optuna_port} is the dashboard's own --port: choose another port")
    urls = {"dashboard": f"http://{host}:{port}", "optuna": f"http://{host}:{optuna_port}" if optuna_port else None}
    if json_out:
        sys.stdout.write(
            json.dumps(
                {"ok": status.ok, "db": status.safe_url, "revision": status.revision, "problem": status.problem, **urls}
            )
            + "\n"
        )
    if not status.ok:
        sys.stderr.write(f"error: {status.problem}\n")
        raise typer.Exit(2 if status.usage else 1)  # README "Exit codes": a URL that names no database is usage
    if check:
        if not json_out:
            sys.stdout.write(f"{status.safe_url} is readable (schema {status.revision})\n")
        return
    import uvicorn

    from warpforge.dashboard.app import create_app

    if optuna_port is not None:
        from warpforge.dashboard.optuna_link import serve_optuna_dashboard

        serve_optuna_dashboard(url, host, optuna_port)
    app = create_app(url, optuna_base=urls["optuna"])
    extra = f"; optuna-dashboard on {urls['optuna']}" if optuna_port else ""
    sys.stderr.write(f"dashboard on {urls['dashboard']} (read-only: {status.safe_url}){extra}\n")
    uvicorn.run(app, host=host, port=port, log_level="warning")
