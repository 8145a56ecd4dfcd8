"""The loss family: each member's reference against torch's own loss functions, every member on every template
under the interpreter (tiny shapes; fp32 in the default tier, fp16 in the slow one), and variants broken the
two ways a reduction to a scalar usually breaks (an fp16 accumulator, a dropped tail tile) caught by the
family's inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from family_harness import run_members

from warpforge.evaluator.judge.compare import lint_task
from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.task import get_task, load_task_file
from warpforge.kernels.variant import builtin_variants, load_variant

TASK = get_task("loss")
VARIANTS = {v.name: v for v in builtin_variants("loss")}
# 3 x 1031 = 3093 elements: past every template's smallest tile and a multiple of none.
SHAPE = {"M": 3, "N": 1031}


def _torch_loss(name: str, p: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """What each member computes, written with torch's loss functions (or as KernelBench writes hinge)."""
    op, _, red = name.rpartition("_")
    if op == "mse":
        return F.mse_loss(p, t, reduction=red)
    if op == "l1":
        return F.l1_loss(p, t, reduction=red)
    if op == "smooth_l1":
        return F.smooth_l1_loss(p, t, reduction=red)
    if op == "hinge":
        h = torch.clamp(1 - p * t, min=0)
        return h.mean() if red == "mean" else h.sum()
    if op == "kl_div":
        return F.kl_div(torch.log(p), t, reduction=red)
    assert op == "kl_div_log"
    return F.kl_div(p, t, reduction=red)


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")  # torch's note on kl_div's mean
def test_members_are_torchs_losses_with_their_reductions() -> None:
    names = {m.name for m in TASK.members}
    assert {"mse_mean", "mse_sum", "smooth_l1_mean", "hinge_mean", "kl_div_batchmean", "kl_div_sum"} <= names
    p, t = TASK.make_inputs({"M": 7, "N": 11}, torch.float64, 3, "cpu")
    for member in TASK.members:
        got = member.reference(p, t)
        assert got.shape == () and got.dtype == torch.float64
        torch.testing.assert_close(got, _torch_loss(member.name, p, t), rtol=1e-12, atol=0.0, msg=member.name)
    # Huber with delta 1 is smooth L1 with beta 1: one member serves both.
    huber = F.huber_loss(p, t, delta=1.0)
    torch.testing.assert_close(TASK.as_member("smooth_l1_mean").reference(p, t), huber, rtol=1e-12, atol=0.0)
    # fp16 inputs: the fp32 sum rounded once to fp16.
    h, ht = p.half(), t.half()
    assert TASK.as_member("mse_sum").reference(h, ht).dtype == torch.float16


def test_inputs_reach_both_branches_of_smooth_l1_and_hinge() -> None:
    p, t = TASK.make_inputs({"M": 13, "N": 67}, torch.float32, 0, "cpu")
    d = (p - t).abs()
    assert bool((d < 1).any()) and bool((d > 1).any())
    assert bool((p * t < 1).any()) and bool((p * t > 1).any())
    assert bool((p > 0).all()) and bool((t > 0).all())  # kl_div takes log p


@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.float16, marks=pytest.mark.slow)], ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_member_on_every_template(name: str, dtype: torch.dtype) -> None:
    failures = run_members(TASK, VARIANTS[name], [SHAPE], dtype)
    assert not failures, "\n".join(failures[:5])


def test_a_template_on_one_element_and_a_17k_element_check_shape() -> None:
    # M = N = 1 is a single masked tile; 67 x 257 is several programs with a partial last tile.
    for name in sorted(VARIANTS):
        failures = run_members(
            TASK,
            VARIANTS[name],
            [{"M": 1, "N": 1}, {"M": 67, "N": 257}],
            torch.float32,
            members=["smooth_l1_mean", "kl_div_batchmean"],
        )
        assert not failures, "\n".join(failures[:5])


# Each edit turns the shipped partials template into a plausible wrong one: its accumulator in fp16, or a grid
# of floor(n / span) programs that never reads the last partial span.
BROKEN = {
    "fp16_accumulator": [
        (
            "acc = tl.zeros([BLOCK], dtype=tl.float32)\n    for i in range(TILES):",
            "acc = tl.zeros([BLOCK], dtype=tl.float16)\n    for i in range(TILES):",
        ),
        (
            "acc += tl.where(mask, _elem_loss(p, t, OP), 0.0)",
            "acc += tl.where(mask, _elem_loss(p, t, OP), 0.0).to(tl.float16)",
        ),
    ],
    "dropped_tail": [
        (
            'programs = triton.cdiv(n, params["BLOCK"] * params["TILES"])',
            'programs = max(n // (params["BLOCK"] * params["TILES"]), 1)',
        )
    ],
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_broken_partials_template_is_caught(kind: str, tmp_path: Path) -> None:
    variant = VARIANTS["partials"]
    assert variant.path is not None
    text = variant.path.read_text()
    for old, new in BROKEN[kind]:
        assert text.count(old) == 1
        text = text.replace(old, new)
    path = tmp_path / f"partials_{kind}.py"
    path.write_text(text)
    broken = load_variant(path)
    assert check_module(broken.source) is None
    # The middle configuration, then the first (BLOCK 512, TILES 1), whose spans leave a partial one to drop.
    failures = run_members(TASK, broken, [SHAPE], torch.float32, members=["mse_mean"], configs=2)
    assert failures, f"{kind}: every member passed"


SCALAR_TASK = """
import torch

NAME = "scalar_sum"
SHAPES = [{"N": 1024}]
CHECK_SHAPES = [{"N": 1}, {"N": 13}]
DTYPES = [torch.float32]
TOLERANCES = {torch.float32: (TOL, TOL)}


def reference(x):
    return x.sum()


def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(shape["N"], generator=gen).to(dtype=dtype, device=device) + 1.0,)


def flops(shape, dtype):
    return float(shape["N"])


def bytes_moved(shape, dtype):
    return 4.0 * shape["N"]
"""


def test_a_loss_reduced_to_a_scalar_is_not_a_degenerate_task(tmp_path: Path) -> None:
    # A scalar's mean is its answer: the best-constant lint passed every scalar loss as "degenerate".
    assert lint_task(TASK) is None
    for tol, degenerate in (("1e-4", False), ("10.0", True)):  # zeros within a tolerance of 10x the answer
        path = tmp_path / f"scalar_{tol.replace('.', '_').replace('-', '_')}.py"
        path.write_text(SCALAR_TASK.replace("(TOL, TOL)", f"({tol}, {tol})"))
        problem = lint_task(load_task_file(path))
        assert (problem is not None) == degenerate, problem
        assert problem is None or "all-zeros output" in problem
