"""The linear task (reference, inputs, cost model, precision and adversarial cases) and its templates, forward
and backward, under the interpreter against torch.nn.functional.linear in float64 and torch autograd of it.

The interpreter computes tl.dot on bfloat16 wrongly (docs/design.md §8): CPU template runs use fp16 (and fp32,
which the interpreter computes exactly in fp32); bf16 is checked by the `gpu` tests."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from newtask_harness import DEVICE, assert_close, load, module_from, nan_allocations, representative

from warpforge.evaluator.judge.compare import compare_outputs, references
from warpforge.kernels.targets import constraint_shape
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import TEMPLATES_DIR, builtin_variants

TASK = get_task("linear")
VARIANTS = {v.name: v for v in builtin_variants("linear")}
MODULES = {name: load(v) for name, v in VARIANTS.items()}
CPU_DTYPES = [torch.float16, torch.float32] if DEVICE == "cpu" else TASK.dtypes


def _feasible(name: str) -> list[dict[str, Any]]:
    """Configurations every benchmark shape accepts (what the search draws from)."""
    module = MODULES[name]
    return [c for c in VARIANTS[name].configs() if all(module.constraints(c, constraint_shape(s)) for s in TASK.shapes)]


def _truth(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, grad_out: torch.Tensor
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """Independent ground truth: F.linear in float64, differentiated by torch autograd (not the task's
    reference, not a template)."""
    leaves = [t.detach().cpu().double().requires_grad_(True) for t in (x, w, b)]
    out = F.linear(*leaves)
    grads = torch.autograd.grad(out, leaves, grad_out.cpu().double())
    return out.detach(), tuple(grads)


def _grad_out(shape: dict[str, int], dtype: torch.dtype, seed: int, device: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed + 1000)
    return torch.randn(shape["M"], shape["N"], generator=gen).to(dtype=dtype, device=device)


def _check(
    module: ModuleType,
    params: dict[str, Any],
    inputs: tuple[torch.Tensor, ...],
    grad_out: torch.Tensor,
    dtype: torch.dtype,
    where: str,
) -> None:
    """launch, launch_forward and launch_backward against the float64 truth with the task's tolerances; the
    inputs and the upstream gradient left unchanged, every output fresh, in the right dtype."""
    before = [t.clone() for t in (*inputs, grad_out)]
    with nan_allocations():
        out = module.launch(*inputs, **params)
        out_f, saved = module.launch_forward(*inputs, **params)
        grads = module.launch_backward(grad_out, saved, *inputs, **params)
    ref, grads64 = _truth(*inputs, grad_out)
    assert isinstance(saved, tuple) and all(type(s) is torch.Tensor for s in saved), where
    for name, y in (("launch", out), ("launch_forward", out_f)):
        assert y.dtype == dtype, f"{where} {name} dtype {y.dtype}"
        assert_close(y.cpu(), ref, TASK.tolerance(dtype), f"{where} {name}")
    assert isinstance(grads, tuple) and len(grads) == 3, where
    for i, g, g64 in zip(TASK.grad_inputs, grads, grads64):
        assert g.dtype == inputs[i].dtype and g.shape == inputs[i].shape, f"{where} grad {i}"
        assert_close(g.cpu(), g64, TASK.grad_tolerance(dtype), f"{where} grad of input {i}")
    for t in (out, out_f, *grads):
        assert all(t.untyped_storage().data_ptr() != s.untyped_storage().data_ptr() for s in (*inputs, grad_out))
    assert all(torch.equal(t, b) for t, b in zip((*inputs, grad_out), before)), f"{where}: an input was modified"


# -- the task module ------------------------------------------------------------------------------


def test_task_loads_with_expected_shapes() -> None:
    assert TASK.name == "linear" and TASK.has_backward and TASK.grad_inputs == (0, 1, 2)
    assert TASK.dtypes == [torch.float16, torch.bfloat16]
    assert TASK.accumulation is torch.float32 and TASK.precision_shapes == [{"M": 16, "N": 16, "K": 4096}]
    module = sys.modules["warpforge.kernels.tasks.linear"]  # loaded by get_task
    assert module.OPTIONAL_INPUTS == (2,)
    assert {"M": 4096, "N": 14336, "K": 4096} in TASK.shapes and {"M": 4096, "N": 4096, "K": 14336} in TASK.shapes
    assert {"M": 1, "N": 1, "K": 1} in TASK.check_shapes
    for shape in TASK.check_shapes:
        assert set(shape) == {"M", "N", "K"} and max(shape.values()) <= 130
    for dim in "MNK":  # a non-multiple of 16 in every dimension, so every GEMM of the backward has a ragged edge
        assert any(s[dim] % 16 for s in TASK.check_shapes)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_reference_matches_independent_float64(dtype: torch.dtype) -> None:
    for shape in TASK.check_shapes + TASK.small_shapes:
        x, w, b = TASK.make_inputs(shape, dtype, seed=0, device="cpu")
        out = TASK.reference(x, w, b)
        assert out.dtype == dtype and out.shape == (shape["M"], shape["N"])
        # sum of products by broadcasting, in float64: no matmul kernel involved
        expected = (x.double()[:, None, :] * w.double()[None, :, :]).sum(-1) + b.double()
        assert_close(out, expected, TASK.tolerance(dtype), f"{shape} {dtype}")


def test_reference_in_float64_stays_float64_and_is_f_linear() -> None:
    x, w, b = TASK.make_inputs(TASK.check_shapes[2], torch.float16, seed=1, device="cpu")
    out = TASK.reference(x.double(), w.double(), b.double())
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, F.linear(x.double(), w.double(), b.double()), atol=0, rtol=0)


def test_make_inputs_deterministic_and_unit_scale() -> None:
    shape = TASK.check_shapes[2]
    first = TASK.make_inputs(shape, torch.float16, seed=0, device="cpu")
    again = TASK.make_inputs(shape, torch.float16, seed=0, device="cpu")
    other = TASK.make_inputs(shape, torch.float16, seed=1, device="cpu")
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not any(torch.equal(a, b) for a, b in zip(first, other))
    assert [tuple(t.shape) for t in first] == [(129, 127), (65, 127), (65,)]
    x, w, b = TASK.make_inputs({"M": 64, "N": 64, "K": 4096}, torch.bfloat16, seed=0, device="cpu")
    assert 0.5 < (x.float() @ w.float().T).std().item() < 2.0  # fan-in scaled weights
    assert 0.3 < b.float().std().item() < 0.7  # a bias worth half of y's scale: dropping it fails


def test_flops_and_bytes() -> None:
    shape = {"M": 4096, "N": 14336, "K": 4096}
    assert TASK.flops(shape, torch.float16) == 2 * 4096 * 14336 * 4096 + 4096 * 14336
    assert TASK.bytes_moved(shape, torch.bfloat16) == 2 * (4096 * 4096 + 14336 * 4096 + 14336 + 4096 * 14336)
    assert TASK.bytes_moved({"M": 2, "N": 3, "K": 5}, torch.float32) == 4 * (10 + 15 + 3 + 6)


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_missing_bias_or_zero_output_fails_tolerance(dtype: torch.dtype) -> None:
    x, w, b = TASK.make_inputs(TASK.check_shapes[2], dtype, seed=0, device="cpu")
    r64, rlp = references(TASK.reference, (x, w, b))
    no_bias = (x.float() @ w.float().T).to(dtype)
    assert compare_outputs([no_bias], r64, rlp, *TASK.tolerance(dtype)) is not None
    assert compare_outputs([torch.zeros_like(rlp[0])], r64, rlp, *TASK.tolerance(dtype)) is not None
    assert compare_outputs([rlp[0]], r64, rlp, *TASK.tolerance(dtype)) is None


def _accumulate(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, block_k: int, acc: torch.dtype) -> torch.Tensor:
    """A tiled linear as a kernel computes it: each K tile's product in fp32, added to an ``acc`` accumulator."""
    c = torch.zeros(x.shape[0], w.shape[0], dtype=acc)
    for k in range(0, x.shape[1], block_k):
        c = (c.float() + x[:, k : k + block_k].float() @ w[:, k : k + block_k].float().T).to(acc)
    return (c.float() + b.float()).to(x.dtype)


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_precision_case_refuses_an_fp16_accumulator(dtype: torch.dtype) -> None:
    assert TASK.precision_inputs is not None
    shape = TASK.precision_shapes[0]
    atol, rtol = TASK.tolerance(dtype)
    for seed in range(3):
        inputs = TASK.precision_inputs(dict(shape), dtype, seed, "cpu")
        r64, rlp = references(TASK.reference, inputs)
        for block_k in (32, 64, 128):
            assert compare_outputs([_accumulate(*inputs, block_k, torch.float32)], r64, rlp, atol, rtol) is None
            if dtype == torch.float16:  # a bf16 input has no narrower accumulator to downgrade to but bf16
                assert compare_outputs([_accumulate(*inputs, block_k, torch.float16)], r64, rlp, atol, rtol) is not None
            assert compare_outputs([_accumulate(*inputs, block_k, torch.bfloat16)], r64, rlp, atol, rtol) is not None


