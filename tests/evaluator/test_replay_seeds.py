"""A failing verdict names what replays its case: the shape, the dtype, the input seed and, in a training
check, the upstream gradient's seed (the judge's own RNG draws them, and the child never sees it)."""

from __future__ import annotations

import random

import torch

from warpforge.evaluator.judge.gradients import add_grad_outs, draw_grad_out
from warpforge.evaluator.judge.judge import plan_cases
from warpforge.kernels.task import get_task


def test_a_training_case_label_names_both_seeds_and_they_replay_it() -> None:
    task = get_task("layernorm")
    plan = plan_cases(task, [{"M": 3, "N": 5}], [torch.float32], seeds=1, hidden=1, rng=random.Random(7))
    add_grad_outs(plan, task, random.Random(8))
    for case in plan.cases:
        assert f"seed={case.seed} grad_seed={case.grad_seed}" in case.label
        shape = dict(case.shape)
        inputs = (
            task.adversarial_inputs(shape, case.dtype, case.seed, "cpu")[case.adversarial]
            if case.adversarial
            else task.make_inputs(shape, case.dtype, case.seed, "cpu")
        )
        assert all(torch.equal(a, b) for a, b in zip(inputs, case.inputs))
        assert torch.equal(draw_grad_out(task.reference, inputs, case.grad_seed), plan.grad_outs[case.id])
