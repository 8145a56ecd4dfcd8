"""H100 calibration from NVIDIA's published tables, scored only on rows it was not fitted on.

``fit(cases, start)`` fits ``H100_FIT_PARAMS`` by least squares on log(predicted / measured step time).
``held_out(cases, start, by)`` refits once per group (``by="release"``: leave-one-release-out;
``by="model"``: leave-one-model-out) on every other row and predicts the left-out rows with that fold's
fit, so no row is ever predicted by a calibration that saw it. ``category_scores`` turns predictions into
MAPE and Spearman per category (dense BF16, dense FP8, MoE). The packaged H100 calibration is the fit on
all scored rows (what a user gets); its honest error is the held-out one.

Example::

    >>> from warpforge.parallel.nemo_fit import H100_FIT_PARAMS
    >>> "fp8_gemm_eff" in H100_FIT_PARAMS
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from warpforge.parallel.calibration import Calibration
from warpforge.parallel.nemo import NemoCase
from warpforge.parallel.simulator import predict
from warpforge.parallel.validation import fit_calibration, mape, spearman

# BF16 and FP8 GEMM asymptotes, the grouped-GEMM factor of MoE experts and its fall with tokens per
# expert (``grouped_half_tokens``: per-expert tile padding, scheduling and wave tails), the fixed time per
# local expert and pass of FP8 expert GEMMs (``fp8_expert_us``: Transformer Engine on Hopper quantises and
# multiplies each expert's split separately, so FP8 MoE costs most where experts are many and small:
# NVIDIA's Qwen3-30B-A3B runs 31% slower in FP8 than in BF16 at the same layout, Qwen3-235B about 10%),
# and the InfiniBand efficiency (EP all-to-all and DP traffic across nodes). ``fp8_grouped_scale`` (one
# rate factor for all FP8 expert GEMMs, whatever their size) stays at 1: it was fitted until this term
# replaced it. Held at the H100 prior from measurements, not fitted: fused attention (``attn_eff``, the
# cuDNN kernel's published rate) and the share of the all-to-all that Megatron's 1F1B overlap hides
# (``ep_overlap``, NVIDIA's Nsight Systems profile): calibration.yaml says where each comes from.
H100_FIT_PARAMS = (
    "gemm_eff",
    "fp8_gemm_eff",
    "grouped_gemm_eff",
    "inter_bw_eff",
    "grouped_half_tokens",
    "fp8_expert_us",
)
SCORED = ("dense-bf16", "dense-fp8", "moe")


def step_time(case: NemoCase, cal: Calibration) -> float:
    return predict(case.model, case.cluster, case.plan, cal).step_time_s


def fit(
    cases: Sequence[NemoCase], start: Calibration, params: Sequence[str] = H100_FIT_PARAMS, source: str = ""
) -> Calibration:
    """Least squares on log(pred / measured) over ``cases`` only, within ``FIT_BOUNDS`` (robust soft-l1 loss:
    a few inconsistent published rows must not pull the whole fit)."""
    return fit_calibration(
        cases, start, step_time, params, source=source or f"fit: {len(cases)} rows", loss="soft_l1", f_scale=0.2
    )


def group_of(case: NemoCase, by: str) -> str:
    return case.release if by == "release" else case.model_key


@dataclass(frozen=True)
class HeldOut:
    """One row predicted by a fit that did not see its group."""

    case: NemoCase
    predicted_s: float
    fold: str

    @property
    def error(self) -> float:
        return self.predicted_s / self.case.measured_s - 1.0


def held_out(
    cases: Sequence[NemoCase], start: Calibration, by: str, fitter: Callable[..., Calibration] = fit
) -> list[HeldOut]:
    """Leave-one-group-out predictions (``by`` = "release" or "model")."""
    out: list[HeldOut] = []
    for g in sorted({group_of(c, by) for c in cases}):
        train = [c for c in cases if group_of(c, by) != g]
        test = [c for c in cases if group_of(c, by) == g]
        cal = fitter(train, start, source=f"fit without {by} {g}")
        out += [HeldOut(c, step_time(c, cal), g) for c in test]
    return out


@dataclass(frozen=True)
class Score:
    category: str
    n: int
    mape: float
    rho: float
    max_abs: float


def category_scores(preds: Sequence[tuple[NemoCase, float]]) -> list[Score]:
    """MAPE / Spearman / worst error of step time per category (dense BF16, dense FP8, MoE, all H100)."""
    out = []
    for cat in (*SCORED, "all"):
        sel = [(c, p) for c, p in preds if (c.category == cat or (cat == "all" and c.category in SCORED))]
        if not sel:
            out.append(Score(cat, 0, math.nan, math.nan, math.nan))
            continue
        p = [x for _, x in sel]
        m = [c.measured_s for c, _ in sel]
        out.append(Score(cat, len(sel), mape(p, m), spearman(p, m), max(abs(a / b - 1) for a, b in zip(p, m))))
    return out
