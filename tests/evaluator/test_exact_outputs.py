"""Integer and boolean outputs are judged exactly and deterministically.

An honest argmax (int64 output, KernelBench's level1/51 at small sizes) was rejected as ``kernel_bypass``
in 2 of 5 identical runs: fresh integer allocations were not prefilled, so the ghost replay's (kernels
disabled) output held whatever memory the allocator returned, a freed copy of the right answer among them.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from warpforge.evaluator.result import Verdict
from warpforge.evaluator.run.backend import get_backend
from warpforge.evaluator.sandbox.child.common import ORIGINAL_ALLOC, ORIGINAL_NEW, Sentinel
from warpforge.evaluator.sandbox.job import Job
from warpforge.evaluator.sandbox.sentinel import exact_sentinel
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import parse_variant

HERE = Path(__file__).parents[1] / "kernels" / "kernelbench"
ARGMAX = (HERE / "argmax_variant.py").read_text()
PARAMS = {"BLOCK": 64, "num_warps": 4}


@pytest.fixture
def sentinel():
    s = Sentinel()
    yield s
    for name, fn in ORIGINAL_ALLOC.items():
        setattr(torch, name, fn)
    for name, fn in ORIGINAL_NEW.items():
        setattr(torch.Tensor, name, fn)


@pytest.mark.parametrize("value", [math.nan, 1234.0])
def test_fresh_integer_and_boolean_allocations_hold_the_sentinel(sentinel, value: float) -> None:
    sentinel.install(value)
    for dtype in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.bool):
        expected = exact_sentinel(dtype, value)
        for t in (
            torch.empty(5, 3, dtype=dtype),
            torch.empty_like(torch.zeros(7, dtype=dtype)),
            torch.zeros(2, dtype=torch.float32).new_empty(4, dtype=dtype),
        ):
            assert bool((t == expected).all()), (dtype, t)
    assert exact_sentinel(torch.int64, math.nan) == torch.iinfo(torch.int64).min
    assert exact_sentinel(torch.int64, 1234.0) == torch.iinfo(torch.int64).max


@pytest.fixture(scope="module")
def backend():
    engine = get_backend("interpret")
    yield engine
    engine.close()


def evaluate(backend, source: str):
    task = load_task_file(HERE / "argmax.py")
    return backend.evaluate(Job(task, parse_variant(source, "argmax_variant"), dict(PARAMS)))


@pytest.mark.slow
def test_an_honest_argmax_is_ok_every_time(backend) -> None:
    verdicts = [evaluate(backend, ARGMAX) for _ in range(5)]
    assert all(r.verdict is Verdict.OK for r in verdicts), [(r.verdict, r.reason, r.message) for r in verdicts]


@pytest.mark.slow
def test_a_wrong_argmax_is_incorrect(backend) -> None:
    result = evaluate(backend, ARGMAX.replace("tl.argmax(vals, axis=0)", "tl.argmin(vals, axis=0)"))
    assert result.verdict is Verdict.INCORRECT and result.reason == "wrong_values", result.message


@pytest.mark.slow
def test_an_integer_output_written_in_part_is_named(backend) -> None:
    source = ARGMAX.replace("_argmax[(B, N)]", "_argmax[(B, N // 2)]")
    assert source != ARGMAX
    result = evaluate(backend, source)
    assert result.verdict is Verdict.INCORRECT and result.reason == "partial_output", result.message
