"""Each task's declared adversarial inputs catch a numerically fragile formula that random inputs pass.

The fragile formulas are written here in plain torch (no kernel needed): softmax and cross-entropy
without max subtraction, a one-pass layernorm variance, an rmsnorm sum of squares kept in fp16, a
sigmoid written exp(a) / (1 + exp(a)). Each must pass the task's random inputs and fail one of its
adversarial sets, judged by the evaluator's own comparison against the float64 reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from warpforge.evaluator.judge.compare import compare_outputs, references
from warpforge.kernels.task import all_tasks, get_task


def _softmax_no_max(x: torch.Tensor) -> torch.Tensor:
    e = torch.exp(x.float())
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)


def _ce_no_max(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    lf = logits.float()
    return torch.log(torch.exp(lf).sum(-1)) - lf.gather(1, targets[:, None])[:, 0]


def _layernorm_one_pass(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    var = ((xf * xf).mean(-1, keepdim=True) - mean * mean).clamp_min(0)
    return (((xf - mean) / torch.sqrt(var + 1e-5)) * w.float() + b.float()).to(x.dtype)


def _rmsnorm_fp16_squares(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    squares = (x.half() * x.half()).sum(-1, keepdim=True, dtype=torch.float16).float() / x.shape[-1]
    return (x.float() / torch.sqrt(squares + 1e-6) * w.float()).to(x.dtype)


def _swiglu_naive_sigmoid(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    af = a.float()
    return (af * (torch.exp(af) / (1 + torch.exp(af))) * b.float()).to(a.dtype)


FRAGILE: dict[str, tuple[Callable[..., Any], torch.dtype]] = {
    "softmax": (_softmax_no_max, torch.float32),
    "cross_entropy": (_ce_no_max, torch.float32),
    "layernorm": (_layernorm_one_pass, torch.float32),
    "rmsnorm": (_rmsnorm_fp16_squares, torch.float16),
    "swiglu": (_swiglu_naive_sigmoid, torch.float32),
}


def _fails(task_name: str, fn: Callable[..., Any], inputs: tuple[Any, ...], dtype: torch.dtype) -> bool:
    task = get_task(task_name)
    out = fn(*inputs)
    r64, rlp = references(task.reference, inputs, "cpu")
    return compare_outputs([out], r64, rlp, *task.tolerance(dtype)) is not None


@pytest.mark.parametrize("task_name", sorted(FRAGILE))
def test_adversarial_inputs_catch_a_fragile_formula(task_name: str) -> None:
    fn, dtype = FRAGILE[task_name]
    task = get_task(task_name)
    assert task.adversarial_inputs is not None
    shape = max(task.check_shapes, key=lambda s: math.prod(s.values()))
    for seed in (1, 2):
        assert not _fails(task_name, fn, task.make_inputs(shape, dtype, seed, "cpu"), dtype)  # random: passes
    sets = task.adversarial_inputs(shape, dtype, 1, "cpu")
    assert any(_fails(task_name, fn, inputs, dtype) for inputs in sets.values()), sorted(sets)


def test_every_builtin_task_but_matmul_declares_adversarial_inputs() -> None:
    missing = sorted(t.name for t in all_tasks() if t.adversarial_inputs is None)
    assert missing == ["matmul"]


@pytest.mark.parametrize("task_name", sorted(FRAGILE))
def test_the_reference_stays_finite_on_adversarial_inputs(task_name: str) -> None:
    task = get_task(task_name)
    shape = max(task.check_shapes, key=lambda s: math.prod(s.values()))
    for dtype in task.dtypes:
        for name, inputs in task.adversarial_inputs(shape, dtype, 3, "cpu").items():
            ref = task.reference(*(x.double() if x.is_floating_point() else x for x in inputs))
            assert bool(torch.isfinite(ref).all()), (name, dtype)
