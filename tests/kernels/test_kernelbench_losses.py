"""Losses reduced to a scalar, matched and searched: the reduction adapter (a problem returning the mean or sum of
a task's output, written here) and KernelBench's level-1 losses (../shared/kernelbench, else the shipped
94, 95 and 96; the others skip without it): which task and member each matches, the adapted templates within
the grammar and computing torch's loss under the interpreter, and the problems that match nothing with the true
reason."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F

from warpforge.evaluator.judge.matching import Match, find_match, matched_files
from warpforge.evaluator.static.grammar import check_module
from warpforge.kernels.targets import constraint_shape
from warpforge.kernels.task import load_task_file
from warpforge.kernels.taskdef import Task

ROOT = Path(__file__).resolve().parents[2]

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, predictions, targets):
        return {expr}


batch_size = 64
num_classes = 1000


def get_inputs():
    return [torch.randn(batch_size, num_classes), {targets}]


def get_init_inputs():
    return []
"""


def write(tmp_path: Path, name: str, expr: str, targets: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(PROBLEM.format(expr=expr, targets=targets))
    return path


def module_of(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"wf_adapted_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_adapted(
    problem: Task, match: Match, tmp_path: Path, shape_index: int = 0
) -> list[tuple[str, torch.Tensor, tuple]]:
    """Every template the match searches, adapted, on the problem's own inputs at one of its check shapes (the
    middle configuration of each): (template, output, inputs)."""
    copy, variants = matched_files(problem, match, tmp_path / "matched")
    task = load_task_file(copy)
    inputs = task.make_inputs(task.check_shapes[shape_index], torch.float32, 0, "cpu")
    out = []
    for variant in variants:
        text = variant.read_text()
        assert check_module(text) is None, variant.name  # the adapted launch stays within the variant grammar
        module = module_of(variant)
        params = {k: v[len(v) // 2] for k, v in module.SPACE.items()}
        out.append((variant.stem, module.launch(*inputs, **params), inputs))
    assert out
    return out


def test_a_summed_cross_entropy_is_cross_entropy_through_the_sum_adapter(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "ce_sum",
        "torch.nn.functional.cross_entropy(predictions, targets, reduction='sum')",
        "torch.randint(0, num_classes, (batch_size,))",
    )
    problem = load_task_file(path)
    match, _ = find_match(problem)
    assert match is not None and match.task == "cross_entropy" and match.in_order
    assert match.adapter is not None and match.adapter.reduction == "sum" and not match.adapter.reshapes
    assert "the sum of its output" in match.describe()
    for name, out, (logits, targets) in run_adapted(problem, match, tmp_path, shape_index=1):
        want = F.cross_entropy(logits.double(), targets, reduction="sum")
        assert out.shape == () and out.dtype == torch.float32, name
        torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-6, msg=name)


def test_a_loss_with_the_wrong_reduction_or_a_label_smoothing_matches_nothing(tmp_path: Path) -> None:
    # A per-row loss is not its mean, and a label-smoothed loss is not the plain one under any reduction.
    for name, expr in (
        ("ce_none", "torch.nn.functional.cross_entropy(predictions, targets, reduction='none') * 2"),
        ("ce_smooth", "torch.nn.functional.cross_entropy(predictions, targets, label_smoothing=0.1)"),
    ):
        path = write(tmp_path, name, expr, "torch.randint(0, num_classes, (batch_size,))")
        match, tried = find_match(load_task_file(path))
        assert match is None, (name, match)
        assert any(t.startswith("cross_entropy: outputs differ") for t in tried), tried


def test_a_hinge_with_targets_shaped_like_the_predictions_is_the_hinge_member(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "hinge",
        "torch.mean(torch.clamp(1 - predictions * targets, min=0))",
        "torch.randint(0, 2, (batch_size, num_classes)).float() * 2 - 1",
    )
    match, _ = find_match(load_task_file(path))
    assert match is not None and (match.task, match.member) == ("loss", "hinge_mean") and match.adapter is None
    assert dict(match.constants) == {"OP": "hinge", "REDUCTION": "mean"}


@pytest.fixture
def kernelbench(kernelbench_file: Callable[[int, str], Path]) -> Callable[[str], Task]:
    """A level-1 problem as a task: ../shared/kernelbench's file, else the shipped copy (94, 95, 96 ship)."""
    return lambda name: load_task_file(kernelbench_file(1, name))


# problem -> (task, member, reduction adapter): what each of KernelBench's level-1 losses computes.
MATCHES = {
    "94_MSELoss": ("loss", "mse_mean", ""),
    "95_CrossEntropyLoss": ("cross_entropy", "", "mean"),
    "96_HuberLoss": ("loss", "smooth_l1_mean", ""),
    "98_KLDivLoss": ("loss", "kl_div_batchmean", ""),
}


@pytest.mark.parametrize("name", sorted(MATCHES))
def test_kernelbench_losses_match_their_task(name: str, kernelbench: Callable[[str], Task]) -> None:
    match, tried = find_match(kernelbench(name))
    assert match is not None, tried
    task, member, reduction = MATCHES[name]
    assert (match.task, match.member) == (task, member) and match.in_order
    assert (match.adapter.reduction if match.adapter is not None else "") == reduction


def test_95_cross_entropy_is_searched_with_its_mean(tmp_path: Path, kernelbench: Callable[[str], Task]) -> None:
    problem = kernelbench("95_CrossEntropyLoss")
    match, _ = find_match(problem)
    assert match is not None and match.keys == {"M": "batch_size", "V": "num_classes"}
    results = run_adapted(problem, match, tmp_path)
    assert {name for name, _, _ in results} == {"online", "split_vocab"}
    for name, out, (logits, targets) in results:
        want = F.cross_entropy(logits.double(), targets)
        torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-6, msg=name)


def test_98_kl_div_keeps_its_literal_width_and_is_searched_as_the_batchmean_member(
    tmp_path: Path, kernelbench: Callable[[str], Task]
) -> None:
    # input_shape = (8192 * 2,) is no global: N is the literal 16384 in every shape of the problem.
    problem = kernelbench("98_KLDivLoss")
    match, _ = find_match(problem)
    assert match is not None and match.keys == {"M": "batch_size", "N": [16384]}
    for name, out, (p, t) in run_adapted(problem, match, tmp_path, shape_index=1):  # batch 1: 16384 elements
        want = F.kl_div(torch.log(p.double()), t.double(), reduction="batchmean")
        torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-7, msg=name)


