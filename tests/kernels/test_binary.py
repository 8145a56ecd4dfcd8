"""The binary elementwise family: its members' references against torch's broadcasting in float64, members on
the templates under the interpreter (same shapes, a broadcast row, a broadcast column, z tiling x), a wrong op
or a wrong broadcast failing, and KernelBench-style problems (``a + b``, a bias row) matching it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from family_harness import run_members

from warpforge.evaluator.judge.matching import find_match, matched_files
from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.task import get_task, load_task_file
from warpforge.kernels.taskdef import Member
from warpforge.kernels.variant import builtin_variants

TASK = get_task("binary")
VARIANTS = {v.name: v for v in builtin_variants("binary")}

# Independent float64 formulas, z broadcast by torch itself (the task's references index z explicitly).
FORMULAS = {
    "add": lambda x, z: x + z,
    "sub": lambda x, z: x - z,
    "mul": lambda x, z: x * z,
    "div": lambda x, z: x / z,
    "maximum": lambda x, z: torch.where(x > z, x, z),
    "minimum": lambda x, z: torch.where(x < z, x, z),
    "mul_sigmoid": lambda x, z: x / (1 + torch.exp(-z)),
}


def test_members_are_a_table_and_the_default_is_what_the_templates_name() -> None:
    assert [m.name for m in TASK.members] == list(FORMULAS)
    assert TASK.member == "add"
    for variant in VARIANTS.values():
        assert 'OP = "add"' in variant.source and check_module(variant.source) is None


@pytest.mark.parametrize("z_shape", [(5, 9), (1, 9), (5, 1), (1, 1)], ids=str)
@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_member_reference_matches_torch_broadcasting(name: str, z_shape: tuple[int, int]) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5, 9, generator=gen, dtype=torch.float64)
    z = torch.randn(*z_shape, generator=gen, dtype=torch.float64) + 3.0
    got = TASK.as_member(name).reference(x, z)
    torch.testing.assert_close(got, FORMULAS[name](x, z), rtol=1e-12, atol=1e-12)


def test_a_tiling_z_repeats_its_rows_and_columns() -> None:
    x = torch.zeros(5, 6, dtype=torch.float64)
    z = torch.arange(6, dtype=torch.float64).view(2, 3)
    want = torch.tensor([[0, 1, 2], [3, 4, 5]], dtype=torch.float64).repeat(3, 2)[:5]
    torch.testing.assert_close(TASK.reference(x, z), want)


@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
def test_denominators_stay_away_from_zero_and_every_input_kind_stays_finite(dtype: torch.dtype) -> None:
    """x / z with z near 0 is ~1e7 in float64 and inf in fp16: a failure of the dtype that no kernel can
    avoid. Every input set keeps |z| well above 0 and every member's float64 result inside the dtype."""
    shape = {"M": 130, "N": 127, "ZM": 130, "ZN": 1}
    sets = {"random": TASK.make_inputs(shape, dtype, 3, "cpu"), **TASK.adversarial_inputs(shape, dtype, 3, "cpu")}
    biggest = torch.finfo(dtype).max
    for kind, (x, z) in sets.items():
        scale = float(z.double().abs().max())
        assert float(z.double().abs().min()) >= 0.19 * scale, kind  # |z| in [0.5, 2.5] times the set's scale
        for member in TASK.members:
            out = member.reference(x.double(), z.double())
            assert bool(out.abs().max() < biggest / 2), (kind, member.name)


def test_the_ties_inputs_hold_equal_operands() -> None:
    shape = {"M": 13, "N": 67, "ZM": 1, "ZN": 67}
    x, z = TASK.adversarial_inputs(shape, torch.float16, 0, "cpu")["ties"]
    equal = (x == z.expand_as(x)).float().mean()
    assert 0.3 < float(equal) < 0.7


# Shapes that take every path of both templates: same shapes, a broadcast row, a broadcast column, z tiling x.
QUICK_SHAPES = [
    {"M": 3, "N": 67, "ZM": 3, "ZN": 67},
    {"M": 5, "N": 33, "ZM": 1, "ZN": 33},
    {"M": 7, "N": 20, "ZM": 7, "ZN": 1},
    {"M": 6, "N": 10, "ZM": 4, "ZN": 3},
]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_members_on_every_template_and_broadcast(name: str) -> None:
    failures = run_members(TASK, VARIANTS[name], QUICK_SHAPES, torch.float32, members=["sub", "div", "maximum"])
    assert not failures, "\n".join(failures[:5])


