"""The conv and conv_transpose families: hyperparameters read from torch's own ``nn.ConvNd`` modules, whose
outputs (float64) are the truth for the members' references; every template under the interpreter on a
standard, a strided/padded/dilated/grouped and a transposed member against ``F.conv3d`` /
``F.conv_transpose3d`` written out here; problems written here (1-D, 2-D, 3-D, transposed, with a bias)
matched with their hyperparameters, and KernelBench's own files (../shared/kernelbench, else the shipped ones)
(bias-free: the bias filled with zeros). The slow tier judges matched problems end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from newtask_harness import DEVICE, load, nan_allocations, valid_configs
from torch import nn

from warpforge.evaluator.judge.compare import compare_outputs
from warpforge.evaluator.judge.matching import find_match, matched_files
from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.task import get_task, load_task_file
from warpforge.kernels.tasks import conv
from warpforge.kernels.variant import TEMPLATES_DIR, builtin_variants
from warpforge.problems import SHIPPED

TASKS = {name: get_task(name) for name in ("conv", "conv_transpose")}
VARIANTS = {(task, v.name): v for task in TASKS for v in builtin_variants(task)}
ROOT = Path(__file__).resolve().parents[2]

# (module, its input's spatial size): 1-D, 2-D and 3-D, standard and transposed, every hyperparameter
MODULES = [
    (lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2), (11,)),
    (lambda: nn.Conv1d(4, 6, 5, padding="same"), (9,)),
    (lambda: nn.Conv2d(6, 4, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2), (7, 8)),
    (lambda: nn.Conv2d(5, 5, 3, groups=5, bias=False), (6, 7)),  # depthwise
    (lambda: nn.Conv3d(3, 4, (2, 3, 1), stride=(1, 2, 1), padding=(0, 1, 0)), (4, 5, 6)),
    (lambda: nn.ConvTranspose1d(4, 6, 3, stride=3, padding=1, output_padding=2, dilation=2), (5,)),
    (lambda: nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 0), dilation=(2, 1), groups=2), (4, 5)),
    (lambda: nn.ConvTranspose3d(3, 2, 2, stride=2, output_padding=1, bias=False), (2, 3, 4)),
]


def _as_5d(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(*t.shape[:2], *(1,) * (5 - t.dim()), *t.shape[2:])


@pytest.mark.parametrize("index", range(len(MODULES)))
def test_member_references_are_torchs_modules(index: int) -> None:
    make, spatial = MODULES[index]
    torch.manual_seed(index)
    module = make().double()
    hyper = conv.hyper_of(module)
    assert hyper is not None and hyper.transposed == isinstance(module, nn.modules.conv._ConvTransposeNd)
    _, reference, constants = conv.member(hyper)
    x = torch.randn(2, module.in_channels, *spatial, dtype=torch.float64)
    bias = module.bias if module.bias is not None else torch.zeros(module.out_channels, dtype=torch.float64)
    with torch.no_grad():
        truth = module(x)
        out = reference(_as_5d(x), _as_5d(module.weight), bias, torch.zeros(module.out_channels, 1, 1, 1))
    torch.testing.assert_close(out.reshape(truth.shape), truth, rtol=1e-12, atol=1e-12)
    assert hyper.groups == module.groups and constants["TRANSPOSED"] == hyper.transposed


def test_modules_it_cannot_express_propose_nothing() -> None:
    assert conv.hyper_of(nn.Conv2d(2, 2, 3, padding_mode="reflect")) is None
    assert conv.hyper_of(nn.Conv1d(2, 2, 4, padding="same")) is None  # 3 padding elements: uneven
    two = nn.Sequential(nn.Conv2d(2, 2, 3), nn.Conv2d(2, 2, 3))
    assert conv.proposals(two, transposed=False) == [] and conv.proposals(nn.Linear(2, 2), False) == []
    assert conv.proposals(nn.ConvTranspose2d(2, 2, 3), transposed=False) == []


def test_templates_pass_the_grammar_and_the_transposed_ones_are_generated_from_them() -> None:
    assert {name for _, name in VARIANTS} == {"implicit_gemm", "direct", "channel_rows"} and len(VARIANTS) == 6
    for variant in VARIANTS.values():
        assert check_module(variant.source) is None, variant.path
    assert not (TEMPLATES_DIR / "conv_transpose").exists(), "one source per template: conv's"
    for name in ("implicit_gemm", "direct", "channel_rows"):
        plain, transposed = VARIANTS["conv", name], VARIANTS["conv_transpose", name]
        assert transposed.source == plain.source.replace('TASK = "conv"\n', "TASK = 'conv_transpose'\n", 1).replace(
            "TRANSPOSED = False\n", "TRANSPOSED = True\n", 1
        )
        # a real file holding the bytes that run (the judge's child and export read the file)
        assert transposed.path is not None and Path(transposed.path).read_text() == transposed.source


# (hyperparameters, shape): the group count divides both channel counts; every size small and odd
CASES = {
    "standard": (conv.Hyper(), {"N": 2, "C_IN": 5, "C_OUT": 7, "D": 3, "H": 5, "W": 7, "G": 1}),
    "strided_padded_dilated_grouped": (
        conv.Hyper(stride=(1, 2, 3), padding=(1, 0, 2), dilation=(2, 1, 1), groups=3),
        {"N": 2, "C_IN": 6, "C_OUT": 9, "D": 5, "H": 7, "W": 11, "G": 3},
    ),
    "transposed": (
        conv.Hyper(
            transposed=True, stride=(2, 1, 3), padding=(1, 1, 0), dilation=(1, 2, 1), output_padding=(1, 0, 2), groups=2
        ),
        {"N": 2, "C_IN": 4, "C_OUT": 6, "D": 3, "H": 4, "W": 5, "G": 2},
    ),
    # no dilation: the templates run it by phase (o % stride per dim), stride 3 with a 3-tap kernel one tap a
    # phase, padding 2 past the first phase's taps
    "transposed_phased": (
        conv.Hyper(transposed=True, stride=(2, 3, 2), padding=(1, 2, 0), output_padding=(1, 2, 0), groups=1),
        {"N": 2, "C_IN": 5, "C_OUT": 7, "D": 3, "H": 4, "W": 5, "G": 1},
    ),
}


def _truth(hyper: conv.Hyper, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    x, w, b = x.double(), w.double(), b.double()
    if hyper.transposed:
        return F.conv_transpose3d(
            x,
            w,
            b,
            stride=hyper.stride,
            padding=hyper.padding,
            output_padding=hyper.output_padding,
            groups=hyper.groups,
            dilation=hyper.dilation,
        )
    return F.conv3d(x, w, b, stride=hyper.stride, padding=hyper.padding, dilation=hyper.dilation, groups=hyper.groups)


# The direct loop pays the interpreter per channel and tap (~10 s a launch on the grouped and transposed cases)
SLOW = {("direct", "strided_padded_dilated_grouped"), ("direct", "transposed"), ("direct", "transposed_phased")}


@pytest.mark.parametrize(
    ("name", "case"),
    [
        pytest.param(name, case, marks=[pytest.mark.slow] if (name, case) in SLOW else [])
        for name in ("implicit_gemm", "direct")
        for case in sorted(CASES)
    ],
)
def test_templates_compute_torchs_convolution_in_fp32(name: str, case: str) -> None:
    hyper, shape = CASES[case]
    task = "conv_transpose" if hyper.transposed else "conv"
    variant = VARIANTS[task, name]
    module = load(variant)
    for key, value in hyper.constants().items():
        setattr(module, key, value)
    configs = valid_configs(variant, module, shape)
    params = configs[len(configs) // 2]
    failures = []
    for seed in (0,):
        inputs = conv.inputs(shape, torch.float32, seed, DEVICE, hyper.transposed)
        cases = {"random": inputs, "large": (inputs[0] * 1e4, inputs[1], inputs[2] * 1e4, inputs[3])}
        for kind, (x, w, b, p) in cases.items():
            with nan_allocations():
                out = module.launch(x, w, b, p, **params).cpu()
            truth = _truth(hyper, x.cpu(), w.cpu(), b.cpu())
            atol, rtol = TASKS[task].tolerance(torch.float32)
            bad = compare_outputs([out], [truth], [truth.float()], atol, rtol)
            if bad is not None:
                failures.append(f"{kind} seed {seed} {params}: {bad.message}")
    assert not failures, failures


def test_a_wrong_hyperparameter_fails_the_comparison() -> None:
    hyper, shape = CASES["strided_padded_dilated_grouped"]
    module = load(VARIANTS["conv", "direct"])
    x, w, b, p = conv.inputs(shape, torch.float32, 0, DEVICE, False)
    truth = _truth(hyper, x.cpu(), w.cpu(), b.cpu())
    for key, value in {**hyper.constants(), "DIL_D": 1, "PAD_D": 0}.items():  # same output size, other taps
        setattr(module, key, value)
    out = module.launch(x, w, b, p, BLOCK_M=64, BLOCK_N=16, num_warps=4).cpu()
    assert out.shape == truth.shape
    assert compare_outputs([out], [truth], [truth.float()], 1e-4, 1e-4) is not None


PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.{module}(in_channels, out_channels, kernel_size, {hyper})

    def forward(self, x):
        return self.conv(x)


batch_size = 4
in_channels = 8
out_channels = {out}
kernel_size = {kernel}
{sizes}


def get_inputs():
    return [torch.rand(batch_size, in_channels, {dims})]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
"""