def test_100_hinge_and_99_triplet_margin_match_nothing_and_say_why(kernelbench: Callable[[str], Task]) -> None:
    # 100's targets are [batch_size] broadcast along a row of input_shape[0]: its code runs only where the two
    # sizes are equal (or the batch is 1), so no probe tells which task dimension is which.
    match, tried = find_match(kernelbench("100_HingeLoss"))
    assert match is None and "no probe with distinct sizes" in tried[0]
    # A triplet margin loss takes three tensors and a norm per row: no elementwise pair loss.
    match, tried = find_match(kernelbench("99_TripletMarginLoss"))
    assert match is None and "loss: takes 2 tensors, the problem 3" in tried


@pytest.mark.slow
@pytest.mark.parametrize("name", ["94_MSELoss", "95_CrossEntropyLoss", "98_KLDivLoss"])
def test_kernelbench_losses_are_ok_under_the_interpreter_backend(
    name: str, tmp_path: Path, kernelbench: Callable[[str], Task]
) -> None:
    """The whole judge (check shapes, seeds, the problem's adversarial inputs) on one adapted template each:
    ~30 s a problem on 2 cores."""
    from warpforge.evaluator.result import Verdict
    from warpforge.evaluator.run.backend import get_backend
    from warpforge.evaluator.sandbox.job import Job
    from warpforge.kernels.variant import load_variant

    problem = kernelbench(name)
    match, _ = find_match(problem)
    assert match is not None
    copy, variants = matched_files(problem, match, tmp_path / "matched")
    task = load_task_file(copy)
    variant = load_variant(variants[0])
    module = module_of(variants[0])
    feasible = [c for c in variant.configs() if all(module.constraints(c, constraint_shape(s)) for s in task.shapes)]
    backend = get_backend("interpret")
    try:
        result = backend.evaluate(Job(task, variant, feasible[len(feasible) // 2]))
    finally:
        backend.close()
    assert result.verdict is Verdict.OK, result.message
