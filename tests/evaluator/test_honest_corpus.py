"""Honest kernels judged as they are written (tests/evaluator/honest/): each answer, in the style of Triton's
tutorials, Liger-Kernel or FlagGems, is judged against its KernelBench-format problem on the interpreter and
must be ``ok``. The references are torch's own modules (the problem files); nothing here restates numbers.

Slow tier: each judgement runs sandboxed children (30-70 s a kernel on 2 loaded cores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.run.job import Job
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import load_variant

HONEST = Path(__file__).parent / "honest"
# answer -> its problem; every idiom of the grammar's honest-code productions appears in at least one
CORPUS = {
    "vector_add": "p_add",  # tutorial 01: lambda META grid
    "fused_softmax": "p_softmax",  # tutorial 02: a num_stages kernel parameter, by position
    "matmul_autotune": "p_matmul",  # tutorial 03: @triton.autotune, triton.Config, lambda grid
    "rmsnorm_libdevice": "p_rmsnorm",  # Liger: libdevice rsqrt by name, annotated constexpr, return annotation
    "swiglu": "p_swiglu",  # Liger: @triton.heuristics, jit helper with a return annotation
    "geglu_libdevice": "p_geglu",  # Liger: libdevice module, alias of libdevice.tanh and triton.cdiv
    "cross_entropy": "p_cross_entropy",  # Liger: online softmax, annotated constexpr mode
    "argmax": "p_argmax",  # FlagGems: tl.argmax, alias of triton.next_power_of_2
}


def test_every_answer_of_the_corpus_is_judged() -> None:
    answers = {p.stem for p in HONEST.glob("*.py") if not p.name.startswith("p_")}
    assert answers == set(CORPUS), answers ^ set(CORPUS)


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
