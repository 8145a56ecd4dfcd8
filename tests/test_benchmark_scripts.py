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


SPACES = BENCH.parent.parent / "shared" / "spaces"


@pytest.mark.skipif(not (SPACES / "pnpoly").is_dir(), reason="../shared/spaces is absent: nothing to screen")
def test_search_screen_reports_each_sampler() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "search_screen.py"),
            "--samplers",
            "random,wf-tpe",
            "--spaces",
            "pnpoly/RTX_3090",
            "--budgets",
            "10,20",
            "--repeats",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("2 repeats, seeds 1000-1001")
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {"random", "wf-tpe"}
    fractions = [float(x) for x in rows["wf-tpe"].split("pnpoly/RTX_3090: ")[1].split("±")[0].split("/")]
    assert len(fractions) == 2 and 0 < fractions[0] <= fractions[1] <= 1


@pytest.mark.skipif(not (SPACES / "convolution_milo").is_dir(), reason="../shared/spaces is absent: nothing to measure")
def test_search_basin_reports_uniform_and_each_sampler() -> None:
    basin = "tile_size_x=1,tile_size_y=3,read_only=1,use_padding=0,use_shmem=1"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "search_basin.py"),
            "convolution_milo/A100",
            "--basin",
            basin,
            "--samplers",
            "random",
            "--budgets",
            "10,20",
            "--repeats",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "holds 60 of 4362 configurations (with the optimum)" in lines[0]
    # exact uniform share: 1 - C(4302, n) / C(4362, n)
    assert lines[1].split(": ")[1] == "0.13 0.24"
    assert lines[2].startswith("random ") and "optimum found" in lines[2]
    bad = subprocess.run(
        [sys.executable, str(BENCH / "search_basin.py"), "convolution_milo/A100", "--basin", "tile_size_x=5"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode != 0 and "tile_size_x has no value '5'" in bad.stderr
