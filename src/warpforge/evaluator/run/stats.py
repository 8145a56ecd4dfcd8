"""Timing statistics, computed on the trusted side from raw samples (never by the child).

- :func:`quantiles`: p20/p50/p80 of a sample list;
- :func:`is_faster`: is a candidate faster than the incumbent beyond noise? A one-sided Mann-Whitney U
  test on the two sample lists (rank-based: robust to the long right tail of GPU timings), or, for
  interleaved A/B samples taken in the same rounds (``paired=True``), a one-sided Wilcoxon signed-rank
  test on the per-round log ratios, which cancels drift shared by both (clock boosts, thermal state);
- :func:`speedup_ci`: the ratio of medians reference/candidate with a percentile-bootstrap interval.

Example::

    >>> from warpforge.evaluator.run.stats import is_faster, speedup_ci
    >>> is_faster([1.0, 1.01, 0.99] * 10, [1.2, 1.21, 1.19] * 10)
    True
    >>> point, lo, hi = speedup_ci([1.0] * 20, [2.0] * 20)
    >>> round(point, 3), round(lo, 3), round(hi, 3)
    (2.0, 2.0, 2.0)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

# Fewer samples than this and no test can tell a 5% difference from GPU timing noise (a few % run to run).
MIN_SAMPLES = 5


def _clean(samples: Sequence[float]) -> list[float]:
    return [float(s) for s in samples if s is not None and math.isfinite(float(s)) and float(s) > 0]


def quantiles(samples: Sequence[float]) -> tuple[float, float, float]:
    """(p20, p50, p80) with linear interpolation; one sample gives that sample three times."""
    vals = sorted(_clean(samples))
    if not vals:
        raise ValueError("no finite positive samples")
    if len(vals) == 1:
        return vals[0], vals[0], vals[0]
    q = statistics.quantiles(vals, n=10, method="inclusive")
    return q[1], statistics.median(vals), q[7]


def is_faster(
    candidate_samples: Sequence[float], incumbent_samples: Sequence[float], alpha: float = 0.05, paired: bool = False
) -> bool:
    """True when the candidate's times are lower than the incumbent's beyond noise, at level ``alpha``.

    Requires at least MIN_SAMPLES samples on each side and a lower median; ``paired`` needs equal lengths
    (sample i of each taken in the same round).
    """
    cand, inc = _clean(candidate_samples), _clean(incumbent_samples)
    if len(cand) < MIN_SAMPLES or len(inc) < MIN_SAMPLES:
        return False
    if statistics.median(cand) >= statistics.median(inc):
        return False
    if paired:
        if len(cand) != len(inc):
            raise ValueError(f"paired samples need equal lengths, got {len(cand)} and {len(inc)}")
        diffs = np.log(np.asarray(cand)) - np.log(np.asarray(inc))
        if not np.any(diffs):
            return False
        p = sps.wilcoxon(diffs, alternative="less", zero_method="zsplit").pvalue
    else:
        p = sps.mannwhitneyu(cand, inc, alternative="less").pvalue
    return bool(p < alpha)


def speedup_ci(
    candidate_samples: Sequence[float],
    reference_samples: Sequence[float],
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(median(reference) / median(candidate), lower, upper): a percentile bootstrap over both lists.

    Each resample draws both lists with replacement, independently; the interval is deterministic for a
    given ``seed`` so that a stored result can be reproduced.
    """
    cand, ref = np.asarray(_clean(candidate_samples)), np.asarray(_clean(reference_samples))
    if cand.size == 0 or ref.size == 0:
        raise ValueError("speedup_ci needs samples on both sides")
    point = float(np.median(ref) / np.median(cand))
    rng = np.random.default_rng(seed)
    c = np.median(rng.choice(cand, size=(resamples, cand.size), replace=True), axis=1)
    r = np.median(rng.choice(ref, size=(resamples, ref.size), replace=True), axis=1)
    ratios = r / c
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [tail, 1.0 - tail])
    return point, float(min(lo, point)), float(max(hi, point))
