"""`warpforge dashboard`: a missing, unreachable or old-schema database is one line and exit 1, never a
traceback; the app shows the same sentence as a page; the server binds 127.0.0.1 by default."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CLI = [sys.executable, "-m", "warpforge.cli", "dashboard"]


def _run(*args: str) -> Any:
    """The command in-process (Typer's runner; stdout and stderr apart), as `warpforge dashboard ARGS`."""
    from typer.testing import CliRunner

    from warpforge.cli import app

    result = CliRunner().invoke(app, ["dashboard", *args], env={"WARPFORGE_DB": None})
    result.returncode = result.exit_code
    return result


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


def test_missing_database_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = _run("--db", f"sqlite:///{tmp_path / 'absent.db'}", "--check")
    assert proc.returncode == 2  # a reader's URL that names no database: a usage error (README "Exit codes")
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: no database at")
    assert "Traceback" not in proc.stderr


def test_unreachable_server_is_one_line_and_hides_the_password() -> None:
    proc = _run("--db", f"postgresql+psycopg://wf:pw-s3cret@127.0.0.1:{_closed_port()}/wf", "--check")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("error: cannot read postgresql+psycopg://wf:***@127.0.0.1")
    assert "pw-s3cret" not in proc.stderr + proc.stdout


def _old_schema(path: Path) -> str:
    from alembic import command
    from alembic.config import Config

    from warpforge.db.session import MIGRATIONS_DIR, Database

    db = Database(f"sqlite:///{path}")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = db.engine
    command.upgrade(cfg, "0001")
    db.engine.dispose()
    return f"sqlite:///{path}"


def test_old_schema_says_to_upgrade(tmp_path: Path) -> None:
    from warpforge.db.health import head_revision

    url = _old_schema(tmp_path / "old.db")
    proc = _run("--db", url, "--check", "--json")
    assert proc.returncode == 1
    assert "schema revision 0001" in proc.stderr and "warpforge db upgrade" in proc.stderr
    import json

    payload = json.loads(proc.stdout)
    assert payload["ok"] is False and payload["revision"] == "0001" and head_revision() != "0001"


def test_app_on_a_bad_database_answers_pages_and_api_with_the_reason(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from warpforge.dashboard.app import create_app

    client = TestClient(create_app(_old_schema(tmp_path / "old.db")))
    page = client.get("/leaderboard")
    assert page.status_code == 503 and "Database unavailable" in page.text and "warpforge db upgrade" in page.text
    api = client.get("/api/campaigns")
    assert api.status_code == 503 and "schema revision 0001" in api.json()["detail"]


def test_good_database_checks_ok_and_defaults_to_localhost(seeded: dict[str, Any]) -> None:
    proc = _run("--db", seeded["url"], "--check", "--json")
    assert proc.returncode == 0, proc.stderr
    import json

    payload = json.loads(proc.stdout)
    assert payload["ok"] is True and payload["dashboard"] == "http://127.0.0.1:8787"


def test_same_port_for_optuna_is_a_usage_error(seeded: dict[str, Any]) -> None:
    proc = _run("--db", seeded["url"], "--port", "9000", "--optuna-port", "9000", "--check")
    assert proc.returncode == 2 and "--optuna-port 9000" in proc.stderr


@pytest.mark.slow
def test_server_and_optuna_dashboard_serve_links(campaign_db: str) -> None:
    """The real command: dashboard + optuna-dashboard on two ports; a campaign page links to its studies."""
    import time
    import urllib.request

    import fill

    port, oport = _closed_port(), _closed_port()
    env = {k: v for k, v in os.environ.items() if k != "WARPFORGE_DB"}
    proc = subprocess.Popen(
        [*CLI, "--db", campaign_db, "--port", str(port), "--optuna-port", str(oport)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 240  # the CLI imports torch; ~25 s on a loaded 2-core machine
        while True:
            try:
                home = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read().decode()
                optuna = urllib.request.urlopen(f"http://127.0.0.1:{oport}/dashboard", timeout=2).status
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.5)
        assert fill.INTERPRET_CAMPAIGN in home and optuna == 200
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/campaigns/{fill.INTERPRET_CAMPAIGN}").read().decode()
        assert page.count(f"http://127.0.0.1:{oport}/dashboard/studies/") == 3  # one study per softmax template
    finally:
        proc.terminate()
        proc.wait(timeout=20)
