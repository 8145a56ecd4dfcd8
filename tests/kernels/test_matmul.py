"""The matmul task (reference, inputs, cost model) and its templates run under the Triton interpreter.

The interpreter computes tl.dot on bfloat16 wrongly (DESIGN 8), so CPU template runs use fp16 and fp32
inputs; bf16 template correctness is checked by the `gpu` tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from newtask_harness import load, representative, valid_configs

from warpforge.kernels.targets import constraint_shape
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import TEMPLATES_DIR, builtin_variants

TASK = get_task("matmul")
VARIANTS = {v.name: v for v in builtin_variants("matmul")}
CPU_DTYPES = [torch.float16, torch.float32]


MODULES = {name: load(v) for name, v in VARIANTS.items()}


def _valid_configs(name: str) -> list[dict]:
    return valid_configs(VARIANTS[name], MODULES[name], *TASK.shapes)


def _representative(name: str) -> list[dict]:
    return representative(_valid_configs(name))


def _expected(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """float64 ground truth, as the evaluator computes it (reference on upcast inputs)."""
    return TASK.reference(a.double(), b.double())


def _assert_matches(out: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    atol, rtol = TASK.tolerance(dtype)
    rms = expected.double().pow(2).mean().sqrt().item()
    torch.testing.assert_close(out.double(), expected.double(), atol=atol * rms, rtol=rtol)


def _independent_f64(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Sum of rank-1 outer products in float64: no matmul kernel involved."""
    a64, b64 = a.double(), b.double()
    out = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
    for k in range(0, a.shape[1], 32):
        out += (a64[:, k : k + 32, None] * b64[None, k : k + 32, :]).sum(dim=1)
    return out


# -- the task module ------------------------------------------------------------------------------


def test_task_loads_with_expected_shapes() -> None:
    assert TASK.name == "matmul"
    assert TASK.dtypes == [torch.float16, torch.bfloat16]
    assert {"M": 4096, "N": 4096, "K": 4096} in TASK.shapes
    assert {"M": 4096, "N": 14336, "K": 4096} in TASK.shapes
    assert {"M": 1, "N": 1, "K": 1} in TASK.check_shapes
    for shape in TASK.check_shapes:
        assert set(shape) == {"M", "N", "K"} and max(shape.values()) <= 130
    # boundary shapes exercise a non-multiple of 16 in every dimension
    for dim in "MNK":
        assert any(s[dim] % 16 for s in TASK.check_shapes)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("shape", TASK.check_shapes + TASK.small_shapes, ids=str)
def test_reference_matches_independent_float64(shape: dict, dtype: torch.dtype) -> None:
    a, b = TASK.make_inputs(shape, dtype, seed=0, device="cpu")
    out = TASK.reference(a, b)
    assert out.dtype == dtype and out.shape == (shape["M"], shape["N"])
    _assert_matches(out, _independent_f64(a, b), dtype)


def test_reference_in_float64_stays_float64() -> None:
    a, b = TASK.make_inputs(TASK.check_shapes[2], torch.float16, seed=1, device="cpu")
    out = TASK.reference(a.double(), b.double())
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, _independent_f64(a, b), atol=1e-10, rtol=1e-10)


def test_make_inputs_deterministic_per_seed() -> None:
    shape = TASK.check_shapes[2]
    a0, b0 = TASK.make_inputs(shape, torch.float16, seed=0, device="cpu")
    a1, b1 = TASK.make_inputs(shape, torch.float16, seed=0, device="cpu")
    a2, b2 = TASK.make_inputs(shape, torch.float16, seed=1, device="cpu")
    assert torch.equal(a0, a1) and torch.equal(b0, b1)
    assert not torch.equal(a0, a2) and not torch.equal(b0, b2)
    assert a0.shape == (129, 127) and b0.shape == (127, 65) and a0.dtype == torch.float16
    # fan-in scaled weights keep C at unit scale
    big_a, big_b = TASK.make_inputs({"M": 64, "N": 64, "K": 4096}, torch.bfloat16, seed=0, device="cpu")
    assert 0.5 < TASK.reference(big_a, big_b).float().std().item() < 2.0


def test_flops_and_bytes() -> None:
    shape = {"M": 4096, "N": 14336, "K": 4096}
    assert TASK.flops(shape, torch.float16) == 2 * 4096 * 14336 * 4096
    assert TASK.bytes_moved(shape, torch.bfloat16) == 2 * (4096 * 4096 + 4096 * 14336 + 4096 * 14336)
    assert TASK.bytes_moved({"M": 2, "N": 3, "K": 5}, torch.float32) == 4 * (10 + 15 + 6)


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_zero_output_fails_tolerance(dtype: torch.dtype) -> None:
    a, b = TASK.make_inputs(TASK.check_shapes[2], dtype, seed=0, device="cpu")
    expected = _expected(a, b)
    with pytest.raises(AssertionError):
        _assert_matches(torch.zeros_like(expected), expected, dtype)


# -- the templates --------------------------------------------------------------------------------


def test_templates_parse_and_differ() -> None:
    assert set(VARIANTS) >= {"tiled_grouped", "persistent", "split_k"}
    for name, variant in VARIANTS.items():
        assert variant.task == "matmul"
        assert "num_warps" in variant.space and "num_stages" in variant.space
        assert _valid_configs(name), f"{name}: no configuration passes its constraints"
    assert len({v.source_hash for v in VARIANTS.values()}) == len(VARIANTS)


