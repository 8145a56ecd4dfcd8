"""Verdicts and evaluation results (docs/design.md §3.3): the typed boundary between evaluator, search and db."""

from __future__ import annotations

import math
from enum import Enum
from typing import Any

from pydantic import BaseModel, Field


class Verdict(str, Enum):
    """The closed set of outcomes: every evaluation ends in exactly one."""

    OK = "ok"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REJECTED = "rejected"
    INVALID_CONFIG = "invalid_config"
    UNSUPPORTED = "unsupported"


class Resources(BaseModel):
    """Per-kernel resource report from ahead-of-time compilation for a target GPU."""

    kernel: str
    target: str  # e.g. "cuda:90"
    registers: int | None = None
    spill_bytes: int | None = None  # cuobjdump STACK: a non-zero frame means spilling
    shared_bytes: int | None = None
    compile_s: float | None = None
    # The compile case this report belongs to (a kernel may compile differently per shape and dtype) and the
    # warps it launches with (with registers, what bounds occupancy); absent in results stored before them.
    shape: dict[str, int] | None = None
    dtype: str | None = None
    num_warps: int | None = None


class ShapeResult(BaseModel):
    """Measurements of one benchmark shape (ms); absent where nothing was measured."""

    shape: dict[str, int]
    dtype: str
    p20_ms: float | None = None
    p50_ms: float | None = None
    p80_ms: float | None = None
    ref_p20_ms: float | None = None
    ref_p50_ms: float | None = None
    ref_p80_ms: float | None = None
    speedup: float | None = None
    roofline_pct: float | None = None
    sol_ms: float | None = None  # speed-of-light bound for this shape on this GPU
    # Raw per-call times behind the quantiles, where the backend has them: the basis of beyond-noise
    # acceptance and of bootstrap confidence intervals on the speedup.
    samples_ms: list[float] | None = None
    ref_samples_ms: list[float] | None = None
    # A training evaluation (a task with GRAD_INPUTS, a variant with launch_forward/launch_backward): each timed
    # call is forward then backward, p20/p50/p80 above are of their sum (the objective), and these are the
    # medians of each part; the reference's are torch's forward and autograd's backward, timed the same way.
    forward_p50_ms: float | None = None
    backward_p50_ms: float | None = None
    ref_forward_p50_ms: float | None = None
    ref_backward_p50_ms: float | None = None


class Timing(BaseModel):
    """Where times came from: a live GPU, or recorded real-GPU measurements, never the interpreter."""

    source: str  # "live" | "recorded"
    gpu: str  # the GPU the times were measured on
    recorded_at: str | None = None


class EvalResult(BaseModel):
    """The outcome of evaluating one (variant, params) on one backend."""

    verdict: Verdict
    reason: str = ""  # machine-readable, e.g. "input_mutated"
    message: str = ""  # human-readable, says what to do
    task: str = ""
    variant_hash: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    backend: str = ""
    device: str = ""  # where correctness ran ("cpu (triton interpreter)", "NVIDIA H200")
    fingerprint: str = ""  # hardware fingerprint of the device that produced the times
    versions: dict[str, str] = Field(default_factory=dict)
    checked: list[str] = Field(default_factory=list)  # "shape dtype seed" cases that passed
    unchecked: list[str] = Field(default_factory=list)  # cases skipped, with why
    shapes: list[ShapeResult] = Field(default_factory=list)
    timing: Timing | None = None
    speedup: float | None = None  # geometric mean over measured shapes
    objective_ms: float | None = None  # geometric mean of p50 over measured shapes; None = not measured
    compile_s: float | None = None
    resources: list[Resources] = Field(default_factory=list)
    wall_s: float | None = None
    # Which walls each child stage ran behind ("correctness check": "bwrap: ...; seccomp strict"), recorded from
    # the run, not assumed: a wall that did not install ends the evaluation as ``crashed: wall_not_installed``.
    walls: dict[str, str] = Field(default_factory=dict)

    @property
    def measured(self) -> bool:
        return self.objective_ms is not None

    def summary(self) -> str:
        head = self.verdict.value + (f": {self.reason}" if self.reason else "")
        if self.measured:
            return f"{head} ({self.objective_ms:.4g} ms, {self.speedup or float('nan'):.3g}x)"
        return head


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def aggregate(result: EvalResult) -> EvalResult:
    """Fill the geometric-mean objective and speedup from per-shape measurements."""
    times = [s.p50_ms for s in result.shapes if s.p50_ms is not None]
    if times and len(times) == len(result.shapes):
        result.objective_ms = geomean(times)  # type: ignore[arg-type]
        speedups = [s.speedup for s in result.shapes if s.speedup is not None]
        result.speedup = geomean(speedups) if len(speedups) == len(result.shapes) else None  # type: ignore[arg-type]
    return result
