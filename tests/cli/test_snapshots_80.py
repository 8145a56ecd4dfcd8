"""What a user sees at 80 columns (issue 19): ``tasks``, ``results``, ``best``, ``plan search`` and ``plan predict``,
each compared with a checked-in expected file under ``snapshots/`` (read line by line when written: every value
whole, no line over 80 characters, nothing cut with "…"; the full values are in ``--json``).

Volatile parts are normalized before comparing: the database path, wall and CPU seconds, dates and hashes.
Commands run as real processes with ``COLUMNS=80`` over the database of tests/cli/conftest.py (known rows).
After a deliberate change of the output, rewrite the files with ``WARPFORGE_UPDATE_SNAPSHOTS=1`` and read the
diff before committing it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SNAPSHOTS = Path(__file__).parent / "snapshots"
CASES = {
    "tasks": ["tasks"],
    "results_campaign": ["results", "--campaign", "cpu-demo"],
    "results_all": ["results", "--limit", "4"],
    "best_cpu": ["best", "rmsnorm", "--limit", "3"],
    "best_timed": ["best", "double"],
    "plan_search": ["plan", "search", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--no-store"],
    "plan_predict": [
        "plan",
        "predict",
        "--model",
        "llama3-70b",
        "--cluster",
        "dgx-h100",
        "--tp",
        "8",
        "--pp",
        "4",
        "--dp",
        "2",
    ],
    "agent_transcripts": ["agent", "transcripts", "plan-llm"],
}


def normalize(text: str, db: Path) -> str:
    text = text.replace(str(db), "<DB>")
    # The seconds vary in width, so where the terminal folds that line varies too: the match takes the spaces
    # and line breaks around them.
    text = re.sub(r"\s*\d+\.\d+\s+s\s+wall,\s+\d+\.\d+\s+s\s+CPU", " <S> s wall, <S> s CPU", text)
    text = re.sub(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}\S*", "<DATE>", text)
    text = re.sub(r"\b[0-9a-f]{12,64}\b", "<HASH>", text)
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def render(args: list[str], db: Path) -> tuple[str, str]:
    """(stdout as printed, the normalized snapshot text of exit code, stdout and stderr)."""
    env = {**os.environ, "COLUMNS": "80", "WARPFORGE_DB": f"sqlite:///{db}"}
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-m", "warpforge.cli", *args], capture_output=True, text=True, env=env, timeout=300
    )
    return proc.stdout, normalize(
        f"$ warpforge {' '.join(args)}\n[exit {proc.returncode}]\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}",
        db,
    )


@pytest.mark.parametrize("name", list(CASES))
def test_output_at_80_columns_matches_its_snapshot(name: str, stored_db: Path) -> None:
    stdout, got = render(CASES[name], stored_db)
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("WARPFORGE_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
    assert max(len(line) for line in stdout.splitlines()) <= 80, "a table or line is wider than 80 columns"
    for line in stdout.splitlines():  # a table cropped at the edge loses its right border (and columns)
        assert line[:1] not in "┏┃┡│└├" or line[-1:] in "┓┃┩│┘┤", f"cropped: {line!r}"
    assert "…" not in got, "a value was cut"
    assert got == path.read_text(), f"{name}: output changed; compare with {path}"
