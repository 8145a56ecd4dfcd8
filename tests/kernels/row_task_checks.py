"""What the row-wise tasks (softmax, rmsnorm, layernorm: x [M, N] -> y [M, N]) are checked by in common: the
judge's comparison in a test's words, and a template run under the interpreter on a task's shapes."""

from __future__ import annotations

import torch
from newtask_harness import load, nan_allocations, representative, valid_configs

from warpforge.kernels.taskdef import Task
from warpforge.kernels.variant import Variant


def assert_matches(task: Task, out: torch.Tensor, ref64: torch.Tensor, dtype: torch.dtype) -> None:
    # task.py scales atol by the reference's RMS; min(1, rms) keeps the check at least as strict as a
    # plain atol too (softmax values are ~1/N, so a plain atol alone would be loose on long rows).
    atol, rtol = task.tolerance(dtype)
    scale = min(1.0, ref64.pow(2).mean().sqrt().item())
    torch.testing.assert_close(out.double(), ref64, atol=atol * scale, rtol=rtol, check_dtype=False)


def run_template(task: Task, variant: Variant, dtype: torch.dtype, shapes: list[dict[str, int]], device: str) -> None:
    """Two seeds, the first, middle and last feasible configurations, NaN-filled allocations: the output is
    finite, fresh, of the input's shape and dtype, within tolerance, and no input is written."""
    module = load(variant)
    for shape in shapes:
        for seed in (0, 1):
            inputs = task.make_inputs(shape, dtype, seed, device)
            x = inputs[0]
            before = [t.clone() for t in inputs]
            ref64 = task.reference(*(t.double() for t in inputs))
            for params in representative(valid_configs(variant, module, shape)):
                with nan_allocations():
                    out = module.launch(*inputs, **params)
                where = f"{variant.name} {params} {shape} {dtype}"
                assert isinstance(out, torch.Tensor), where
                assert out.dtype == dtype and out.shape == x.shape, where
                assert torch.isfinite(out).all(), where
                ptrs = {t.untyped_storage().data_ptr() for t in inputs}
                assert out.untyped_storage().data_ptr() not in ptrs, where
                assert all(torch.equal(t, b) for t, b in zip(inputs, before)), where
                assert_matches(task, out, ref64, dtype)
