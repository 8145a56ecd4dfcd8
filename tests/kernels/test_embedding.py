"""The embedding task (reference, inputs, cost model, adversarial cases) and its templates, forward and backward,
under the interpreter against index_select and index_add in float64 and torch autograd of F.embedding; both
templates judged by the interpret backend, and a backward that stores instead of adding judged incorrect."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from newtask_harness import DEVICE, assert_close, load, module_from, nan_allocations, representative

from warpforge.evaluator.judge.compare import compare_outputs, references
from warpforge.evaluator.judge.gradients import grad_references
from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.targets import constraint_shape
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import TEMPLATES_DIR, builtin_variants, load_variant

TASK = get_task("embedding")
VARIANTS = {v.name: v for v in builtin_variants("embedding")}
MODULES = {name: load(v) for name, v in VARIANTS.items()}


def _feasible(name: str) -> list[dict[str, Any]]:
    """Configurations every benchmark shape accepts (what the search draws from)."""
    module = MODULES[name]
    return [c for c in VARIANTS[name].configs() if all(module.constraints(c, constraint_shape(s)) for s in TASK.shapes)]


def _truth(ids: torch.Tensor, weight: torch.Tensor, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Independent ground truth in float64: the rows picked by index_select, and dW by index_add (not the task's
    reference, not a template)."""
    w64 = weight.detach().cpu().double()
    out = w64.index_select(0, ids.cpu())
    dw = torch.zeros_like(w64).index_add_(0, ids.cpu(), grad_out.detach().cpu().double())
    return out, dw


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
    """launch, launch_forward and launch_backward against the float64 truth: the forward bit-exact, dW within the
    task's gradient tolerance; the inputs and the upstream gradient unchanged, every output fresh."""
    before = [t.clone() for t in (*inputs, grad_out)]
    with nan_allocations():
        out = module.launch(*inputs, **params)
        out_f, saved = module.launch_forward(*inputs, **params)
        grads = module.launch_backward(grad_out, saved, *inputs, **params)
    ref, dw64 = _truth(*inputs, grad_out)
    assert saved == (), where
    for name, y in (("launch", out), ("launch_forward", out_f)):
        assert y.dtype == dtype and y.shape == ref.shape, f"{where} {name} {y.dtype} {tuple(y.shape)}"
        assert torch.equal(y.cpu().double(), ref), f"{where} {name}: not the gathered rows"
    assert isinstance(grads, tuple) and len(grads) == 1, where
    (dw,) = grads
    assert dw.dtype == dtype and dw.shape == inputs[1].shape, f"{where} dW {dw.dtype} {tuple(dw.shape)}"
    assert_close(dw.cpu(), dw64, TASK.grad_tolerance(dtype), f"{where} dW")
    untouched = dw64 == 0
    assert bool((dw.cpu()[untouched] == 0).all()), f"{where}: a row no id hits is not zero"
    for t in (out, out_f, dw):
        assert all(t.untyped_storage().data_ptr() != s.untyped_storage().data_ptr() for s in (*inputs, grad_out))
    assert all(torch.equal(t, b) for t, b in zip((*inputs, grad_out), before)), f"{where}: an input was modified"


