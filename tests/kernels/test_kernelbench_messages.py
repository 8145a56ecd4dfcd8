"""What an ok says about a by-path problem whose sizes cannot be derived, and the interpreter's refusal of a
problem too large for it (no KernelBench files needed: the problems are written here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.run.stages import largest_checked
from warpforge.evaluator.sandbox.job import Job
from warpforge.kernels.kernelbench import NOTES
from warpforge.kernels.task import get_task, load_task_file
from warpforge.kernels.variant import load_variant

HERE = Path(__file__).parent / "kernelbench"

LITERAL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(ROWS, 33)]


def get_init_inputs():
    return []
"""


def write(tmp_path: Path, rows: str) -> Path:
    path = tmp_path / "relu.py"  # the variant's TASK is "relu"
    path.write_text(LITERAL.replace("ROWS", rows))
    return path


@pytest.mark.slow
def test_sizes_that_cannot_be_derived_keep_the_files_shape_and_say_so(tmp_path: Path) -> None:
    task = load_task_file(write(tmp_path, "4"))
    assert task.shapes == task.check_shapes == [{"x0_d0": 4, "x0_d1": 33}]
    assert "none derived" in NOTES[str(task.path)]
    backend = get_backend("interpret")
    try:
        result = backend.evaluate(Job(task, load_variant(HERE / "relu_variant.py"), {"BLOCK": 256, "num_warps": 4}))
    finally:
        backend.close()
    assert result.verdict is Verdict.OK, result.message
    text = " | ".join(result.unchecked)
    # Old: "no full benchmark shape, the smallest is x0_d0=4,x0_d1=33" about the very shape it checked.
    assert "no full benchmark shape" not in text and "every benchmark shape was itself a check shape" in text
    assert "none derived" in text and "shapes x0_d0=4,x0_d1=33" in text


def test_the_interpreter_refuses_a_problem_it_cannot_scale_down(tmp_path: Path) -> None:
    task = load_task_file(write(tmp_path, "4096 * 512"))  # 275 MB of input, no global to scale
    backend = get_backend("interpret")
    try:
        result = backend.evaluate(Job(task, load_variant(HERE / "relu_variant.py"), {"BLOCK": 256, "num_warps": 4}))
    finally:
        backend.close()
    assert result.verdict is Verdict.UNSUPPORTED and result.reason == "shape_too_large_for_interpreter"
    assert "--backend cuda" in result.message and "0.55 GB" in result.message  # 2 x 4096*512*33*4 = 5.5e8 bytes


def test_largest_checked_names_only_benchmark_shapes_it_did_not_run() -> None:
    task = get_task("softmax")
    job = Job(task, load_variant(HERE / "relu_variant.py"), {})
    line = largest_checked(job, task.check_shapes)
    assert "no full benchmark shape was run, e.g. M=8192,N=8192 (product 67108864)" in line
    assert "the largest benchmark shape included" in largest_checked(job, [*task.check_shapes, *task.shapes])
    assert torch.float32 in task.dtypes


SIZED = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


batch_size = 64
dim = 100


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


def test_a_probe_whose_cases_do_not_all_run_gives_way_to_the_next(tmp_path: Path, monkeypatch) -> None:
    """The problem's reference at a probe of distinct primes may run once and then outgrow the memory limit on
    the later cases (KernelBench level 3's VGG16 in float64): the matcher tries the next probe, and says so
    where none runs, instead of ending the caller (the benchmark's whole-level run died of it)."""
    from warpforge.evaluator.judge import matching

    path = tmp_path / "relu_sized.py"
    path.write_text(SIZED)
    problem = load_task_file(path)
    real, seen = matching._cases, []

    def first_runs_out(problem, probe):  # type: ignore[no-untyped-def]
        seen.append(probe)
        if len(seen) == 1:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory")
        return real(problem, probe)

    monkeypatch.setattr(matching, "_cases", first_runs_out)
    match, _ = matching.find_match(problem, [get_task("elementwise")])
    assert match is not None and match.task == "elementwise" and len(seen) == 2 and seen[0] != seen[1]

    def never_runs(problem, probe):  # type: ignore[no-untyped-def]
        raise MemoryError

    monkeypatch.setattr(matching, "_cases", never_runs)
    match, tried = matching.find_match(problem, [get_task("elementwise")])
    assert match is None and tried[0].startswith("its reference did not run on every case at any probe")
    assert "MemoryError" in tried[0]
