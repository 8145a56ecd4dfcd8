"""The rmsnorm task: its ground truth, inputs, cost model and backward (its forward templates: test_row_tasks.py)."""

from __future__ import annotations

import pytest
import torch
from newtask_harness import DEVICE, load, nan_allocations, valid_configs
from row_task_checks import assert_matches

from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

TASK = get_task("rmsnorm")
VARIANTS = {v.name: v for v in builtin_variants("rmsnorm")}


def _independent(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """float64 RMSNorm as x / ||x||_2 * sqrt(N) (eps folded in), a different route from reference()."""
    x64, w64 = x.double(), w.double()
    n = x.shape[-1]
    norm = torch.sqrt(torch.linalg.vector_norm(x64, dim=-1, keepdim=True) ** 2 + n * 1e-6)
    return x64 / norm * (n**0.5) * w64


# ---------------------------------------------------------------------------------------------- task


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_reference_matches_independent_float64(dtype: torch.dtype) -> None:
    for shape in [*TASK.check_shapes, {"M": 4, "N": 4096}]:
        x, w = TASK.make_inputs(shape, dtype, 0, "cpu")
        out = TASK.reference(x, w)
        assert out.dtype == dtype and out.shape == x.shape
        expected = _independent(x, w)
        assert_matches(TASK, out, expected, dtype)
        # The evaluator's ground truth: the same reference on float64-upcast inputs.
        out64 = TASK.reference(x.double(), w.double())
        assert out64.dtype == torch.float64
        torch.testing.assert_close(out64, expected, atol=1e-12, rtol=1e-10)
    # A row of ones normalizes to exactly w (rms = 1, eps negligible at 1e-6 relative).
    ones = torch.ones(2, 8, dtype=torch.float64)
    w = torch.arange(8, dtype=torch.float64)
    torch.testing.assert_close(TASK.reference(ones, w), w.expand(2, 8) / (1 + 1e-6) ** 0.5)


def test_make_inputs_deterministic_and_seeded() -> None:
    shape = {"M": 5, "N": 33}
    a = TASK.make_inputs(shape, torch.float16, 1, "cpu")
    b = TASK.make_inputs(shape, torch.float16, 1, "cpu")
    c = TASK.make_inputs(shape, torch.float16, 2, "cpu")
    assert a[0].shape == (5, 33) and a[1].shape == (33,)
    assert all(t.dtype == torch.float16 and t.device.type == "cpu" for t in a)
    assert all(torch.equal(p, q) for p, q in zip(a, b))
    assert not any(torch.equal(p, q) for p, q in zip(a, c))
    # Activations of unit-ish scale, weights near 1.
    x, w = TASK.make_inputs({"M": 64, "N": 1024}, torch.float32, 0, "cpu")
    assert 0.5 < x.std().item() < 2.0
    assert 0.9 < w.mean().item() < 1.1 and w.std().item() < 0.2


def test_cost_model_by_hand() -> None:
    shape = {"M": 4096, "N": 4096}
    # x read, y written (M*N each), w read (N).
    assert TASK.bytes_moved(shape, torch.float16) == (2 * 4096 * 4096 + 4096) * 2
    assert TASK.bytes_moved(shape, torch.float32) == (2 * 4096 * 4096 + 4096) * 4
    assert TASK.flops(shape, torch.bfloat16) == 4 * 4096 * 4096
    for s in TASK.shapes:
        for dtype in TASK.dtypes:
            assert TASK.flops(s, dtype) > 0 and TASK.bytes_moved(s, dtype) > 0


def test_check_shapes_are_small() -> None:
    assert 1 <= len(TASK.check_shapes) <= 5
    assert all(s["M"] * s["N"] <= 20_000 for s in TASK.check_shapes)
    assert any(s["N"] == 1 for s in TASK.check_shapes)


# ----------------------------------------------------------------------------------------- templates


# ------------------------------------------------------------------------------------------ backward


def _autograd(inputs: tuple[torch.Tensor, ...], dy: torch.Tensor) -> tuple[torch.Tensor, ...]:
    leaves = [t.detach().clone().requires_grad_(i in TASK.grad_inputs) for i, t in enumerate(inputs)]
    TASK.reference(*leaves).backward(dy.to(leaves[0].dtype))
    return tuple(leaves[i].grad for i in TASK.grad_inputs)  # type: ignore[misc]


def _grad_truth(inputs: tuple[torch.Tensor, ...], dy: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Gradients of the reference by torch autograd in float64 (the task's ground truth)."""
    return _autograd(tuple(t.double() for t in inputs), dy)


def _assert_grads(
    grads: tuple[torch.Tensor, ...],
    truth: tuple[torch.Tensor, ...],
    dtype: torch.dtype,
    where: str,
    own: tuple[torch.Tensor, ...] | None = None,
) -> None:
    """The judge's rule (evaluator/judge/compare.py, also the exported package's _testing.py): atol scaled by the
    truth's RMS, plus the error torch's own autograd of the reference makes in ``dtype`` (``own``): a row of
    one element (N = 1) has dx ~ eps * r^3, a cancellation no fp32 computation escapes."""
    atol, rtol = TASK.grad_tolerance(dtype)
    assert len(grads) == len(truth) == len(TASK.grad_inputs), where
    for i, (g, t) in enumerate(zip(grads, truth)):
        assert g.shape == t.shape and g.dtype == dtype, f"{where}: grad {i} {tuple(g.shape)} {g.dtype}"
        scale = t.pow(2).mean().sqrt().item()
        slack = float((own[i].double() - t).abs().max()) if own is not None else 0.0
        torch.testing.assert_close(
            g.double(),
            t,
            atol=atol * scale + slack,
            rtol=rtol,
            msg=lambda m, i=i: f"{where}: grad of input {TASK.grad_inputs[i]}: {m}",
        )


def _upstream(shape: dict[str, int], dtype: torch.dtype, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed + 100)
    return torch.randn(shape["M"], shape["N"], generator=gen).to(dtype)


def test_task_trains_x_and_w() -> None:
    assert TASK.grad_inputs == (0, 1) and TASK.has_backward
    assert all(v.has_backward for v in VARIANTS.values())


def test_grad_truth_matches_the_formula() -> None:
    """The autograd truth against the closed form dx = r*(w*dy - x*r^2*mean(x*w*dy)), dw = sum(dy*x*r)."""
    x, w = TASK.make_inputs({"M": 6, "N": 37}, torch.float64, 3, "cpu")
    dy = torch.randn(6, 37, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    r = 1.0 / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    c = (x * w * dy).mean(-1, keepdim=True)
    dx, dw = _grad_truth((x, w), dy)
    torch.testing.assert_close(dx, r * (w * dy - x * r * r * c))
    torch.testing.assert_close(dw, (dy * x * r).sum(0))


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_backward_matches_autograd(name: str, dtype: torch.dtype) -> None:
    variant = VARIANTS[name]
    module = load(variant)
    for k, shape in enumerate(TASK.check_shapes):
        inputs = TASK.make_inputs(shape, dtype, 0, DEVICE)
        dy = _upstream(shape, dtype, 0).to(DEVICE)
        truth = _grad_truth(tuple(t.cpu() for t in inputs), dy.cpu())
        own = _autograd(tuple(t.cpu() for t in inputs), dy.cpu())
        ref64 = TASK.reference(*(t.double() for t in inputs))
        configs = valid_configs(variant, module, shape)
        # the first and the last configuration, in turn (the interpreter runs a program at a time)
        for params in [configs[0] if k % 2 == 0 else configs[-1]]:
            where = f"{name} {params} {shape} {dtype}"
            with nan_allocations():
                out, saved = module.launch_forward(*inputs, **params)
                assert_matches(TASK, out, ref64, dtype)
                grads = module.launch_backward(dy, saved, *inputs, **params)
            _assert_grads(tuple(g.cpu() for g in grads), truth, dtype, where, own)
            # the statistic the forward keeps: rstd per row in fp32, as the reference computes it
            x64 = inputs[0].double()
            torch.testing.assert_close(
                saved[0].double().cpu(), torch.rsqrt(x64.pow(2).mean(-1) + 1e-6).cpu(), atol=0, rtol=1e-5
            )


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_wrong_backward_fails(dtype: torch.dtype) -> None:
    """Plausible backward bugs fail the comparison: dx without the rstd^2 correction term, dw of one program's
    rows only (the partial sums never reduced), dx and dw swapped in role (dw = sum of dx)."""
    for shape in TASK.check_shapes[1:]:
        x, w = TASK.make_inputs(shape, dtype, 0, "cpu")
        dy = _upstream(shape, dtype, 0)
        dx, dw = _grad_truth((x, w), dy)
        own = _autograd((x, w), dy)
        x64, dy64 = x.double(), dy.double()
        r = torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6)
        wrong = [
            ((r * w.double() * dy64).to(dtype), dw.to(dtype)),
            (dx.to(dtype), (dy64 * x64 * r)[0].to(dtype)),
            (dx.to(dtype), dx.sum(0).to(dtype)),
        ]
        for grads in wrong:
            with pytest.raises(AssertionError):
                _assert_grads(grads, (dx, dw), dtype, str(shape), own)


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_judge_rule_holds_at_one_element_and_still_refuses_wrong_backwards(dtype: torch.dtype) -> None:
    """At N = 1, dx = w*g*eps*rstd^3 (~1e-6) cancels from O(1) terms: against the gradient's own RMS an honest
    fp32 kernel failed the judge's comparator on 13 of 30 seeds. With the task's grad_scales it passes every
    seed, and dx without its correction term (O(1) off) still fails there; so does an error of 3x rtol (3% in
    bf16, 0.03% in fp32) on a 13x67 case."""
    from warpforge.evaluator.judge.compare import compare_outputs
    from warpforge.evaluator.judge.gradients import draw_grad_out, grad_floors, grad_references

    module = load(VARIANTS["single_pass"])
    params = valid_configs(VARIANTS["single_pass"], module, {"M": 1, "N": 1})[0]
    atol, rtol = TASK.grad_tolerance(dtype)
    for seed in range(20):  # a failing seed replays: inputs and upstream gradient come from it alone
        x, w = TASK.make_inputs({"M": 1, "N": 1}, dtype, seed, "cpu")
        g = draw_grad_out(TASK.reference, (x, w), seed)
        _, saved = module.launch_forward(x, w, **params)
        grads = module.launch_backward(g, saved, x, w, **params)
        r64, rlp = grad_references(TASK.reference, (x, w), TASK.grad_inputs, g)
        floors = grad_floors(TASK, (x, w), g)
        for j in range(2):
            assert compare_outputs([grads[j]], [r64[j]], [rlp[j]], atol, rtol, floors[j]) is None, (seed, j)
        uncorrected = (torch.rsqrt(x.double().pow(2) + 1e-6) * w.double() * g.double()).to(dtype)
        assert compare_outputs([uncorrected], [r64[0]], [rlp[0]], atol, rtol, floors[0]) is not None, seed
    x, w = TASK.make_inputs({"M": 13, "N": 67}, dtype, 0, "cpu")
    g = draw_grad_out(TASK.reference, (x, w), 0)
    r64, rlp = grad_references(TASK.reference, (x, w), TASK.grad_inputs, g)
    floors = grad_floors(TASK, (x, w), g)
    for j in range(2):
        off = (r64[j] * (1 + 3 * rtol)).to(dtype)
        assert compare_outputs([off], [r64[j]], [rlp[j]], atol, rtol, floors[j]) is not None, j
