"""benchmarks/read_layer.py runs end to end at a tiny size and prints a row per reader (no timing asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "read_layer.py"
READERS = [
    "campaigns() page of 50",
    "campaign(name)",
    "evaluations() newest 50",
    "evaluations() last page by cursor",
    "evaluation(id) in full",
    "variant(hash)",
    "lineage(hash)",
    "decisions(task=)",
    "winners(task=)",
    "winners(task=, gpu=, shape=)",
    "plans() page of 50",
    "llm_calls() newest 50",
    "llm_call(id) with its text",
    "llm_usage() campaign x model",
    "llm_call_for_variant(hash)",
]


def test_read_layer_benchmark_prints_every_reader() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--sizes", "300", "--backends", "sqlite", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("read layer: wall time (ms), median of 1 calls")
    assert "sqlite 300" in lines[1]
    for name in READERS:
        rows = [line for line in lines if line.startswith(name + " ")]
        assert len(rows) == 4, name  # median wall, fastest wall, CPU, first call
        assert float(rows[0].split("|")[1]) >= 0.0
    assert any(line.startswith("slowest page (median wall; deep pages by cursor): ") for line in lines)
