"""A memory cap the evaluator cannot work under is the evaluator's error, never the candidate's crash.

Before: a host memory budget below what the harness itself needs ended as ``crashed: process_died``
("the candidate process exited..."), blamed on an honest control that never ran.
"""

from __future__ import annotations

from pathlib import Path

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.sandbox.job import Job
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import load_variant

ROOT = Path(__file__).parent / "adversarial"


def test_a_cap_below_the_harness_s_needs_is_an_evaluator_error() -> None:
    job = Job(
        load_task_file(ROOT / "task_double.py"),
        load_variant(ROOT / "control_double.py"),
        {"BLOCK": 256, "num_warps": 4},
        host_memory_gb=0.01,
    )  # 10 MiB above what torch and Triton map
    backend = get_backend("interpret")
    try:
        result = backend.evaluate(job)
    finally:
        backend.close()
    assert result.verdict is Verdict.CRASHED and result.reason == "evaluator_limit", (result.reason, result.message)
    assert "not the candidate's" in result.message and "below the harness's own needs" in result.message
