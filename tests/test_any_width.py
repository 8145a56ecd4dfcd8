"""The default tier passes whatever width the terminal that runs it has (issue 31).

A plan-agent transcript test used to fail whenever ``COLUMNS=80`` was set: Rich's module-level consoles read the
width once, at import, from the environment pytest ran in. tests/conftest.py now fixes the width for every test
(and every child process); this runs a subset of width-sensitive CLI tests in a fresh pytest under two outer
widths and checks both pass. The subset is the tests that print Rich tables in-process through ``CliRunner``
(the module-level consoles are the ones that kept the outer width).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUBSET = [
    "tests/parallel/plan_agent/test_plan_agent.py::test_transcripts_show_the_proposed_plans_and_never_read_markup_in_them",
    "tests/cli/test_compile_facts.py",
]


@pytest.mark.slow
@pytest.mark.parametrize("columns", ["80", "200"])
def test_width_sensitive_cli_tests_pass_at_any_outer_width(columns: str) -> None:
    env = {**os.environ, "COLUMNS": columns}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *SUBSET],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout.splitlines()[-1]
