"""Calibration: how close to the datasheet the kernels and collectives of a GPU family get.

The simulator is analytical; these few numbers turn datasheet peaks into achieved rates. Priors per GPU
family live in ``presets/calibration.yaml`` (from public microbenchmarks); fitted values in
``presets/calibration_fitted.yaml``, written only by ``benchmarks/planner_validation.py
--write-calibration`` from a declared training split of measured runs. Only A100 has measured data in
``shared/``, so H100/H200 use their priors.

Example::

    >>> from warpforge.parallel.calibration import calibration_for
    >>> from warpforge.parallel.specs import load_cluster
    >>> 0 < calibration_for(load_cluster("dgx-a100")).gemm_eff <= 1
    True
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from warpforge.parallel.specs import ClusterSpec

# The parameters a fit may move, with their bounds (physically sensible ranges, so that a fit cannot
# "explain" a dataset with, say, 120% of peak).
FIT_BOUNDS: dict[str, tuple[float, float]] = {
    "gemm_eff": (0.4, 0.82),  # best cuBLAS bf16 GEMMs: ~80% of peak on A100 and H100
    "gemm_half_dim": (4.0, 512.0),
    "mem_eff": (0.3, 0.95),
    "host_us": (0.0, 200.0),
    "intra_bw_eff": (0.3, 0.95),
    "inter_bw_eff": (0.3, 0.95),
    "attn_eff": (0.25, 0.9),
    "fp8_gemm_eff": (0.3, 0.9),
    "grouped_gemm_eff": (0.5, 1.0),  # grouped GEMMs reach at least half of one GEMM's rate
    "ep_overlap": (0.0, 0.9),
    "grouped_half_tokens": (0.0, 4096.0),
    "fp8_grouped_scale": (0.3, 1.0),
    "fp8_expert_us": (0.0, 100.0),  # a few launches + host dispatch per expert and GEMM: tens of us at most
}


class Calibration(BaseModel):
    """Efficiency knobs of the simulator (all dimensionless unless a unit is in the name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gemm_eff: float = Field(default=0.80, gt=0, le=1)  # large bf16 GEMMs: ~250 of 312 TFLOP/s on A100
    gemm_half_dim: float = Field(default=48.0, gt=0)  # a GEMM dimension of this size halves efficiency
    fp8_gemm_eff: float = Field(default=0.60, gt=0, le=1)  # large FP8 GEMMs, fraction of the FP8 peak
    grouped_gemm_eff: float = Field(default=0.85, gt=0, le=1)  # MoE grouped GEMM vs one GEMM of that size
    ep_overlap: float = Field(default=0.0, ge=0, lt=1)  # share of EP all-to-all hidden behind compute
    # Tokens per local expert at which a grouped GEMM's rate halves (beyond ``gemm_half_dim``'s shape
    # factor): many small per-expert GEMMs in one launch pay per-expert tile padding, scheduling and
    # wave tails that one large GEMM does not. 0 = off (no data below ~1K tokens per expert on A100).
    grouped_half_tokens: float = Field(default=0.0, ge=0)
    # FP8 expert GEMMs relative to FP8 dense GEMMs (Transformer Engine quantises each expert's split
    # separately, pads every split for FP8 alignment and runs the grouped FP8 GEMM as per-expert cuBLAS
    # calls on Hopper); 1 = the dense FP8 rate.
    fp8_grouped_scale: float = Field(default=1.0, gt=0, le=1)
    # Microseconds per local expert and FP8 expert-GEMM pass that the GPU waits (Transformer Engine's FP8
    # grouped linear on Hopper quantises each expert's split and runs one cuBLAS GEMM per expert, issued
    # from the host after the per-expert token counts were copied back, so the host cannot run ahead).
    # A fixed cost per expert: it weighs on many small experts, not on few large ones. 0 = none.
    fp8_expert_us: float = Field(default=0.0, ge=0)
    attn_eff: float = Field(default=0.50, gt=0, le=1)  # fused (flash) attention, fwd+bwd average
    mem_eff: float = Field(default=0.75, gt=0, le=1)  # elementwise kernels reach ~75% of HBM bandwidth
    kernel_us: float = Field(default=4.0, ge=0)  # per-kernel GPU launch latency + tail
    host_us: float = Field(default=15.0, ge=0)  # host (framework) time to issue one simulated kernel
    intra_bw_eff: float = Field(default=0.75, gt=0, le=1)  # NCCL bus bandwidth / NVLink (~230 of 300 GB/s)
    inter_bw_eff: float = Field(default=0.85, gt=0, le=1)  # NCCL over InfiniBand reaches ~85% of line rate
    # torchtitan's GEMM/attention rate relative to the fit above (PyTorch's kernels, not TE's); fitted on
    # the torchtitan rows marked train (presets/torchtitan_h100_runs.yaml) by planner_validation.py.
    torchtitan_gemm_scale: float = Field(default=1.0, gt=0, le=1.5)
    # torchtitan's attention efficiency where it is set apart from ``attn_eff`` (None: the same). Its
    # attention is SDPA's, on the peak ``compute.Hw`` scales by FlashAttention-2's rate.
    torchtitan_attn_eff: float | None = Field(default=None, gt=0, le=1)
    source: str = "prior"

    def with_params(self, **params: float) -> Calibration:
        """A copy with some parameters replaced (used by the fit)."""
        return self.model_copy(update=params)


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, Any]]:
    text = resources.files("warpforge.parallel").joinpath("presets").joinpath("calibration.yaml").read_text()
    data: dict[str, dict[str, Any]] = yaml.safe_load(text) or {}
    return data


@lru_cache(maxsize=1)
def _fitted_table() -> dict[str, dict[str, Any]]:
    path = resources.files("warpforge.parallel").joinpath("presets").joinpath("calibration_fitted.yaml")
    if not path.is_file():
        return {}
    data: dict[str, dict[str, Any]] = yaml.safe_load(path.read_text()) or {}
    return data


def _entry(cluster: ClusterSpec) -> dict[str, Any]:
    table = _table()
    entry = dict(table.get(cluster.gpu_family) or table.get("default") or {})
    fitted = _fitted_table().get(cluster.gpu_family)
    if fitted:
        entry["fitted"] = fitted
    return entry


def prior_for(cluster: ClusterSpec) -> Calibration:
    """The unfitted prior for the cluster's GPU family: the starting point of a fit."""
    return Calibration(**_entry(cluster).get("prior", {}), source="prior")


def calibration_for(cluster: ClusterSpec) -> Calibration:
    """The packaged calibration for the cluster's GPU family: the fitted values where a fit was
    recorded, else the prior (``default`` when the family is unknown)."""
    entry = _entry(cluster)
    fitted = entry.get("fitted")
    if not fitted:
        return prior_for(cluster)
    return Calibration(**{**entry.get("prior", {}), **fitted})
