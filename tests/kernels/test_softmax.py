"""The softmax task: its ground truth, inputs and cost model (its templates: tests/kernels/test_row_tasks.py)."""

from __future__ import annotations

import pytest
import torch
from row_task_checks import assert_matches

from warpforge.kernels.task import get_task

TASK = get_task("softmax")


def _independent(x: torch.Tensor) -> torch.Tensor:
    """float64 softmax written as exp(x - logsumexp(x)), a different route from reference()."""
    x64 = x.double()
    peak = x64.max(dim=-1, keepdim=True).values
    lse = peak + (x64 - peak).exp().sum(dim=-1, keepdim=True).log()
    return (x64 - lse).exp()


# ---------------------------------------------------------------------------------------------- task


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_reference_matches_independent_float64(dtype: torch.dtype) -> None:
    for shape in [*TASK.check_shapes, {"M": 4, "N": 4096}]:
        (x,) = TASK.make_inputs(shape, dtype, 0, "cpu")
        out = TASK.reference(x)
        assert out.dtype == dtype and out.shape == x.shape
        expected = _independent(x)
        assert_matches(TASK, out, expected, dtype)
        # The evaluator's ground truth: the same reference on float64-upcast inputs.
        out64 = TASK.reference(x.double())
        assert out64.dtype == torch.float64
        torch.testing.assert_close(out64, expected, atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(out64.sum(dim=-1), torch.ones(shape["M"], dtype=torch.float64))


def test_make_inputs_deterministic_and_seeded() -> None:
    shape = {"M": 5, "N": 33}
    (a,) = TASK.make_inputs(shape, torch.float16, 1, "cpu")
    (b,) = TASK.make_inputs(shape, torch.float16, 1, "cpu")
    (c,) = TASK.make_inputs(shape, torch.float16, 2, "cpu")
    assert a.shape == (5, 33) and a.dtype == torch.float16 and a.device.type == "cpu"
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    # Logits of a few units, not a degenerate all-equal row.
    (big,) = TASK.make_inputs({"M": 64, "N": 1024}, torch.float32, 0, "cpu")
    assert 2.0 < big.std().item() < 4.0


def test_cost_model_by_hand() -> None:
    shape = {"M": 4096, "N": 4096}
    assert TASK.bytes_moved(shape, torch.float16) == 2 * 4096 * 4096 * 2
    assert TASK.bytes_moved(shape, torch.float32) == 2 * 4096 * 4096 * 4
    assert TASK.flops(shape, torch.bfloat16) == 5 * 4096 * 4096
    for s in TASK.shapes:
        for dtype in TASK.dtypes:
            assert TASK.flops(s, dtype) > 0 and TASK.bytes_moved(s, dtype) > 0


def test_check_shapes_are_small() -> None:
    assert 1 <= len(TASK.check_shapes) <= 5
    assert all(s["M"] * s["N"] <= 20_000 for s in TASK.check_shapes)
    assert any(s["N"] == 1 for s in TASK.check_shapes)


# ----------------------------------------------------------------------------------------- templates
