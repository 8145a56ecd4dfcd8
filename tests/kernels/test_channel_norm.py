"""The channel_norm family: batch (running or batch statistics), instance and group normalization of [N, C, H, W].

Expected values are torch's normalization modules in float64 (never the task's references): members proposed
from nn.BatchNorm2d (eval and train), nn.InstanceNorm2d and nn.GroupNorm over group counts and eps; every member
on both templates under the interpreter at tiny shapes (random inputs and a mean 100 standard deviations from 0,
where E[x^2] - E[x]^2 cancels); and the real KernelBench level-1 files matched (33 as the eval-mode batch norm
the by-path loader runs, 34 with its affine and running statistics filled, 35 with its running statistics
filled): ../shared/kernelbench, else the shipped copies; skipped when neither has one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from family_harness import run_members
from torch import nn

from warpforge.evaluator.judge.matching import find_match
from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.task import get_task, load_task_file
from warpforge.kernels.taskdef import Member
from warpforge.kernels.tasks import channel_norm
from warpforge.kernels.variant import builtin_variants

TASK = get_task("channel_norm")
VARIANTS = {v.name: v for v in builtin_variants("channel_norm")}


class _Wrap(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def _one(module: nn.Module) -> Member:
    members = channel_norm.propose_members(_Wrap(module))
    assert len(members) == 1
    return members[0]


def _state(c: int, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    w, b = 1 + 0.2 * torch.randn(c, generator=gen), 0.3 * torch.randn(c, generator=gen)
    rm, rv = torch.randn(c, generator=gen), 0.5 + torch.rand(c, generator=gen)
    return tuple(t.double() for t in (w, b, rm, rv))


@pytest.mark.parametrize("eps", [1e-5, 1e-3])
def test_members_are_torchs_normalization_modules(eps: float) -> None:
    x = 0.5 + torch.randn(3, 8, 5, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    w, b, rm, rv = _state(8, 1)
    nbt = torch.zeros((), dtype=torch.int64)
    bn = nn.BatchNorm2d(8, eps=eps).double()
    with torch.no_grad():
        bn.weight.copy_(w)
        bn.bias.copy_(b)
        bn.running_mean.copy_(rm)
        bn.running_var.copy_(rv)
    bn.eval()
    got = _one(bn).reference(x, w, b, rm, rv, nbt)
    assert _one(bn).constants["KIND"] == "batch"
    torch.testing.assert_close(got, bn(x))
    bn.train()
    train = _one(bn)
    assert train.constants["KIND"] == "batch_train"
    torch.testing.assert_close(train.reference(x, w, b, rm, rv, nbt), bn(x))
    inorm = nn.InstanceNorm2d(8, eps=eps).double()
    ones, zeros = torch.ones(8, dtype=torch.float64), torch.zeros(8, dtype=torch.float64)
    torch.testing.assert_close(_one(inorm).reference(x, ones, zeros, zeros, ones, nbt), inorm(x))
    for groups in (1, 2, 4, 8):
        gn = nn.GroupNorm(groups, 8, eps=eps).double()
        with torch.no_grad():
            gn.weight.copy_(w)
            gn.bias.copy_(b)
        member = _one(gn)
        assert member.constants["GROUPS"] == groups
        torch.testing.assert_close(member.reference(x, w, b, rm, rv, nbt), gn(x))


def test_refusals() -> None:
    assert channel_norm.propose_members(_Wrap(nn.ReLU())) == []
    assert channel_norm.propose_members(_Wrap(nn.Sequential(nn.BatchNorm2d(4), nn.BatchNorm2d(4)))) == []
    tracked = nn.InstanceNorm2d(4, track_running_stats=True).eval()
    assert channel_norm.propose_members(_Wrap(tracked)) == []


def test_templates_pass_the_grammar() -> None:
    assert len(VARIANTS) >= 2
    for variant in VARIANTS.values():
        assert variant.path is not None
        assert check_module(variant.path.read_text()) is None, variant.name


# Group norm with 8 groups of one channel (instance norm's statistics under another name) and eps 1e-3.
FAMILY = replace(TASK, members=(*TASK.members, _one(nn.GroupNorm(8, 8, eps=1e-3))))
SHAPES = [{"N": 2, "C": 8, "H": 3, "W": 5}]


@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.float16, marks=pytest.mark.slow)], ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_member_on_every_template(name: str, dtype: torch.dtype) -> None:
    failures = run_members(FAMILY, VARIANTS[name], SHAPES, dtype)
    assert not failures, "\n".join(failures[:5])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_table_members_on_every_check_shape(name: str) -> None:
    failures = run_members(TASK, VARIANTS[name], TASK.check_shapes, torch.float32, configs=2)
    assert not failures, "\n".join(failures[:5])


LEVEL1_MEMBERS = {
    "33_BatchNorm": ("batch_norm_train(eps=1e-05)", ""),  # the harness runs Model in training mode
    "34_InstanceNorm": ("instance_norm(eps=1e-05)", "input 1 filled with 1, input 2 filled with 0"),
    "35_GroupNorm_": ("group_norm(8,eps=1e-05)", "input 3 filled with 0, input 4 filled with 1"),
}


@pytest.mark.parametrize("name", sorted(LEVEL1_MEMBERS))
def test_kernelbench_norm_problems_match(name: str, kernelbench_file: Callable[[int, str], Path]) -> None:
    path = kernelbench_file(1, name)
    match, tried = find_match(load_task_file(path), [TASK])
    assert match is not None, tried
    member, filled = LEVEL1_MEMBERS[name]
    assert match.member == member
    assert filled in match.describe()
    # 35 passes its weight and bias: they are the task's weight and bias, never a filled pair
    assert "input 1 filled" not in match.describe() or name == "34_InstanceNorm"
