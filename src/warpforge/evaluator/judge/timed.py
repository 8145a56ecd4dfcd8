"""Rechecks of timed calls: the saved output of one chosen timed call, read from the dead bench child's scratch
directory, against the float64 reference of exactly that call's inputs (evaluator/run/timing.py chooses the
calls and rebuilds their inputs).

The judge reads the file itself, through the caps of sandbox/readback.py, as it does for a check run
(judge.Judge.load): a timed phase is its child, then one judging step on what the child left.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from warpforge.evaluator.judge.compare import compare_with_spread, forward_references, references
from warpforge.evaluator.judge.gradients import recheck_training
from warpforge.evaluator.sandbox.job import Job, training_check
from warpforge.evaluator.sandbox.readback import OUTPUT_CAP, NotReadable, load_saved, read_regular
from warpforge.evaluator.sandbox.supervisor import ChildOutcome
from warpforge.kernels.taskdef import Shape, shape_key


class TimedCall(Protocol):
    """What the recheck needs of a timed case (timing.TimedCase, which imports this module)."""

    shape: Shape
    dtype: torch.dtype
    grad_seed: int

    def inputs_of_call(self, job: Job, call: int) -> tuple[Any, ...]: ...


def recheck_timed_call(
    job: Job,
    case: TimedCall,
    outcome: ChildOutcome,
    call: int,
    name: str,
    ref_device: str,
    training: bool | None = None,
) -> str | None:
    """Why timed call ``call`` of ``case`` (saved as ``name``) was wrong, or None when it was right."""
    try:  # a regular file of the child's, never a link or FIFO, at most OUTPUT_CAP bytes (readback.py)
        data = read_regular(outcome.scratch / name, OUTPUT_CAP)
    except (FileNotFoundError, NotReadable):
        return f"the output of timed call {call} was not a plain tensor"
    saved = load_saved(data)
    if saved is None:
        return f"the output of timed call {call} is not a saved case of plain tensors"
    outs = saved["out"]
    inputs = case.inputs_of_call(job, call)
    if training is None:
        training = training_check(job.task, job.variant)
    if training:  # out, then the gradients for the call's upstream gradient
        problem = recheck_training(job.task, inputs, outs, case.dtype, case.grad_seed, ref_device)
        return None if problem is None else f"timed call {call} ({shape_key(case.shape)}): {problem}"
    r64, rlp = references(job.task.reference, inputs, ref_device)
    atol, rtol = job.task.tolerance(case.dtype)
    mismatch = compare_with_spread(
        outs, r64, rlp, atol, rtol, forward_references(job.task.reference, ref_device), inputs, call
    )
    return None if mismatch is None else f"timed call {call} ({shape_key(case.shape)}): {mismatch.message}"
