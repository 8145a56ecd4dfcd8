"""The checks softmax, rmsnorm and layernorm share, once for the three: zero output refused, two templates or
more with a feasible configuration on every shape, and each template correct under the interpreter on the check
shapes (the first dtype in the default tier, the others in the slow one) and, on a GPU, the benchmark shapes.

What differs per task (its independent float64 route, input statistics, cost model by hand, backward) stays
in tests/kernels/test_<task>.py.
"""

from __future__ import annotations

import pytest
import torch
from newtask_harness import DEVICE, load, valid_configs
from row_task_checks import assert_matches, run_template

from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

# Each task's templates by name: a template dropped or renamed fails here.
TEMPLATES = {
    "softmax": {"single_pass", "online"},
    "rmsnorm": {"single_pass", "looped"},
    "layernorm": {"single_pass", "looped"},
}
TASKS = {name: get_task(name) for name in TEMPLATES}
VARIANTS = {(t, v.name): v for t in TEMPLATES for v in builtin_variants(t)}
# The first dtype in the default tier; the others (~2/3 of the interpreter time) in the slow tier.
CHECKED = [
    pytest.param(t, v, d, id=f"{t}-{v}-{d}", marks=[pytest.mark.slow] if i else [])
    for t, v in sorted(VARIANTS)
    for i, d in enumerate(TASKS[t].dtypes)
]


@pytest.mark.parametrize("task_name", sorted(TASKS))
def test_zero_output_fails_tolerance(task_name: str) -> None:
    task = TASKS[task_name]
    for dtype in task.dtypes:
        for shape in task.check_shapes + task.small_shapes:
            inputs = task.make_inputs(shape, dtype, 0, "cpu")
            ref64 = task.reference(*(t.double() for t in inputs))
            with pytest.raises(AssertionError):
                assert_matches(task, torch.zeros_like(inputs[0]), ref64, dtype)


@pytest.mark.parametrize("task_name", sorted(TASKS))
def test_at_least_two_templates(task_name: str) -> None:
    variants = [v for (t, _), v in VARIANTS.items() if t == task_name]
    assert TEMPLATES[task_name] <= {v.name for v in variants}
    assert all(v.task == task_name and v.space for v in variants)
    assert all({"num_warps", "num_stages"} <= set(v.space) for v in variants)


@pytest.mark.parametrize(("task_name", "name"), sorted(VARIANTS))
def test_template_valid_on_every_shape(task_name: str, name: str) -> None:
    task, variant = TASKS[task_name], VARIANTS[task_name, name]
    module = load(variant)
    for shape in task.shapes + task.check_shapes + task.small_shapes:
        assert valid_configs(variant, module, shape), f"{name}: no valid config for {shape}"


@pytest.mark.parametrize(("task_name", "name", "dtype"), CHECKED)
def test_template_correct_on_check_shapes(task_name: str, name: str, dtype: torch.dtype) -> None:
    task = TASKS[task_name]
    run_template(task, VARIANTS[task_name, name], dtype, task.check_shapes, DEVICE)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("task_name", "name", "dtype"), [(t, v, d) for t, v in sorted(VARIANTS) for d in TASKS[t].dtypes]
)
def test_template_correct_on_benchmark_shapes_gpu(task_name: str, name: str, dtype: torch.dtype) -> None:
    task = TASKS[task_name]
    run_template(task, VARIANTS[task_name, name], dtype, task.shapes, "cuda")
