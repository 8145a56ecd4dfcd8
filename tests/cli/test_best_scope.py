"""``best`` says what its static ranking covers, and with nothing verified ok offers nothing to export
(issue 31)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def best(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warpforge.cli", "best", *args, "--db", db],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
    )


@pytest.mark.slow
def test_nothing_stored_is_one_line_without_an_empty_table_or_an_export_hint(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'wf.db'}"
    subprocess.run(
        [sys.executable, "-m", "warpforge.cli", "db", "upgrade", "--db", db], check=True, capture_output=True
    )
    for args in (["softmax"], ["softmax", "--static"]):
        proc = best(db, *args)
        assert (proc.returncode, proc.stdout) == (1, ""), proc.stdout  # the old code: an empty table, --static 0
        assert proc.stderr.count("\n") == 1 and "export" not in proc.stderr


def test_the_header_names_the_ranking_scope(stored_db: Path) -> None:
    proc = best(f"sqlite:///{stored_db}", "rmsnorm", "--limit", "1")
    assert proc.returncode == 1
    # tests/cli/conftest.py stores rmsnorm in cpu-demo only: the ranking covers that one campaign, said so.
    assert "below, the configurations campaign cpu-demo verified ok, ranked by compile facts" in proc.stderr
