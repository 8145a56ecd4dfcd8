"""The chain reader's (kernels/fx_chain.py) wider steps and the KernelBench level-2 problems they let match:
a min or max with a 0-d constant (``torch.min(x, torch.tensor(c))``, a scalar ``nn.Parameter``), read as a
clamp step with the constant's value; real problem files end ok through the real judge (skipped without
../shared/kernelbench)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from newtask_harness import DEVICE, load, nan_allocations
from torch import nn

from warpforge.evaluator.judge.compare import compare_outputs
from warpforge.kernels.fx_chain import apply_steps, read_chain
from warpforge.kernels.members import with_constants
from warpforge.kernels.task import get_task
from warpforge.kernels.tasks import linear_chain
from warpforge.kernels.variant import builtin_variants

GEMM_VARIANTS = {v.name: v for v in builtin_variants("linear_chain")}
# one small configuration each: the interpreter's cost, not speed, matters here
GEMM_PARAMS = {
    "tiled": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 4, "num_warps": 4, "num_stages": 2},
    "persistent": {
        "BLOCK_M": 64,
        "BLOCK_N": 64,
        "BLOCK_K": 32,
        "GROUP_M": 8,
        "NUM_SMS": 132,
        "num_warps": 4,
        "num_stages": 2,
    },
}


class _Head(nn.Module):
    """A Linear, a scalar parameter and a 0-d constant, then ``fn(self, z)``."""

    def __init__(self, fn) -> None:
        super().__init__()
        self.gemm = nn.Linear(8, 6)
        self.constant = nn.Parameter(torch.tensor(2.0))
        self.fn = fn

    def forward(self, x):
        return self.fn(self, self.gemm(x))


@pytest.mark.parametrize(
    ("fn", "steps"),
    [
        # KernelBench 31: a constant made in the forward (fx lifts it to an attribute)
        (lambda m, z: torch.min(z, torch.tensor(0.5)) * 2.0, (("min", 0.5, 0.0), ("mul", 2.0, 0.0))),
        # KernelBench 93: made on the value's device (``v.device`` only passed on to torch.tensor)
        (
            lambda m, z: F.gelu(torch.min(z + 0.5, torch.tensor(0.0, device=z.device))),
            (("add", 0.5, 0.0), ("min", 0.0, 0.0), ("gelu", 0.0, 0.0)),
        ),
        # KernelBench 68: a scalar parameter, read with the value the module holds, in a min and a subtraction
        (lambda m, z: torch.min(z, m.constant) - m.constant, (("min", 2.0, 0.0), ("add", -2.0, 0.0))),
        (lambda m, z: torch.maximum(torch.tensor(-1.0), z) / m.constant, (("max", -1.0, 0.0), ("div", 2.0, 0.0))),
        (lambda m, z: torch.max(z, torch.tensor(0.25)), (("max", 0.25, 0.0),)),
        # a 0-d constant does not promote the [M, N] value: a half-precision one is its value
        (lambda m, z: torch.min(z, torch.tensor(0.5, dtype=torch.float16)), (("min", 0.5, 0.0),)),
        # not a step: the min of two tensors, a constant that is no scalar, an integer constant
        (lambda m, z: torch.min(z, z * 2.0), None),
        (lambda m, z: torch.min(z, torch.tensor([0.5])), None),
        (lambda m, z: torch.min(z, torch.tensor(1)), None),
    ],
)
def test_a_min_or_max_with_a_0d_constant_reads_as_a_clamp_step(fn, steps) -> None:
    model = _Head(fn)
    chain = read_chain(model)
    assert (None if chain is None else chain.steps) == steps
    if steps is not None:  # the steps compute the forward
        x = torch.randn(5, 8)
        with torch.no_grad():
            torch.testing.assert_close(apply_steps(model.gemm(x), steps), model(x))


# --- a per-column parameter after a Linear (KernelBench 95: ``x + self.add_value``, add_value [out_features]) ---


def test_a_per_column_parameter_reads_as_a_param_step() -> None:
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.matmul = nn.Linear(8, 6)
            self.add_value = nn.Parameter(torch.randn(6))

        def forward(self, x):
            x = self.matmul(x) + self.add_value
            return F.hardtanh(torch.tanh(torch.sigmoid(x) * x) / self.add_value, -1, 1)

    chain = read_chain(Model())
    assert chain is not None and chain.param == "add_value"
    assert chain.steps == (
        ("add_p", 0.0, 0.0),
        ("silu", 0.0, 0.0),
        ("tanh", 0.0, 0.0),
        ("div_p", 0.0, 0.0),
        ("clamp", -1.0, 1.0),
    )


@pytest.mark.parametrize("name", ["tiled", "persistent"])
def test_param_steps_on_the_gemm_templates_match_torch_in_fp32(name: str) -> None:
    steps = (
        ("add_p", 0.0, 0.0),
        ("silu", 0.0, 0.0),
        ("mul_p", 0.0, 0.0),
        ("sub_p", 0.0, 0.0),
        ("div_p", 0.0, 0.0),
        ("mul", 0.5, 0.0),
    )
    module = load(GEMM_VARIANTS[name])
    for key, value in linear_chain.member(steps)[2].items():
        setattr(module, key, value)
    x, w, b, p = linear_chain.make_inputs({"M": 67, "N": 71, "K": 37}, torch.float32, 0, DEVICE)
    with nan_allocations():
        out = module.launch(x, w, b, p, **GEMM_PARAMS[name]).cpu()
    x, w, b, p = (t.cpu().double() for t in (x, w, b, p))
    v = F.silu(x @ w.T + b + p)
    truth = (((v * p) - p) / p) * 0.5
    atol, rtol = get_task("linear_chain").tolerance(torch.float32)
    assert compare_outputs([out], [truth], [truth.float()], atol, rtol) is None
    module.PARAM_COLS = False  # p unread: every p step reads the GEMM's own tile instead, and the check tells
    with nan_allocations():
        wrong = module.launch(*(t.float().to(DEVICE) for t in (x, w, b, p)), **GEMM_PARAMS[name]).cpu()
    assert compare_outputs([wrong], [truth], [truth.float()], atol, rtol) is not None


def test_the_rows_template_takes_no_param_member() -> None:
    constants = tuple(linear_chain.member((("add_p", 0.0, 0.0), ("relu", 0.0, 0.0)))[2].items())
    assert with_constants(GEMM_VARIANTS["rows"].source, constants) is None
    assert with_constants(GEMM_VARIANTS["tiled"].source, constants) is not None
    with pytest.raises(ValueError, match="per-column parameter"):
        linear_chain.member((("add_p", 0.0, 0.0), ("row_sum", 1.0, 0.0)))


# --- KernelBench level 2 files (../shared/kernelbench, else skipped): the member they match, and the real judge ---

# problem -> (task, member); the matcher's own order and fills are the numbers' business
LEVEL2 = {
    "31_Conv2d_Min_Add_Multiply": ("conv", "conv3d()>min(0.5)>add_p>mul(2.0)"),
    "93_ConvTranspose2d_Add_Min_GELU_Multiply": (
        "conv_transpose",
        "conv_transpose3d(s=1,2,2)>add(0.5)>min(0.0)>gelu>mul(2.0)",
    ),
    "95_Matmul_Add_Swish_Tanh_GELU_Hardtanh": ("linear_chain", "add_p>silu>tanh>gelu>clamp(-1.0,1.0)"),
}


@pytest.mark.parametrize("name", sorted(LEVEL2))
def test_kernelbench_level2_problems_match_their_chain(name: str, kernelbench_file) -> None:
    from warpforge.evaluator.judge.matching import find_match
    from warpforge.kernels.task import load_task_file

    task, member = LEVEL2[name]
    match, tried = find_match(load_task_file(kernelbench_file(2, name)), [get_task(task)])
    assert match is not None and (match.task, match.member) == (task, member), tried


# problem -> (template, configuration): one small tile each, the interpreter's cheapest
JUDGED = {
    "95_Matmul_Add_Swish_Tanh_GELU_Hardtanh": ("tiled", GEMM_PARAMS["tiled"]),
    "31_Conv2d_Min_Add_Multiply": (
        "implicit_gemm",
        {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2},
    ),
    # 5 (a transposed convolution run by phase) is not here: at x1e4 inputs 1 element of 66k, a cancelling sum,
    # misses by 2.4e-4 where 2.3e-4 is allowed on some seeds (fp32 tl.dot as tf32x3): an open question, not a pass
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(JUDGED))
def test_kernelbench_level2_problems_are_judged_ok(name: str, kernelbench_file, tmp_path) -> None:
    """The matched problem through the real judge (hidden shapes, adversarial inputs) in the interpreter: one to
    several minutes each on a loaded 2-core machine."""
    from warpforge.evaluator.judge.matching import find_match, matched_files
    from warpforge.evaluator.run.backend import get_backend
    from warpforge.evaluator.sandbox.job import Job
    from warpforge.kernels.task import load_task_file
    from warpforge.kernels.variant import load_variant

    problem = load_task_file(kernelbench_file(2, name))
    task = LEVEL2.get(name, ("conv_transpose", ""))[0]
    match, tried = find_match(problem, [get_task(task)])
    assert match is not None, tried
    copy, variants = matched_files(problem, match, tmp_path)
    stem, params = JUDGED[name]
    variant = next(v for v in variants if v.stem == stem)
    backend = get_backend("interpret")
    try:
        result = backend.evaluate(Job(load_task_file(copy), load_variant(variant), params))
    finally:
        backend.close()
    assert result.verdict.value == "ok", (result.reason, result.message)
