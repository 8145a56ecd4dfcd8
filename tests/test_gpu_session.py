"""scripts/gpu_session.sh (issue 27): the prepared device run. Its whole --dry-run runs in .ci/run (~2 min on
2 cores); here only what is cheap: the script parses, refuses unknown options, and every stage has a limit."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_session.sh"


def test_the_script_parses_and_refuses_unknown_options() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    done = subprocess.run(["bash", str(SCRIPT), "--no-such-option"], capture_output=True, text=True)
    assert done.returncode == 2 and "usage" in done.stderr


def test_every_stage_runs_under_a_limit_that_fits_the_budget() -> None:
    text = SCRIPT.read_text()
    device = text[text.index("else\n  stage manifest") :]
    pattern = r'stage \w+ "\$\(lim (\d+)\)"'
    shared = text.split('if [ "$DRY" = 1 ]; then\n  stage')[0]  # install and env, before the dry/device split
    limits = [int(n) for n in re.findall(pattern, shared)] + [int(n) for n in re.findall(pattern, device)]
    assert len(limits) == 6, limits
    assert sum(limits) <= 480, limits  # install + env + manifest + campaign + record + tests: 8 minutes
    assert "trap finish EXIT" in text and "timeout --kill-after" in text and "stdbuf -oL" in text