@pytest.mark.slow
@pytest.mark.parametrize("dtype", TASK.dtypes, ids=str)
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_member_on_every_template(name: str, dtype: torch.dtype) -> None:
    failures = run_members(TASK, VARIANTS[name], TASK.check_shapes, dtype)
    assert not failures, "\n".join(failures[:5])


@pytest.mark.parametrize(("wrong", "member"), [({"OP": "add"}, "sub"), ({"OP": "sub"}, "div")])
def test_a_wrong_op_fails_the_comparison(wrong: dict[str, str], member: str) -> None:
    ref = TASK.as_member(member).reference
    task = replace(TASK, members=(Member(member, ref, wrong),))
    assert run_members(task, VARIANTS["flat"], [{"M": 3, "N": 67, "ZM": 1, "ZN": 67}], torch.float32)


def test_a_broadcast_read_as_same_shaped_fails(tmp_path: Path) -> None:
    """The flat template with the tiling path dropped (z paired by flat index whatever its shape) is wrong on a
    z that tiles x: the harness tells."""
    source = VARIANTS["flat"].source.replace("    if zm == m and zn == n:\n", "    if True:\n")
    assert source != VARIANTS["flat"].source
    path = tmp_path / "flat.py"
    path.write_text(source)
    from warpforge.kernels.variant import load_variant

    failures = run_members(
        TASK, load_variant(path), [{"M": 6, "N": 10, "ZM": 6, "ZN": 5}], torch.float32, members=["add"]
    )
    assert failures


PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return {forward}


batch_size = 64
dim = 96


def get_inputs():
    return [torch.rand(batch_size, dim), {second}]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(
    ("forward", "second", "member", "zkeys"),
    [
        ("a + b", "torch.rand(batch_size, dim)", "add", ("batch_size", "dim")),
        ("torch.maximum(a, b)", "torch.rand(batch_size, dim)", "maximum", ("batch_size", "dim")),
        ("b - a", "torch.rand(batch_size, dim)", "sub", ("batch_size", "dim")),
        ("a * b", "torch.rand(batch_size, 1)", "mul", ("batch_size", None)),
    ],
    ids=["add", "maximum", "rsub", "per_row_mul"],
)
def test_a_kernelbench_problem_matches_its_member(
    tmp_path: Path, forward: str, second: str, member: str, zkeys: tuple[str, str | None]
) -> None:
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM.format(forward=forward, second=second))
    problem = load_task_file(path)
    match, tried = find_match(problem, [TASK])
    assert match is not None, tried
    assert (match.task, match.member, match.adapter) == ("binary", member, None)
    assert match.order == ((1, 0) if forward == "b - a" else (0, 1))
    assert match.keys["M"] == "batch_size" and match.keys["N"] == "dim" and match.keys["ZM"] == zkeys[0]
    assert match.aliased({"batch_size": 64, "dim": 96})["ZN"] == (96 if zkeys[1] else 1)
    _, variants = matched_files(problem, match, tmp_path / "matched")
    assert {v.stem for v in variants} == set(VARIANTS)
    assert all(check_module(v.read_text()) is None for v in variants)


def test_a_bias_vector_is_one_broadcast_row(tmp_path: Path) -> None:
    path = tmp_path / "bias.py"
    path.write_text(PROBLEM.format(forward="a + b", second="torch.rand(dim)"))
    match, tried = find_match(load_task_file(path), [TASK])
    assert match is not None and match.member == "add", tried
    assert match.adapter is not None and match.aliased({"batch_size": 64, "dim": 96})["ZM"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("member", ["add", "div"])
def test_members_are_judged_ok_by_the_real_judge(member: str) -> None:
    """The judge end to end (check shapes in every dtype, hidden shapes, the adversarial sets, benchmark-scale
    slices, compiled for sm_90): ~30-50 s each under the interpreter, so two members, one per template (add on
    flat, div with its denominators on rows); every member's values on every template are
    test_every_member_on_every_template's."""
    from warpforge.evaluator.run.backend import get_backend
    from warpforge.evaluator.sandbox.job import Job

    name = f"binary[{member}]"
    variants = builtin_variants(name)
    variant = variants[list(FORMULAS).index(member) % len(variants)]
    params = {
        "flat": {"BLOCK": 1024, "num_warps": 4, "num_stages": 1},
        "rows": {"BLOCK_M": 4, "BLOCK_N": 256, "num_warps": 4, "num_stages": 1},
    }[variant.name]
    backend = get_backend("interpret")
    try:
        result = backend.evaluate(Job(get_task(name), variant, params))
    finally:
        backend.close()
    assert result.verdict.value == "ok", (result.reason, result.message)
