"""The cross_entropy task (reference, inputs, cost model) and its templates under the Triton interpreter."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from newtask_harness import load, representative, valid_configs

from warpforge.kernels.task import get_task
from warpforge.kernels.variant import TEMPLATES_DIR, builtin_variants

TASK = get_task("cross_entropy")
VARIANTS = {v.name: v for v in builtin_variants("cross_entropy")}


MODULES = {name: load(v) for name, v in VARIANTS.items()}


def _valid_configs(name: str) -> list[dict]:
    return valid_configs(VARIANTS[name], MODULES[name], *TASK.shapes)


def _representative(name: str) -> list[dict]:
    return representative(_valid_configs(name))


def _expected(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return TASK.reference(logits.double(), targets)


def _assert_matches(out: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    atol, rtol = TASK.tolerance(dtype)
    rms = expected.double().pow(2).mean().sqrt().item()
    torch.testing.assert_close(out.double(), expected.double(), atol=atol * rms, rtol=rtol)


def _independent_f64(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """-log(softmax(x)[t]) row by row from the formula, in float64 (two-pass max / sum)."""
    x = logits.double()
    losses = []
    for i in range(x.shape[0]):
        row = x[i]
        peak = row.max()
        total = torch.exp(row - peak).sum()
        losses.append(peak + torch.log(total) - row[int(targets[i])])
    return torch.stack(losses)


# -- the task module ------------------------------------------------------------------------------


def test_task_loads_with_expected_shapes() -> None:
    assert TASK.name == "cross_entropy"
    assert TASK.dtypes == [torch.float16, torch.bfloat16, torch.float32]
    assert {"M": 4096, "V": 128256} in TASK.shapes and {"M": 4096, "V": 32000} in TASK.shapes
    assert any(s["M"] == 1 for s in TASK.check_shapes)
    assert all(s["M"] * s["V"] <= 20_000 for s in TASK.check_shapes)
    assert all(s["V"] % 16 for s in TASK.check_shapes)


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("shape", TASK.check_shapes + TASK.small_shapes, ids=str)
def test_reference_matches_independent_float64(shape: dict, dtype: torch.dtype) -> None:
    logits, targets = TASK.make_inputs(shape, dtype, seed=0, device="cpu")
    out = TASK.reference(logits, targets)
    assert out.dtype == torch.float32 and out.shape == (shape["M"],)
    _assert_matches(out, _independent_f64(logits, targets), dtype)


def test_reference_in_float64_stays_float64_and_agrees_with_torch() -> None:
    logits, targets = TASK.make_inputs(TASK.check_shapes[3], torch.bfloat16, seed=1, device="cpu")
    out = TASK.reference(logits.double(), targets)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, _independent_f64(logits, targets), atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(
        out, torch.nn.functional.cross_entropy(logits.double(), targets, reduction="none"), atol=1e-12, rtol=1e-12
    )


def test_make_inputs_deterministic_per_seed_and_targets_in_range() -> None:
    shape = TASK.check_shapes[3]
    l0, t0 = TASK.make_inputs(shape, torch.float16, seed=0, device="cpu")
    l1, t1 = TASK.make_inputs(shape, torch.float16, seed=0, device="cpu")
    l2, t2 = TASK.make_inputs(shape, torch.float16, seed=1, device="cpu")
    assert torch.equal(l0, l1) and torch.equal(t0, t1)
    assert not torch.equal(l0, l2) and not torch.equal(t0, t2)
    assert l0.shape == (33, 257) and l0.dtype == torch.float16
    assert t0.dtype == torch.int64 and t0.shape == (33,)
    big_logits, big_targets = TASK.make_inputs({"M": 64, "V": 32000}, torch.float32, seed=0, device="cpu")
    assert 0 <= int(big_targets.min()) and int(big_targets.max()) < 32000
    assert 1.0 < big_logits.std().item() < 5.0  # "a few units" of spread


def test_flops_and_bytes() -> None:
    shape = {"M": 4096, "V": 128256}
    assert TASK.flops(shape, torch.bfloat16) == 4 * 4096 * 128256
    assert TASK.bytes_moved(shape, torch.bfloat16) == 4096 * 128256 * 2 + 4096 * 8 + 4096 * 4
    assert TASK.bytes_moved({"M": 3, "V": 5}, torch.float32) == 3 * 5 * 4 + 3 * 8 + 3 * 4


def test_tolerance_override_is_fp32_level() -> None:
    for dtype in TASK.dtypes:
        assert TASK.tolerance(dtype) == (1e-4, 1e-4)


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_zero_output_fails_tolerance(dtype: torch.dtype) -> None:
    logits, targets = TASK.make_inputs(TASK.check_shapes[3], dtype, seed=0, device="cpu")
    expected = _expected(logits, targets)
    with pytest.raises(AssertionError):
        _assert_matches(torch.zeros_like(expected), expected, dtype)


def test_half_precision_math_fails_tolerance() -> None:
    """The override is not vacuous either way: a loss computed in bf16 is rejected."""
    logits, targets = TASK.make_inputs(TASK.check_shapes[2], torch.bfloat16, seed=0, device="cpu")
    expected = _expected(logits, targets)
    with pytest.raises(AssertionError):
        _assert_matches(expected.to(torch.bfloat16), expected, torch.bfloat16)


# -- the templates --------------------------------------------------------------------------------


def test_templates_parse_and_differ() -> None:
    assert set(VARIANTS) >= {"online", "split_vocab"}
    for name, variant in VARIANTS.items():
        assert variant.task == "cross_entropy"
        assert "num_warps" in variant.space and "num_stages" in variant.space
        assert _valid_configs(name), f"{name}: no configuration passes its constraints"


CASES = [(name, config) for name in VARIANTS for config in _representative(name)]


@pytest.mark.parametrize(("name", "config"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_template_matches_reference_on_check_shapes(name: str, config: dict) -> None:
    module = MODULES[name]
    for dtype in TASK.dtypes:
        for seed, shape in enumerate(TASK.check_shapes):
            logits, targets = TASK.make_inputs(shape, dtype, seed=seed, device="cpu")
            logits_before, targets_before = logits.clone(), targets.clone()
            out = module.launch(logits, targets, **config)
            assert out.shape == (shape["M"],) and out.dtype == torch.float32
            assert torch.isfinite(out).all(), f"{name} {config} {shape}: non-finite output"
            for x in (logits, targets):
                assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
            assert torch.equal(logits, logits_before) and torch.equal(targets, targets_before)
            _assert_matches(out, _expected(logits, targets), dtype)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_boundary_targets_and_large_logits(name: str) -> None:
    """Targets at 0 and V-1, and logits of magnitude 1e4 (exp overflows without the max shift)."""
    m, v = 4, 3001
    logits, _ = TASK.make_inputs({"M": m, "V": v}, torch.float32, seed=7, device="cpu")
    logits = logits * 5000.0
    logits[2, 1234] = 1.0e5  # one dominant logit: the row's loss is ~0 for that target, huge otherwise
    targets = torch.tensor([0, v - 1, 1234, v - 1])
    for config in _representative(name)[:2]:
        out = MODULES[name].launch(logits, targets, **config)
        assert torch.isfinite(out).all()
        _assert_matches(out, _expected(logits, targets), torch.float32)
        assert abs(out[2].item()) < 1e-3


def test_split_vocab_more_splits_than_blocks() -> None:
    """NUM_SPLITS above the number of BLOCK_V chunks: no empty split, same answer."""
    logits, targets = TASK.make_inputs({"M": 3, "V": 1500}, torch.float16, seed=2, device="cpu")
    config = {"NUM_SPLITS": 64, "BLOCK_V": 1024, "num_warps": 4, "num_stages": 1}
    _assert_matches(MODULES["split_vocab"].launch(logits, targets, **config), _expected(logits, targets), torch.float16)


def test_online_on_small_shape() -> None:
    shape = TASK.small_shapes[0]
    logits, targets = TASK.make_inputs(shape, torch.bfloat16, seed=0, device="cpu")
    config = {"BLOCK_V": 4096, "num_warps": 8, "num_stages": 2}
    out = MODULES["online"].launch(logits, targets, **config)
    _assert_matches(out, _expected(logits, targets), torch.bfloat16)
    assert abs(out.mean().item() - (math.log(shape["V"]) + 2.0)) < 1.0  # ~ log V + sigma^2 / 2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_on_gpu(name: str, dtype: torch.dtype) -> None:
    for config in _representative(name):
        for shape in TASK.check_shapes + [{"M": 37, "V": 128256}]:
            logits, targets = TASK.make_inputs(shape, dtype, seed=0, device="cuda")
            out = MODULES[name].launch(logits, targets, **config)
            torch.cuda.synchronize()
            _assert_matches(out.cpu(), _expected(logits.cpu(), targets.cpu()), dtype)


def test_templates_directory_matches_variant_loader() -> None:
    files = sorted(p.stem for p in (Path(TEMPLATES_DIR) / "cross_entropy").glob("*.py") if not p.stem.startswith("_"))
    assert files == sorted(VARIANTS)