# name -> (module, hyperparameters, kernel size, spatial globals, the task and member that match)
PROBLEMS = {
    "conv1d_strided": (
        "Conv1d",
        "stride=2, padding=1, dilation=2",
        "3",
        ("length",),
        "conv",
        "conv3d(s=1,1,2 p=0,0,1 d=1,1,2)",
    ),
    "conv2d_grouped": (
        "Conv2d",
        "stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2",
        "(3, 5)",
        ("height", "width"),
        "conv",
        "conv3d(s=1,2,1 p=0,1,2 d=1,1,2)",
    ),
    "transposed1d_bias_free": (
        "ConvTranspose1d",
        "stride=3, padding=2, dilation=2, bias=False",
        "5",
        ("length",),
        "conv_transpose",
        "conv_transpose3d(s=1,1,3 p=0,0,2 d=1,1,2)",
    ),
    "transposed3d_grouped": (
        "ConvTranspose3d",
        "stride=2, padding=1, output_padding=1, groups=2",
        "3",
        ("depth", "height", "width"),
        "conv_transpose",
        "conv_transpose3d(s=2,2,2 p=1,1,1 op=1,1,1)",
    ),
}


def _problem(tmp_path: Path, name: str) -> Path:
    module, hyper, kernel, dims, _, _ = PROBLEMS[name]
    path = tmp_path / f"{name}.py"
    # 8 channels (sizes up to 8 are kept as they are): the derived check shapes then keep a group count dividing them
    out = 8 if "groups" in hyper else 12
    path.write_text(
        PROBLEM.format(
            module=module,
            hyper=hyper,
            kernel=kernel,
            dims=", ".join(dims),
            out=out,
            sizes="\n".join(f"{d} = 12" for d in dims),
        )
    )
    return path


