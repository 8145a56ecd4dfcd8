"""The cases the judge adds on its own: the task's accumulation precision (a cancelling long reduction) and
benchmark-scale shapes, and what an interpreter ``ok`` says it did not run. No child process here."""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import torch

from warpforge.evaluator.judge.compare import compare_outputs, references
from warpforge.evaluator.judge.judge import plan_cases
from warpforge.evaluator.run.interpret import SCALE_BUDGET, scale_shapes
from warpforge.evaluator.run.stages import largest_checked
from warpforge.evaluator.sandbox.child.compile import _smallest_shapes
from warpforge.evaluator.sandbox.job import Job
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import TEMPLATES_DIR, load_variant


def _accumulate(a: torch.Tensor, b: torch.Tensor, block_k: int, acc: torch.dtype) -> torch.Tensor:
    """A tiled matmul as a kernel computes it: each K tile's product in fp32, added to an ``acc`` accumulator."""
    c = torch.zeros(a.shape[0], b.shape[1], dtype=acc)
    for k in range(0, a.shape[1], block_k):
        c = (c.float() + a[:, k : k + block_k].float() @ b[k : k + block_k].float()).to(acc)
    return c.to(a.dtype)


def test_matmul_precision_case_refuses_an_fp16_accumulator_and_passes_fp32() -> None:
    task = get_task("matmul")
    assert task.accumulation is torch.float32 and task.precision_inputs is not None
    shape = task.precision_shapes[0]
    atol, rtol = task.tolerance(torch.float16)
    for seed in range(3):
        inputs = task.precision_inputs(dict(shape), torch.float16, seed, "cpu")
        r64, rlp = references(task.reference, inputs)
        for block_k in (32, 64, 128):
            assert compare_outputs([_accumulate(*inputs, block_k, torch.float32)], r64, rlp, atol, rtol) is None
            assert compare_outputs([_accumulate(*inputs, block_k, torch.float16)], r64, rlp, atol, rtol) is not None
        # the random inputs of the same length do not tell the two apart: why the task declares its own
        random_inputs = task.make_inputs(dict(shape), torch.float16, seed, "cpu")
        r64, rlp = references(task.reference, random_inputs)
        assert compare_outputs([_accumulate(*random_inputs, 32, torch.float16)], r64, rlp, atol, rtol) is None


def test_plan_adds_one_precision_case_per_narrow_dtype() -> None:
    task = get_task("matmul")
    plan = plan_cases(task, task.check_shapes[:1], task.dtypes, 1, 0, random.Random(0))
    precise = [c for c in plan.cases if c.precision]
    assert [c.dtype for c in precise] == [torch.float16, torch.bfloat16]
    assert all(c.shape == {"M": 16, "N": 16, "K": 4096} and "cancelling" in c.label for c in precise)
    softmax = get_task("softmax")  # declares no accumulation: no such case
    plan = plan_cases(softmax, softmax.check_shapes[:1], softmax.dtypes, 1, 0, random.Random(0))
    assert not any(c.precision for c in plan.cases)


def test_scale_shapes_reach_every_benchmark_maximum_within_the_budget() -> None:
    task = get_task("softmax")
    shapes, note = scale_shapes(task)
    assert {"M": 1, "N": 32768} in shapes and {"M": 256, "N": 1} in shapes
    assert all(math.prod(s.values()) <= SCALE_BUDGET for s in shapes)
    assert "M up to 256 (benchmark 16384)" in note and "the smallest is M=4096,N=4096" in note
    plan = plan_cases(task, task.check_shapes[:1], task.dtypes, 1, 0, random.Random(0), scale=shapes)
    scaled = [c for c in plan.cases if c.scale]
    assert [c.shape for c in scaled] == shapes and all(c.dtype == task.dtypes[0] for c in scaled)
    assert scaled[0].inputs[0].shape == (256, 1)


