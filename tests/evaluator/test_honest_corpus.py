"""Honest kernels judged as they are written (tests/evaluator/honest/): each answer, in the style of Triton's
tutorials, Liger-Kernel or FlagGems, is judged against its KernelBench-format problem on the interpreter and
must be ``ok``. The references are torch's own modules (the problem files); nothing here restates numbers.

Slow tier: each judgement runs sandboxed children (30-70 s a kernel on 2 loaded cores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.sandbox.job import Job
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import load_variant

HONEST = Path(__file__).parent / "honest"
# answer -> its problem; every idiom of the grammar's honest-code productions appears in at least one
CORPUS = {
    "vector_add": "p_add",  # tutorial 01: lambda META grid
    "fused_softmax": "p_softmax",  # tutorial 02: a num_stages kernel parameter, by position
    "matmul_autotune": "p_matmul",  # tutorial 03: @triton.autotune, triton.Config, lambda grid, fp16
    "rmsnorm_libdevice": "p_rmsnorm",  # Liger: libdevice rsqrt by name, annotated constexpr, return annotation
    "swiglu": "p_swiglu",  # Liger: @triton.heuristics, jit helper with a return annotation
    "geglu_libdevice": "p_geglu",  # Liger: libdevice module, alias of libdevice.tanh and triton.cdiv
    "cross_entropy": "p_cross_entropy",  # Liger: online softmax, annotated constexpr mode
    "argmax": "p_argmax",  # FlagGems: tl.argmax, alias of triton.next_power_of_2
    "layer_norm": "p_layer_norm",  # tutorial 05: two-pass mean and variance (constant rows: conditioning)
}


def test_every_answer_of_the_corpus_is_judged() -> None:
    answers = {p.stem for p in HONEST.glob("*.py") if not p.name.startswith("p_")}
    assert answers == set(CORPUS), answers ^ set(CORPUS)


def test_a_kernelbench_problem_is_judged_in_its_inputs_dtype() -> None:
    """fp16 inputs (the matmul tutorial's) make an fp16 task, with the built-in tasks' fp16 tolerances; fp32 stays."""
    import torch

    from warpforge.kernels.taskdef import DEFAULT_TOLERANCES

    fp16 = load_task_file(HONEST / "p_matmul.py")
    assert fp16.dtypes == [torch.float16]
    assert fp16.tolerance(torch.float16) == DEFAULT_TOLERANCES[torch.float16]
    inputs = fp16.make_inputs(fp16.check_shapes[0], torch.float16, 0, "cpu")
    assert all(x.dtype == torch.float16 for x in inputs)
    assert load_task_file(HONEST / "p_add.py").dtypes == [torch.float32]


@pytest.fixture(scope="module")
def backend():
    engine = get_backend("interpret")
    yield engine
    engine.close()


@pytest.mark.slow
@pytest.mark.parametrize("answer", sorted(CORPUS))
def test_an_honest_kernel_as_written_is_ok(backend, answer: str) -> None:
    task = load_task_file(HONEST / f"{CORPUS[answer]}.py")
    variant = load_variant(HONEST / f"{answer}.py")
    params = {name: values[0] for name, values in variant.space.items()}  # eval's first configuration
    result = backend.evaluate(Job(task, variant.for_task(task.name), params))
    assert result.verdict is Verdict.OK, f"{result.verdict.value}: {result.reason}: {result.message}"
