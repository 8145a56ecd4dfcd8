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
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "agent_eval.py"),
            "--scripted",
            "--trials",
            "6",
            "--max-calls",
            "4",
            "--no-plans",
            "--db",
            f"sqlite:///{tmp_path / 'wf.db'}",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
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


@pytest.mark.slow
def test_agent_eval_plans_counts_top5_per_model_and_preset(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARPFORGE_LLM", "OPENAI"))}
    env["PYTHONPATH"] = str(ROOT / "src")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "agent_eval.py"),
            "--scripted",
            "--plans-only",
            "--plan-presets",
            "llama3-8b@dgx-h100:1",
            "--plan-calls",
            "2",
            "--db",
            f"sqlite:///{tmp_path / 'wf.db'}",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["plans"]
    # The scripted planner's answer, by hand: the best plan shown (rank 1), a plan without sharding or recompute
    # (14 B x 8.03e9 params > 76 GiB: does not fit) and TP 3 (divides no 8-GPU node: invalid). The second call
    # repeats it: two duplicates and the invalid one again; that answer is "rejected" and its re-ask would be
    # call 3, past the 2-call budget.
    assert (row["model"], row["preset"], row["proposed"], row["top5"], row["best_rank"]) == (
        "scripted",
        "llama3-8b@dgx-h100:1",
        6,
        1,
        1,
    )
    assert (row["ranked"], row["does_not_fit"], row["invalid"], row["duplicate"]) == (1, 1, 2, 2)
    assert (row["calls"], row["stop_reason"]) == (2, "calls")