@pytest.mark.parametrize("name", ["conv1d_strided", "conv2d_grouped", "transposed1d_bias_free"])
def test_problems_match_with_their_hyperparameters(tmp_path: Path, name: str) -> None:
    problem = load_task_file(_problem(tmp_path, name))
    match, tried = find_match(problem, list(TASKS.values()))
    assert match is not None, tried
    assert (match.task, match.member) == PROBLEMS[name][4:]
    assert match.keys["N"] == "batch_size"
    _, variants = matched_files(problem, match, tmp_path / "matched")
    # channel_rows computes the plain member too (programs owning every channel of their pixels)
    assert {v.stem for v in variants} == {"implicit_gemm", "direct", "channel_rows"}
    for variant in variants:
        text = variant.read_text()
        assert check_module(text) is None
        # a 1-D or 2-D problem's output is the task's with its unit dims dropped, sizes read from it
        assert "return wf_out.view(wf_out.shape[0], wf_out.shape[1], wf_out.shape[" in text


def test_a_bias_free_match_reads_the_output_sizes_off_the_task_at_every_shape(tmp_path: Path) -> None:
    # KernelBench 66's sizes: at the matcher's probe a 3x5x7 kernel's output sizes equal input sizes by chance
    # (output depth = C_OUT, height and width = D), so sizes read off the inputs viewed a published-shape
    # output [8, 64, 14, 124, 122] as [8, 64, 64, 16, 16]
    path = tmp_path / "conv3d_asymmetric.py"
    path.write_text(
        PROBLEM.format(
            module="Conv3d",
            hyper="bias=False",
            kernel="(3, 5, 7)",
            out=64,
            dims="depth, height, width",
            sizes="depth = 16\nheight = 128\nwidth = 128",
        ).replace("batch_size = 4\nin_channels = 8", "batch_size = 8\nin_channels = 3")
    )
    problem = load_task_file(path)
    match, tried = find_match(problem, [TASKS["conv"]])
    assert match is not None and match.adapter is not None, tried
    x, w = torch.empty(8, 3, 16, 128, 128, device="meta"), torch.empty(64, 3, 3, 5, 7, device="meta")
    want = F.conv3d(x, w)
    assert match.adapter.output(want, [x, w]).shape == want.shape == (8, 64, 14, 124, 122)


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="a grouped transposed convolution's outputs differ at the matcher's probe "
    "since the group count is read from the shapes (b.shape[0] / w.shape[1]); KernelBench's grouped "
    "transposed 72, 73 and 75 do not match either",
)
def test_a_grouped_transposed_problem_with_a_bias_matches(tmp_path: Path) -> None:
    problem = load_task_file(_problem(tmp_path, "transposed3d_grouped"))
    match, tried = find_match(problem, list(TASKS.values()))
    assert match is not None and (match.task, match.member) == PROBLEMS["transposed3d_grouped"][4:], tried


