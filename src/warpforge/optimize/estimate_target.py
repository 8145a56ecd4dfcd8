"""optimize's trace for ``warpforge estimate``: a target's forward walked on meta tensors, and a step priced by
the cost model.

:func:`walk_forward` runs optimize's own trace (optimize/trace.py: every aten op with its module, FLOPs and
bytes, and the functional call it runs in) on tensors of the real sizes on the ``meta`` device: no weights or
inputs are allocated, so a KernelBench problem whose inputs are 8 GB is walked in seconds. Anything a meta
tensor cannot tell (a data-dependent ``item()``) is a :class:`WalkError` saying so. :func:`estimate_target`
is ``warpforge estimate``'s answer for a TARGET; :func:`priced_trace` is optimize's step priced op by op by the
cost model where its ``--gpu`` has a preset (estimate/step.py).

Example::

    >>> e = estimate_target("level1/1_Square_matrix_multiplication_.py", gpu="H100")   # doctest: +SKIP
    >>> e.eager_us                                                                     # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from warpforge.errors import UsageError
from warpforge.estimate.gpus import gpu_preset
from warpforge.estimate.kernels import kernels_of
from warpforge.estimate.ops import METADATA, ShapeRecorder, WalkedOp, with_shapes
from warpforge.estimate.predict import Estimate, estimate_kernels
from warpforge.estimate.step import EstimatedPeaks
from warpforge.evaluator.gpus import GpuPeaks
from warpforge.optimize.target import Target, load_target
from warpforge.optimize.trace import StepTrace, trace_step

# trace_step prices each op on a roofline as it records it; the estimate prices them itself afterwards
_UNPRICED = GpuPeaks("unpriced", 1.0, 1.0, 1.0)


class WalkError(UsageError):
    """The target's forward cannot run on meta tensors; the message says why."""


def walk_forward(target: Target, seed: int = 0) -> list[WalkedOp]:
    """The target's eager forward, op by op, on meta tensors of its real sizes."""
    try:
        with torch.device("meta"), torch.no_grad():
            model, inputs = target.build(seed)
            with ShapeRecorder() as shapes:
                trace = trace_step(model, inputs, None, _UNPRICED)
    except NotImplementedError as e:  # an op with no meta kernel, or one that reads values
        raise WalkError(
            f"{target.spec}: its forward cannot run on meta tensors ({str(e).splitlines()[0][:160]})"
        ) from None
    except RuntimeError as e:
        raise WalkError(f"{target.spec}: its forward failed on meta tensors ({str(e).splitlines()[0][:160]})") from None
    ops = [WalkedOp(o.op, o.flops, o.bytes, o.dtype, o.module, o.call) for o in trace.ops if not o.backward]
    return [o for o in with_shapes(ops, shapes.seen) if o.op not in METADATA]


def estimate_target(
    target: str,
    gpu: str = "H100",
    tf32_matmul: bool = False,
    dtype: torch.dtype | None = None,
    batch: int = 2,
    seq: int = 64,
) -> Estimate:
    """TARGET's predicted forward time on ``gpu`` (estimate/predict.py). ``dtype`` None: FP32 for a KernelBench
    file or a function (KernelBench's problems are FP32), BF16 for a transformers config."""
    preset = gpu_preset(gpu)
    start = time.perf_counter()
    loaded = load_target(target, batch, seq, dtype or torch.float32)
    if dtype is None and loaded.kind == "transformers":  # a language model's forward as it is trained
        loaded = load_target(target, batch, seq, torch.bfloat16)
    kernels = kernels_of(walk_forward(loaded))
    return estimate_kernels(loaded.spec, kernels, preset, tf32_matmul, walk_s=time.perf_counter() - start)


def priced_trace(
    model: torch.nn.Module, inputs: tuple[Any, ...], loss_fn: Callable[[Any], torch.Tensor] | None, peaks: GpuPeaks
) -> StepTrace:
    """optimize's trace of one step, each op priced by the cost model where ``peaks`` is a preset's."""
    if not isinstance(peaks, EstimatedPeaks):
        return trace_step(model, inputs, loss_fn, peaks)
    with ShapeRecorder() as shapes:
        trace = trace_step(model, inputs, loss_fn, peaks)
    walked = with_shapes([WalkedOp(o.op, o.flops, o.bytes, o.dtype, o.module, o.call) for o in trace.ops], shapes.seen)
    # one kernel per op here (an attention call's ops priced as they were recorded, not regrouped)
    trace.ops = [replace(o, seconds=peaks.kernel_seconds(kernels_of([w])[0])) for o, w in zip(trace.ops, walked)]
    return trace
