"""The conv and conv_transpose families: hyperparameters read from torch's own ``nn.ConvNd`` modules, whose
outputs (float64) are the truth for the members' references; every template under the interpreter on a
standard, a strided/padded/dilated/grouped and a transposed member against ``F.conv3d`` /
``F.conv_transpose3d`` written out here; problems written here (1-D, 2-D, 3-D, transposed, with a bias)
matched with their hyperparameters, and KernelBench's own level-1 files where ../shared/kernelbench exists
(bias-free: the bias filled with zeros). The slow tier judges matched problems end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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

TASKS = {name: get_task(name) for name in ("conv", "conv_transpose")}
VARIANTS = {(task, v.name): v for task in TASKS for v in builtin_variants(task)}
ROOT = Path(__file__).resolve().parents[2]
LEVEL1 = ROOT.parent / "shared" / "kernelbench" / "level1"

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
    assert {name for _, name in VARIANTS} == {"implicit_gemm", "direct"} and len(VARIANTS) == 4
    for variant in VARIANTS.values():
        assert check_module(variant.source) is None, variant.path
    assert not (TEMPLATES_DIR / "conv_transpose").exists(), "one source per template: conv's"
    for name in ("implicit_gemm", "direct"):
        plain, transposed = VARIANTS["conv", name], VARIANTS["conv_transpose", name]
        assert transposed.source == plain.source.replace('TASK = "conv"\n', "TASK = 'conv_transpose'\n", 1).replace(
            "TRANSPOSED = False\n", "TRANSPOSED = True\n", 1)
        # a real file holding the bytes that run (the judge's child and export read the file)
        assert transposed.path is not None and Path(transposed.path).read_text() == transposed.source


# (hyperparameters, shape): the group count divides both channel counts; every size small and odd
CASES = {
    "standard": (conv.Hyper(), {"N": 2, "C_IN": 5, "C_OUT": 7, "D": 3, "H": 5, "W": 7, "G": 1}),
    "strided_padded_dilated_grouped": (conv.Hyper(stride=(1, 2, 3), padding=(1, 0, 2), dilation=(2, 1, 1),
                                                  groups=3),
                                       {"N": 2, "C_IN": 6, "C_OUT": 9, "D": 5, "H": 7, "W": 11, "G": 3}),
    "transposed": (conv.Hyper(transposed=True, stride=(2, 1, 3), padding=(1, 1, 0), dilation=(1, 2, 1),
                              output_padding=(1, 0, 2), groups=2),
                   {"N": 2, "C_IN": 4, "C_OUT": 6, "D": 3, "H": 4, "W": 5, "G": 2}),
}


def _truth(hyper: conv.Hyper, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    x, w, b = x.double(), w.double(), b.double()
    if hyper.transposed:
        return F.conv_transpose3d(x, w, b, stride=hyper.stride, padding=hyper.padding,
                                  output_padding=hyper.output_padding, groups=hyper.groups, dilation=hyper.dilation)
    return F.conv3d(x, w, b, stride=hyper.stride, padding=hyper.padding, dilation=hyper.dilation,
                    groups=hyper.groups)


# The direct loop pays the interpreter per channel and tap (~10 s a launch on the grouped and transposed cases)
SLOW = {("direct", "strided_padded_dilated_grouped"), ("direct", "transposed")}


@pytest.mark.parametrize(("name", "case"), [
    pytest.param(name, case, marks=[pytest.mark.slow] if (name, case) in SLOW else [])
    for name in ("implicit_gemm", "direct") for case in sorted(CASES)])
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


PROBLEM = '''
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
'''

# name -> (module, hyperparameters, kernel size, spatial globals, the task and member that match)
PROBLEMS = {
    "conv1d_strided": ("Conv1d", "stride=2, padding=1, dilation=2", "3", ("length",),
                       "conv", "conv3d(s=1,1,2 p=0,0,1 d=1,1,2)"),
    "conv2d_grouped": ("Conv2d", "stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2", "(3, 5)",
                       ("height", "width"), "conv", "conv3d(s=1,2,1 p=0,1,2 d=1,1,2)"),
    "transposed1d_bias_free": ("ConvTranspose1d", "stride=3, padding=2, dilation=2, bias=False", "5",
                               ("length",), "conv_transpose", "conv_transpose3d(s=1,1,3 p=0,0,2 d=1,1,2)"),
    "transposed3d_grouped": ("ConvTranspose3d", "stride=2, padding=1, output_padding=1, groups=2", "3",
                             ("depth", "height", "width"), "conv_transpose",
                             "conv_transpose3d(s=2,2,2 p=1,1,1 op=1,1,1)"),
}


def _problem(tmp_path: Path, name: str) -> Path:
    module, hyper, kernel, dims, _, _ = PROBLEMS[name]
    path = tmp_path / f"{name}.py"
    # 8 channels (sizes up to 8 are kept as they are): the derived check shapes then keep a group count dividing them
    out = 8 if "groups" in hyper else 12
    path.write_text(PROBLEM.format(module=module, hyper=hyper, kernel=kernel, dims=", ".join(dims), out=out,
                                   sizes="\n".join(f"{d} = 12" for d in dims)))
    return path


@pytest.mark.parametrize("name", ["conv1d_strided", "conv2d_grouped", "transposed1d_bias_free"])
def test_problems_match_with_their_hyperparameters(tmp_path: Path, name: str) -> None:
    problem = load_task_file(_problem(tmp_path, name))
    match, tried = find_match(problem, list(TASKS.values()))
    assert match is not None, tried
    assert (match.task, match.member) == PROBLEMS[name][4:]
    assert match.keys["N"] == "batch_size"
    _, variants = matched_files(problem, match, tmp_path / "matched")
    assert {v.stem for v in variants} == {"implicit_gemm", "direct"}
    for variant in variants:
        text = variant.read_text()
        assert check_module(text) is None
        # a 1-D or 2-D problem's output is the task's with its unit dims dropped, sizes read from it
        assert "return wf_out.view(wf_out.shape[0], wf_out.shape[1], wf_out.shape[" in text


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="a grouped transposed convolution's outputs differ at the matcher's probe "
                   "since the group count is read from the shapes (b.shape[0] / w.shape[1]); KernelBench's grouped "
                   "transposed 72, 73 and 75 do not match either")
def test_a_grouped_transposed_problem_with_a_bias_matches(tmp_path: Path) -> None:
    problem = load_task_file(_problem(tmp_path, "transposed3d_grouped"))
    match, tried = find_match(problem, list(TASKS.values()))
    assert match is not None and (match.task, match.member) == PROBLEMS["transposed3d_grouped"][4:], tried


# KernelBench level 1 (bias-free, so the bias is filled): a 3-D, a 1-D, a depthwise 2-D and a transposed 2-D
LEVEL1_MATCHES = {
    "54_conv_standard_3D__square_input__square_kernel": ("conv", "conv3d()"),
    "67_conv_standard_1D": ("conv", "conv3d()"),
    "82_conv_depthwise_2D_square_input_square_kernel": ("conv", "conv3d()"),
    "57_conv_transposed_2D__square_input__square_kernel": ("conv_transpose", "conv_transpose3d()"),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n.startswith("54_") else [])
                                  for n in sorted(LEVEL1_MATCHES)])  # 54's float64 3-D references: ~30 s
def test_kernelbench_level1_convolutions_match(name: str) -> None:
    path = LEVEL1 / f"{name}.py"
    if not path.is_file():
        pytest.skip(f"KernelBench level 1 not found at {LEVEL1} (../shared/kernelbench)")
    match, tried = find_match(load_task_file(path), list(TASKS.values()))
    assert match is not None, tried
    task, member = LEVEL1_MATCHES[name]
    assert (match.task, match.member) == (task, member), match.describe()


@pytest.mark.slow
def test_benchmark_judges_level1_convolutions_ok() -> None:
    if not LEVEL1.is_dir():
        pytest.skip(f"KernelBench level 1 not found at {LEVEL1} (../shared/kernelbench)")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kernelbench.py"), str(LEVEL1),
                          "--problems", "76,87", "--trials", "1", "--json"],
                         capture_output=True, text=True, env=env, timeout=1800, check=True)
    rows = {r["problem"]: r for r in json.loads(out.stdout)["rows"]}
    for name, row in rows.items():
        assert row["matched"].startswith("conv") and row["correct"], (name, row["why"])