HEAVY = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.{module}(in_channels, out_channels, {kernel}, {hyper}bias=False)

    def forward(self, x):
        return self.conv(x)


batch_size = 16
in_channels = 64
out_channels = 64
{sizes}


def get_inputs():
    return [torch.rand(batch_size, in_channels, {dims})]


def get_init_inputs():
    return [in_channels, out_channels]
"""

# KernelBench 58's, 80's and 82's kinds: a 3x5x7 kernel over a strided transposed 3-D convolution (its gather
# visits every tap of every output), a 5x7 one over a dilated 2-D image, a depthwise 3x3 one (a group a
# channel); 1e8 to 3e10 multiply-adds, or 1e7 taps, at the shapes that 100k input elements alone allowed
HEAVY_PROBLEMS = {
    "transposed3d": ("ConvTranspose3d", "(3, 5, 7)", "stride=2, padding=1, ", {"depth": 16, "height": 32, "width": 64}),
    "conv2d_dilated": ("Conv2d", "(5, 7)", "padding=(2, 3), dilation=(2, 1), ", {"height": 128, "width": 256}),
    "depthwise2d": ("Conv2d", "3", "groups=in_channels, ", {"height": 256, "width": 256}),
}


@pytest.mark.parametrize("name", sorted(HEAVY_PROBLEMS))
def test_derived_check_shapes_are_capped_by_their_work_and_run(tmp_path: Path, name: str) -> None:
    from warpforge.kernels.kernelbench import CHECK_MACS, CHECK_TAPS, KEEP_AT_MOST

    module, kernel, hyper, sizes = HEAVY_PROBLEMS[name]
    path = tmp_path / f"{name}.py"
    path.write_text(
        HEAVY.format(
            module=module,
            kernel=kernel,
            hyper=hyper,
            dims=", ".join(sizes),
            sizes="\n".join(f"{d} = {v}" for d, v in sizes.items()),
        )
    )
    task = load_task_file(path)
    assert task.check_shapes, task.check_shapes
    for shape in task.check_shapes:
        x, w = task.make_inputs(shape, torch.float32, 0, "cpu")
        y = task.reference(x, w)
        if module.startswith("ConvTranspose"):
            truth = F.conv_transpose3d(x, w, stride=2, padding=1)
        elif "groups" in hyper:
            truth = F.conv2d(x, w, groups=x.shape[1])
        else:
            truth = F.conv2d(x, w, padding=(2, 3), dilation=(2, 1))
        assert y.shape == truth.shape and torch.isfinite(y).all()
        # every output sums its window: a group's input channels times the kernel's taps; a direct loop over
        # tiles of 16 output channels a group steps through every tap of every output position per tile
        groups = x.shape[1] if "groups" in hyper else 1
        taps = w[0, 0].numel()
        positions = y[:, 0].numel()
        macs = y.numel() * (x.shape[1] // groups) * taps
        steps = positions * taps * groups * -(-(y.shape[1] // groups) // 16)
        # within the caps, or as small as the derivation goes: no size above KEEP_AT_MOST left to halve (the
        # transposed 3-D one's 105 taps over 5 x 5 x 5 inputs are 1.4e5 steps)
        at_floor = all(v <= KEEP_AT_MOST for v in shape.values())
        assert (macs <= CHECK_MACS and steps <= CHECK_TAPS) or at_floor, (shape, macs, steps)
        assert macs < 1e8 and steps < 1e6, (shape, macs, steps)
        # the judge's hidden shapes draw each size down to half of it: the padded image still holds the
        # (dilated) kernel there, 2 * 4 + 1 rows and 7 columns
        if name == "conv2d_dilated":
            assert shape["height"] // 2 + 2 * 2 >= 9 and shape["width"] // 2 + 2 * 3 >= 7, shape


# KernelBench level 1 (bias-free, so the bias is filled): a 3-D, a 1-D, a depthwise 2-D, a pointwise 2-D and
# transposed 2-D and 1-D (67, 87 and 64 ship: they run from a fresh clone)
LEVEL1_MATCHES = {
    "54_conv_standard_3D__square_input__square_kernel": ("conv", "conv3d()"),
    "67_conv_standard_1D": ("conv", "conv3d()"),
    "87_conv_pointwise_2D": ("conv", "conv3d()"),
    "64_conv_transposed_1D": ("conv_transpose", "conv_transpose3d()"),
    "82_conv_depthwise_2D_square_input_square_kernel": ("conv", "conv3d()"),
    "57_conv_transposed_2D__square_input__square_kernel": ("conv_transpose", "conv_transpose3d()"),
}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.slow] if n.startswith("54_") else []) for n in sorted(LEVEL1_MATCHES)]
)  # 54's float64 3-D references: ~30 s
def test_kernelbench_level1_convolutions_match(name: str, kernelbench_file: Callable[[int, str], Path]) -> None:
    match, tried = find_match(load_task_file(kernelbench_file(1, name)), list(TASKS.values()))
    assert match is not None, tried
    task, member = LEVEL1_MATCHES[name]
    assert (match.task, match.member) == (task, member), match.describe()


@pytest.mark.slow
@pytest.mark.long
def test_benchmark_judges_the_shipped_convolutions_ok() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "kernelbench.py"),
            str(SHIPPED / "level1"),
            "--problems",
            "64,67,87",
            "--trials",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=True,
    )
    rows = {r["problem"]: r for r in json.loads(out.stdout)["rows"]}
    for name, row in rows.items():
        assert row["matched"].startswith("conv") and row["correct"], (name, row["why"])


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "63_conv_standard_2D__square_input__square_kernel",
        "58_conv_transposed_3D__asymmetric_input__asymmetric_kernel",
        "60_conv_standard_3D__square_input__asymmetric_kernel",
    ],
)
def test_benchmark_judges_heavy_convolutions_ok(name: str, kernelbench_file: Callable[[int, str], Path]) -> None:
    """Problems whose check shapes held 7e7 to 1.6e8 multiply-adds before the work cap (63 timed out in the
    judge, then took 453 s; after the cap 255 s, 58 374 s, on a loaded machine), and one whose benchmark
    specialization's smallest shape went below its 3x5x7 kernel (60: the judge's reference raised), judged end
    to end at one trial."""
    path = kernelbench_file(1, name)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "kernelbench.py"),
            str(path.parent),
            "--problems",
            name.split("_")[0],
            "--trials",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    row = json.loads(out.stdout)["rows"][0]
    assert row["matched"].startswith("conv") and row["correct"], (name, row["why"])


# ---- the elementwise chain after the convolution (KernelBench level 2) ----


class _Chained(nn.Module):
    """A convolution, then a forward's elementwise steps; ``param`` a per-channel parameter of the conv's rank."""

    def __init__(self, conv_module: nn.Module, steps, param: bool) -> None:
        super().__init__()
        self.conv = conv_module
        rank = len(conv_module.kernel_size)
        self.bias = nn.Parameter(torch.rand(conv_module.out_channels, *(1,) * rank) + 0.5) if param else None
        self.steps = steps

    def forward(self, x):
        return self.steps(self, self.conv(x))


def _relu_bias_tanh(m, x):
    return torch.tanh(torch.relu(x) + m.bias)


def _residuals(m, x):  # KernelBench 20's forward
    z = x.clone().detach()
    return (x + m.bias + z) * z + z


def _mish_scale_clamp(m, x):
    return F.hardtanh(F.mish(x) + 0.5, min_val=-1, max_val=1) * 2


def _div_leaky(m, x):
    return F.leaky_relu(x / m.bias, 0.2) - 0.3


# (module, its forward's steps, a parameter, the spatial size, the member's chain)
CHAINS = {
    "conv2d_relu_bias_tanh": (lambda: nn.Conv2d(3, 5, 3), _relu_bias_tanh, True, (6, 7), "relu>add_p>tanh"),
    "conv_transpose3d_residuals": (
        lambda: nn.ConvTranspose3d(3, 4, 3, stride=2, padding=1, output_padding=1),
        _residuals,
        True,
        (2, 3, 4),
        "add_p>add_z>mul_z>add_z",
    ),
    "conv1d_mish_add_hardtanh_scale": (
        lambda: nn.Conv1d(4, 6, 3, padding=1),
        _mish_scale_clamp,
        False,
        (9,),
        "mish>add(0.5)>clamp(-1.0,1.0)>mul(2.0)",
    ),
    "conv2d_div_param_leaky": (
        lambda: nn.Conv2d(4, 6, 3, stride=2),
        _div_leaky,
        True,
        (7, 8),
        "div_p>leaky_relu(0.2)>add(-0.3)",
    ),
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chain_members_read_from_a_forward_compute_it(name: str) -> None:
    make, steps, param, spatial, chain = CHAINS[name]
    torch.manual_seed(0)
    model = _Chained(make(), steps, param).double()
    task = TASKS["conv_transpose" if isinstance(model.conv, nn.modules.conv._ConvTransposeNd) else "conv"]
    proposed = task.propose(model) if task.propose is not None else []
    assert len(proposed) == 1 and proposed[0].name.split(">", 1)[1] == chain
    x = torch.randn(2, model.conv.in_channels, *spatial, dtype=torch.float64)
    c_out = model.conv.out_channels
    p = model.bias.reshape(c_out, 1, 1, 1) if param else torch.zeros(c_out, 1, 1, 1, dtype=torch.float64)
    with torch.no_grad():
        truth = model(x)
        out = proposed[0].reference(_as_5d(x), _as_5d(model.conv.weight), model.conv.bias, p)
    torch.testing.assert_close(out.reshape(truth.shape), truth, rtol=1e-12, atol=1e-12)


def test_norms_after_a_convolution_are_no_chain() -> None:
    # (reductions over the channels are: tests/kernels/test_conv_channels.py)
    def group_norm(m, x):
        return F.group_norm(torch.relu(x), 1)

    model = _Chained(nn.Conv2d(3, 4, 3), group_norm, False)
    assert all(">" not in m.name for m in conv.propose_members(model))


# KernelBench 1's steps (ReLU, the bias parameter) and 16's (Mish, Hardtanh, a scale) with a residual of z
CHAIN_STEPS = (
    ("relu", 0.0, 0.0),
    ("add_p", 0.0, 0.0),
    ("mish", 0.0, 0.0),
    ("sub_z", 0.0, 0.0),
    ("clamp", -1.0, 1.0),
    ("mul", 2.0, 0.0),
)


@pytest.mark.parametrize("name", ["implicit_gemm", "direct"])
def test_templates_compute_a_chain_in_fp32(name: str) -> None:
    hyper, shape = CASES["standard"]
    steps = CHAIN_STEPS
    _, _, constants = conv.member(hyper, steps)
    variant = VARIANTS["conv", name]
    module = load(variant)
    for key, value in constants.items():
        setattr(module, key, value)
    params = valid_configs(variant, module, shape)[0]
    x, w, b, p = conv.inputs(shape, torch.float32, 0, DEVICE, False)
    failures = []
    for kind, scale in (("random", 1.0), ("large", 100.0)):
        with nan_allocations():
            out = module.launch(x * scale, w, b * scale, p, **params).cpu()
        z = _truth(hyper, (x * scale).cpu(), w.cpu(), (b * scale).cpu())
        truth = F.hardtanh(F.mish(torch.relu(z) + p.cpu().double()) - z, -1.0, 1.0) * 2.0
        atol, rtol = TASKS["conv"].tolerance(torch.float32)
        bad = compare_outputs([out], [truth], [truth.float()], atol, rtol)
        if bad is not None:
            failures.append(f"{kind} {params}: {bad.message}")
    assert not failures, failures
    # a step dropped is no longer the chain: the comparison tells
    module.OP2 = "none"
    with nan_allocations():
        out = module.launch(x, w, b, p, **params).cpu()
    assert compare_outputs([out], [truth], [truth.float()], 1e-4, 1e-4) is not None


@pytest.mark.parametrize("name", ["implicit_gemm", "direct"])
def test_gelu_tanh_keeps_its_tail_on_one_element(name: str) -> None:
    """One output of -4.456 (the centre tap alone): gelu_tanh there is -2.6e-5, which 0.5 y (1 + tanh(u)) gets
    1.4% wrong (one ulp of 1 left); a one-element check allows 2e-4 relative."""
    shape = {"N": 1, "C_IN": 1, "C_OUT": 1, "D": 3, "H": 3, "W": 3, "G": 1}
    variant = VARIANTS["conv", name]
    module = load(variant)
    for key, value in conv.member(conv.Hyper(), (("gelu_tanh", 0.0, 0.0),))[2].items():
        setattr(module, key, value)
    x, w = torch.zeros(1, 1, 3, 3, 3), torch.zeros(1, 1, 3, 3, 3)
    x[0, 0, 1, 1, 1], w[0, 0, 1, 1, 1] = -4.456, 1.0
    b, p = torch.zeros(1), torch.zeros(1, 1, 1, 1)
    with nan_allocations():
        out = module.launch(*(t.to(DEVICE) for t in (x, w, b, p)), **valid_configs(variant, module, shape)[0]).cpu()
    truth = F.gelu(torch.tensor(-4.456, dtype=torch.float32).double(), approximate="tanh").reshape(1, 1, 1, 1, 1)
    atol, rtol = TASKS["conv"].tolerance(torch.float32)
    bad = compare_outputs([out], [truth], [truth.float()], atol, rtol)
    assert bad is None, bad.message


# KernelBench level 2: a 2-D convolution with a parameter after it (its state lists the parameter before the
# conv's weight and bias), a transposed one subtracting it, and a 2-D chain of numbers (the parameter filled)
LEVEL2_MATCHES = {
    "1_Conv2D_ReLU_BiasAdd": ("conv", "conv3d()>relu>add_p", (0, 2, 3, 1)),
    "5_ConvTranspose2d_Subtract_Tanh": (
        "conv_transpose",
        "conv_transpose3d(s=1,2,2 p=0,1,1 op=0,1,1)>sub_p>tanh",
        (0, 2, 3, 1),
    ),
    "87_Conv2d_Subtract_Subtract_Mish": ("conv", "conv3d()>add(-0.5)>add(-0.2)>mish", (0, 1, 2)),
}


@pytest.mark.parametrize("name", sorted(LEVEL2_MATCHES))
def test_kernelbench_level2_chains_match(name: str, kernelbench_file: Callable[[int, str], Path]) -> None:
    problem = load_task_file(kernelbench_file(2, name))
    match, tried = find_match(problem, list(TASKS.values()))
    assert match is not None, tried
    assert (match.task, match.member, match.order) == LEVEL2_MATCHES[name], match.describe()
    # a 2-D problem's parameter [C, 1, 1] is the task's [C, 1, 1, 1]; without one, p is a zero [C, 1, 1, 1]
    assert match.adapter is not None
    filled = [(f.index, f.dims[1:]) for f in match.adapter.filled]
    assert filled == ([] if len(match.order) == 4 else [(3, ((-1, 1), (-1, 1), (-1, 1)))])
    # the bias parameter's unit dims are no sizes the judge's hidden shapes may change (its reference needs them)
    assert (
        not [k for k in problem.check_shapes[0] if k.startswith("bias_shape[")]
        or {"bias_shape[1]", "bias_shape[2]"} <= problem.fixed_keys
    )


PROBLEM2 = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.nn.functional.leaky_relu(x, 0.1)
        x = x * self.bias * 0.5
        return x * torch.nn.functional.mish(x)


batch_size = 2
in_channels = 12
out_channels = 16
height = width = 12
kernel_size = 3
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
"""


