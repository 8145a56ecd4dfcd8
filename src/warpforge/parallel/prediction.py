"""The simulator's typed output: step time, throughput, utilisation, memory, and their breakdowns.

Example::

    >>> from warpforge.parallel import predict, load_model, load_cluster, PlanConfig
    >>> p = predict(load_model("llama3-8b"), load_cluster("dgx-h100"), PlanConfig(tp=2, dp=4))
    >>> sorted(p.summary())  # doctest: +NORMALIZE_WHITESPACE
    ['error_band', 'fits', 'fits_verdict', 'hardware', 'memory_band', 'mfu', 'peak_mem_gb', 'step_time_s',
     'tokens_per_s']
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from warpforge.parallel.bands import ErrorBand
from warpforge.parallel.fit_verdict import FitVerdict
from warpforge.parallel.specs import PlanConfig


class TimeBreakdown(BaseModel):
    """Seconds per step on the critical path. Compute, memory-bound, recompute and per-layer communication
    are summed over the micro-batches of the slowest pipeline stage; they add up to ``step_time_s``."""

    model_config = ConfigDict(frozen=True)

    compute: float = 0.0  # GEMMs and attention, forward + backward
    memory_bound: float = 0.0  # norms, activations, residuals, softmax, cross-entropy
    recompute: float = 0.0  # forward work repeated in backward
    host_overhead: float = 0.0  # GPU idle while the host issues kernels (small layers)
    tp_comm: float = 0.0
    cp_comm: float = 0.0
    ep_comm: float = 0.0
    pp_p2p: float = 0.0
    bubble: float = 0.0
    dp_comm: float = 0.0  # exposed gradient reduction / parameter gathering
    optimizer: float = 0.0

    def total(self) -> float:
        return float(sum(self.model_dump().values()))

    def fractions(self) -> dict[str, float]:
        tot = self.total() or 1.0
        return {k: v / tot for k, v in self.model_dump().items()}


class MemoryBreakdown(BaseModel):
    """GiB on one GPU of the pipeline stage with the highest peak (``stage``)."""

    model_config = ConfigDict(frozen=True)

    stage: int = 0
    weights: float = 0.0
    grads: float = 0.0
    optimizer: float = 0.0
    activations: float = 0.0
    logits: float = 0.0
    overhead: float = 0.0

    def total(self) -> float:
        d = self.model_dump()
        d.pop("stage")
        return float(sum(d.values()))


class Prediction(BaseModel):
    """What one plan is predicted to do on one cluster."""

    model_config = ConfigDict(frozen=True)

    model: str
    cluster: str
    plan: PlanConfig
    gpus: int
    global_batch: int
    num_microbatches: int
    step_time_s: float
    tokens_per_s: float
    mfu: float  # model FLOPs (no recompute) / (time x GPUs x peak)
    hfu: float  # hardware FLOPs (with recompute) / (time x GPUs x peak)
    peak_mem_gb: float  # GiB, including runtime overhead
    hbm_gb: float
    fits: bool
    bubble_fraction: float
    time: TimeBreakdown
    memory: MemoryBreakdown
    notes: list[str] = []
    error_band: ErrorBand | None = None  # held-out error of this GPU family / precision / model kind
    fit: FitVerdict | None = None  # yes / no / uncertain within the validated memory band
    # False on datasheet-only GPUs (B200, GB200: hardware.py): no measured table backs any number here.
    hardware_validated: bool = True

    def summary(self) -> dict[str, Any]:
        """The headline fields (what ``plan predict --json`` leads with)."""
        return {
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "mfu": self.mfu,
            "peak_mem_gb": self.peak_mem_gb,
            "fits": self.fits,
            "fits_verdict": self.fit.verdict if self.fit else ("yes" if self.fits else "no"),
            "memory_band": self.fit.band if self.fit else None,
            "error_band": self.error_band.model_dump() if self.error_band else None,
            "hardware": "validated" if self.hardware_validated else "unvalidated (datasheet values only)",
        }
