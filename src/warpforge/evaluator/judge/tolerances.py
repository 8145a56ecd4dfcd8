"""KernelBench's tolerance beside warpforge's, on the same candidate output (docs/tasks.md).

KernelBench's fp32 correctness check is ``torch.allclose(out, ref, atol=1e-4, rtol=1e-4)`` (1e-2 in its
versions 0 and 0.1); warpforge's is compare.compare_outputs (per-dtype atol scaled by the reference's RMS,
rtol, plus torch's own rounding). A user importing KernelBench solutions sees both verdicts side by side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from warpforge.evaluator.judge.compare import compare_outputs
from warpforge.kernels.taskdef import DEFAULT_TOLERANCES, Task

# -- KernelBench's tolerance next to warpforge's ---------------------------------------------------------------
# KernelBench's fp32 check at commit 423217d (../shared/kernelbench/README.md): torch.allclose with
# atol = rtol = 1e-4; its versions 0 and 0.1 used 1e-2.
KERNELBENCH_TOLERANCES = {"kernelbench": (1e-4, 1e-4), "kernelbench v0/v0.1": (1e-2, 1e-2)}


@dataclass(frozen=True)
class ToleranceVerdicts:
    """Both rules on the same outputs: warpforge's (evaluator/judge/compare.py) and KernelBench's allclose."""

    warpforge: bool
    warpforge_rule: str
    kernelbench: bool
    kernelbench_v0: bool
    max_abs_err: float

    def line(self) -> str:
        word = {True: "pass", False: "fail"}
        return (
            f"warpforge {word[self.warpforge]} ({self.warpforge_rule}); KernelBench atol=rtol=1e-4 "
            f"{word[self.kernelbench]}; KernelBench v0/v0.1 atol=rtol=1e-2 {word[self.kernelbench_v0]} "
            f"(max |err| {self.max_abs_err:.3g})"
        )


def tolerance_verdicts(
    out: torch.Tensor, ref64: torch.Tensor, ref: torch.Tensor, task: Task | None = None
) -> ToleranceVerdicts:
    """warpforge's verdict (compare.compare_outputs: per-dtype atol/rtol, atol scaled by the reference's RMS,
    against the float64 reference ``ref64`` plus the reference's own rounding in ``ref``'s dtype) and
    KernelBench's ``torch.allclose(out, ref)`` verdicts, on the same candidate output."""

    dtype = ref.dtype
    atol, rtol = task.tolerance(dtype) if task is not None else DEFAULT_TOLERANCES.get(dtype, (1e-3, 1e-3))
    ours = compare_outputs([out], [ref64.double()], [ref], atol, rtol)
    o, r = out.double(), ref.double()
    if o.shape != r.shape:
        return ToleranceVerdicts(ours is None, f"atol={atol:g} x RMS(ref), rtol={rtol:g}", False, False, math.inf)
    err = float((o - r).abs().max()) if o.numel() else 0.0
    kb = {name: bool(torch.allclose(o, r, atol=a, rtol=t)) for name, (a, t) in KERNELBENCH_TOLERANCES.items()}
    return ToleranceVerdicts(
        ours is None, f"atol={atol:g} x RMS(ref), rtol={rtol:g}", kb["kernelbench"], kb["kernelbench v0/v0.1"], err
    )