def _judge(copy: Path, variant: Path, constants: dict | None = None) -> str:
    from warpforge.evaluator.run.backend import get_backend
    from warpforge.evaluator.sandbox.job import Job
    from warpforge.kernels.variant import load_variant

    if constants:
        text = variant.read_text()
        for key, value in constants.items():
            old = next(ln for ln in text.splitlines() if ln.startswith(f"{key} = "))
            text = text.replace(old + "\n", f"{key} = {value!r}\n", 1)
        variant = variant.with_name("tampered.py")
        variant.write_text(text)
    backend = get_backend("interpret")
    try:
        params = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
        result = backend.evaluate(Job(load_task_file(copy), load_variant(variant), params))
    finally:
        backend.close()
    return result.verdict.value


def _matched_chain(tmp_path: Path) -> tuple[Path, Path]:
    path = tmp_path / "conv_leaky_mul.py"
    path.write_text(PROBLEM2)
    problem = load_task_file(path)
    match, tried = find_match(problem, list(TASKS.values()))
    assert match is not None and match.member == "conv3d()>leaky_relu(0.1)>mul_p>mul(0.5)>mul_mish", tried
    copy, variants = matched_files(problem, match, tmp_path / "matched")
    gemm = next(v for v in variants if v.stem == "implicit_gemm")
    assert "def launch(x, p, w, b, **params):" in gemm.read_text()  # the problem's order: its parameter first
    return copy, gemm


@pytest.mark.slow
def test_a_matched_chain_is_judged_ok(tmp_path: Path) -> None:
    """KernelBench 1's kind of problem at small sizes through the real judge (hidden shapes, adversarial inputs;
    ~30 s in the interpreter), ending in ``x * mish(x)`` (a step every conv template once lacked: each stopped at
    its static assert)."""
    copy, gemm = _matched_chain(tmp_path)
    assert _judge(copy, gemm) == "ok"


@pytest.mark.slow
def test_a_matched_chain_with_a_step_dropped_is_not_ok(tmp_path: Path) -> None:
    copy, gemm = _matched_chain(tmp_path)
    assert _judge(copy, gemm, {"OP2": "none"}) != "ok"
