"""The conv family's chains across the channels or the image (kernels/channel_steps.py, the `channel_rows`
template): a reduction over the channels (keepdim), a softmax over them, a global average pooling and steps on
the pooled means. Truth is the forward itself in float64 (torch's modules and functions, written out here);
the template runs under the interpreter in fp32 on random and x1e4 inputs; KernelBench level 2's own files
(../shared/kernelbench) match with the chain their forward reads as, and a few end ok through the real judge."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from newtask_harness import DEVICE, load, nan_allocations, valid_configs
from torch import nn

from warpforge.evaluator.judge.compare import compare_outputs
from warpforge.evaluator.judge.matching import find_match, matched_files
from warpforge.kernels.channel_steps import channel_constants
from warpforge.kernels.members import with_constants
from warpforge.kernels.task import get_task, load_task_file
from warpforge.kernels.tasks import conv
from warpforge.kernels.variant import builtin_variants

TASKS = {name: get_task(name) for name in ("conv", "conv_transpose")}
VARIANTS = {(task, v.name): v for task in TASKS for v in builtin_variants(task)}


class _Chained(nn.Module):
    """A convolution, then a forward's steps; ``param`` a per-channel parameter [C, 1, ...] of the conv's rank."""

    def __init__(self, conv_module: nn.Module, steps: Callable[..., torch.Tensor], param: bool) -> None:
        super().__init__()
        self.conv = conv_module
        rank = len(conv_module.kernel_size)
        self.bias = nn.Parameter(torch.randn(conv_module.out_channels, *(1,) * rank)) if param else None
        self.steps = steps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.steps(self, self.conv(x))


# name -> (module, its forward's steps, a parameter, the input's spatial size, the member's chain): KernelBench
# level 2's forwards (the number) at small sizes, and a grouped and a wide-softmax case
FORWARDS: dict[str, tuple[Callable[[], nn.Module], Callable[..., torch.Tensor], bool, tuple[int, ...], str]] = {
    "min_tanh_tanh": (
        lambda: nn.Conv2d(3, 6, 3),
        lambda m, x: torch.tanh(torch.tanh(torch.min(x, dim=1, keepdim=True)[0])),
        False,
        (6, 7),
        "row_min(1.0)>tanh>tanh",
    ),  # 25
    "scale_min": (
        lambda: nn.Conv2d(4, 5, 3, padding=1),
        lambda m, x: torch.min(x * 2.0, dim=1, keepdim=True)[0],
        False,
        (5, 6),
        "mul(2.0)>row_min(1.0)",
    ),  # 32
    "logsumexp_relu": (
        lambda: nn.ConvTranspose3d(3, 4, 3, stride=2, padding=1),
        lambda m, x: torch.relu(torch.logsumexp(x, dim=1, keepdim=True)),
        False,
        (2, 3, 4),
        "row_logsumexp(1.0)>relu",
    ),
    "grouped_mean": (
        lambda: nn.Conv2d(4, 6, 3, groups=2),
        lambda m, x: torch.mean(torch.relu(x), 1, True) - 0.5,
        False,
        (5, 6),
        "relu>row_mean(1.0)>add(-0.5)",
    ),
    "softmax_sigmoid": (
        lambda: nn.ConvTranspose3d(3, 5, 3, stride=2, padding=1, output_padding=1),
        lambda m, x: torch.sigmoid(torch.softmax(x, dim=1)),
        False,
        (2, 3, 3),
        "row_softmax>sigmoid",
    ),  # 49
    "softmax_bias_scale_sigmoid": (
        lambda: nn.ConvTranspose2d(4, 20, 4, stride=2, padding=1, output_padding=1),
        lambda m, x: torch.sigmoid((torch.softmax(x, dim=1) + m.bias) * 2.0),
        True,
        (4, 5),
        "row_softmax>add_p>mul(2.0)>sigmoid",
    ),  # 91, more channels than a tile
    "gelu_pool": (
        lambda: nn.Conv2d(3, 6, 3),
        lambda m, x: F.adaptive_avg_pool2d(F.gelu(x), 1).squeeze(-1).squeeze(-1),
        False,
        (12, 13),
        "gelu>spatial_mean",
    ),  # 67
    "pool_bias_logsumexp": (
        lambda: nn.ConvTranspose2d(3, 6, 3),
        lambda m, x: (
            torch.sum(
                torch.logsumexp(torch.mean(x, dim=(2, 3), keepdim=True) + m.bias, dim=1, keepdim=True), dim=(2, 3)
            )
            * 10.0
        ),
        True,
        (8, 9),
        "spatial_mean>add_p>row_logsumexp(1.0)>mul(10.0)",
    ),  # 42
    "scale_pool_pool": (
        lambda: nn.ConvTranspose2d(3, 5, 3, stride=2, padding=1, output_padding=1),
        lambda m, x: (x * 0.5).mean(dim=[2, 3], keepdim=True).mean(dim=[2, 3], keepdim=True),
        False,
        (6, 7),
        "mul(0.5)>spatial_mean",
    ),  # 44
    "grouped_pool3d_max": (
        lambda: nn.Conv3d(4, 6, 2, groups=2),
        lambda m, x: torch.amax(nn.functional.adaptive_avg_pool3d(x, (1, 1, 1)), dim=1, keepdim=True),
        False,
        (3, 9, 10),
        "spatial_mean>row_max(1.0)",
    ),
}


def _model(name: str) -> _Chained:
    make, steps, param, _, _ = FORWARDS[name]
    torch.manual_seed(sorted(FORWARDS).index(name))
    return _Chained(make(), steps, param).double().eval()


def _as_5d(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(*t.shape[:2], *(1,) * (5 - t.dim()), *t.shape[2:])


def _task_inputs(model: _Chained, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    c_out = model.conv.out_channels
    b = model.conv.bias if model.conv.bias is not None else torch.zeros(c_out, dtype=x.dtype)
    p = model.bias.reshape(c_out, 1, 1, 1) if model.bias is not None else torch.zeros(c_out, 1, 1, 1, dtype=x.dtype)
    return _as_5d(x), _as_5d(model.conv.weight), b, p


def _task(model: _Chained) -> str:
    return "conv_transpose" if isinstance(model.conv, nn.modules.conv._ConvTransposeNd) else "conv"


@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_forwards_propose_their_chain_and_its_reference_is_the_forward(name: str) -> None:
    model = _model(name)
    proposed = conv.proposals(model, transposed=_task(model) == "conv_transpose")
    assert len(proposed) == 1 and proposed[0].name.split(">", 1)[1] == FORWARDS[name][4]
    x = torch.randn(2, model.conv.in_channels, *FORWARDS[name][3], dtype=torch.float64)
    with torch.no_grad():
        truth = model(x)
        out = proposed[0].reference(*_task_inputs(model, x))
    torch.testing.assert_close(out.reshape(truth.shape), truth, rtol=1e-12, atol=1e-12)


def test_chains_no_template_computes_are_refused() -> None:
    relu, tanh = ("relu", 0.0, 0.0), ("tanh", 0.0, 0.0)
    refused = {
        "a squeezed reduction": (("row_min", 0.0, 0.0),),
        "two reductions": (("row_min", 1.0, 0.0), ("row_sum", 1.0, 0.0)),
        "a 1-D pooling": (("row_pool_max", 2.0, 0.0),),
        "p after a reduction": (("row_max", 1.0, 0.0), ("add_p", 0.0, 0.0)),
        "z after a softmax": (("row_softmax", 0.0, 0.0), ("add_z", 0.0, 0.0)),
        "a softmax after a pooling": (("spatial_mean", 0.0, 0.0), ("row_softmax", 0.0, 0.0)),
        "a reduction before a pooling": (("row_max", 1.0, 0.0), ("spatial_mean", 0.0, 0.0)),
        "two poolings": (("spatial_mean", 0.0, 0.0), relu, ("spatial_mean", 0.0, 0.0)),
    }
    for why, steps in refused.items():
        with pytest.raises(ValueError):
            conv.member(conv.Hyper(), steps)
        assert conv.proposals(nn.Conv2d(2, 2, 3), False)  # (the plain convolution still proposes itself)
        del why
    assert channel_constants((relu, tanh)) == {}
    assert channel_constants((relu, ("row_softmax", 0.0, 0.0), tanh)) == {"RED_AT": 0, "SOFTMAX_AT": 2, "POOL_AT": 0}


def test_only_the_channel_rows_template_takes_these_members() -> None:
    """The other templates lack RED_AT, SOFTMAX_AT and POOL_AT: no template of such a member (members.py)."""
    for steps in ((("row_min", 1.0, 0.0),), (("row_softmax", 0.0, 0.0),), (("spatial_mean", 0.0, 0.0),)):
        constants = tuple(conv.member(conv.Hyper(), steps)[2].items())
        takes = {
            name
            for (task, name), v in VARIANTS.items()
            if task == "conv" and with_constants(v.source, constants) is not None
        }
        assert takes == {"channel_rows"}, steps
    # its own constants are the task's plain member, which it computes too (tests/kernels/test_conv.py runs it)
    plain = conv.member(conv.Hyper())[2]
    source = VARIANTS["conv", "channel_rows"].source
    assert all(f"\n{k} = {v!r}\n" in source or f'\n{k} = "{v}"\n' in source for k, v in plain.items())


def _run(name: str, x: torch.Tensor, model: _Chained, narrow: bool) -> torch.Tensor:
    task = _task(model)
    hyper = conv.hyper_of(model.conv)
    assert hyper is not None
    _, _, constants = conv.member(hyper, _steps(model))
    variant = VARIANTS[task, "channel_rows"]
    module = load(variant)
    for key, value in constants.items():
        setattr(module, key, value)
    shape = {
        "N": x.shape[0],
        "C_IN": model.conv.in_channels,
        "C_OUT": model.conv.out_channels,
        "D": 1,
        "H": 1,
        "W": 1,
        "G": model.conv.groups,
    }
    configs = valid_configs(variant, module, shape)
    # narrow: BLOCK_N 16, where a softmax over 20 channels takes its two-pass path; BLOCK_M 64 for a pooling,
    # whose 100-170 output positions an image are then 2 or 3 programs adding into its totals
    pooled = "spatial_mean" in FORWARDS[name][4]
    pick = {"BLOCK_M": 64} if pooled else {"BLOCK_N": 16, "BLOCK_M": 256}
    params = next(c for c in configs if pick.items() <= c.items()) if narrow else configs[0]
    inputs = [t.float().to(DEVICE) for t in _task_inputs(model, x)]
    with nan_allocations():
        return module.launch(*inputs, **params).cpu()


def _steps(model: _Chained) -> tuple[tuple[str, float, float], ...]:
    from warpforge.kernels.fx_chain import read_chain

    chain = read_chain(model, conv._CONVS)
    assert chain is not None
    return chain.steps


@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_the_template_computes_the_forward_in_fp32(name: str) -> None:
    model = _model(name)
    x = torch.randn(2, model.conv.in_channels, *FORWARDS[name][3], dtype=torch.float64)
    atol, rtol = TASKS["conv"].tolerance(torch.float32)
    failures = []
    for kind, scale in (("random", 1.0), ("large", 1e4)):
        scaled = _model(name)
        with torch.no_grad():
            if scaled.conv.bias is not None:
                scaled.conv.bias.mul_(scale)
            # torch's fp32 forward's rounding of the inputs, then float64
            truth = scaled(x.float().double() * scale)
        for narrow in (False, True):
            out = _run(name, (x * scale).float().double(), scaled, narrow)
            bad = compare_outputs([out.reshape(truth.shape)], [truth], [truth.float()], atol, rtol)
            if bad is not None:
                failures.append(f"{kind} narrow={narrow}: {bad.message}")
    assert not failures, failures


# KernelBench level 2 -> (the task, the member) it matches with: channel reductions, softmaxes, global poolings
LEVEL2 = {
    "25_Conv2d_Min_Tanh_Tanh": ("conv", "conv3d()>row_min(1.0)>tanh>tanh"),
    "32_Conv2d_Scaling_Min": ("conv", "conv3d()>mul(2.0)>row_min(1.0)"),
    "91_ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid": (
        "conv_transpose",
        "conv_transpose3d(s=1,2,2 p=0,1,1 op=0,1,1)>row_softmax>add_p>mul(2.0)>sigmoid",
    ),
    "42_ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply": (
        "conv_transpose",
        "conv_transpose3d()>spatial_mean>add_p>row_logsumexp(1.0)>mul(10.0)",
    ),
    "44_ConvTranspose2d_Multiply_GlobalAvgPool_GlobalAvgPool_Mean": (
        "conv_transpose",
        "conv_transpose3d(s=1,2,2 p=0,1,1 op=0,1,1)>mul(0.5)>spatial_mean",
    ),
    "67_Conv2d_GELU_GlobalAvgPool": ("conv", "conv3d()>gelu>spatial_mean"),
}


def _match(name: str, kernelbench_file: Callable[[int, str], Path]) -> tuple[Any, Any]:
    problem = load_task_file(kernelbench_file(2, name))
    match, tried = find_match(problem, list(TASKS.values()))
    assert match is not None, tried
    assert (match.task, match.member) == LEVEL2[name], match.describe()
    return problem, match


@pytest.mark.parametrize("name", sorted(LEVEL2))
def test_kernelbench_level2_problems_match(name: str, kernelbench_file: Callable[[int, str], Path]) -> None:
    _match(name, kernelbench_file)


def _judge(copy: Path, variant: Path) -> str:
    from warpforge.evaluator.run.backend import get_backend
    from warpforge.evaluator.sandbox.job import Job
    from warpforge.kernels.variant import load_variant

    backend = get_backend("interpret")
    try:
        params = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
        result = backend.evaluate(Job(load_task_file(copy), load_variant(variant), params))
    finally:
        backend.close()
    return result.verdict.value


# a reduction over the channels; a global pooling. (91's stride-2 transposed gather of 16 taps, 3/4 of them
# masked, runs past the interpreter's budget on its check shapes on a loaded CPU. 42 is no member at every hidden
# shape: its bias (C, 1, 1) still broadcasts after the pooling as (C, 2, 3), which the judge may draw, and then
# the problem sums a logsumexp over 6 positions.)
JUDGED = ["25_Conv2d_Min_Tanh_Tanh", "67_Conv2d_GELU_GlobalAvgPool"]


@pytest.mark.slow
@pytest.mark.parametrize("name", JUDGED)
def test_kernelbench_level2_problems_are_judged_ok(
    name: str, kernelbench_file: Callable[[int, str], Path], tmp_path: Path
) -> None:
    """The real file's matched copy through the real judge (its derived small check shapes, hidden shapes,
    adversarial inputs) with the `channel_rows` template, the one template of such a member."""
    problem, match = _match(name, kernelbench_file)
    copy, variants = matched_files(problem, match, tmp_path / "matched")
    assert [v.stem for v in variants] == ["channel_rows"]
    assert _judge(copy, variants[0]) == "ok"
