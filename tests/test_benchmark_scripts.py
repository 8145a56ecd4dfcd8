"""The GPU-only scripts say plainly that they measured nothing when there is no GPU, and exit 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU these scripts really run")
@pytest.mark.parametrize("script", ["gpu_check.py", "record_spaces.py"])
def test_gpu_scripts_refuse_to_invent_numbers_without_a_gpu(script: str) -> None:
    proc = subprocess.run([sys.executable, str(BENCH / script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "no CUDA GPU" in proc.stdout and "Nothing" in proc.stdout
