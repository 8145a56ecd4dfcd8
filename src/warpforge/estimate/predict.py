"""``warpforge estimate``'s answer: a target's predicted GPU forward time, eager and fused, with bands.

optimize/estimate_target.py walks the target's forward on meta tensors; :func:`estimate_kernels` takes its
kernels and fusible regions (estimate/kernels.py) and prices each on a GPU preset with the fitted cost model
(estimate/model.py). ``eager_us`` is every op its own kernel, as PyTorch eager runs it; ``fused_us`` is every
fusible region as one kernel (what torch.compile's default mode or warpforge's kernels could reach). Each
comes with a band: the held-out error of its op classes, weighted by their predicted share; a class (or a
precision) the model was never validated on is named in ``unvalidated`` and widens the band to a factor 2; a
GPU whose published timings never checked the model (its datasheet only) is named there too.

Example::

    >>> e = estimate_kernels("mm", kernels, gpu_preset("H100"))   # doctest: +SKIP
    >>> e.eager_us, e.eager_band                                 # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import replace

import torch
from pydantic import BaseModel

from warpforge.estimate.gpus import GpuPreset
from warpforge.estimate.kernels import COMPUTE, Kernel, regions_of
from warpforge.estimate.model import CostModel, precision

UNVALIDATED_ERROR = 1.0  # a class never checked against a measurement: a factor-2 band


class Band(BaseModel):
    low_us: float
    high_us: float
    error: float  # the relative held-out error it rests on (MAPE)


class RegionEstimate(BaseModel):
    module: str
    op_class: str  # gemm | conv | attention | reduction | pointwise
    ops: list[str]
    eager_us: float
    fused_us: float
    kernels: int  # eager kernels (one fused kernel after fusion)


class Estimate(BaseModel):
    target: str
    gpu: str
    gpu_basis: str
    eager_us: float
    eager_band: Band
    fused_us: float
    fused_band: Band
    regions: list[RegionEstimate]
    basis: str
    unvalidated: list[str]
    tf32_matmul: bool
    walk_s: float


def _class_key(k: Kernel, tf32: bool) -> str:
    """The validation entry a kernel's error comes from: its op class, qualified by a precision the
    published timings never ran (KernelBench's problems are all FP32). A memory-bound kernel's time is its
    bytes, whatever their type: only compute classes are qualified."""
    if k.kind not in COMPUTE:
        return k.op_class
    prec = precision(k, tf32)
    default = precision(replace(k, dtype=torch.float32))  # what KernelBench's FP32 problems ran at
    return k.op_class if prec == default else f"{k.op_class}[{prec}]"


def _band(total: float, parts: dict[str, float], errors: dict[str, float]) -> Band:
    err = sum(t * errors.get(c, UNVALIDATED_ERROR) for c, t in parts.items()) / total if total > 0 else 0.0
    return Band(
        low_us=round(total / (1 + err) * 1e6, 3), high_us=round(total * (1 + err) * 1e6, 3), error=round(err, 4)
    )


def price(
    kernels: list[Kernel], gpu: GpuPreset, model: CostModel | None = None, tf32_matmul: bool = False
) -> tuple[float, float, list[RegionEstimate], dict[str, float], dict[str, float]]:
    """(eager s, fused s, regions, eager s per validation class, fused s per class)."""
    model = model or CostModel.load()
    eager_parts: dict[str, float] = {}
    fused_parts: dict[str, float] = {}
    rows = []
    for r in regions_of(kernels):
        one = r.as_one()
        eager = 0.0
        for k in r.kernels:
            s = model.seconds(k, gpu, tf32_matmul)
            eager += s
            key = _class_key(k, tf32_matmul)
            eager_parts[key] = eager_parts.get(key, 0.0) + s
        fused = model.seconds(one, gpu, tf32_matmul)
        key = _class_key(one, tf32_matmul)
        fused_parts[key] = fused_parts.get(key, 0.0) + fused
        rows.append(
            RegionEstimate(
                module=one.module or "(root)",
                op_class=one.op_class,
                ops=list(one.ops),
                eager_us=round(eager * 1e6, 3),
                fused_us=round(fused * 1e6, 3),
                kernels=len(r.kernels),
            )
        )
    return sum(eager_parts.values()), sum(fused_parts.values()), rows, eager_parts, fused_parts


def estimate_kernels(
    target: str,
    kernels: list[Kernel],
    gpu: GpuPreset,
    tf32_matmul: bool = False,
    walk_s: float = 0.0,
    model: CostModel | None = None,
) -> Estimate:
    """The estimate of a forward already walked into kernels (see module doc)."""
    model = model or CostModel.load()
    eager, fused, rows, eager_parts, fused_parts = price(kernels, gpu, model, tf32_matmul)
    errors = {c: float(v["mape"]) for c, v in model.validation.get("classes", {}).items()}
    unvalidated = sorted(c for c in {**eager_parts, **fused_parts} if c not in errors)
    if gpu.name not in model.validation.get("gpus", []):  # its datasheet only: no published timing checked
        unvalidated.append(f"{gpu.name} (no measured timing of this GPU checked)")
    prov = model.provenance
    fitted = (
        f"fitted on {prov.get('gpu', '?')} ({prov.get('file', '?')}, {prov.get('problems', '?')} problems)"
        if prov.get("fitted")
        else "unfitted priors"
    )
    held = model.validation.get("summary", "no held-out validation recorded")
    basis = (
        f"cost model per op class on {gpu.name} datasheet peaks (estimate/model.py), {fitted}; "
        f"held out: {held}; eager = each op its own kernel, fused = each fusible region one kernel; "
        "a prediction, not a measurement"
    )
    return Estimate(
        target=target,
        gpu=gpu.name,
        gpu_basis=gpu.basis,
        eager_us=round(eager * 1e6, 3),
        eager_band=_band(eager, eager_parts, errors),
        fused_us=round(fused * 1e6, 3),
        fused_band=_band(fused, fused_parts, errors),
        regions=rows,
        basis=basis,
        unvalidated=unvalidated,
        tf32_matmul=tf32_matmul,
        walk_s=round(walk_s, 2),
    )
