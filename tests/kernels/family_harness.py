"""Running every member of a task family (kernels/taskdef.Member) on a template under the interpreter, with
NaN-filled allocations, against the member's reference in float64 (the comparison the judge makes)."""

from __future__ import annotations

import torch
from newtask_harness import DEVICE, load, nan_allocations, representative, valid_configs

from warpforge.evaluator.judge.compare import compare_outputs
from warpforge.kernels.taskdef import Shape, Task
from warpforge.kernels.variant import Variant


def run_members(
    task: Task,
    variant: Variant,
    shapes: list[Shape],
    dtype: torch.dtype,
    members: list[str] | None = None,
    configs: int = 1,
) -> list[str]:
    """One line per failure (member, shape, input kind, config, the mismatch): empty when all agree."""
    module = load(variant)
    failures: list[str] = []
    for member in task.members:
        if members is not None and member.name not in members:
            continue
        for name, value in member.constants.items():
            assert hasattr(module, name), f"{variant.name} lacks the member constant {name}"
            setattr(module, name, value)
        for shape in shapes:
            cases = {"random": task.make_inputs(shape, dtype, 0, DEVICE)}
            if task.adversarial_inputs is not None:
                cases.update(task.adversarial_inputs(shape, dtype, 0, DEVICE))
            picks = representative(valid_configs(variant, module, shape))
            # The middle configuration first: the first is the smallest block, the slowest under the interpreter.
            for params in (picks[1:2] + picks[:1] + picks[2:])[:configs]:
                for kind, inputs in cases.items():
                    before = [t.clone() for t in inputs]
                    with nan_allocations():
                        out = module.launch(*inputs, **params)
                    ref64 = member.reference(*(t.cpu().double() for t in inputs))
                    ref = member.reference(*(t.cpu() for t in inputs))
                    atol, rtol = task.tolerance(dtype)
                    bad = compare_outputs([out.cpu()], [ref64], [ref], atol, rtol)
                    if bad is not None or not all(torch.equal(a, b) for a, b in zip(inputs, before)):
                        failures.append(
                            f"{member.name} {shape} {kind} {params}: {bad.message if bad else 'input mutated'}"
                        )
    return failures
