"""The swiglu task (reference, inputs, cost model) and its templates run under the Triton interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from newtask_harness import load, representative, valid_configs

from warpforge.kernels.targets import constraint_shape
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import TEMPLATES_DIR, builtin_variants

TASK = get_task("swiglu")
VARIANTS = {v.name: v for v in builtin_variants("swiglu")}


MODULES = {name: load(v) for name, v in VARIANTS.items()}


def _valid_configs(name: str) -> list[dict]:
    return valid_configs(VARIANTS[name], MODULES[name], *TASK.shapes)


def _representative(name: str) -> list[dict]:
    return representative(_valid_configs(name))


def _expected(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return TASK.reference(a.double(), b.double())


def _assert_matches(out: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    atol, rtol = TASK.tolerance(dtype)
    rms = expected.double().pow(2).mean().sqrt().item()
    torch.testing.assert_close(out.double(), expected.double(), atol=atol * rms, rtol=rtol)


def _independent_f64(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """silu(a) * b = a * b / (1 + e^-a), from the formula in float64."""
    a64, b64 = a.double(), b.double()
    return a64 * b64 / (1.0 + torch.exp(-a64))


# -- the task module ------------------------------------------------------------------------------


def test_task_loads_with_expected_shapes() -> None:
    assert TASK.name == "swiglu"
    assert TASK.dtypes == [torch.float16, torch.bfloat16, torch.float32]
    assert {"M": 4096, "N": 14336} in TASK.shapes and {"M": 8192, "N": 28672} in TASK.shapes
    assert {"M": 1, "N": 1} in TASK.check_shapes
    assert all(s["M"] * s["N"] <= 20_000 for s in TASK.check_shapes)
    assert any(s["N"] % 2 for s in TASK.check_shapes)


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("shape", TASK.check_shapes + TASK.small_shapes, ids=str)
def test_reference_matches_independent_float64(shape: dict, dtype: torch.dtype) -> None:
    a, b = TASK.make_inputs(shape, dtype, seed=0, device="cpu")
    out = TASK.reference(a, b)
    assert out.dtype == dtype and out.shape == (shape["M"], shape["N"])
    _assert_matches(out, _independent_f64(a, b).to(dtype), dtype)
    _assert_matches(out, _independent_f64(a, b), dtype)


def test_reference_in_float64_stays_float64() -> None:
    a, b = TASK.make_inputs(TASK.check_shapes[1], torch.bfloat16, seed=1, device="cpu")
    out = TASK.reference(a.double(), b.double())
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, _independent_f64(a, b), atol=1e-12, rtol=1e-12)


def test_make_inputs_deterministic_per_seed() -> None:
    shape = TASK.check_shapes[2]
    a0, b0 = TASK.make_inputs(shape, torch.bfloat16, seed=0, device="cpu")
    a1, b1 = TASK.make_inputs(shape, torch.bfloat16, seed=0, device="cpu")
    a2, b2 = TASK.make_inputs(shape, torch.bfloat16, seed=1, device="cpu")
    assert torch.equal(a0, a1) and torch.equal(b0, b1)
    assert not torch.equal(a0, a2) and not torch.equal(b0, b2)
    assert not torch.equal(a0, b0)
    assert a0.shape == (17, 257) and a0.dtype == torch.bfloat16


def test_flops_and_bytes() -> None:
    shape = {"M": 4096, "N": 14336}
    assert TASK.flops(shape, torch.bfloat16) == 5 * 4096 * 14336
    assert TASK.bytes_moved(shape, torch.bfloat16) == 3 * 2 * 4096 * 14336
    assert TASK.bytes_moved({"M": 3, "N": 5}, torch.float32) == 3 * 4 * 15


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_zero_output_fails_tolerance(dtype: torch.dtype) -> None:
    a, b = TASK.make_inputs(TASK.check_shapes[2], dtype, seed=0, device="cpu")
    expected = _expected(a, b)
    with pytest.raises(AssertionError):
        _assert_matches(torch.zeros_like(expected), expected, dtype)


# -- the templates --------------------------------------------------------------------------------


def test_templates_parse_and_differ() -> None:
    assert set(VARIANTS) >= {"flat", "rows"}
    for name, variant in VARIANTS.items():
        assert variant.task == "swiglu"
        assert "num_warps" in variant.space and "num_stages" in variant.space
        assert _valid_configs(name), f"{name}: no configuration passes its constraints"
    assert max(VARIANTS["flat"].space["BLOCK"]) >= 8192


def test_rows_constraints_reject_spilling_blocks() -> None:
    check = MODULES["rows"].constraints
    shape = constraint_shape(TASK.shapes[0])
    assert not check({"BLOCK_M": 16, "BLOCK_N": 2048, "num_warps": 16, "num_stages": 1}, shape)
    assert check({"BLOCK_M": 8, "BLOCK_N": 2048, "num_warps": 8, "num_stages": 1}, shape)


CASES = [(name, config) for name in VARIANTS for config in _representative(name)]


@pytest.mark.parametrize(("name", "config"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_template_matches_reference_on_check_shapes(name: str, config: dict) -> None:
    module = MODULES[name]
    for dtype in TASK.dtypes:
        for shape in TASK.check_shapes:
            a, b = TASK.make_inputs(shape, dtype, seed=0, device="cpu")
            a_before, b_before = a.clone(), b.clone()
            out = module.launch(a, b, **config)
            assert out.shape == a.shape and out.dtype == dtype
            assert torch.isfinite(out).all(), f"{name} {config} {shape}: non-finite output"
            for x in (a, b):
                assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
            assert torch.equal(a, a_before) and torch.equal(b, b_before), "inputs were modified"
            _assert_matches(out, _expected(a, b), dtype)


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_extreme_gate_values(name: str) -> None:
    """Large |a| saturates the sigmoid: exp(-a) overflows to inf for a << 0, the result must be -0, not NaN."""
    a = torch.tensor([[-1000.0, -100.0, -20.0, -1e-3, 0.0, 1e-3, 20.0, 100.0, 1000.0]])
    b = torch.full_like(a, 3.0)
    out = MODULES[name].launch(a, b, **_representative(name)[0])
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), _independent_f64(a, b), atol=1e-6, rtol=1e-6)


def test_rows_accepts_row_strided_halves_of_a_fused_projection() -> None:
    """gate and up as the two halves of one [M, 2N] tensor (non-contiguous rows)."""
    fused, _ = TASK.make_inputs({"M": 9, "N": 2 * 301}, torch.float16, seed=5, device="cpu")
    a, b = fused[:, :301], fused[:, 301:]
    assert not a.is_contiguous()
    for name in sorted(VARIANTS):
        out = MODULES[name].launch(a, b, **_representative(name)[1])
        _assert_matches(out, _expected(a, b), torch.float16)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_on_gpu(name: str, dtype: torch.dtype) -> None:
    for config in _representative(name):
        for shape in TASK.check_shapes + [{"M": 333, "N": 14336}]:
            a, b = TASK.make_inputs(shape, dtype, seed=0, device="cuda")
            out = MODULES[name].launch(a, b, **config)
            torch.cuda.synchronize()
            _assert_matches(out.cpu(), _expected(a.cpu(), b.cpu()), dtype)


# -- backward --------------------------------------------------------------------------------------


def _autograd(a: torch.Tensor, b: torch.Tensor, dout: torch.Tensor) -> tuple[torch.Tensor, ...]:
    la, lb = a.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
    TASK.reference(la, lb).backward(dout.to(la.dtype))
    return la.grad, lb.grad  # type: ignore[return-value]


def _assert_grads(
    grads: tuple[torch.Tensor, ...], a: torch.Tensor, b: torch.Tensor, dout: torch.Tensor, where: str
) -> None:
    """Against torch autograd of the reference in float64, with the judge's rule: atol scaled by the truth's
    RMS plus the error torch's own autograd makes in the inputs' dtype."""
    dtype = a.dtype
    truth = _autograd(a.double(), b.double(), dout)
    own = _autograd(a, b, dout)
    atol, rtol = TASK.grad_tolerance(dtype)
    assert len(grads) == 2, where
    for i, (g, t, o) in enumerate(zip(grads, truth, own)):
        assert g.shape == t.shape and g.dtype == dtype, f"{where}: grad {i} {tuple(g.shape)} {g.dtype}"
        scale = t.pow(2).mean().sqrt().item()
        slack = float((o.double() - t).abs().max())
        torch.testing.assert_close(
            g.double(), t, atol=atol * scale + slack, rtol=rtol, msg=lambda m, i=i: f"{where}: grad of input {i}: {m}"
        )


def _dout(shape: dict, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(shape["M"], shape["N"], generator=torch.Generator().manual_seed(7)).to(dtype)


def test_task_trains_a_and_b() -> None:
    assert TASK.grad_inputs == (0, 1) and TASK.has_backward
    assert all(v.has_backward for v in VARIANTS.values())


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_backward_matches_autograd(name: str, dtype: torch.dtype) -> None:
    module = MODULES[name]
    configs = _representative(name)
    for k, shape in enumerate(TASK.check_shapes):
        config = configs[k % len(configs)]
        a, b = TASK.make_inputs(shape, dtype, seed=0, device="cpu")
        dout = _dout(shape, dtype)
        out, saved = module.launch_forward(a, b, **config)
        _assert_matches(out, _expected(a, b), dtype)
        grads = module.launch_backward(dout, saved, a, b, **config)
        _assert_grads(tuple(grads), a, b, dout, f"{name} {config} {shape} {dtype}")


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_backward_extreme_gate_values(name: str) -> None:
    """Saturated sigmoid in the backward: finite gradients equal to the float64 formula's."""
    a = torch.tensor([[-1000.0, -100.0, -20.0, -1e-3, 0.0, 1e-3, 20.0, 100.0, 1000.0]])
    b = torch.full_like(a, 3.0)
    dout = torch.full_like(a, 0.5)
    module = MODULES[name]
    config = _representative(name)[0]
    out, saved = module.launch_forward(a, b, **config)
    da, db = module.launch_backward(dout, saved, a, b, **config)
    assert torch.isfinite(da).all() and torch.isfinite(db).all()
    a64 = a.double()
    s = torch.sigmoid(a64)
    torch.testing.assert_close(da.double(), 0.5 * 3.0 * s * (1 + a64 * (1 - s)), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(db.double(), 0.5 * a64 * s, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_wrong_backward_fails(dtype: torch.dtype) -> None:
    """Plausible bugs fail the comparison: da without the sigmoid's derivative (dout * b * s), da and db
    swapped, and grad_out ignored (as if it were ones)."""
    for shape in TASK.check_shapes[1:]:
        a, b = TASK.make_inputs(shape, dtype, seed=0, device="cpu")
        dout = _dout(shape, dtype)
        da, db = (g.to(dtype) for g in _autograd(a.double(), b.double(), dout))
        s = torch.sigmoid(a.double())
        ones = _autograd(a.double(), b.double(), torch.ones_like(dout))
        for grads in [((dout.double() * b.double() * s).to(dtype), db), (db, da), tuple(g.to(dtype) for g in ones)]:
            with pytest.raises(AssertionError):
                _assert_grads(grads, a, b, dout, str(shape))


def test_templates_directory_matches_variant_loader() -> None:
    files = sorted(p.stem for p in (Path(TEMPLATES_DIR) / "swiglu").glob("*.py") if not p.stem.startswith("_"))
    assert files == sorted(VARIANTS)
