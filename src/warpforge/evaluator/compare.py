"""Output comparison on the trusted side: full tensors, dtype- and magnitude-aware tolerances.

The allowed error of each element is ``atol * scale + rtol * |ref64| + |ref_lowp - ref64|``: the
task's tolerance for the dtype, scaled by the reference's RMS magnitude (a 4096-deep fp16 matmul has
outputs near 64, a 32k-wide softmax near 3e-5), plus the error the reference itself makes when it
runs in the task's dtype, measured against float64. A candidate may be as inexact as PyTorch is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Mismatch:
    reason: str  # incorrect reasons: shape_mismatch, dtype_mismatch, non_finite_output, wrong_values
    message: str


def upcast(inputs: Sequence[object]) -> tuple[object, ...]:
    """Float tensors to float64, others unchanged: the inputs of the float64 reference."""
    return tuple(x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)


def as_tuple(value: object) -> tuple[torch.Tensor, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)  # type: ignore[return-value]


def compare_outputs(
    outs: Sequence[torch.Tensor], ref64: Sequence[torch.Tensor], ref_lowp: Sequence[torch.Tensor],
    atol: float, rtol: float,
) -> Mismatch | None:
    """None when every output matches; else the first mismatch with a readable message."""
    if len(outs) != len(ref64):
        return Mismatch("wrong_output_count", f"returned {len(outs)} outputs, the reference returns {len(ref64)}")
    for i, (out, r64, rlp) in enumerate(zip(outs, ref64, ref_lowp)):
        if tuple(out.shape) != tuple(r64.shape):
            return Mismatch("shape_mismatch", f"output {i} has shape {tuple(out.shape)}, expected {tuple(r64.shape)}")
        if out.dtype != rlp.dtype:
            return Mismatch("dtype_mismatch", f"output {i} is {out.dtype}, expected {rlp.dtype}")
        if not out.is_floating_point():
            if not torch.equal(out, rlp):
                return Mismatch("wrong_values", f"output {i}: integer values differ from the reference")
            continue
        o = out.double()
        r = r64.double()
        finite_ref = torch.isfinite(r)
        bad_finite = finite_ref & ~torch.isfinite(o)
        if bool(bad_finite.any()):
            n = int(bad_finite.sum())
            return Mismatch("non_finite_output", f"output {i}: {n} NaN/Inf values where the reference is finite "
                            "(unwritten output is NaN-filled)")
        if not bool(torch.equal(torch.isnan(o[~finite_ref]), torch.isnan(r[~finite_ref]))):
            return Mismatch("wrong_values", f"output {i}: non-finite values differ from the reference")
        rf, of = r[finite_ref], o[finite_ref]
        if rf.numel() == 0:
            continue
        scale = max(float(rf.pow(2).mean().sqrt()), 1e-12)
        allowed = atol * scale + rtol * rf.abs() + (rlp.double()[finite_ref] - rf).abs()
        err = (of - rf).abs()
        excess = err > allowed
        if bool(excess.any()):
            n = int(excess.sum())
            worst = int(torch.argmax(err - allowed))
            return Mismatch(
                "wrong_values",
                f"output {i}: {n}/{rf.numel()} elements out of tolerance; worst got {float(of[worst]):.6g}, "
                f"expected {float(rf[worst]):.6g} (allowed error {float(allowed[worst]):.3g})",
            )
    return None
