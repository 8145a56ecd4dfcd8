"""Contract tests over every registered task, template and backend."""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import BACKENDS, get_backend
from warpforge.evaluator.run.stages import compile_stage, space_stage
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.targets import limits
from warpforge.kernels.task import builtin_task_names, get_task, load_task_file
from warpforge.kernels.taskdef import KINDS, TaskError
from warpforge.kernels.variant import builtin_variants, load_variant

TASKS = builtin_task_names()
TEMPLATES = [(t, v.name) for t in TASKS for v in builtin_variants(t)]
# Compiling a template for sm_90 takes 5-48 s on 2 cores (attention's atomic dq the most): the default tier
# checks every template's space, the slow tier (`make test-slow`) compiles each one's largest accepted
# configuration (every ahead-of-time stage of an evaluation in the default tier compiles for sm_90 too).
PLANTED = Path(__file__).parents[1] / "evaluator" / "planted"


@pytest.fixture(scope="module")
def pool():
    with ChildPool() as p:
        yield p


def test_every_task_declares_its_kind_which_the_optimizer_reports() -> None:
    """Each built-in task module says its role (``KIND``); the model optimizer's regions read it from the task,
    from no table of its own (9 of 31 tasks were once missing from such a table, reported as "other")."""
    from warpforge.optimize.match import task_kind

    undeclared = [n for n in TASKS if not hasattr(importlib.import_module(f"warpforge.kernels.tasks.{n}"), "KIND")]
    assert not undeclared
    kinds = {n: get_task(n).kind for n in TASKS}
    assert set(kinds.values()) <= set(KINDS) - {"other"}, kinds
    assert (kinds["conv"], kinds["linear_groupnorm"], kinds["pool"]) == ("convolution", "gemm", "pooling")
    assert all(task_kind(n) == k for n, k in kinds.items()) and task_kind("no_such_task") == "other"


def test_an_unknown_kind_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "mysoftmax.py"
    path.write_text(get_task("softmax").path.read_text().replace('KIND = "reduction"', 'KIND = "softmaxes"'))
    with pytest.raises(TaskError, match="KIND 'softmaxes' is none of gemm"):
        load_task_file(path)


@pytest.mark.parametrize("name", TASKS)
def test_task_contract(name: str) -> None:
    task = get_task(name)
    assert task.name == name and task.description
    assert task.shapes and task.check_shapes and task.dtypes
    assert len(builtin_variants(name)) >= 2, "each task ships at least two genuinely different templates"
    for shape in task.shapes + task.check_shapes:
        for dtype in task.dtypes:
            assert task.flops(shape, dtype) > 0 and task.bytes_moved(shape, dtype) > 0
    # Every check shape runs in the interpreter on every trial: keep them small (elements of the largest input).
    for shape in task.check_shapes:
        biggest = max(
            x.numel() for x in task.make_inputs(shape, task.dtypes[0], 0, "cpu") if isinstance(x, torch.Tensor)
        )
        assert biggest <= 40_000, shape
    # Boundary sizes: some dimension of 1 and some prime dimension among the check shapes.
    dims = [d for s in task.check_shapes for d in s.values()]
    assert 1 in dims and any(d > 2 and all(d % p for p in range(2, int(math.sqrt(d)) + 1)) for d in dims)


def _feasible(task_name: str, variant_name: str, pool) -> tuple[Any, Any, list[dict]]:
    task = get_task(task_name)
    variant = next(v for v in builtin_variants(task_name) if v.name == variant_name)
    assert variant.task == task_name
    failure, configs = space_stage(pool, Job(task, variant, {}))
    assert failure is None and configs, "no configuration satisfies constraints on the benchmark shapes"
    return task, variant, configs


@pytest.mark.parametrize(("task_name", "variant_name"), TEMPLATES)
def test_template_has_a_feasible_space(task_name: str, variant_name: str, pool) -> None:
    _feasible(task_name, variant_name, pool)


@pytest.mark.slow
@pytest.mark.parametrize(("task_name", "variant_name"), TEMPLATES)
def test_template_has_feasible_space_and_compiles_for_sm90(task_name: str, variant_name: str, pool) -> None:
    task, variant, configs = _feasible(task_name, variant_name, pool)
    # The constraints must hold where they are tightest: the configuration with the largest tiles and most
    # stages that they accept (the product of its numeric values) compiles within sm_90's limits.
    failure, resources = compile_stage(pool, Job(task, variant, max(configs, key=_weight)))
    assert failure is None, failure.message
    assert all(r.registers and r.registers <= 255 for r in resources)
    assert all(r.shared_bytes is not None and r.shared_bytes <= limits("sm_90").shared_bytes for r in resources)


def _weight(config: dict) -> float:
    return math.prod(
        float(v) for v in config.values() if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
    )


# the built-ins: a test module registering a stand-in (tests/search/test_decision.py) must not change this
# module's parameters with the order the files are collected in
@pytest.mark.parametrize("backend_name", BACKENDS.builtins())
def test_backend_contract(backend_name: str, pool) -> None:
    """Every backend ends in one verdict of the closed set, labelled with its name and versions."""
    task = load_task_file(PLANTED / "task_double.py")
    backend = get_backend(backend_name, pool=pool)
    result = backend.evaluate(Job(task, load_variant(PLANTED / "good.py"), {"BLOCK": 256, "num_warps": 4}))
    assert result.verdict in set(Verdict) and result.backend == backend_name
    assert {"torch", "triton", "warpforge"} <= set(result.versions)
    if result.measured:
        assert result.timing is not None and result.timing.source in ("live", "recorded") and result.timing.gpu
    elif backend_name == "interpret":
        assert result.verdict is Verdict.OK and result.timing is None
    else:  # no GPU, no recordings here: said so, never a made-up time
        assert result.verdict is Verdict.UNSUPPORTED