@pytest.mark.parametrize(
    "tile",
    [(128, 256, 64, 8, 3), (128, 128, 64, 4, 4), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (256, 128, 64, 8, 3)],
    ids=str,
)
def test_tiled_grouped_space_holds_hopper_configs(tile: tuple[int, ...]) -> None:
    bm, bn, bk, warps, stages = tile
    config = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "num_warps": warps, "num_stages": stages}
    assert config in VARIANTS["tiled_grouped"].configs()
    assert all(MODULES["tiled_grouped"].constraints(config, constraint_shape(s)) for s in TASK.shapes)


def test_constraints_reject_spilling_and_oversized_tiles() -> None:
    check = MODULES["tiled_grouped"].constraints
    shape = constraint_shape(TASK.shapes[0])
    base = {"GROUP_M": 8, "num_stages": 3}
    assert not check({**base, "BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8}, shape)  # registers
    assert not check({**base, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 4}, shape)  # registers
    big_k = {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 8, "num_stages": 4}
    assert not check(big_k, shape)  # 4 x 96 KiB of shared memory


CASES = [(name, config) for name in VARIANTS for config in _representative(name)]


@pytest.mark.parametrize("dtype", CPU_DTYPES, ids=str)
@pytest.mark.parametrize(("name", "config"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_template_matches_reference_on_check_shapes(name: str, config: dict, dtype: torch.dtype) -> None:
    module = MODULES[name]
    for shape in TASK.check_shapes:
        a, b = TASK.make_inputs(shape, dtype, seed=0, device="cpu")
        a_before, b_before = a.clone(), b.clone()
        out = module.launch(a, b, **config)
        assert out.shape == (shape["M"], shape["N"]) and out.dtype == dtype
        assert torch.isfinite(out).all(), f"{name} {config} {shape}: non-finite output"
        for x in (a, b):
            assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
        assert torch.equal(a, a_before) and torch.equal(b, b_before), "inputs were modified"
        _assert_matches(out, _expected(a, b), dtype)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_transposed_weight(name: str) -> None:
    """B as a transposed [N, K] weight (x @ W.T, as in nn.Linear): the templates honour strides."""
    config = _representative(name)[-1]
    a, b = TASK.make_inputs(TASK.check_shapes[2], torch.float16, seed=3, device="cpu")
    b_t = b.t().contiguous().t()  # same values, column-major storage
    assert b_t.stride() == (1, b.shape[0])
    _assert_matches(MODULES[name].launch(a, b_t, **config), _expected(a, b), torch.float16)


def test_tiled_grouped_on_small_shape() -> None:
    config = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 4}
    shape = TASK.small_shapes[0]
    a, b = TASK.make_inputs(shape, torch.float16, seed=3, device="cpu")
    _assert_matches(MODULES["tiled_grouped"].launch(a, b, **config), _expected(a, b), torch.float16)


def test_split_k_never_launches_empty_slices() -> None:
    """SPLIT_K larger than the number of K tiles still writes every partial plane it sums."""
    config = {
        "BLOCK_M": 64,
        "BLOCK_N": 64,
        "BLOCK_K": 128,
        "SPLIT_K": 16,
        "GROUP_M": 8,
        "num_warps": 4,
        "num_stages": 2,
    }
    for k in (1, 129, 385):
        a, b = TASK.make_inputs({"M": 33, "N": 70, "K": k}, torch.float32, seed=0, device="cpu")
        _assert_matches(MODULES["split_k"].launch(a, b, **config), _expected(a, b), torch.float32)


# -- on a GPU (bf16 tl.dot is only right there) ---------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_on_gpu(name: str, dtype: torch.dtype) -> None:
    for config in _representative(name):
        for shape in TASK.check_shapes + [{"M": 1000, "N": 1500, "K": 777}, {"M": 512, "N": 512, "K": 4096}]:
            a, b = TASK.make_inputs(shape, dtype, seed=0, device="cuda")
            out = MODULES[name].launch(a, b, **config)
            torch.cuda.synchronize()
            _assert_matches(out.cpu(), _expected(a.cpu(), b.cpu()), dtype)


def test_templates_directory_matches_variant_loader() -> None:
    files = sorted(p.stem for p in (Path(TEMPLATES_DIR) / "matmul").glob("*.py") if not p.stem.startswith("_"))
    assert files == sorted(VARIANTS)


# -- the triangular members (KernelBench level 1's 14 and 15: triu/tril of a product) ------------------------


def test_triangular_member_references_are_torchs() -> None:
    a, b = TASK.make_inputs({"M": 9, "N": 7, "K": 5}, torch.float32, seed=0, device="cpu")
    a, b = a.double(), b.double()
    full = _independent_f64(a, b)
    refs = {m.name: m.reference for m in TASK.members}
    assert TASK.member == "full" and set(refs) == {"full", "triu", "tril"}
    torch.testing.assert_close(refs["triu"](a, b), torch.triu(full), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(refs["tril"](a, b), torch.tril(full), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(refs["full"](a, b), full, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_triangular_members_on_every_template(name: str) -> None:
    """NaN-filled allocations: a skipped tile that leaves its zeros unwritten shows. M = 129 rows against N = 65
    columns: tiles wholly below, wholly above and across the diagonal; dense inputs (the members assume no
    zeros of their own)."""
    from family_harness import run_members

    shapes = [{"M": 129, "N": 65, "K": 127}, {"M": 17, "N": 131, "K": 67}]
    failures = run_members(TASK, VARIANTS[name], shapes, torch.float32, members=["triu", "tril"])
    assert not failures, "\n".join(failures[:5])
