"""The elementwise family: its members' references against formulas written out here, and every member on
every template under the interpreter (tiny shapes; fp32 in the default tier, fp16/bf16 in the slow one)."""

from __future__ import annotations

import math

import pytest
import torch
from family_harness import run_members

from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

TASK = get_task("elementwise")
VARIANTS = {v.name: v for v in builtin_variants("elementwise")}

# Independent float64 formulas (the task's references call torch.nn.functional).
FORMULAS = {
    "relu": lambda x: x.clamp(min=0),
    "leaky_relu(0.01)": lambda x: torch.where(x >= 0, x, 0.01 * x),
    "sigmoid": lambda x: 1 / (1 + torch.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "selu": lambda x: 1.0507009873554805 * torch.where(x > 0, x, 1.6732632423543772 * (torch.exp(x) - 1)),
    "elu(0.5)": lambda x: torch.where(x > 0, x, 0.5 * (torch.exp(x) - 1)),
    "hardtanh(0.0,6.0)": lambda x: x.clamp(0, 6),
    "hardsigmoid": lambda x: (x / 6 + 0.5).clamp(0, 1),
    "softplus": lambda x: torch.log1p(torch.exp(x)),
    "softsign": lambda x: x / (1 + x.abs()),
    "mish": lambda x: x * torch.tanh(torch.log1p(torch.exp(x))),
}


def test_members_are_a_table_and_the_default_is_what_the_templates_name() -> None:
    names = [m.name for m in TASK.members]
    assert len(names) == len(set(names)) >= 20
    assert TASK.member == "gelu"
    for variant in VARIANTS.values():
        assert 'OP = "gelu"' in variant.source and "OP_A = 0.0" in variant.source


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_member_reference_matches_an_independent_formula(name: str) -> None:
    x = torch.linspace(-8, 8, 801, dtype=torch.float64).view(3, 267)
    got = TASK.as_member(name).reference(x)
    torch.testing.assert_close(got, FORMULAS[name](x), rtol=1e-12, atol=1e-12)


def test_an_unknown_member_is_a_clear_error() -> None:
    with pytest.raises(Exception, match="no member 'gelu_fast'.*relu"):
        TASK.as_member("gelu_fast")


# A few members whose branches share nothing (a clamp, a series-guarded tanh inside softplus, erf, expm1):
# the default tier runs these on every template, the slow tier every member in every dtype.
QUICK = ["leaky_relu(0.2)", "mish", "gelu", "selu"]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_few_members_on_every_template(name: str) -> None:
    failures = run_members(TASK, VARIANTS[name], [{"M": 3, "N": 67}], torch.float32, members=QUICK)
    assert not failures, "\n".join(failures[:5])


@pytest.mark.slow
@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_member_on_every_template(name: str, dtype: torch.dtype) -> None:
    # 13 x 67 crosses blocks and rows unevenly; the adversarial inputs (|x| ~ 1e-4 and ~300) come with it.
    failures = run_members(TASK, VARIANTS[name], [{"M": 13, "N": 67}], dtype)
    assert not failures, "\n".join(failures[:5])


def test_a_wrong_op_fails_the_comparison() -> None:
    # The harness can fail: the relu constants against the leaky_relu reference.
    from warpforge.kernels.taskdef import Member

    member = TASK.as_member("leaky_relu(0.1)")
    wrong = Member("leaky_relu(0.1)", member.reference, {"OP": "relu", "OP_A": 0.0, "OP_B": 0.0})
    from dataclasses import replace

    task = replace(TASK, members=(wrong,))
    assert run_members(task, VARIANTS["flat"], [{"M": 3, "N": 67}], torch.float32)


@pytest.mark.parametrize("seed", [1794354947, 679027242])
def test_gelu_tanh_keeps_its_tail_on_one_element(seed: int) -> None:
    """The seeds of one-element cases: x = -4.46 (a `wrong_values` verdict seen in an optimize run), where
    0.5 * x * (1 + tanh(u)) in fp32 is 1.4% off; x = -7.23, where that formula is exactly 0 even in float64
    and the value -1.4e-16. On a one-element shape the judge's allowance is relative to that element alone.
    Truth: x * sigmoid(2u), which does not cancel, in float64."""
    from newtask_harness import load, nan_allocations

    x = TASK.make_inputs({"M": 1, "N": 1}, torch.float32, seed, "cpu")[0]
    x64 = x.double()
    exact = float(x64 / (1 + torch.exp(-2 * math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3))))
    module = load(VARIANTS["flat"])
    module.OP = "gelu_tanh"
    with nan_allocations():
        out = module.launch(x, BLOCK=1024, num_warps=2, num_stages=1)
    assert abs(float(out) - exact) <= 1e-5 * abs(exact)
    assert abs(float(TASK.as_member("gelu_tanh").reference(x64)) - exact) <= 1e-12 * abs(exact)
