"""torchtitan's published H100 runs (``presets/torchtitan_h100_runs.yaml``) as planner cases.

Each row becomes (model, cluster, plan) as a user would type it: FSDP degree -> ``dp`` with ``zero=3``,
``framework="torchtitan"``, ``compiled``, Float8 -> ``precision="fp8"``, AsyncTP -> ``overlap_tp_comm``,
"Interleaved 1F1B" -> two chunks per rank (torchtitan's default of two stages per rank for its looped
schedules). The global batch is the local batch times the FSDP degree; without PP one forward takes the
whole local batch (``micro_batch = local_batch``).

``fit_reserved_ratio`` fits the one memory constant (the caching allocator's reserved / live ratio) on the
rows marked ``train``; ``score`` predicts every row.

Example::

    >>> runs = load_runs()
    >>> len(runs), sum(r.train for r in runs)
    (18, 3)
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from warpforge.parallel.calibration import Calibration, calibration_for
from warpforge.parallel.memory_fsdp import RESERVED_RATIO
from warpforge.parallel.simulator import predict
from warpforge.parallel.specs import ClusterSpec, ModelSpec, PlanConfig, load_model

SOURCE = (
    "torchtitan, benchmarks/llama3_h100_202412_torchtitan.md (github.com/pytorch/torchtitan, "
    "commit 31a17bf; H100 96GB HBM2e at 500 W)"
)


@dataclass(frozen=True)
class Run:
    id: str
    table: int
    model: ModelSpec
    cluster: ClusterSpec
    plan: PlanConfig
    tps_per_gpu: float
    memory_gib: float
    train: bool


@dataclass(frozen=True)
class Scored:
    run: Run
    tps_per_gpu: float  # predicted
    memory_gib: float  # predicted (reserved)
    fits: bool
    verdict: str  # yes / no / uncertain within the validated memory band


@lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    text = resources.files("warpforge.parallel").joinpath("presets").joinpath("torchtitan_h100_runs.yaml")
    data: dict[str, Any] = yaml.safe_load(text.read_text())
    return data


def load_runs() -> list[Run]:
    raw = _raw()
    out = []
    for r in raw["runs"]:
        cluster = ClusterSpec(**raw["cluster"], nodes=max(1, r["gpus"] // raw["cluster"]["gpus_per_node"]))
        plan = PlanConfig(
            tp=r["tp"],
            pp=r["pp"],
            dp=r["dp"],
            cp=r["cp"],
            micro_batch=r["micro_batch"],
            global_batch=r["local_batch"] * r["dp"],
            recompute=r["recompute"],
            zero=3,
            interleave=2 if r["schedule"] == "interleaved" else 1,
            precision="fp8" if r["fp8"] else "bf16",
            overlap_tp_comm=bool(r["async_tp"]),
            framework="torchtitan",
            compiled=bool(r["compiled"]),
        )
        out.append(
            Run(
                r["id"],
                int(r["table"]),
                load_model(r["model"], seq=r["seq"]),
                cluster,
                plan,
                float(r["tps_per_gpu"]),
                float(r["memory_gib"]),
                r["split"] == "train",
            )
        )
    return out


def score(run: Run, calib: Calibration | None = None) -> Scored:
    pred = predict(run.model, run.cluster, run.plan, calib)
    return Scored(
        run,
        pred.tokens_per_s / run.plan.gpus,
        pred.peak_mem_gb,
        pred.fits,
        pred.fit.verdict if pred.fit else ("yes" if pred.fits else "no"),
    )


def fit_gemm_scale(runs: list[Run], lo: float = 0.3, hi: float = 1.5) -> float:
    """``torchtitan_gemm_scale`` at which the median predicted / measured throughput of the ``train``
    rows is 1 (bisection: throughput rises with the scale). Starts from the packaged H100 calibration."""
    train = [r for r in runs if r.train]
    base = calibration_for(train[0].cluster)

    def median_ratio(x: float) -> float:
        cal = base.with_params(torchtitan_gemm_scale=x)
        return statistics.median(score(r, cal).tps_per_gpu / r.tps_per_gpu for r in train)

    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if median_ratio(mid) < 1.0 else (lo, mid)
    return round(0.5 * (lo + hi), 4)


def fit_reserved_ratio(runs: list[Run]) -> float:
    """Median of measured reserved / predicted live memory over the ``train`` rows (ratio-free live
    memory: the packaged prediction divided by the packaged ratio, exact since the reserve is a factor)."""
    ratios = [r.memory_gib / (score(r).memory_gib / RESERVED_RATIO) for r in runs if r.train]
    return statistics.median(ratios)
