"""Four small tasks that KernelBench level 1 computes and the GEMM and elementwise families did not: ``bmm``
(3_Batched_matrix_multiplication), ``row_scale`` (12_Matmul_with_diagonal_matrices_), ``scale`` (5_Matrix_scalar_
multiplication, whose factor is a Python float argument) and ``masked_cumsum`` (93_masked_cumsum).

References against torch written out in float64; every template under the interpreter on every check shape
with NaN-filled allocations (fp32; the judge's own run in the slow tier); the real problem files matched to
these tasks (../shared/kernelbench, else the shipped copies)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from newtask_harness import DEVICE, load, nan_allocations, representative, valid_configs

from warpforge.evaluator.judge.compare import compare_outputs
from warpforge.evaluator.judge.matching import find_match
from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.targets import constraint_shape
from warpforge.kernels.task import get_task, load_task_file
from warpforge.kernels.variant import builtin_variants

TASKS = ("bmm", "row_scale", "scale", "masked_cumsum")
TEMPLATES = [(t, v.name) for t in TASKS for v in builtin_variants(t)]


def test_references_are_torch_written_out() -> None:
    gen = torch.Generator().manual_seed(0)
    a, b = (
        torch.randn(3, 5, 7, generator=gen, dtype=torch.float64),
        torch.randn(3, 7, 4, generator=gen, dtype=torch.float64),
    )
    torch.testing.assert_close(get_task("bmm").reference(a, b), torch.einsum("bmk,bkn->bmn", a, b))
    s, x = torch.randn(6, generator=gen, dtype=torch.float64), torch.randn(6, 9, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(get_task("row_scale").reference(s, x), torch.diag(s) @ x)
    torch.testing.assert_close(get_task("scale").reference(x, 3.14), x * 3.14)
    x3 = torch.randn(2, 11, 3, generator=gen, dtype=torch.float64)
    mask = torch.rand(2, 11, 3, generator=gen) < 0.5
    loop = torch.zeros_like(x3)
    run = torch.zeros(2, 3, dtype=torch.float64)
    for i in range(11):
        run = run + torch.where(mask[:, i], x3[:, i], 0.0)
        loop[:, i] = run
    torch.testing.assert_close(get_task("masked_cumsum").reference(x3, mask), loop)


def test_half_references_round_once() -> None:
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1)).half()
    assert torch.equal(get_task("scale").reference(x, 3.14), (x.float() * 3.14).half())
    s = torch.randn(4, generator=torch.Generator().manual_seed(2)).half()
    assert torch.equal(get_task("row_scale").reference(s, x), (s.float()[:, None] * x.float()).half())


def test_scale_draws_a_different_factor_per_seed() -> None:
    task = get_task("scale")
    factors = [task.make_inputs({"M": 2, "N": 3}, torch.float32, seed, "cpu")[1] for seed in range(4)]
    assert all(isinstance(f, float) and 1.5 <= abs(f) < 3.5 for f in factors)
    assert len(set(factors)) == 4 and factors[1] < 0 < factors[0]


@pytest.mark.parametrize(("task_name", "name"), TEMPLATES)
def test_templates_pass_the_grammar(task_name: str, name: str) -> None:
    variant = next(v for v in builtin_variants(task_name) if v.name == name)
    assert check_module(variant.source) is None


def _run(module: Any, inputs: tuple[Any, ...], params: dict[str, Any]) -> torch.Tensor:
    with nan_allocations():
        return module.launch(*inputs, **params)


@pytest.mark.parametrize(("task_name", "name"), TEMPLATES)
def test_templates_match_the_reference_on_check_shapes(task_name: str, name: str) -> None:
    task = get_task(task_name)
    variant = next(v for v in builtin_variants(task_name) if v.name == name)
    module = load(variant)
    failures = []
    for shape in task.check_shapes:
        # The middle feasible configuration: the first is the smallest block, the slowest under the interpreter.
        configs = representative(valid_configs(variant, module, {**shape, **task.shapes[0]}))
        params = configs[len(configs) // 2]
        for seed in (0, 1):
            inputs = task.make_inputs(shape, torch.float32, seed, DEVICE)
            before = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
            out = _run(module, inputs, params)
            cpu = tuple(t.cpu() if isinstance(t, torch.Tensor) else t for t in inputs)
            ref64 = task.reference(
                *(t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in cpu)
            )
            bad = compare_outputs([out.cpu()], [ref64], [task.reference(*cpu)], *task.tolerance(torch.float32))
            if bad is not None:
                failures.append(f"{shape} seed {seed} {params}: {bad.message}")
            assert all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(inputs, before))
    assert not failures, "\n".join(failures[:5])


def test_a_row_scale_by_the_wrong_row_is_wrong() -> None:
    """The check inputs catch a kernel that scales by the column's factor (square x) or by s[0]."""
    task = get_task("row_scale")
    s, x = task.make_inputs({"M": 13, "N": 13}, torch.float64, 0, "cpu")
    ref = task.reference(s, x)
    for wrong in (s[None, :] * x, s[0] * x):
        assert compare_outputs([wrong], [ref], [ref], *task.tolerance(torch.float32)) is not None


