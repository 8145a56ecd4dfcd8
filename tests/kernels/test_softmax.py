"""The softmax task (ground truth, inputs, cost model) and its templates run under the interpreter."""

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

TASK = get_task("softmax")
VARIANTS = {v.name: v for v in builtin_variants("softmax")}
# Without a GPU the kernels run on CPU tensors under TRITON_INTERPRET=1 (tests/conftest.py).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _load(variant: Variant) -> ModuleType:
    assert variant.path is not None
    spec = importlib.util.spec_from_file_location(f"wf_test_softmax_{variant.name}", variant.path)
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
    # plain atol too (softmax values are ~1/N, so a plain atol alone would be loose on long rows).
    atol, rtol = TASK.tolerance(dtype)
    scale = min(1.0, ref64.pow(2).mean().sqrt().item())
    torch.testing.assert_close(out.double(), ref64, atol=atol * scale, rtol=rtol, check_dtype=False)


def _independent(x: torch.Tensor) -> torch.Tensor:
    """float64 softmax written as exp(x - logsumexp(x)), a different route from reference()."""
    x64 = x.double()
    peak = x64.max(dim=-1, keepdim=True).values
    lse = peak + (x64 - peak).exp().sum(dim=-1, keepdim=True).log()
    return (x64 - lse).exp()


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
        (x,) = TASK.make_inputs(shape, dtype, 0, "cpu")
        out = TASK.reference(x)
        assert out.dtype == dtype and out.shape == x.shape
        expected = _independent(x)
        _assert_matches(out, expected, dtype)
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


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_zero_output_fails_tolerance(dtype: torch.dtype) -> None:
    for shape in TASK.check_shapes + TASK.small_shapes:
        (x,) = TASK.make_inputs(shape, dtype, 0, "cpu")
        ref64 = TASK.reference(x.double())
        with pytest.raises(AssertionError):
            _assert_matches(torch.zeros_like(x), ref64, dtype)


# ----------------------------------------------------------------------------------------- templates


def test_at_least_two_templates() -> None:
    assert {"single_pass", "online"} <= set(VARIANTS)
    assert all(v.task == "softmax" and v.space for v in VARIANTS.values())
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
