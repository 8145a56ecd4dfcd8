"""Timing statistics: faster beyond noise, and speedup intervals (synthetic samples, seeded)."""

from __future__ import annotations

import random

import pytest

from warpforge.evaluator.run.stats import is_faster, quantiles, speedup_ci


def noisy(median: float, n: int, seed: int, spread: float = 0.03) -> list[float]:
    """GPU-like samples: a few % of jitter plus an occasional slow outlier (a right tail)."""
    rng = random.Random(seed)
    out = [median * (1 + rng.gauss(0, spread)) for _ in range(n)]
    for i in range(0, n, 17):
        out[i] *= 1.5
    return out


def test_quantiles() -> None:
    assert quantiles([3.0]) == (3.0, 3.0, 3.0)
    p20, p50, p80 = quantiles([float(v) for v in range(1, 12)])
    assert p20 < p50 == 6.0 < p80
    with pytest.raises(ValueError):
        quantiles([])


def test_clear_speedup_is_faster() -> None:
    assert is_faster(noisy(0.90, 30, 1), noisy(1.00, 30, 2))


def test_same_distribution_is_not_faster() -> None:
    # Over many seeds, two draws of one distribution are called faster at about the test's level (5%).
    hits = sum(is_faster(noisy(1.0, 30, s), noisy(1.0, 30, 1000 + s)) for s in range(100))
    assert hits <= 12


def test_slower_and_tiny_samples_are_never_faster() -> None:
    assert not is_faster(noisy(1.1, 30, 3), noisy(1.0, 30, 4))
    assert not is_faster([0.5, 0.5], [1.0, 1.0])  # too few samples to tell anything


def test_paired_test_sees_through_shared_drift() -> None:
    # Interleaved A/B rounds with a slow drift shared by both (clocks, temperature): B is 2% slower in
    # every round. Pairing cancels the drift; the unpaired test drowns in it.
    rng = random.Random(5)
    drift = [1.0 + 0.3 * i / 40 for i in range(40)]
    a = [d * (1 + rng.gauss(0, 0.002)) for d in drift]
    b = [d * 1.02 * (1 + rng.gauss(0, 0.002)) for d in drift]
    assert is_faster(a, b, paired=True)
    assert not is_faster(a, b)
    with pytest.raises(ValueError):
        is_faster(a, b[:-1], paired=True)


def test_speedup_ci_brackets_the_ratio_of_medians() -> None:
    cand, ref = noisy(0.5, 40, 6), noisy(1.0, 40, 7)
    point, lo, hi = speedup_ci(cand, ref)
    assert lo < point < hi and 1.85 < point < 2.15
    assert speedup_ci(cand, ref) == (point, lo, hi)  # deterministic for a seed
    narrow = speedup_ci(cand, ref, confidence=0.5)
    assert lo <= narrow[1] <= narrow[2] <= hi
    with pytest.raises(ValueError):
        speedup_ci([], ref)