def _store_dw(ids: torch.Tensor, grad_out: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """dW as a backward that stores each grad row instead of adding it: the last write of a repeated id wins."""
    dw = torch.zeros(weight.shape, dtype=torch.float32)
    for i, v in enumerate(ids.tolist()):
        dw[v] = grad_out[i].float()
    return dw.to(weight.dtype)


# -- the task module ------------------------------------------------------------------------------


def test_task_loads_with_expected_shapes() -> None:
    assert TASK.name == "embedding" and TASK.has_backward and TASK.grad_inputs == (1,)
    assert TASK.dtypes == [torch.float16, torch.bfloat16, torch.float32]
    assert all(TASK.tolerance(d) == (0.0, 0.0) for d in TASK.dtypes)  # a gather is bit-exact
    assert all(TASK.grad_tolerance(d) != (0.0, 0.0) for d in TASK.dtypes)
    assert {"M": 4096, "V": 128256, "N": 4096} in TASK.shapes and {"M": 8192, "V": 128256, "N": 4096} in TASK.shapes
    assert {"M": 4096, "V": 32000, "N": 4096} in TASK.shapes

    def prime(n: int) -> bool:
        return n > 2 and all(n % p for p in range(2, int(math.sqrt(n)) + 1))

    checks = TASK.check_shapes
    assert any(s["M"] == 1 for s in checks) and any(prime(s["N"]) for s in checks)
    assert all(s["V"] & (s["V"] - 1) for s in checks)  # no vocabulary a power of two
    assert any(s["M"] > s["V"] for s in checks)  # more ids than rows: repeats are certain
    for shape in checks:
        assert set(shape) == {"M", "V", "N"} and 1_000 <= shape["V"] * shape["N"] <= 20_000, shape


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_reference_is_the_gather(dtype: torch.dtype) -> None:
    for seed, shape in enumerate(TASK.check_shapes + TASK.small_shapes):
        ids, weight = TASK.make_inputs(shape, dtype, seed, "cpu")
        out = TASK.reference(ids, weight)
        assert out.dtype == dtype and out.shape == (shape["M"], shape["N"])
        assert torch.equal(out, weight.index_select(0, ids))
        assert torch.equal(out, torch.stack([weight[int(i)] for i in ids]))  # row by row
        out64 = TASK.reference(ids, weight.double())
        assert out64.dtype == torch.float64 and torch.equal(out64, weight.double()[ids])


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_reference_gradient_is_index_add_in_float64(dtype: torch.dtype) -> None:
    """The judge's gradient truth (autograd of the reference in float64) is the float64 index_add of the grad rows,
    and autograd of F.embedding itself."""
    for seed, shape in enumerate(TASK.check_shapes):
        ids, weight = TASK.make_inputs(shape, dtype, seed, "cpu")
        g = _grad_out(shape, dtype, seed, "cpu")
        (dw64,), (dw_lp,) = grad_references(TASK.reference, (ids, weight), TASK.grad_inputs, g)
        _, expected = _truth(ids, weight, g)
        torch.testing.assert_close(dw64, expected, atol=1e-12, rtol=0)
        leaf = weight.double().requires_grad_(True)
        (auto,) = torch.autograd.grad(F.embedding(ids, leaf), [leaf], g.double())
        torch.testing.assert_close(dw64, auto, atol=1e-12, rtol=0)
        assert dw_lp.dtype == dtype


def test_make_inputs_deterministic_with_repeated_ids_and_any_size() -> None:
    shape = TASK.check_shapes[1]
    first = TASK.make_inputs(shape, torch.float16, seed=0, device="cpu")
    again = TASK.make_inputs(shape, torch.float16, seed=0, device="cpu")
    other = TASK.make_inputs(shape, torch.float16, seed=1, device="cpu")
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not any(torch.equal(a, b) for a, b in zip(first, other))
    ids, weight = TASK.make_inputs({"M": 32, "V": 512, "N": 64}, torch.float32, seed=0, device="cpu")
    assert ids.dtype == torch.int64 and ids.shape == (32,) and weight.shape == (512, 64)
    for m in (3, 4, 5, 17, 67, 130):  # from M = 3 on an id repeats, whatever the seed and vocabulary
        for seed in range(5):
            ids, _ = TASK.make_inputs({"M": m, "V": 100_000, "N": 2}, torch.float32, seed, "cpu")
            assert ids.unique().numel() < m, (m, seed)
            assert bool(((ids >= 0) & (ids < 100_000)).all())
    ids, _ = TASK.make_inputs({"M": 4096, "V": 128256, "N": 1}, torch.bfloat16, 0, "cpu")
    assert ids.unique().numel() > 4096 // 2  # bytes_moved counts min(M, V) / 2 distinct rows


def test_make_inputs_run_on_fake_tensors() -> None:
    """The compile stage builds every benchmark shape's inputs under FakeTensorMode (a 1 GiB weight)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        for shape in TASK.shapes:
            ids, weight = TASK.make_inputs(shape, TASK.dtypes[0], 0, "cpu")
            assert ids.shape == (shape["M"],) and weight.shape == (shape["V"], shape["N"])


def test_adversarial_inputs_hit_the_edge_rows() -> None:
    assert TASK.adversarial_inputs is not None
    shape = TASK.check_shapes[2]
    sets = TASK.adversarial_inputs(shape, torch.float16, 1, "cpu")
    assert set(sets) == {"one_id", "edge_ids"}
    ids, _ = sets["one_id"]
    assert bool((ids == shape["V"] - 1).all())
    ids, _ = sets["edge_ids"]
    assert set(ids.tolist()) == {0, shape["V"] - 1}


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_a_store_instead_of_an_add_fails_the_gradient_check(dtype: torch.dtype) -> None:
    """dW without accumulation of repeated ids: wrong on random inputs (M >= 3) and on every adversarial set."""
    assert TASK.adversarial_inputs is not None
    shape = TASK.check_shapes[2]
    cases = [TASK.make_inputs(shape, dtype, 0, "cpu"), *TASK.adversarial_inputs(shape, dtype, 0, "cpu").values()]
    for ids, weight in cases:
        g = _grad_out(shape, dtype, 0, "cpu")
        g64, glp = grad_references(TASK.reference, (ids, weight), TASK.grad_inputs, g)
        exact = torch.zeros(weight.shape, dtype=torch.float32).index_add_(0, ids, g.float()).to(dtype)
        assert compare_outputs([exact], g64, glp, *TASK.grad_tolerance(dtype)) is None
        assert compare_outputs([_store_dw(ids, g, weight)], g64, glp, *TASK.grad_tolerance(dtype)) is not None


def test_the_gradient_tolerance_refuses_an_fp16_accumulator_torch_on_the_cpu_is_one() -> None:
    """fp16 weights, dW summed in fp16: the 130 grad rows of one id drift by ~0.05 from the float64 sum where
    the tolerance allows ~0.013. Torch's own CPU backward sums fp16 rows in fp16 (bit for bit this sum), and the
    judge allows whatever the reference does in the case's dtype (compare.py), so this fp16 accumulator is refused
    only where the reference runs on a GPU (torch's CUDA backward accumulates in fp32)."""
    assert TASK.adversarial_inputs is not None
    shape = TASK.check_shapes[2]
    ids, weight = TASK.adversarial_inputs(shape, torch.float16, 0, "cpu")["one_id"]
    g = _grad_out(shape, torch.float16, 0, "cpu")
    g64, glp = grad_references(TASK.reference, (ids, weight), TASK.grad_inputs, g)
    acc = torch.zeros(shape["N"], dtype=torch.float16)
    for row in g:
        acc = acc + row  # fp16 + fp16 rounds to fp16 after every add
    dw = torch.zeros_like(weight)
    dw[shape["V"] - 1] = acc
    rounded = [g64[0].half()]  # the float64 truth rounded once: what an fp32 accumulator may differ by
    assert compare_outputs([dw], g64, rounded, *TASK.grad_tolerance(torch.float16)) is not None
    assert torch.equal(glp[0], dw)
    fp32 = torch.zeros_like(weight)
    fp32[shape["V"] - 1] = g.float().sum(0).half()
    assert compare_outputs([fp32], g64, rounded, *TASK.grad_tolerance(torch.float16)) is None


def test_forward_tolerance_is_exact() -> None:
    """One flipped bit in one element of the gathered rows fails (the tolerance is 0)."""
    ids, weight = TASK.make_inputs(TASK.check_shapes[1], torch.bfloat16, 0, "cpu")
    r64, rlp = references(TASK.reference, (ids, weight))
    assert compare_outputs([rlp[0]], r64, rlp, *TASK.tolerance(torch.bfloat16)) is None
    bits = rlp[0].clone().view(torch.int16)
    bits[3, 5] ^= 1
    assert compare_outputs([bits.view(torch.bfloat16)], r64, rlp, *TASK.tolerance(torch.bfloat16)) is not None


def test_flops_and_bytes() -> None:
    shape = {"M": 4096, "V": 128256, "N": 4096}
    assert TASK.flops(shape, torch.float16) == 4096 * 4096
    # ids, the output and half of the M rows read: never the whole 1 GiB weight
    assert TASK.bytes_moved(shape, torch.bfloat16) == 4096 * 8 + 2 * 4096 * 4096 + 2 * 2048 * 4096
    assert TASK.bytes_moved({"M": 10, "V": 4, "N": 3}, torch.float32) == 80 + 4 * 30 + 4 * 2 * 3


# -- the templates --------------------------------------------------------------------------------


def test_templates_parse_and_differ() -> None:
    assert set(VARIANTS) == {"atomic", "segmented"}
    for name, variant in VARIANTS.items():
        assert variant.task == "embedding" and variant.has_backward
        assert "num_warps" in variant.space and "num_stages" in variant.space and "BLOCK_N" in variant.space
        assert _feasible(name), f"{name}: no configuration passes its constraints"
    assert len({v.source_hash for v in VARIANTS.values()}) == len(VARIANTS)


def test_templates_directory_matches_variant_loader() -> None:
    files = sorted(p.stem for p in (Path(TEMPLATES_DIR) / "embedding").glob("*.py") if not p.stem.startswith("_"))
    assert files == sorted(VARIANTS)


def test_constraints_keep_2_to_16_values_per_thread() -> None:
    shape = TASK.shapes[0]
    atomic, segmented = MODULES["atomic"].constraints, MODULES["segmented"].constraints
    assert atomic({"BLOCK_N": 1024, "num_warps": 4, "num_stages": 1}, shape)  # 8 fp16 per thread: 16 bytes
    assert not atomic({"BLOCK_N": 64, "num_warps": 4, "num_stages": 1}, shape)  # half the lanes idle
    assert not atomic({"BLOCK_N": 2048, "num_warps": 1, "num_stages": 1}, shape)
    assert segmented({"BLOCK_M": 4, "BLOCK_N": 512, "num_warps": 4, "num_stages": 1}, shape)
    assert not segmented({"BLOCK_M": 16, "BLOCK_N": 1024, "num_warps": 4, "num_stages": 1}, shape)


# The default tier: every template in fp16 at its middle feasible configuration (~25 s each on 2 shared
# cores); the slow tier: its smallest tiles in bf16 and its widest in fp32 (every dtype at the middle
# configuration is also judged, adversarial sets included, by test_template_judged_ok_forward_and_backward).
_PAIRS = {(1, torch.float16): [], (0, torch.bfloat16): [pytest.mark.slow], (2, torch.float32): [pytest.mark.slow]}
CASES = [
    pytest.param(name, config, dtype, id=f"{name}-{i}-{dtype}".replace("torch.", ""), marks=_PAIRS[(i, dtype)])
    for name in VARIANTS
    for i, config in enumerate(representative(_feasible(name)))
    for dtype in TASK.dtypes
    if (i, dtype) in _PAIRS
]


@pytest.mark.parametrize(("name", "config", "dtype"), CASES)
def test_forward_and_backward_match_float64_on_check_shapes(name: str, config: dict, dtype: torch.dtype) -> None:
    for seed, shape in enumerate(TASK.check_shapes):
        inputs = TASK.make_inputs(shape, dtype, seed, DEVICE)
        _check(MODULES[name], config, inputs, _grad_out(shape, dtype, seed, DEVICE), dtype, f"{name} {config} {shape}")


# ~10 s a template at the widest tiles on 2 busy cores; fp32 only: the judged test below runs both sets in
# every dtype through the evaluator, this one checks them against float64 directly
@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32], ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_adversarial_inputs(name: str, dtype: torch.dtype) -> None:
    config = representative(_feasible(name))[-1]  # the widest tiles: the fewest programs to interpret
    assert TASK.adversarial_inputs is not None
    shape = max(TASK.check_shapes, key=lambda s: math.prod(s.values()))
    for set_name, inputs in TASK.adversarial_inputs(shape, dtype, 3, DEVICE).items():
        _check(MODULES[name], config, inputs, _grad_out(shape, dtype, 3, DEVICE), dtype, f"{name} {set_name}")


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_templates_honour_strides(name: str) -> None:
    """A weight that is a column slice of a wider one, ids that are every other element of a longer tensor and an
    upstream gradient stored transposed: every kernel reads its operands through their strides."""
    config = representative(_feasible(name))[-1]
    shape = {"M": 23, "V": 41, "N": 37}
    ids, weight = TASK.make_inputs(shape, torch.float32, 5, DEVICE)
    wide = torch.zeros(shape["V"], shape["N"] + 9, dtype=weight.dtype, device=DEVICE)
    wide[:, 3 : 3 + shape["N"]] = weight
    w_view = wide[:, 3 : 3 + shape["N"]]
    long_ids = torch.zeros(2 * shape["M"], dtype=torch.int64, device=DEVICE)
    long_ids[::2] = ids
    ids_view = long_ids[::2]
    g = _grad_out(shape, torch.float32, 5, DEVICE)
    g_t = g.t().contiguous().t()
    assert not w_view.is_contiguous() and ids_view.stride() == (2,) and g_t.stride() == (1, shape["M"])
    _check(MODULES[name], config, (ids_view, w_view), g_t, torch.float32, f"{name} strided")


def _store_variant(tmp_path: Path) -> Path:
    """The atomic template with dW written by a plain store: right whenever no id repeats (M = 1), wrong on
    every repeated id (the last program to run wins)."""
    source = (Path(TEMPLATES_DIR) / "embedding" / "atomic.py").read_text()
    old = "    tl.atomic_add(acc_ptr + tl.where(valid, idx, 0) * N + cols, g, mask=mask)\n"
    assert source.count(old) == 1
    path = tmp_path / "store_not_add.py"
    path.write_text(source.replace(old, old.replace("tl.atomic_add(", "tl.store(")))
    return path


def test_a_stored_gradient_fails_in_process(tmp_path: Path) -> None:
    broken = module_from(_store_variant(tmp_path).read_text(), "embedding_store_not_add")
    config = representative(_feasible("atomic"))[1]
    shape = TASK.check_shapes[0]  # M = 1: nothing repeats, the store is right
    inputs = TASK.make_inputs(shape, torch.float32, 0, DEVICE)
    _check(broken, config, inputs, _grad_out(shape, torch.float32, 0, DEVICE), torch.float32, "store, M = 1")
    shape = TASK.check_shapes[2]
    inputs = TASK.make_inputs(shape, torch.float32, 0, DEVICE)
    with pytest.raises(AssertionError, match="dW"):
        _check(broken, config, inputs, _grad_out(shape, torch.float32, 0, DEVICE), torch.float32, "store")


# -- judged by the interpret backend (compile for sm_90, then the interpreter in a sandboxed child) -----------


@pytest.fixture(scope="module")
def interpret():
    with ChildPool() as pool:
        yield get_backend("interpret", pool=pool)


def _middle(name: str) -> dict[str, Any]:
    return representative(_feasible(name))[1]


def _one_dtype(job: Job) -> Job:
    # fp16, one seed, no hidden shape: the four check shapes, both adversarial sets and the benchmark-scale
    # cases, 35-75 s on the 2-core machine at a load of 6 (13 s of CPU); the full judgement is the slow test below
    job.dtypes, job.seeds, job.hidden_shapes = [torch.float16], 1, 0
    return job


@pytest.mark.slow
def test_atomic_judged_ok_in_fp16(interpret) -> None:
    result = interpret.evaluate(_one_dtype(Job(TASK, VARIANTS["atomic"], _middle("atomic"))))
    assert result.verdict is Verdict.OK, f"{result.reason}: {result.message}"
    assert all(label.endswith("(forward + backward)") for label in result.checked)
    assert any("one_id" in label for label in result.checked) and any("edge_ids" in label for label in result.checked)


@pytest.mark.slow
def test_a_stored_gradient_is_judged_incorrect(interpret, tmp_path: Path) -> None:
    variant = load_variant(_store_variant(tmp_path))
    result = interpret.evaluate(_one_dtype(Job(TASK, variant, _middle("atomic"))))
    assert result.verdict is Verdict.INCORRECT, f"{result.verdict}: {result.message}"
    assert result.reason in ("wrong_gradient", "fails_adversarial_input"), result.reason
    assert "grad of input 1 (weight)" in result.message, result.message


@pytest.mark.slow  # 100-150 s a template on 2 shared cores: every dtype, two seeds, a hidden shape
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_template_judged_ok_forward_and_backward(name: str, interpret) -> None:
    result = interpret.evaluate(Job(TASK, VARIANTS[name], _middle(name)))
    assert result.verdict is Verdict.OK, f"{result.reason}: {result.message}"
    assert any("hidden shape" in label for label in result.checked)
    assert {d for d in ("float16", "bfloat16", "float32") if any(f" {d} " in c for c in result.checked)} == {
        "float16",
        "bfloat16",
        "float32",
    }


@pytest.mark.slow  # 20-40 s a template on 2 shared cores
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_kernel_compiles_for_sm90(name: str) -> None:
    """Forward and backward kernels (the evaluator's compile stage captures launch's only), for sm_90 without a
    GPU, through newtask_compile_probe.py in a process without the interpreter."""
    probe = Path(__file__).with_name("newtask_compile_probe.py")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    args = [sys.executable, str(probe), "embedding", str(VARIANTS[name].path), json.dumps(_middle(name))]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    kernels = {k["kernel"]: k for k in (json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{"))}
    expected = {
        "atomic": {"_emb_gather_kernel", "_emb_scatter_add_kernel", "_emb_round_kernel"},
        "segmented": {"_emb_tile_kernel", "_emb_links_kernel", "_emb_segment_sum_kernel"},
    }[name]
    assert set(kernels) == expected and all(
        k["cubin_bytes"] > 0 and k["shared_bytes"] <= 232448 for k in kernels.values()
    )


# -- on a GPU ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_templates_on_gpu(name: str, dtype: torch.dtype) -> None:
    for config in representative(_feasible(name)):
        for seed, shape in enumerate(
            TASK.check_shapes + [{"M": 4096, "V": 32000, "N": 4096}, {"M": 2048, "V": 128256, "N": 512}]
        ):
            inputs = TASK.make_inputs(shape, dtype, seed, "cuda")
            _check(
                MODULES[name], config, inputs, _grad_out(shape, dtype, seed, "cuda"), dtype, f"{name} {config} {shape}"
            )
            torch.cuda.synchronize()
