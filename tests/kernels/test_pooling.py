"""The pool family: max and average pooling over [N, C, D, H, W], 1-D and 2-D as unit dims.

Expected values are torch's own pooling modules in float64 (nn.MaxPool1d..3d, nn.AvgPool1d..3d, never the task's
references): members built from modules over a grid of kernel, stride, padding, dilation, ceil_mode and
count_include_pad; every member on both templates under the interpreter at tiny fp32 shapes (the judge's
comparison, random and adversarial inputs); a max that pads with 0 failing; a pooling problem written here matched
through the unit-dim adapter and its adapted template run on the problem's own [N, C, L] input; and the real
KernelBench level-1 pooling files matched with their hyperparameters (../shared/kernelbench, else the shipped
copies; skipped when neither has one)."""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from family_harness import run_members
from newtask_harness import DEVICE, nan_allocations
from torch import nn

from warpforge.evaluator.judge.compare import compare_outputs
from warpforge.evaluator.judge.matching import find_match, matched_files
from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.task import get_task, load_task_file
from warpforge.kernels.taskdef import Member
from warpforge.kernels.tasks import pool
from warpforge.kernels.variant import builtin_variants

TASK = get_task("pool")
VARIANTS = {v.name: v for v in builtin_variants("pool")}
ROOT = Path(__file__).resolve().parents[2]


class _Wrap(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def _as_5d(x: torch.Tensor) -> torch.Tensor:
    # [N, C, *spatial] with unit leading spatial dims, as the matcher's adapter views it
    return x.reshape(*x.shape[:2], *([1] * (5 - x.dim())), *x.shape[2:])


def _one(module: nn.Module) -> Member:
    members = pool.propose_members(_Wrap(module))
    assert len(members) == 1
    return members[0]


MAX_GRID = [
    (k, s, p, d, ceil)
    for k, s, p, d, ceil in itertools.product((2, 3), (1, 2), (0, 1), (1, 2), (False, True))
    if p <= (d * (k - 1) + 1) // 2
]
AVG_GRID = list(itertools.product((2, 3), (1, 2), (0, 1), (False, True), (False, True)))


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_max_members_are_torchs_max_pooling(rank: int) -> None:
    cls = (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)[rank - 1]
    x = torch.randn(2, 3, *([9] * rank), generator=torch.Generator().manual_seed(rank), dtype=torch.float64)
    for k, s, p, d, ceil in MAX_GRID:
        module = cls(k, s, p, d, ceil_mode=ceil)
        got = _one(module).reference(_as_5d(x))
        torch.testing.assert_close(got.reshape(module(x).shape), module(x), rtol=0, atol=0)


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_avg_members_are_torchs_average_pooling(rank: int) -> None:
    cls = (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)[rank - 1]
    x = torch.randn(2, 3, *([9] * rank), generator=torch.Generator().manual_seed(rank), dtype=torch.float64)
    for k, s, p, ceil, count_pad in AVG_GRID:
        module = cls(k, s, p, ceil_mode=ceil, count_include_pad=count_pad)
        got = _one(module).reference(_as_5d(x))
        torch.testing.assert_close(got.reshape(module(x).shape), module(x))


def test_divisor_override_and_refusals() -> None:
    x = torch.randn(1, 2, 7, 7, dtype=torch.float64)
    module = nn.AvgPool2d(3, 2, 1, divisor_override=5)
    torch.testing.assert_close(_one(module).reference(_as_5d(x)).reshape(2, 4, 4)[None], module(x))
    assert pool.propose_members(_Wrap(nn.MaxPool2d(2, return_indices=True))) == []
    assert pool.propose_members(_Wrap(nn.Sequential(nn.MaxPool1d(2), nn.MaxPool1d(2)))) == []
    assert pool.propose_members(_Wrap(nn.ReLU())) == []


def test_output_size_is_torchs() -> None:
    for size, (k, s, p, d, ceil) in itertools.product((5, 8, 9), MAX_GRID):
        x = torch.zeros(1, 1, size)
        expected = nn.MaxPool1d(k, s, p, d, ceil_mode=ceil)(x).shape[-1]
        assert pool.output_size(size, k, s, p, d, ceil) == expected


def test_templates_pass_the_grammar() -> None:
    assert len(VARIANTS) >= 2
    for variant in VARIANTS.values():
        assert variant.path is not None
        assert check_module(variant.path.read_text()) is None, variant.name


# Proposed members (not in the table) the templates must also compute: 3-D dilation with ceil_mode, average
# without counting the padding, a divisor override, and KernelBench 41's 1-D dilated window.
EXTRA = [
    _one(nn.MaxPool3d((2, 3, 3), (1, 2, 1), 1, (1, 2, 1), ceil_mode=True)),
    _one(nn.AvgPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1), ceil_mode=True, count_include_pad=False)),
    _one(nn.AvgPool3d(3, 2, 1)),
    _one(nn.AvgPool3d((1, 1, 4), 1, (0, 0, 2), divisor_override=3)),
    _one(nn.MaxPool1d(4, 1, 2, 3)),
]
FAMILY = replace(TASK, members=(*TASK.members, *EXTRA))
SHAPE = {"N": 1, "C": 2, "D": 3, "H": 5, "W": 9}


