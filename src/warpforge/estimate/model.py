"""The cost model: one kernel's time on a GPU preset, from its class, FLOPs, bytes and sizes.

    t = launch + (t_c^p + t_m^p)^(1/p)
    t_c = FLOPs / (peak[precision] * e[kind] * s(N / n0) * s(K / k0))    compute: GEMM, convolution, attention
    t_m = bytes / (bandwidth * m[kind] * s(bytes / b0) * s(rows / r0))   memory: every kernel (rows: a norm's)
    b0 = bandwidth * t0                                                  Little's law
    s(x) = x / (1 + x)                                                   small sizes fill fewer SMs

``precision`` is what torch runs by default: an FP32 matmul on FP32 cores (``allow_tf32`` is off for
matmuls; level 1's 4096^3 FP32 matmul takes 2.66 ms on an H100 SXM, 77% of its 67 TF FP32 peak, where a
TF32 or BF16 roofline says 0.14-0.28 ms), an FP32 convolution on TF32 tensor cores (cuDNN's ``allow_tf32``
is on; a grouped or depthwise one, one or few channels per group, on FP32 cores), BF16/FP16 on tensor cores.
A convolution's N and K are its implicit GEMM's: C_out / groups and C_in / groups x kernel volume.
``e``, ``m``, ``n0``, ``k0``, ``r0`` and ``p`` are fitted (benchmarks/estimate_validation.py) on one GPU's
published timings; the launch cost, ``t0`` and L2's gain only within physical ranges (estimate/fit.py), where
they end at a bound: KernelBench's problems run 0.5-50 ms on tensors of 10 MB and more, where a few
microseconds per kernel and the small-tensor regime cannot be told apart.

Example::

    >>> model = CostModel.load()                                                   # doctest: +SKIP
    >>> model.seconds(kernel, gpu_preset("H100"))                                  # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from warpforge.estimate.gpus import GpuPreset
from warpforge.estimate.kernels import COMPUTE, Kernel

FITTED = Path(__file__).resolve().parent.parent / "data" / "estimate_model.json"

# Where the data never constrained a parameter, a neutral prior (also the fit's starting point).
PRIOR: dict[str, float] = {
    "launch_us": 5.0,  # PyTorch eager's dispatch and launch per kernel; a prior (see module doc)
    "p": 2.0,
    "e_gemm": 0.8,
    "n0_gemm": 64.0,
    "k0_gemm": 64.0,
    "e_conv": 0.4,
    "e_conv3d": 0.3,
    "e_conv_transpose": 0.3,
    "e_conv_transpose3d": 0.1,
    "e_conv_grouped": 0.05,
    "n0_conv": 32.0,
    "k0_conv": 32.0,
    # power laws: a convolution's kernel volume (over 3x3) and a transposed one's stride; a pool's overlap
    "a_window": 0.01,
    "a_stride": 0.01,
    "a_pool": 0.3,
    "e_attention": 0.5,
    "m_gemm": 0.8,
    "m_conv": 0.8,
    "m_conv3d": 0.8,
    "m_conv_transpose": 0.8,
    "m_conv_transpose3d": 0.8,
    "m_conv_grouped": 0.5,
    "m_attention": 0.8,
    "m_pointwise": 0.9,
    "m_reduction": 0.85,
    "m_norm": 0.45,
    "m_pool": 0.4,
    "m_scan": 0.5,
    "m_fused": 0.85,
    "m_fused_norm": 0.5,
    "l2_gain": 1.5,  # L2's bandwidth over HBM's for a memory-bound kernel whose bytes fit in L2
    "t0_us": 1.0,  # HBM latency with the queueing to fill it: a prior (KernelBench's tensors are all far larger)
    "r0": 256.0,  # rows: a norm over fewer rows than about the SMs' count runs on part of the GPU
}


def precision(kernel: Kernel, tf32_matmul: bool = False) -> str:
    """The peak a kernel runs at (see module doc)."""
    if kernel.dtype in (torch.bfloat16, torch.float16):
        return "bf16"
    if kernel.kind == "gemm":
        return "tf32" if tf32_matmul else "fp32"
    if kernel.kind == "conv_grouped":
        return "fp32"  # cuDNN's grouped and depthwise kernels: direct convolutions on FP32 cores
    if kernel.kind.startswith("conv") or kernel.kind == "attention":
        return "tf32"  # cuDNN's allow_tf32; SDPA's FP32 kernels (level 1's 97: 130 TFLOP/s on an H100 SXM)
    return "fp32"


def _s(x: float) -> float:
    return x / (1.0 + x) if x > 0 else 1.0


@dataclass
class CostModel:
    params: dict[str, float] = field(default_factory=lambda: dict(PRIOR))
    provenance: dict[str, Any] = field(default_factory=dict)  # fitted on which GPU, which file, when
    validation: dict[str, Any] = field(default_factory=dict)  # held-out error per op class (the bands)

    @classmethod
    def load(cls, path: Path = FITTED) -> CostModel:
        return _load(str(path))

    def seconds(self, k: Kernel, gpu: GpuPreset, tf32_matmul: bool = False) -> float:
        p = self.params
        # Little's law: a kernel moving fewer bytes than bandwidth x memory latency cannot keep HBM busy
        bw = gpu.hbm_tbps * 1e12 * p[f"m_{k.kind}"] * _s(k.bytes / (gpu.hbm_tbps * 1e12 * p["t0_us"] * 1e-6))
        if k.rows:
            bw *= _s(k.rows / p["r0"])
        if k.kind not in COMPUTE and k.bytes <= gpu.l2_mb * 1e6:
            # it fits in L2, where the kernel before it left its input: read at L2's bandwidth, not HBM's
            bw *= p["l2_gain"]
        if k.kind in ("pool", "conv_grouped") and k.window > k.stride:  # overlapping windows read each input again
            bw /= (k.window / k.stride) ** p["a_pool"]
        t_m = k.bytes / bw
        t_c = 0.0
        if k.kind in COMPUTE and k.flops > 0:
            fam = "gemm" if k.kind == "gemm" else "conv" if k.kind.startswith("conv") else ""
            eff = p[f"e_{k.kind}"]
            if fam and k.gemm_mnk[1] > 0 and k.kind != "conv_grouped":
                _, n, kk = k.gemm_mnk
                eff *= _s(n / p[f"n0_{fam}"]) * _s(kk / p[f"k0_{fam}"])
            if fam == "conv" and k.kind != "conv_grouped":
                # a strided transposed convolution runs as cuDNN's data-gradient kernel, slower per FLOP the
                # larger the stride; a strided forward one is an implicit GEMM over fewer positions
                stride = k.stride if "transpose" in k.kind else 1
                eff = min(1.0, eff * (k.window / 9.0) ** p["a_window"] * stride ** -p["a_stride"])
            t_c = k.flops / (gpu.peak_tflops(precision(k, tf32_matmul)) * 1e12 * eff)
        elif k.flops > 0:
            t_c = k.flops / (gpu.fp32_tflops * 1e12)  # a pointwise op's math: never the bound at fp32
        q = p["p"]
        body = (t_c**q + t_m**q) ** (1.0 / q) if t_c > 0 else t_m
        return p["launch_us"] * 1e-6 + body

    def save(self, path: Path = FITTED) -> None:
        doc = {
            "_doc": "warpforge estimate's cost model (estimate/model.py): coefficients fitted by "
            "benchmarks/estimate_validation.py --write; provenance says on which published timings; "
            "validation holds the held-out error per op class that the bands use.",
            "provenance": self.provenance,
            "params": {k: round(v, 6) for k, v in self.params.items()},
            "validation": self.validation,
        }
        path.write_text(json.dumps(doc, indent=2) + "\n")
        _load.cache_clear()


@lru_cache(maxsize=4)
def _load(path: str) -> CostModel:
    file = Path(path)
    if not file.is_file():
        return CostModel(provenance={"fitted": False, "note": "no fitted coefficients: priors only"})
    doc = json.loads(file.read_text())
    return CostModel({**PRIOR, **doc.get("params", {})}, doc.get("provenance", {}), doc.get("validation", {}))
