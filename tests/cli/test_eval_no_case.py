"""`warpforge eval` on a candidate that fails before any case ran says so (it printed "checked 0 cases on ;")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "kernels" / "kernelbench"


@pytest.mark.slow
def test_a_failure_before_any_case_says_no_case_was_checked() -> None:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "warpforge.cli",
            "eval",
            str(HERE / "relu.py"),
            str(HERE / "relu_bad_constraints.py"),
            "--unsafe-run-unsandboxed",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stderr
    assert "runtime_error: constraints_failed" in proc.stdout
    assert "no case was checked (stopped at the first failure)" in proc.stdout
    assert "on ;" not in proc.stdout and "checked 0 cases" not in proc.stdout
