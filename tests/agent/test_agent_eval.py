"""benchmarks/agent_eval.py runs end to end against the scripted server (its CI configuration) and counts right."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.mark.slow
def test_agent_eval_scripted_counts_what_the_script_answers(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARPFORGE_LLM", "OPENAI"))}
    env.pop("TRITON_INTERPRET", None)
    env["PYTHONPATH"] = str(ROOT / "src")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "agent_eval.py"), "--scripted", "--trials", "6",
                           "--max-calls", "4", "--db", f"sqlite:///{tmp_path / 'wf.db'}", "--json"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    # The script's cycle, one call at a time: good, wrong values, a run-time hack, prose (whose re-ask would
    # be call 5: the 4-call budget stops it). By hand: 4 proposals, 3 parsed and accepted, all 3 past
    # compilation (ok, incorrect, rejected), 1 correct.
    m = report["models"]["scripted"]
    assert (m["proposals"], m["parsed"], m["accepted"], m["compiled"], m["correct"]) == (4, 3, 3, 3, 1)
    (task,) = report["tasks"]
    assert task["calls"] == 4 and task["correct_llm_variants"] == 1 and task["best_speedup"] is None
    assert task["tokens"] == m["tokens"] > 0 and 0 < task["busy_share"] <= 1
    assert any("stopped by calls" in n for n in task["notes"])
