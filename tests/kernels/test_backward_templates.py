"""Training templates (launch_forward + launch_backward) of softmax, layernorm and cross_entropy under the
interpreter: every CHECK_SHAPE and dtype, and the task's adversarial inputs, against torch autograd in float64
with the task's gradient tolerance and the evaluator's comparator (evaluator/judge/compare.py)."""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import pytest
import torch
from newtask_harness import DEVICE, load, nan_allocations, valid_configs

from warpforge.evaluator.judge.compare import compare_outputs, references
from warpforge.evaluator.judge.gradients import draw_grad_out, grad_references
from warpforge.kernels.task import get_task
from warpforge.kernels.taskdef import Task
from warpforge.kernels.variant import Variant, builtin_variants

TRAINING = [(t, v) for t in ("softmax", "layernorm", "cross_entropy") for v in builtin_variants(t) if v.has_backward]


def _config(variant: Variant, module: ModuleType, shape: dict[str, int]) -> dict[str, Any]:
    configs = valid_configs(variant, module, shape)
    return configs[len(configs) // 2]  # a middle configuration: neither the smallest blocks nor the largest


def _check(
    task: Task, module: ModuleType, params: dict[str, Any], inputs: tuple[Any, ...], seed: int, dtype: torch.dtype
) -> str | None:
    """None when forward output and every gradient match; else which one failed and how."""
    grad_out = draw_grad_out(task.reference, inputs, seed)
    moved = tuple(x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in inputs)
    with nan_allocations():
        out, saved = module.launch_forward(*moved, **params)
        grads = module.launch_backward(grad_out.to(DEVICE), saved, *moved, **params)
    assert isinstance(saved, tuple) and all(type(s) is torch.Tensor for s in saved)
    r64, rlp = references(task.reference, inputs)
    found = compare_outputs([out.cpu()], r64, rlp, *task.tolerance(dtype))
    if found is not None:
        return f"forward: {found.message}"
    g64, glp = grad_references(task.reference, inputs, task.grad_inputs, grad_out)
    assert len(grads) == len(task.grad_inputs)
    for index, got, want64, wantlp in zip(task.grad_inputs, grads, g64, glp):
        found = compare_outputs([got.cpu()], [want64], [wantlp], *task.grad_tolerance(dtype))
        if found is not None:
            return f"grad of input {index}: {found.message}"
    return None


def test_each_task_ships_a_training_template() -> None:
    assert {t for t, _ in TRAINING} == {"softmax", "layernorm", "cross_entropy"}
    for name in ("softmax", "layernorm", "cross_entropy"):
        assert get_task(name).has_backward


@pytest.mark.slow
@pytest.mark.parametrize(("task_name", "variant"), TRAINING, ids=lambda v: getattr(v, "name", v))
def test_forward_and_backward_match_autograd(task_name: str, variant: Variant) -> None:
    task = get_task(task_name)
    module = load(variant)
    for shape in task.check_shapes:
        params = _config(variant, module, shape)
        for dtype in task.dtypes:
            inputs = task.make_inputs(dict(shape), dtype, 7, "cpu")
            assert _check(task, module, params, inputs, 11, dtype) is None, (shape, dtype, params)
    assert task.adversarial_inputs is not None
    shape = max(task.check_shapes, key=lambda s: math.prod(s.values()))
    params = _config(variant, module, shape)
    for dtype in task.dtypes:
        for name, inputs in task.adversarial_inputs(dict(shape), dtype, 3, "cpu").items():
            assert _check(task, module, params, tuple(inputs), 5, dtype) is None, (name, dtype)


class _Broken:
    """A template module whose backward is wrong in one gradient: the check must say which."""

    def __init__(self, module: ModuleType, index: int, how: str) -> None:
        self.module, self.index, self.how = module, index, how

    def launch_forward(self, *inputs: Any, **params: Any) -> Any:
        return self.module.launch_forward(*inputs, **params)

    def launch_backward(self, grad_out: torch.Tensor, saved: Any, *inputs: Any, **params: Any) -> Any:
        grads = list(self.module.launch_backward(grad_out, saved, *inputs, **params))
        if self.how == "ones_grad_out":  # the backward of an upstream gradient of ones
            grads = list(self.module.launch_backward(torch.ones_like(grad_out), saved, *inputs, **params))
        else:
            grads[self.index] = grads[self.index] * 1.01
        return tuple(grads)


@pytest.mark.parametrize(
    ("task_name", "index"), [("softmax", 0), ("layernorm", 1), ("layernorm", 2), ("cross_entropy", 0)]
)
@pytest.mark.parametrize("how", ["scaled", "ones_grad_out"])
def test_a_wrong_backward_fails(task_name: str, index: int, how: str) -> None:
    task = get_task(task_name)
    variant = next(v for t, v in TRAINING if t == task_name)
    module = load(variant)
    shape = task.check_shapes[1]
    params = _config(variant, module, shape)
    inputs = task.make_inputs(dict(shape), torch.float32, 7, "cpu")
    found = _check(task, _Broken(module, index, how), params, inputs, 11, torch.float32)  # type: ignore[arg-type]
    assert found is not None and found.startswith("grad of input")
    if how == "scaled":
        assert found.startswith(f"grad of input {index}:")