def test_adversarial_overflow_set_catches_rounding_before_the_bias() -> None:
    assert TASK.adversarial_inputs is not None
    shape = max(TASK.check_shapes, key=lambda s: s["M"] * s["N"] * s["K"])
    sets = TASK.adversarial_inputs(shape, torch.float16, 1, "cpu")
    assert set(sets) == {"bias_cancels_overflow", "no_bias"} and not sets["no_bias"][2].any()
    x, w, b = sets["bias_cancels_overflow"]
    assert all(bool(torch.isfinite(t).all()) for t in (x, w, b))
    r64, rlp = references(TASK.reference, (x, w, b))
    assert bool(torch.isfinite(rlp[0]).all())
    rounded_first = ((x.float() @ w.float().T).half().float() + b.float()).half()  # inf where x @ w.T > 65504
    assert compare_outputs([rounded_first], r64, rlp, *TASK.tolerance(torch.float16)) is not None
    # the reference's gradients stay finite in fp16 for a standard-normal upstream gradient
    _, grads = _truth(x, w, b, _grad_out(shape, torch.float16, 0, "cpu"))
    assert all(bool((g.abs() < 65504).all()) for g in grads)


# -- the templates --------------------------------------------------------------------------------


def test_templates_parse_and_differ() -> None:
    assert set(VARIANTS) == {"tiled", "fused_db"}
    for name, variant in VARIANTS.items():
        assert variant.task == "linear" and variant.has_backward
        assert "num_warps" in variant.space and "num_stages" in variant.space
        assert _feasible(name), f"{name}: no configuration passes its constraints"
    assert len({v.source_hash for v in VARIANTS.values()}) == len(VARIANTS)


