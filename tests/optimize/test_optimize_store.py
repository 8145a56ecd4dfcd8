"""``warpforge optimize`` stores its report in the database (``--db``) and says where in one line; with
``--json`` stdout stays the one JSON document. The flow itself is replaced by a report built by hand: what is
tested is the command's storing, not the search."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from warpforge.cli import app
from warpforge.db.queries import Reader


@pytest.fixture
def flow(monkeypatch: pytest.MonkeyPatch, optimize_report: Any) -> Any:
    import warpforge.optimize.flow as flow_module

    monkeypatch.setattr(flow_module, "optimize", lambda opts: optimize_report)
    return optimize_report


def test_the_report_is_stored_and_the_command_says_where(tmp_path: Path, flow: Any) -> None:
    url = f"sqlite:///{tmp_path / 'wf.db'}"
    args = ["optimize", "./qwen3-tiny", "--dtype", "float16", "--out", str(tmp_path / "o"), "--db", url]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"stored: optimize run 1 in {url} (warpforge dashboard: /optimize/1)" in result.stdout

    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["target"] == "./qwen3-tiny"  # nothing but the report on stdout
    assert "stored: optimize run 2 in" in result.stderr

    reader = Reader(url)
    assert [r.id for r in reader.optimize_runs().items] == [2, 1]
    run = reader.optimize_run(2)
    assert run is not None and run.report == json.loads(flow.model_dump_json())


def test_a_report_that_cannot_be_stored_is_said_and_exits_1(
    tmp_path: Path, flow: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warpforge.optimize.store as store
    from warpforge.db.session import DatabaseError

    def refused(url: str | None, report: Any, package_source: Any = None) -> int:
        raise DatabaseError("database is locked")

    monkeypatch.setattr(store, "store_report", refused)
    result = CliRunner().invoke(
        app,
        [
            "optimize",
            "./qwen3-tiny",
            "--dtype",
            "float16",
            "--out",
            str(tmp_path / "o"),
            "--db",
            f"sqlite:///{tmp_path / 'wf.db'}",
            "--json",
        ],
    )
    assert result.exit_code == 1
    assert json.loads(result.stdout)["target"] == "./qwen3-tiny"  # the report is still printed
    assert "not stored: database is locked" in result.stderr and "Traceback" not in result.output
