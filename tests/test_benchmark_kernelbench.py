"""benchmarks/kernelbench.py on a few of the shipped KernelBench problems (warpforge/data/problems), and on
../shared/kernelbench where a problem is not shipped (skipped where it is absent)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from warpforge.problems import SHIPPED

ROOT = Path(__file__).resolve().parents[1]
LEVEL1 = SHIPPED / "level1"
FULL_LEVEL1 = ROOT.parent / "shared" / "kernelbench" / "level1"
# level 2: a convolution, an instance norm and a division; no template family computes a norm after a convolution
UNMATCHED = "17_Conv2d_InstanceNorm_Divide"


def bench(*args: str, folder: Path = LEVEL1) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kernelbench.py"), str(folder), *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
def test_a_problem_no_template_computes_is_a_row_saying_what_was_tried() -> None:
    proc = bench("--problems", UNMATCHED, "--json", folder=SHIPPED / "level2")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["rows"]
    assert row["problem"] == UNMATCHED and not row["correct"] and row["evaluations"] == 0
    assert row["why"].startswith("not searched")
    assert all(f"{task}:" in row["why"] for task in ("linear", "matmul", "softmax"))  # each task tried, named


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the timing columns hold numbers")
def test_the_table_fits_80_columns_and_never_times_the_interpreter() -> None:
    proc = bench("--problems", UNMATCHED, folder=SHIPPED / "level2")
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    assert "fast_1.0 needs a GPU" in proc.stdout


@pytest.mark.slow
def test_per_level_counts_and_the_families_that_matched(tmp_path: Path) -> None:
    """A benchmark root: one summary per level folder (the expected counts are what these two files are: a ReLU
    any elementwise template computes, and a level-2 convolution and norm nothing matches); two problems at once
    (--jobs 2) still give their rows in the problems' order, and the table and the saved JSON say the same."""
    saved = tmp_path / "run.json"
    proc = bench(
        "--problems", f"19_ReLU,{UNMATCHED}", "--trials", "1", "--jobs", "2", "--save", str(saved), folder=SHIPPED
    )
    assert proc.returncode == 0, proc.stderr
    run = json.loads(saved.read_text())
    assert run["levels"] == [
        {
            "level": "level1",
            "problems": 1,
            "loads": 1,
            "reference_runs": 1,
            "matched": 1,
            "ok": 1,
            "families": {"elementwise": 1},
        },
        {"level": "level2", "problems": 1, "loads": 1, "reference_runs": 1, "matched": 0, "ok": 0, "families": {}},
    ]
    assert [r["problem"] for r in run["rows"]] == ["19_ReLU", UNMATCHED] and run["jobs"] == 2
    assert "per level" in proc.stdout and "elementwise 1" in proc.stdout and "(2 at a time)" in proc.stdout
    assert "[2/2] " in proc.stderr  # a line per finished problem


@pytest.mark.slow
def test_softmax_is_searched_with_its_templates_and_both_tolerances_are_stated() -> None:
    proc = bench("--problems", "23_Softmax", "--trials", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["rows"]
    assert row["correct"] and row["matched"].startswith("softmax")
    assert any(c.endswith("M=1,N=257") for c in row["checked"]) and "negated" in row["input_kinds"]
    assert row["warpforge_tolerance"].startswith("pass") and row["kernelbench_tolerance"].startswith("pass")
    assert row["speedup_eager"] == ("needs a GPU" if not torch.cuda.is_available() else row["speedup_eager"])


@pytest.mark.slow
@pytest.mark.skipif(not FULL_LEVEL1.is_dir(), reason=f"92_cumsum_exclusive is not shipped; not found at {FULL_LEVEL1}")
def test_an_exclusive_cumsum_and_a_cumprod_are_searched_with_the_scan_templates() -> None:
    # 92 is cat(zeros, cumsum(x[:, :-1])): the exclusive member; 90 a cumprod of rand, which underflows to 0.
    proc = bench("--problems", "90_cumprod,92_cumsum_exclusive", "--trials", "1", "--json", folder=FULL_LEVEL1)
    assert proc.returncode == 0, proc.stderr
    cumprod, exclusive = json.loads(proc.stdout)["rows"]
    assert cumprod["correct"] and cumprod["matched"].startswith("scan[cumprod] "), cumprod["why"]
    assert exclusive["correct"] and exclusive["matched"].startswith("scan[cumsum_exclusive] "), exclusive["why"]
    assert any(c.endswith("L=1031,M=3,N=1,dim=1") for c in exclusive["checked"])
    assert exclusive["warpforge_tolerance"].startswith("pass") and exclusive["kernelbench_tolerance"].startswith("pass")


@pytest.mark.slow
@pytest.mark.skipif(not FULL_LEVEL1.is_dir(), reason=f"20_LeakyReLU is not shipped; not found at {FULL_LEVEL1}")
def test_the_scripted_llm_solves_relu_and_its_copy_as_leaky_relu_is_refused() -> None:
    """--proposer llm --scripted: the real campaign, prompt, parser, sandboxed judge and store, with the model
    replaced by benchmarks/kernelbench_answers (a ReLU kernel, and a 'LeakyReLU' that copies its input)."""
    proc = bench(
        "--problems",
        "19_ReLU,20_LeakyReLU",
        "--proposer",
        "llm",
        "--scripted",
        str(ROOT / "benchmarks" / "kernelbench_answers"),
        "--trials",
        "1",
        "--max-calls",
        "1",
        "--backend",
        "interpret",
        "--json",
        folder=FULL_LEVEL1,
    )
    assert proc.returncode == 0, proc.stderr
    relu, leaky = json.loads(proc.stdout)["rows"]
    assert relu["correct"] and "negated" in relu["input_kinds"], relu["why"]
    assert isinstance(relu["tokens_per_correct"], float) and relu["tokens_per_correct"] > 0
    assert not leaky["correct"] and "incorrect" in leaky["why"], leaky["why"]


def test_scripted_answers_need_the_llm_proposer() -> None:
    proc = bench("--problems", "19_ReLU", "--scripted", str(ROOT / "benchmarks" / "kernelbench_answers"))
    assert proc.returncode == 2 and "--proposer llm" in proc.stderr