def test_scale_and_specialization_shapes_keep_a_key_that_sizes_nothing() -> None:
    # A group count G (Task.fixed_keys) is a constant of the variant: at another G the reference is another
    # function, so neither search moves it, and it counts in no product of dimensions.
    softmax = get_task("softmax")
    task = dataclasses.replace(
        softmax,
        shapes=[{**s, "G": 256} for s in softmax.shapes],
        check_shapes=[{**s, "G": 256} for s in softmax.check_shapes],
        fixed_keys=frozenset({"G"}),
    )
    shapes, _ = scale_shapes(task)
    assert shapes and all(s["G"] == 256 for s in shapes)
    assert {"M": 1, "N": 32768, "G": 256} in shapes
    # the specialization search: every shape down to M = N = 1 has the same one here
    found = _smallest_shapes(
        {"spec_budget": 64},
        {"spec": "benchmark"},
        {"spec": {"shape": {"M": 4096, "N": 4096, "G": 256}, "dtype": "float32"}},
        lambda shape, dtype: {"spec"},
        frozenset({"G"}),
    )
    assert found[0]["shape"] is not None and found[0]["shape"]["G"] == 256
    assert found[0]["shape"]["M"] * found[0]["shape"]["N"] <= 64


def test_largest_checked_names_a_larger_benchmark_shape_never_the_checked_one() -> None:
    task = get_task("softmax")
    job = Job(task, load_variant(TEMPLATES_DIR / "softmax" / "online.py"), {})
    text = largest_checked(job, task.check_shapes)
    assert "e.g. M=8192,N=8192" in text and "up to M=17,N=1031" in text
    job.shapes = [{"M": 2, "N": 3}]
    assert largest_checked(job, task.check_shapes).endswith("the largest benchmark shape included")


KERNEL_OVER_INPUT = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(2, 3, (3, 5, 7), bias=False)

    def forward(self, x):
        return self.conv(x)

batch_size = 2
depth = 4
height = 6
width = 8

def get_inputs():
    return [torch.rand(batch_size, 2, depth, height, width)]

def get_init_inputs():
    return []
"""


def test_a_hidden_shape_where_the_problem_does_not_run_is_no_case(tmp_path: Path) -> None:
    """A hidden size drawn below the problem's kernel (width 5 under a 7-wide kernel) is a shape where its
    function is not defined: that case is dropped with a note, not a crash of the evaluation; the hidden cases
    kept all run the reference."""
    from warpforge.kernels.task import load_task_file

    path = tmp_path / "kernel_over_input.py"
    path.write_text(KERNEL_OVER_INPUT)
    task = load_task_file(path)
    dropped, kept = [], []
    for seed in range(16):
        plan = plan_cases(task, task.check_shapes[:1], [torch.float32], 1, 1, random.Random(seed))
        dropped += [n for n in plan.notes if "the reference does not run at" in n]
        kept += [c for c in plan.cases if c.hidden]
    assert dropped and kept
    assert all("RuntimeError" in n for n in dropped)
    for case in kept:
        task.reference(*case.inputs)


def test_a_specialization_shape_where_the_problem_does_not_run_is_no_case(tmp_path: Path) -> None:
    """The smallest shape of a benchmark specialization is the compile child's answer: one where the problem's
    function is not defined (width 5 under a 7-wide kernel) is dropped with a note, not a crash of the
    evaluation when the judge computes its reference; a shape where it runs is a case."""
    from warpforge.evaluator.run.stages import add_spec_cases
    from warpforge.kernels.task import load_task_file

    path = tmp_path / "kernel_over_input.py"
    path.write_text(KERNEL_OVER_INPUT)
    task = load_task_file(path)
    job = Job(task, load_variant(TEMPLATES_DIR / "softmax" / "online.py"), {})
    good, bad = {**task.shapes[0], "width": 9}, {**task.shapes[0], "width": 5}
    job.spec_shapes = [{"key": "a", "shape": bad, "dtype": "float32"}, {"key": "b", "shape": good, "dtype": "float32"}]
    plan = plan_cases(task, [], [torch.float32], 1, 0, random.Random(0))
    before = len(plan.cases)
    add_spec_cases(plan, job, [torch.float32], random.Random(0))
    assert [c.shape for c in plan.cases[before:]] == [good]
    assert any("the reference does not run at" in n and "width=5" in n and "RuntimeError" in n for n in plan.notes)
