"""The new tasks' templates compile for sm_90 without a GPU (every kernel, forward and backward), and the
interpret backend is honest about fp8: compile facts recorded, correctness ``unsupported`` (never ``ok``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from newtask_harness import load, valid_configs

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.run.interpreter_dtypes import fp8_dtypes
from warpforge.evaluator.run.stages import compile_stage
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.supervisor import ChildPool
from warpforge.kernels.targets import constraint_shape
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import builtin_variants

NEW_TASKS = ["attention", "rotary", "fused_linear_cross_entropy", "fp8_quant_token", "fp8_quant_block", "fp8_gemm"]
TEMPLATES = [(t, v.name) for t in NEW_TASKS for v in builtin_variants(t)]
PROBE = Path(__file__).with_name("newtask_compile_probe.py")
SMEM_SM90 = 232448


@pytest.fixture(scope="module")
def pool():
    with ChildPool() as p:
        yield p


def _middle_config(task_name: str, variant_name: str) -> tuple[object, object, dict[str, object]]:
    task = get_task(task_name)
    variant = next(v for v in builtin_variants(task_name) if v.name == variant_name)
    module = load(variant)
    feasible = [
        c
        for c in valid_configs(variant, module, task.shapes[0])
        if all(module.constraints(c, constraint_shape(s)) for s in task.shapes + task.check_shapes)
    ]
    assert feasible, f"{variant_name}: no configuration fits every shape"
    assert len(variant.configs()) <= 500, "SPACE sized for the search's budgets: a few hundred configs at most"
    return task, variant, feasible[len(feasible) // 2]


@pytest.mark.slow  # 15-40 s a template on 2 shared cores
@pytest.mark.parametrize(("task_name", "variant_name"), TEMPLATES)
def test_every_kernel_compiles_for_sm90(task_name: str, variant_name: str) -> None:
    task, variant, params = _middle_config(task_name, variant_name)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, str(PROBE), task_name, str(variant.path), json.dumps(params)],  # type: ignore[attr-defined]
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    kernels = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert kernels and all(k["cubin_bytes"] > 0 and k["shared_bytes"] <= SMEM_SM90 for k in kernels)
    if variant.has_backward:  # type: ignore[attr-defined]
        assert len(kernels) >= 2, kernels  # the backward's kernels (or specialisations) were compiled too


@pytest.mark.parametrize("task_name", [pytest.param("fp8_gemm", marks=pytest.mark.slow), "fp8_quant_block"])
def test_interpret_backend_compiles_fp8_and_leaves_correctness_to_a_gpu(task_name: str, pool: ChildPool) -> None:
    task, variant, params = _middle_config(task_name, builtin_variants(task_name)[0].name)
    result = get_backend("interpret", pool=pool).evaluate(Job(task, variant, params))  # type: ignore[arg-type]
    assert result.verdict is Verdict.UNSUPPORTED and result.reason == "interpreter_fp8", result.message
    assert "correctness needs a GPU (fp8)" in result.message
    assert result.resources and all(r.target == "sm_90" and r.registers for r in result.resources)


def test_make_inputs_run_on_fake_tensors() -> None:
    """The compile stage builds every shape's inputs under FakeTensorMode: no host read of a tensor there."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    for name in NEW_TASKS:
        task = get_task(name)
        with FakeTensorMode():
            for shape in task.shapes:
                assert task.make_inputs(shape, task.dtypes[0], 0, "cpu")


def test_fp8_detection_reads_inputs_and_outputs() -> None:
    assert fp8_dtypes(get_task("fp8_gemm")) == ["float8_e4m3fn"]  # fp8 inputs
    assert fp8_dtypes(get_task("fp8_quant_token")) == ["float8_e4m3fn"]  # bf16 in, fp8 out
    assert fp8_dtypes(get_task("rotary")) == [] and fp8_dtypes(get_task("softmax")) == []


@pytest.mark.slow  # ~30 s; tests/kernels/test_contract.py compiles every template's launch in the default tier
def test_compile_stage_records_facts_for_sm90(pool: ChildPool) -> None:
    """The evaluator's own compile stage (launch only) on one forward template of a training task."""
    task, variant, params = _middle_config("attention", "flash2")
    failure, resources = compile_stage(pool, Job(task, variant, params))  # type: ignore[arg-type]
    assert failure is None and resources and all(r.registers and r.registers <= 255 for r in resources)