@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.float16, marks=pytest.mark.slow)], ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_member_on_every_template(name: str, dtype: torch.dtype) -> None:
    failures = run_members(FAMILY, VARIANTS[name], [SHAPE], dtype)
    assert not failures, "\n".join(failures[:5])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_table_members_on_every_check_shape(name: str) -> None:
    failures = run_members(TASK, VARIANTS[name], TASK.check_shapes, torch.float32, configs=2)
    assert not failures, "\n".join(failures[:5])


def test_a_max_padded_with_zero_is_wrong(tmp_path: Path) -> None:
    # Every value negative: a padded tap read as 0 wins at the borders, where torch's -inf never does.
    source = VARIANTS["flat"].path.read_text()  # type: ignore[union-attr]
    line = 'v = tl.load(row + w, mask=m, other=float("-inf")).to(tl.float32)'
    assert line in source
    path = tmp_path / "zero_pad.py"
    path.write_text(source.replace(line, "v = tl.load(row + w, mask=m, other=0.0).to(tl.float32)"))
    spec = importlib.util.spec_from_file_location("wf_test_pool_zero_pad", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    member = _one(nn.MaxPool2d(3, 2, 1))
    for key, value in member.constants.items():
        setattr(module, key, value)
    (x,) = TASK.adversarial_inputs(SHAPE, torch.float32, 0, DEVICE)["negative"]  # type: ignore[misc]
    with nan_allocations():
        out = module.launch(x, BLOCK=256, num_warps=4, num_stages=1)
    ref = member.reference(x.cpu().double())
    assert compare_outputs([out.cpu()], [ref], [member.reference(x.cpu())], 1e-4, 1e-4) is not None


PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size, stride, padding, dilation):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size, stride, padding, dilation, ceil_mode=True)

    def forward(self, x):
        return self.pool(x)


batch_size = 16
channels = 24
length = 300
kernel_size = 4
stride = 2
padding = 1
dilation = 2


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]
"""


def test_a_1d_problem_matches_and_its_adapted_template_pools_its_own_input(tmp_path: Path) -> None:
    path = tmp_path / "my_pool.py"
    path.write_text(PROBLEM)
    problem = load_task_file(path)
    match, tried = find_match(problem, [TASK])
    assert match is not None, tried
    assert match.label == "pool[max(k=1x1x4,s=1x1x2,p=0x0x1,d=1x1x2,ceil)]"
    assert match.adapter is not None and "reshaped" in match.describe()
    _, variants = matched_files(problem, match, tmp_path / "matched")
    assert sorted(p.stem for p in variants) == sorted(VARIANTS)
    x = torch.randn(3, 5, 37, generator=torch.Generator().manual_seed(0)).to(DEVICE)
    expected = nn.MaxPool1d(4, 2, 1, 2, ceil_mode=True)(x.cpu().double())
    for variant in variants:
        assert check_module(variant.read_text()) is None
        spec = importlib.util.spec_from_file_location(f"wf_test_pool_adapted_{variant.stem}", variant)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        params = {"BLOCK": 256} if variant.stem == "flat" else {"BLOCK_H": 1, "BLOCK_W": 32}
        with nan_allocations():
            out = module.launch(x, **params, num_warps=4, num_stages=1)
        assert out.shape == expected.shape
        torch.testing.assert_close(out.cpu().double(), expected, rtol=0, atol=0)


LEVEL1_MEMBERS = {
    "41_Max_Pooling_1D": "max(k=1x1x8,s=1x1x1,p=0x0x4,d=1x1x3)",
    "42_Max_Pooling_2D": "max(k=1x4x4,s=1x1x1,p=0x1x1,d=1x1x1)",
    "43_Max_Pooling_3D": "max(k=3x3x3,s=2x2x2,p=1x1x1,d=3x3x3)",
    "44_Average_Pooling_1D": "avg(k=1x1x8,s=1x1x1,p=0x0x4,d=1x1x1)",
    "45_Average_Pooling_2D": "avg(k=1x11x11,s=1x11x11,p=0x0x0,d=1x1x1)",
    "46_Average_Pooling_3D": "avg(k=3x3x3,s=2x2x2,p=1x1x1,d=1x1x1)",
}


@pytest.mark.parametrize("name", sorted(LEVEL1_MEMBERS))
def test_kernelbench_pooling_problems_match_with_their_hyperparameters(
    name: str, kernelbench_file: Callable[[int, str], Path]
) -> None:
    path = kernelbench_file(1, name)
    match, tried = find_match(load_task_file(path), [TASK])
    assert match is not None, tried
    assert match.member == LEVEL1_MEMBERS[name]
    assert match.keys["N"] == "batch_size"
