"""The layernorm task: its ground truth, inputs and cost model (its templates: tests/kernels/test_row_tasks.py)."""

from __future__ import annotations

import pytest
import torch
from row_task_checks import assert_matches

from warpforge.kernels.task import get_task

TASK = get_task("layernorm")


def _independent(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """float64 LayerNorm from explicit moments, a different route from reference() (F.layer_norm)."""
    x64 = x.double()
    mean = x64.mean(dim=-1, keepdim=True)
    var = ((x64 - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x64 - mean) / torch.sqrt(var + 1e-5) * w.double() + b.double()


# ---------------------------------------------------------------------------------------------- task


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_reference_matches_independent_float64(dtype: torch.dtype) -> None:
    for shape in [*TASK.check_shapes, {"M": 4, "N": 4096}]:
        x, w, b = TASK.make_inputs(shape, dtype, 0, "cpu")
        out = TASK.reference(x, w, b)
        assert out.dtype == dtype and out.shape == x.shape
        expected = _independent(x, w, b)
        assert_matches(TASK, out, expected, dtype)
        # The evaluator's ground truth: the same reference on float64-upcast inputs.
        out64 = TASK.reference(x.double(), w.double(), b.double())
        assert out64.dtype == torch.float64
        torch.testing.assert_close(out64, expected, atol=1e-12, rtol=1e-10)
    # A constant row has variance 0 and normalizes to exactly b.
    const = torch.full((2, 8), 3.0, dtype=torch.float64)
    w = torch.arange(8, dtype=torch.float64)
    b = torch.linspace(-1, 1, 8, dtype=torch.float64)
    torch.testing.assert_close(TASK.reference(const, w, b), b.expand(2, 8))


def test_make_inputs_deterministic_and_seeded() -> None:
    shape = {"M": 5, "N": 33}
    a = TASK.make_inputs(shape, torch.float16, 1, "cpu")
    b = TASK.make_inputs(shape, torch.float16, 1, "cpu")
    c = TASK.make_inputs(shape, torch.float16, 2, "cpu")
    assert a[0].shape == (5, 33) and a[1].shape == (33,) and a[2].shape == (33,)
    assert all(t.dtype == torch.float16 and t.device.type == "cpu" for t in a)
    assert all(torch.equal(p, q) for p, q in zip(a, b))
    assert not any(torch.equal(p, q) for p, q in zip(a, c))
    # Activations of unit-ish scale with per-row offsets, weights near 1, small biases.
    x, w, b = TASK.make_inputs({"M": 64, "N": 1024}, torch.float32, 0, "cpu")
    assert 0.5 < x.std(dim=-1).mean().item() < 2.0
    assert x.mean(dim=-1).abs().max().item() > 0.3
    assert 0.9 < w.mean().item() < 1.1 and w.std().item() < 0.2
    assert b.abs().mean().item() < 0.2


def test_cost_model_by_hand() -> None:
    shape = {"M": 4096, "N": 4096}
    # x read, y written (M*N each), w and b read (N each).
    assert TASK.bytes_moved(shape, torch.float16) == (2 * 4096 * 4096 + 2 * 4096) * 2
    assert TASK.bytes_moved(shape, torch.float32) == (2 * 4096 * 4096 + 2 * 4096) * 4
    assert TASK.flops(shape, torch.bfloat16) == 7 * 4096 * 4096
    for s in TASK.shapes:
        for dtype in TASK.dtypes:
            assert TASK.flops(s, dtype) > 0 and TASK.bytes_moved(s, dtype) > 0


def test_check_shapes_are_small() -> None:
    assert 1 <= len(TASK.check_shapes) <= 5
    assert all(s["M"] * s["N"] <= 20_000 for s in TASK.check_shapes)
    assert any(s["N"] == 1 for s in TASK.check_shapes)


# ----------------------------------------------------------------------------------------- templates


def _grad_x_mismatches(task, grad_seeds: range) -> int:
    """How many upstream gradients make the single_pass template's dx miss at M=1, N=2 (the input seed of a
    `fails_hidden_shape` verdict seen in an optimize run), judged as the training judge compares gradients."""
    from dataclasses import replace

    from newtask_harness import load, nan_allocations

    from warpforge.evaluator.judge.compare import compare_outputs
    from warpforge.evaluator.judge.gradients import draw_grad_out, grad_floors, grad_references
    from warpforge.kernels.variant import builtin_variants

    module = load(next(v for v in builtin_variants("layernorm") if v.name == "single_pass"))
    params = {"ROWS_PER_PROGRAM": 8, "num_warps": 8, "num_stages": 3, "BWD_ROWS_PER_PROGRAM": 16}
    inputs = task.make_inputs({"M": 1, "N": 2}, torch.float32, 1366364544, "cpu")
    bad = 0
    for seed in grad_seeds:
        g = draw_grad_out(task.reference, inputs, seed)
        with nan_allocations():
            _, saved = module.launch_forward(*inputs, **params)
            dx = module.launch_backward(g, saved, *inputs, **params)[0]
        g64, glp = grad_references(task.reference, inputs, task.grad_inputs, g)
        floor = grad_floors(replace(task), inputs, g)[0]
        bad += compare_outputs([dx], [g64[0]], [glp[0]], *task.grad_tolerance(torch.float32), floor) is not None
    return bad


def test_dx_at_two_columns_is_judged_against_the_size_of_its_terms() -> None:
    """At N = 2, dx is rstd * (the half-difference of w*g) * eps / (d^2 + eps): ~1e-5 of the terms it is
    computed from, below one fp32 ulp of xhat's relative error there. Against the gradient's own RMS an honest
    kernel missed for about half the upstream gradients; against its terms' size (grad_scales) none."""
    from dataclasses import replace

    assert _grad_x_mismatches(replace(TASK, grad_scales=None), range(8)) >= 1
    assert _grad_x_mismatches(TASK, range(8)) == 0