@pytest.mark.slow
@pytest.mark.parametrize(("task_name", "name"), TEMPLATES)
def test_the_judge_passes_every_template(task_name: str, name: str) -> None:
    from warpforge.evaluator.run.backend import get_backend
    from warpforge.evaluator.sandbox.job import Job

    task = get_task(task_name)
    variant = next(v for v in builtin_variants(task_name) if v.name == name)
    module = load(variant)
    configs = [c for c in variant.configs() if all(module.constraints(c, constraint_shape(s)) for s in task.shapes)]
    backend = get_backend("interpret")
    try:
        result = backend.evaluate(Job(task, variant, configs[len(configs) // 2]))
    finally:
        backend.close()
    assert result.verdict.value == "ok", result.message


# problem -> (task, member) it matches
PROBLEMS = {
    "3_Batched_matrix_multiplication": ("bmm", ""),
    "5_Matrix_scalar_multiplication": ("scale", ""),
    "12_Matmul_with_diagonal_matrices_": ("row_scale", ""),
    "14_Matmul_for_upper_triangular_matrices": ("matmul", "triu"),
    "15_Matmul_for_lower_triangular_matrices": ("matmul", "tril"),
    "93_masked_cumsum": ("masked_cumsum", ""),
}


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_kernelbench_problems_match(problem: str, kernelbench_file: Callable[[int, str], Path]) -> None:
    path = kernelbench_file(1, problem)
    task_name, member = PROBLEMS[problem]
    match, tried = find_match(load_task_file(path), [get_task(n) for n in ("bmm", task_name)])
    assert match is not None, tried
    assert (match.task, match.member) == (task_name, member) and match.in_order
    if task_name != "masked_cumsum":  # 93 is a 2-D scan: the [M, L, 1] reshape of the scan family
        assert match.adapter is None


def test_a_direct_match_beats_a_reshaped_one(tmp_path: Path) -> None:
    """``s[:, None] * x`` is also a batch of 1 x 1 @ 1 x N products (bmm through a reshape, tried first): the
    task that computes it on the problem's own tensors wins."""
    path = tmp_path / "rowscale.py"
    path.write_text("""import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, s, x):
        return s[:, None] * x


rows = 512
cols = 1024


def get_inputs():
    return [torch.rand(rows), torch.rand(rows, cols)]


def get_init_inputs():
    return []
""")
    match, _ = find_match(load_task_file(path), [get_task("bmm"), get_task("row_scale")])
    assert match is not None and match.task == "row_scale" and match.adapter is None
    alone, _ = find_match(load_task_file(path), [get_task("bmm")])
    assert alone is not None and alone.task == "bmm" and alone.adapter is not None  # still found, when alone


def test_a_layout_whose_output_dwarfs_the_problem_is_never_computed(tmp_path: Path) -> None:
    """Two [rows, width] inputs cut to [rows, width, 1] and [rows, 1, width] are a batch of outer products to bmm
    (at KernelBench 98's width of 16384, 23 GB in float64): the matcher sizes them on meta tensors first."""
    from dataclasses import replace

    path = tmp_path / "rowdot.py"
    path.write_text("""import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return (a * b).sum()


rows = 64


def get_inputs():
    return [torch.rand(rows, 1024), torch.rand(rows, 1024)]


def get_init_inputs():
    return []
""")
    bmm = get_task("bmm")
    sizes: list[int] = []

    def recording(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if a.device.type != "meta":
            sizes.append(a.shape[0] * a.shape[1] * b.shape[2])
        return bmm.reference(a, b)

    problem = load_task_file(path)
    find_match(problem, [replace(bmm, reference=recording)])  # (a whole-row dot product is a 1 x 1 bmm)
    assert sizes and max(sizes) <= 4 * 11 * 1024  # the probe's rows are a prime (11): 4x its largest input