@pytest.mark.parametrize(
    ("tile", "names"),
    [
        ((128, 256, 64, 8, 3), ("tiled", "fused_db")),
        ((128, 128, 64, 4, 4), ("tiled",)),  # fused_db: 128 + 64 fp32 values per thread (its A tile too) spill
        ((64, 256, 32, 4, 4), ("tiled", "fused_db")),
        ((128, 128, 32, 4, 4), ("tiled", "fused_db")),
    ],
    ids=str,
)
def test_space_holds_hopper_configs(tile: tuple[int, ...], names: tuple[str, ...]) -> None:
    bm, bn, bk, warps, stages = tile
    config = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "num_warps": warps, "num_stages": stages}
    for name in names:
        assert config in VARIANTS[name].configs()
        assert all(MODULES[name].constraints(config, constraint_shape(s)) for s in TASK.shapes), name


def test_constraints_reject_spilling_and_oversized_tiles() -> None:
    shape = constraint_shape(TASK.shapes[0])
    base = {"GROUP_M": 8, "num_stages": 3}
    for module in MODULES.values():
        check = module.constraints
        assert not check({**base, "BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8}, shape)
        assert not check({**base, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 4}, shape)
        big_k = {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 8, "num_stages": 4}
        assert not check(big_k, shape)  # 4 x 96 KiB of shared memory
    # the fused db sums its A tile in registers too: 64 x 256 fp32 accumulators plus a 64 x 128 tile over 4 warps
    # are 192 values per thread (that configuration compiled to 80 bytes of spill for sm_90)
    wide_a = {"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 4, "num_stages": 2}
    assert MODULES["tiled"].constraints(wide_a, shape) and not MODULES["fused_db"].constraints(wide_a, shape)


CASES = [(name, config) for name in VARIANTS for config in representative(_feasible(name))]


@pytest.mark.parametrize("dtype", CPU_DTYPES, ids=str)
@pytest.mark.parametrize(("name", "config"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_forward_and_backward_match_float64_on_check_shapes(name: str, config: dict, dtype: torch.dtype) -> None:
    for seed, shape in enumerate(TASK.check_shapes):
        inputs = TASK.make_inputs(shape, dtype, seed, DEVICE)
        _check(MODULES[name], config, inputs, _grad_out(shape, dtype, seed, DEVICE), dtype, f"{name} {config} {shape}")


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_adversarial_and_precision_inputs(name: str) -> None:
    config = representative(_feasible(name))[1]
    assert TASK.adversarial_inputs is not None and TASK.precision_inputs is not None
    shape = max(TASK.check_shapes, key=lambda s: s["M"] * s["N"] * s["K"])
    for set_name, inputs in TASK.adversarial_inputs(shape, torch.float16, 3, DEVICE).items():
        _check(
            MODULES[name],
            config,
            inputs,
            _grad_out(shape, torch.float16, 3, DEVICE),
            torch.float16,
            f"{name} {set_name}",
        )
    shape = TASK.precision_shapes[0]
    inputs = TASK.precision_inputs(dict(shape), torch.float16, 0, DEVICE)
    _check(
        MODULES[name], config, inputs, _grad_out(shape, torch.float16, 0, DEVICE), torch.float16, f"{name} precision"
    )


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_templates_honour_strides(name: str) -> None:
    """A weight stored transposed ([K, N] memory viewed as [N, K]), activations that are a column slice and a
    non-contiguous upstream gradient: the GEMMs read every operand through its strides."""
    config = representative(_feasible(name))[-1]
    shape = TASK.check_shapes[2]
    x, w, b = TASK.make_inputs(shape, torch.float16, 5, DEVICE)
    wide = torch.zeros(x.shape[0], x.shape[1] + 9, dtype=x.dtype, device=DEVICE)
    wide[:, 3 : 3 + x.shape[1]] = x
    x_view = wide[:, 3 : 3 + x.shape[1]]
    w_t = w.t().contiguous().t()
    assert w_t.stride() == (1, w.shape[0]) and not x_view.is_contiguous()
    g = _grad_out(shape, torch.float16, 5, DEVICE)
    g_t = g.t().contiguous().t()
    _check(MODULES[name], config, (x_view, w_t, b), g_t, torch.float16, f"{name} strided")


def _variant_source(name: str, old: str, new: str) -> str:
    source = (Path(TEMPLATES_DIR) / "linear" / f"{name}.py").read_text()
    assert source.count(old) == 1, old
    return source.replace(old, new)


def test_an_fp16_accumulator_fails_the_precision_case() -> None:
    """The tiled template with its accumulator rounded to fp16 after every K tile: right on the check shapes
    (K <= 129), wrong on the task's precision case (K = 4096, partial sums ~2048)."""
    honest = MODULES["tiled"]
    broken = module_from(
        _variant_source(
            "tiled",
            "        acc = tl.dot(a, b, acc)\n",
            "        acc = tl.dot(a, b, acc.to(tl.float32)).to(tl.float16)\n",
        ),
        "linear_fp16_acc",
    )
    config = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 2}
    assert TASK.precision_inputs is not None
    atol, rtol = TASK.tolerance(torch.float16)
    shape = TASK.check_shapes[2]
    inputs = TASK.make_inputs(shape, torch.float16, 0, "cpu")
    r64, rlp = references(TASK.reference, inputs)
    assert compare_outputs([broken.launch(*inputs, **config)], r64, rlp, atol, rtol) is None  # passes there
    inputs = TASK.precision_inputs(dict(TASK.precision_shapes[0]), torch.float16, 0, "cpu")
    r64, rlp = references(TASK.reference, inputs)
    assert compare_outputs([honest.launch(*inputs, **config)], r64, rlp, atol, rtol) is None
    assert compare_outputs([broken.launch(*inputs, **config)], r64, rlp, atol, rtol) is not None


def test_rounding_before_the_bias_fails_the_adversarial_case() -> None:
    broken = module_from(
        _variant_source(
            "tiled",
            "        acc += bias.to(tl.float32)[None, :]\n",
            "        acc = acc.to(c_ptr.dtype.element_ty).to(tl.float32) + bias.to(tl.float32)[None, :]\n",
        ),
        "linear_round_first",
    )
    config = representative(_feasible("tiled"))[0]
    assert TASK.adversarial_inputs is not None
    shape = max(TASK.check_shapes, key=lambda s: s["M"] * s["N"] * s["K"])
    random_inputs = TASK.make_inputs(shape, torch.float16, 0, "cpu")
    r64, rlp = references(TASK.reference, random_inputs)
    assert compare_outputs([broken.launch(*random_inputs, **config)], r64, rlp, *TASK.tolerance(torch.float16)) is None
    inputs = TASK.adversarial_inputs(shape, torch.float16, 0, "cpu")["bias_cancels_overflow"]
    r64, rlp = references(TASK.reference, inputs)
    assert compare_outputs([broken.launch(*inputs, **config)], r64, rlp, *TASK.tolerance(torch.float16)) is not None


@pytest.mark.parametrize("index", [0, 1, 2])
def test_a_wrong_gradient_fails(index: int) -> None:
    """Each gradient is checked on its own: one scaled by 1.01 fails the check."""
    module = MODULES["tiled"]
    config = representative(_feasible("tiled"))[0]
    shape = TASK.check_shapes[1]
    x, w, b = TASK.make_inputs(shape, torch.float16, 0, "cpu")
    g = _grad_out(shape, torch.float16, 0, "cpu")
    grads = list(module.launch_backward(g, (), x, w, b, **config))
    _, grads64 = _truth(x, w, b, g)
    assert_close(grads[index], grads64[index], TASK.grad_tolerance(torch.float16), "honest")
    with pytest.raises(AssertionError):
        assert_close(grads[index] * 1.01, grads64[index], TASK.grad_tolerance(torch.float16), "scaled")


# -- on a GPU (bf16 tl.dot is only right there) ---------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_templates_on_gpu(name: str, dtype: torch.dtype) -> None:
    for config in representative(_feasible(name)):
        for seed, shape in enumerate(
            TASK.check_shapes + [{"M": 1000, "N": 1500, "K": 777}, {"M": 512, "N": 384, "K": 4096}]
        ):
            inputs = TASK.make_inputs(shape, dtype, seed, "cuda")
            _check(
                MODULES[name], config, inputs, _grad_out(shape, dtype, seed, "cuda"), dtype, f"{name} {config} {shape}"
            )
            torch.cuda.synchronize()


def test_templates_directory_matches_variant_loader() -> None:
    files = sorted(p.stem for p in (Path(TEMPLATES_DIR) / "linear").glob("*.py") if not p.stem.startswith("_"))
    assert files == sorted(VARIANTS)
