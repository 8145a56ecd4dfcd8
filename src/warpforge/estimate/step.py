"""The cost model where ``warpforge optimize`` prices a step on a CPU (its step time, budget and ceiling).

:func:`step_peaks` gives optimize's pricing object for a GPU preset: a ``GpuPeaks`` whose ``sol_ms`` prices one
fused kernel (a matched task's, from its FLOPs and bytes) with the fitted cost model instead of the bare
roofline, and whose ``kernel_seconds`` prices each op of the step as its class's kernel
(optimize/estimate_target.py's ``priced_trace``). A GPU with no preset (``H200``, ``RTX 3090``) keeps the
roofline, and the basis says so.

Example::

    >>> peaks = step_peaks("H100")                                              # doctest: +SKIP
    >>> peaks.sol_ms(2 * 4096**3, 3 * 4096**2 * 4, torch.float32)                # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from warpforge.errors import UsageError
from warpforge.estimate.gpus import GpuPreset, gpu_preset
from warpforge.estimate.kernels import Kernel
from warpforge.estimate.model import CostModel
from warpforge.evaluator.gpus import GpuPeaks

# FLOPs per byte above which a fused task's kernel is priced as a GEMM (a GEMM with an epilogue); a chain of
# elementwise and reduction ops does a few FLOPs per byte (a GELU: about 2 per 8 bytes)
_GEMM_INTENSITY = 8.0


@dataclass(frozen=True)
class EstimatedPeaks(GpuPeaks):
    preset: GpuPreset | None = None
    model: CostModel | None = None

    def sol_ms(self, flops: float, bytes_moved: float, dtype: torch.dtype) -> float:
        """One fused kernel's predicted time (the name is optimize's; the number is the cost model's)."""
        assert self.preset is not None and self.model is not None
        kind = "gemm" if bytes_moved and flops / bytes_moved > _GEMM_INTENSITY else "fused"
        return self.kernel_seconds(Kernel(kind, flops, bytes_moved, dtype, "", ())) * 1e3

    def kernel_seconds(self, kernel: Kernel) -> float:
        assert self.preset is not None and self.model is not None
        return self.model.seconds(kernel, self.preset)


def step_peaks(gpu: str) -> GpuPeaks | None:
    """The cost model's pricing for ``gpu``'s preset; None where it has none (optimize keeps the roofline)."""
    try:
        preset = gpu_preset(gpu)
    except UsageError:
        return None
    return EstimatedPeaks(
        preset.name, preset.bf16_tflops, preset.fp32_tflops, preset.hbm_tbps, preset, CostModel.load()
    )


def step_basis(peaks: GpuPeaks) -> str | None:
    """What the step's numbers rest on, with the validation (None for the roofline's own basis)."""
    if not isinstance(peaks, EstimatedPeaks) or peaks.model is None:
        return None
    held = peaks.model.validation.get("summary", "no held-out validation recorded")
    return (
        f"warpforge estimate's cost model on {peaks.name} (datasheet peaks; per op class, fitted on "
        f"{peaks.model.provenance.get('gpu', 'no')} published timings; held out: {held}) per op of the eager "
        "step, against each patched region's forward as one kernel of the task's FLOPs and bytes; backward "
        "ops unchanged; an estimate, not a time"
    )
