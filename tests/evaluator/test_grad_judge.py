"""The training judge on reports made in this process (no child, no sandbox): the child's training call
(child/backward.py) runs a template in-process, its outputs are saved as the child saves them, and
grad_judge.TrainingJudge judges them. The sandboxed path is covered by the manifest's training fixtures."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import random
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from warpforge.evaluator.judge.gradients import add_grad_outs, input_names
from warpforge.evaluator.judge.judge import CheckPlan, plan_cases
from warpforge.evaluator.judge.training import judge_training
from warpforge.evaluator.sandbox.child.backward import training_call
from warpforge.evaluator.sandbox.job import Job, training_check, training_note
from warpforge.evaluator.sandbox.supervisor import ChildOutcome
from warpforge.kernels.task import get_task
from warpforge.kernels.variant import TEMPLATES_DIR, load_variant

LAYERNORM = TEMPLATES_DIR / "layernorm" / "single_pass.py"
PARAMS = {"ROWS_PER_PROGRAM": 2, "num_warps": 4, "num_stages": 1, "BWD_ROWS_PER_PROGRAM": 4}


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"wf_test_gj_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Tweaked:
    """The template with one thing changed: ``grads`` maps the honest gradients to what is returned,
    ``saved`` the honest saved tuple to what launch_forward returns."""

    def __init__(self, module: ModuleType, grads: Any = None, saved: Any = None, mutate: bool = False) -> None:
        self.m, self.grads, self.saved, self.mutate = module, grads, saved, mutate

    def launch(self, *a: Any, **p: Any) -> Any:
        return self.m.launch(*a, **p)

    def launch_forward(self, *a: Any, **p: Any) -> Any:
        out, saved = self.m.launch_forward(*a, **p)
        return out, (self.saved(saved) if self.saved else saved)

    def launch_backward(self, grad_out: torch.Tensor, saved: Any, *a: Any, **p: Any) -> Any:
        grads = self.m.launch_backward(grad_out, saved[:2] if self.saved else saved, *a, **p)
        if self.mutate:
            grad_out.mul_(2)
        return self.grads(grads) if self.grads else grads


def _judge(tmp_path: Path, module: Any, dtype: torch.dtype = torch.float32) -> tuple[Any, list[str], CheckPlan]:
    task = get_task("layernorm")
    job = Job(task, load_variant(LAYERNORM), dict(PARAMS))
    assert training_check(job.task, job.variant)
    rng = random.Random(0)
    plan = plan_cases(task, [{"M": 5, "N": 67}], [dtype], 1, 0, rng)
    plan.cases = [c for c in plan.cases if not c.adversarial][:1] + [c for c in plan.cases if c.adversarial][:1]
    plan.pair = None
    add_grad_outs(plan, task, rng)
    facts = []
    for case in plan.cases:
        inputs = tuple(x.clone() for x in case.inputs) + (plan.grad_outs[case.id].clone(),)
        outs, extra = training_call(module, inputs, dict(PARAMS))
        buffer = io.BytesIO()
        torch.save({"out": [o.detach().clone() for o in outs], "inputs_after": [x.clone() for x in inputs]}, buffer)
        name = f"out_{case.id}.pt"
        (tmp_path / name).write_bytes(buffer.getvalue())
        facts.append(
            {
                "id": case.id,
                "kinds": ["Tensor" if type(o) is torch.Tensor else type(o).__name__ for o in outs],
                "aliases": [False] * len(outs),
                "ops": [],
                "kernel_calls": 3,
                "threads": 0,
                "tampered": [],
                "state_changed": [],
                "kernels": [],
                "saved": name,
                "sha256": hashlib.sha256(buffer.getvalue()).hexdigest(),
                **extra,
            }
        )
    outcome = ChildOutcome("done", {"cases": facts}, 0, "", 0.0, tmp_path)
    failure, checked = judge_training(job, plan, outcome)
    return failure, checked, plan


def test_honest_training_template_passes(tmp_path: Path) -> None:
    failure, checked, plan = _judge(tmp_path, _module(LAYERNORM))
    assert failure is None and len(checked) == len(plan.cases) == 2
    assert all(label.endswith("(forward + backward)") for label in checked)


@pytest.mark.parametrize(("index", "name"), [(0, "x"), (1, "w"), (2, "b")])
def test_a_wrong_gradient_is_named(tmp_path: Path, index: int, name: str) -> None:
    def scale(grads: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        return tuple(g * 1.01 if i == index else g for i, g in enumerate(grads))

    failure, _, _ = _judge(tmp_path, _Tweaked(_module(LAYERNORM), grads=scale))
    assert failure is not None and failure.verdict.value == "incorrect"
    assert failure.reason == "wrong_gradient"
    assert failure.message.startswith(f"grad of input {index} ({name}):"), failure.message


def test_a_missing_gradient_names_launch_backward(tmp_path: Path) -> None:
    failure, _, _ = _judge(tmp_path, _Tweaked(_module(LAYERNORM), grads=lambda g: g[:2]))
    assert failure is not None and failure.reason == "wrong_output_count"
    assert failure.message.startswith("launch_backward returned 2 output(s), the contract 3")


def test_saved_must_hold_tensors_only(tmp_path: Path) -> None:
    failure, _, _ = _judge(tmp_path, _Tweaked(_module(LAYERNORM), saved=lambda s: (*s, 5)))
    assert failure is not None and failure.reason == "saved_not_tensor"


def test_a_backward_that_writes_grad_out_is_rejected(tmp_path: Path) -> None:
    failure, _, _ = _judge(tmp_path, _Tweaked(_module(LAYERNORM), mutate=True))
    assert failure is not None and (failure.verdict.value, failure.reason) == ("rejected", "input_mutated")


def test_ghost_replay_catches_a_backward_outside_the_kernels(tmp_path: Path) -> None:
    """Forward kernels disabled (NaN), gradients still right: the backward did not come from the kernels."""
    from warpforge.evaluator.judge.training import TrainingJudge

    failure, _, plan = _judge(tmp_path, _module(LAYERNORM))
    assert failure is None
    case = plan.cases[0]
    job = Job(get_task("layernorm"), load_variant(LAYERNORM), dict(PARAMS))
    judge = TrainingJudge(job, plan, ChildOutcome("done", {}, 0, "", 0.0, tmp_path))
    saved = torch.load(tmp_path / f"out_{case.id}.pt", weights_only=True)["out"]
    nan = [torch.full_like(t, float("nan")) for t in saved]
    assert judge.bypassed(case, nan) is None
    assert judge.bypassed(case, nan[:2] + saved[2:3] + nan[3:]) == "launch_backward's grad of input 0 (x)"
    assert judge.bypassed(case, nan[:1] + saved[1:2] + nan[2:]) == "launch_forward's output"


def test_notes_and_names() -> None:
    layernorm = get_task("layernorm")
    assert input_names(layernorm) == ["x", "w", "b"]
    assert training_note(layernorm, load_variant(LAYERNORM)) is None
    forward_only = load_variant(TEMPLATES_DIR / "layernorm" / "looped.py")
    note = training_note(layernorm, forward_only)
    assert note is not None and note.startswith("backward: not checked") and "forward-only" in note
    matmul = get_task("matmul")
    assert not matmul.has_backward
    ln_variant = load_variant(LAYERNORM)
    note = training_note(matmul, ln_variant)
    assert note is not None and note.startswith("backward: ignored")


ADV = Path(__file__).parent / "adversarial"


@pytest.mark.slow
def test_training_bench_times_forward_and_backward_and_rechecks_gradients() -> None:
    """The timing plumbing on the interpreter (its times are never an objective: only their presence and the
    rechecks are tested): forward and backward are timed apart, their sum is the objective, the reference is
    timed as forward + autograd backward, and a timed gradient is rechecked against float64 autograd."""
    from warpforge.evaluator.run.timing import BenchSettings, ab_stage, bench_stage
    from warpforge.evaluator.sandbox.supervisor import ChildPool
    from warpforge.kernels.task import load_task_file

    square = load_task_file(ADV / "task_square.py")
    params = {"BLOCK": 256, "num_warps": 4}
    job = Job(square, load_variant(ADV / "control_square_train.py"), dict(params))
    settings = BenchSettings(warmup=1, reps=4, wall_calls=2)
    with ChildPool() as pool:
        failure, shapes, _ = bench_stage(pool, job, "cpu", True, [{"N": 97}], torch.float32, settings)
        assert failure is None, failure and failure.message
        (sr,) = shapes
        assert sr.forward_p50_ms and sr.backward_p50_ms and sr.ref_forward_p50_ms and sr.ref_backward_p50_ms
        assert sr.samples_ms is not None and sr.p50_ms is not None
        assert sr.p50_ms >= min(sr.samples_ms) and len(sr.samples_ms) == 4
        bad = Job(square, load_variant(ADV / "backward_ignores_grad_out.py"), dict(params))
        failure, _, _ = bench_stage(pool, bad, "cpu", True, [{"N": 97}], torch.float32, settings)
        assert failure is not None and failure.reason == "timed_output_incorrect"
        assert "grad of input 0 (x)" in failure.message
        failure, a, b = ab_stage(pool, job, bad, "cpu", True, [{"N": 97}], torch.float32, rounds=2)
        assert failure is not None and failure.reason == "timed_output_incorrect"


def test_compile_facts_count_the_backward_kernels() -> None:
    """The AOT stage traces launch_forward/launch_backward too: the backward's kernels have compile facts (the
    static CPU ranking reads them) and are on the list of kernels the check may launch."""
    from warpforge.evaluator.run.stages import compile_stage
    from warpforge.evaluator.sandbox.supervisor import ChildPool
    from warpforge.kernels.task import load_task_file

    square = load_task_file(ADV / "task_square.py")
    job = Job(square, load_variant(ADV / "control_square_train.py"), {"BLOCK": 256, "num_warps": 4})
    with ChildPool() as pool:
        failure, resources = compile_stage(pool, job)
    assert failure is None, failure and failure.message
    assert {r.kernel for r in resources} == {"_square", "_square_bwd"}
    assert len(job.compiled_kernels) == 2
