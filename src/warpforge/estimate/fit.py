"""Fitting the cost model's coefficients on published timings (least squares on log time).

A problem is its kernels and one measured time; the fit moves the chosen parameters (in log space, efficiencies
kept at or under 1, the launch cost and HBM's fill time within physical ranges, exponents as they are) to minimise
the log error of the summed prediction (soft L1: a few outliers do not bend every class). The eager fit moves the
per-class efficiencies; the fused fit then moves only the fused regions' two memory efficiencies on
torch.compile's timings, the rest held.

Example::

    >>> params = fit_params(problems, gpu_preset("H100"), EAGER_KEYS)   # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from warpforge.estimate.gpus import GpuPreset
from warpforge.estimate.kernels import Kernel
from warpforge.estimate.model import PRIOR, CostModel

EAGER_KEYS = (
    "launch_us",
    "p",
    "e_gemm",
    "n0_gemm",
    "k0_gemm",
    "e_conv",
    "e_conv3d",
    "e_conv_transpose",
    "e_conv_transpose3d",
    "e_conv_grouped",
    "n0_conv",
    "k0_conv",
    "e_attention",
    "m_gemm",
    "m_conv_grouped",
    "m_pointwise",
    "m_reduction",
    "m_norm",
    "m_pool",
    "m_scan",
    "t0_us",
    "r0",
    "l2_gain",
    "a_window",
    "a_stride",
    "a_pool",
)
FUSED_KEYS = ("m_fused", "m_fused_norm")
# Physical ranges: PyTorch eager's per-kernel cost from Python with a synchronising timer (2-30 us); the time
# to fill HBM's pipeline (latency with queueing: 0.5-5 us, so at most 17 MB on an H100 SXM)
_RANGES = {"launch_us": (2.0, 30.0), "t0_us": (0.5, 5.0), "l2_gain": (1.0, 5.0)}
_UNBOUNDED = {"p", "n0_gemm", "k0_gemm", "n0_conv", "k0_conv", "r0"}


@dataclass(frozen=True)
class Problem:
    name: str
    kernels: tuple[Kernel, ...]
    seconds: float  # measured


def predict(model: CostModel, kernels: Sequence[Kernel], gpu: GpuPreset) -> float:
    return sum(model.seconds(k, gpu) for k in kernels)


def fit_params(
    problems: Sequence[Problem], gpu: GpuPreset, keys: Sequence[str], start: dict[str, float] | None = None
) -> dict[str, float]:
    """The parameters ``keys`` fitted on ``problems`` (the others from ``start``, default the priors)."""
    import numpy as np
    from scipy.optimize import least_squares

    base = dict(start or PRIOR)
    kinds = {k.kind for p in problems for k in p.kernels}
    # a class no problem has stays at its prior (the band says it was never validated)
    used = [k for k in keys if k in base and (k.partition("_")[2] in kinds or k[:2] not in ("e_", "m_"))]
    # exponents (a_*) as they are, in [-2, 2]; the rest in log space, an efficiency at most 1
    linear = [k.startswith("a_") for k in used]

    def values(x: np.ndarray) -> dict[str, float]:
        return {k: float(v if lin else math.exp(v)) for k, v, lin in zip(used, x, linear)}

    x0 = np.array([base[k] if lin else math.log(base[k]) for k, lin in zip(used, linear)])
    hi = np.array(
        [
            2.0 if lin else math.log(_RANGES[k][1]) if k in _RANGES else math.inf if k in _UNBOUNDED else 0.0
            for k, lin in zip(used, linear)
        ]
    )
    lo = np.array(
        [
            -2.0 if lin else math.log(_RANGES[k][0]) if k in _RANGES else 0.0 if k == "p" else -math.inf
            for k, lin in zip(used, linear)
        ]
    )
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)

    def residuals(x: np.ndarray) -> np.ndarray:
        model = CostModel({**base, **values(x)})
        return np.array([math.log(predict(model, p.kernels, gpu) / p.seconds) for p in problems])

    # soft_l1: a few problems cuDNN runs with an odd algorithm should not bend every other class's fit
    result = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.3, max_nfev=400)
    return {**base, **values(result.x)}
