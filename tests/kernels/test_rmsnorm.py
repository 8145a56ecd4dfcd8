"""The rmsnorm task (ground truth, inputs, cost model) and its templates run under the interpreter."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest
import torch

from warpforge.kernels.task import get_task
from warpforge.kernels.variant import Variant, builtin_variants

TASK = get_task("rmsnorm")
VARIANTS = {v.name: v for v in builtin_variants("rmsnorm")}
# Without a GPU the kernels run on CPU tensors under TRITON_INTERPRET=1 (tests/conftest.py).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _load(variant: Variant) -> ModuleType:
    assert variant.path is not None
    spec = importlib.util.spec_from_file_location(f"wf_test_rmsnorm_{variant.name}", variant.path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _valid_configs(variant: Variant, module: ModuleType, shape: dict[str, int]) -> list[dict[str, Any]]:
    check = getattr(module, "constraints", None)
    return [c for c in variant.configs() if check is None or check(c, shape)]


def _representative(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    picks = [configs[0], configs[len(configs) // 2], configs[-1]]
    return [c for i, c in enumerate(picks) if c not in picks[:i]]


def _assert_matches(out: torch.Tensor, ref64: torch.Tensor, dtype: torch.dtype) -> None:
    # task.py scales atol by the reference's RMS; min(1, rms) keeps the check at least as strict as a
    # plain atol too.
    atol, rtol = TASK.tolerance(dtype)
    scale = min(1.0, ref64.pow(2).mean().sqrt().item())
    torch.testing.assert_close(out.double(), ref64, atol=atol * scale, rtol=rtol, check_dtype=False)


def _independent(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """float64 RMSNorm as x / ||x||_2 * sqrt(N) (eps folded in), a different route from reference()."""
    x64, w64 = x.double(), w.double()
    n = x.shape[-1]
    norm = torch.sqrt(torch.linalg.vector_norm(x64, dim=-1, keepdim=True) ** 2 + n * 1e-6)
    return x64 / norm * (n**0.5) * w64


@contextmanager
def _nan_allocations() -> Iterator[None]:
    """Fresh allocations come back NaN-filled, as in the evaluator, so unwritten output shows up."""
    empty, empty_like = torch.empty, torch.empty_like

    def nan_empty(*args: Any, **kwargs: Any) -> torch.Tensor:
        t = empty(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    def nan_empty_like(*args: Any, **kwargs: Any) -> torch.Tensor:
        t = empty_like(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    torch.empty, torch.empty_like = nan_empty, nan_empty_like  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.empty, torch.empty_like = empty, empty_like  # type: ignore[assignment]


# ---------------------------------------------------------------------------------------------- task


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_reference_matches_independent_float64(dtype: torch.dtype) -> None:
    for shape in [*TASK.check_shapes, {"M": 4, "N": 4096}]:
        x, w = TASK.make_inputs(shape, dtype, 0, "cpu")
        out = TASK.reference(x, w)
        assert out.dtype == dtype and out.shape == x.shape
        expected = _independent(x, w)
        _assert_matches(out, expected, dtype)
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


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_zero_output_fails_tolerance(dtype: torch.dtype) -> None:
    for shape in TASK.check_shapes + TASK.small_shapes:
        x, w = TASK.make_inputs(shape, dtype, 0, "cpu")
        ref64 = TASK.reference(x.double(), w.double())
        with pytest.raises(AssertionError):
            _assert_matches(torch.zeros_like(x), ref64, dtype)


# ----------------------------------------------------------------------------------------- templates


def test_at_least_two_templates() -> None:
    assert {"single_pass", "looped"} <= set(VARIANTS)
    assert all(v.task == "rmsnorm" and v.space for v in VARIANTS.values())
    assert all({"num_warps", "num_stages"} <= set(v.space) for v in VARIANTS.values())


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_valid_on_every_shape(name: str) -> None:
    module = _load(VARIANTS[name])
    for shape in TASK.shapes + TASK.check_shapes + TASK.small_shapes:
        assert _valid_configs(VARIANTS[name], module, shape), f"{name}: no valid config for {shape}"


def _run_template(name: str, dtype: torch.dtype, shapes: list[dict[str, int]], device: str) -> None:
    variant = VARIANTS[name]
    module = _load(variant)
    for shape in shapes:
        for seed in (0, 1):
            inputs = TASK.make_inputs(shape, dtype, seed, device)
            x = inputs[0]
            before = [t.clone() for t in inputs]
            ref64 = TASK.reference(*(t.double() for t in inputs))
            for params in _representative(_valid_configs(variant, module, shape)):
                with _nan_allocations():
                    out = module.launch(*inputs, **params)
                where = f"{name} {params} {shape} {dtype}"
                assert isinstance(out, torch.Tensor), where
                assert out.dtype == dtype and out.shape == x.shape, where
                assert torch.isfinite(out).all(), where
                ptrs = {t.untyped_storage().data_ptr() for t in inputs}
                assert out.untyped_storage().data_ptr() not in ptrs, where
                assert all(torch.equal(t, b) for t, b in zip(inputs, before)), where
                _assert_matches(out, ref64, dtype)


# The first dtype in the default tier; the others (~2/3 of this test's interpreter time) in the slow tier.
@pytest.mark.parametrize("dtype", [pytest.param(d, id=str(d), marks=[pytest.mark.slow] if i else [])
                                   for i, d in enumerate(TASK.dtypes)])
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_correct_on_check_shapes(name: str, dtype: torch.dtype) -> None:
    _run_template(name, dtype, TASK.check_shapes, DEVICE)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_correct_on_benchmark_shapes_gpu(name: str, dtype: torch.dtype) -> None:
    _run_template(name, dtype, TASK.shapes, "cuda")


# ------------------------------------------------------------------------------------------ backward


def _autograd(inputs: tuple[torch.Tensor, ...], dy: torch.Tensor) -> tuple[torch.Tensor, ...]:
    leaves = [t.detach().clone().requires_grad_(i in TASK.grad_inputs) for i, t in enumerate(inputs)]
    TASK.reference(*leaves).backward(dy.to(leaves[0].dtype))
    return tuple(leaves[i].grad for i in TASK.grad_inputs)  # type: ignore[misc]


def _grad_truth(inputs: tuple[torch.Tensor, ...], dy: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Gradients of the reference by torch autograd in float64 (the task's ground truth)."""
    return _autograd(tuple(t.double() for t in inputs), dy)


def _assert_grads(grads: tuple[torch.Tensor, ...], truth: tuple[torch.Tensor, ...], dtype: torch.dtype,
                  where: str, own: tuple[torch.Tensor, ...] | None = None) -> None:
    """The judge's rule (evaluator/judge/compare.py, also the exported package's _testing.py): atol scaled by the
    truth's RMS, plus the error torch's own autograd of the reference makes in ``dtype`` (``own``): a row of
    one element (N = 1) has dx ~ eps * r^3, a cancellation no fp32 computation escapes."""
    atol, rtol = TASK.grad_tolerance(dtype)
    assert len(grads) == len(truth) == len(TASK.grad_inputs), where
    for i, (g, t) in enumerate(zip(grads, truth)):
        assert g.shape == t.shape and g.dtype == dtype, f"{where}: grad {i} {tuple(g.shape)} {g.dtype}"
        scale = t.pow(2).mean().sqrt().item()
        slack = float((own[i].double() - t).abs().max()) if own is not None else 0.0
        torch.testing.assert_close(g.double(), t, atol=atol * scale + slack, rtol=rtol,
                                   msg=lambda m, i=i: f"{where}: grad of input {TASK.grad_inputs[i]}: {m}")


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
    module = _load(variant)
    for k, shape in enumerate(TASK.check_shapes):
        inputs = TASK.make_inputs(shape, dtype, 0, DEVICE)
        dy = _upstream(shape, dtype, 0).to(DEVICE)
        truth = _grad_truth(tuple(t.cpu() for t in inputs), dy.cpu())
        own = _autograd(tuple(t.cpu() for t in inputs), dy.cpu())
        ref64 = TASK.reference(*(t.double() for t in inputs))
        configs = _valid_configs(variant, module, shape)
        # the first and the last configuration, in turn (the interpreter runs a program at a time)
        for params in [configs[0] if k % 2 == 0 else configs[-1]]:
            where = f"{name} {params} {shape} {dtype}"
            with _nan_allocations():
                out, saved = module.launch_forward(*inputs, **params)
                _assert_matches(out, ref64, dtype)
                grads = module.launch_backward(dy, saved, *inputs, **params)
            _assert_grads(tuple(g.cpu() for g in grads), truth, dtype, where, own)
            # the statistic the forward keeps: rstd per row in fp32, as the reference computes it
            x64 = inputs[0].double()
            torch.testing.assert_close(saved[0].double().cpu(), torch.rsqrt(x64.pow(2).mean(-1) + 1e-6).cpu(),
                                       atol=0, rtol=1e-5)


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
        wrong = [((r * w.double() * dy64).to(dtype), dw.to(dtype)),
                 (dx.to(dtype), (dy64 * x64 * r)[0].to(dtype)),
                 (dx.to(dtype), dx.sum(0).to(dtype))]
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

    module = _load(VARIANTS["single_pass"])
    params = _valid_configs(VARIANTS["single_pass"], module, {"M": 1, "N": 1})[0]
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
