"""Perturbed arithmetic (child/perturb.py): inexact results take either rounding of the true value, exact ones
never move. Expected values from the definition: the two fp32 neighbours that bracket the float64 value."""

from __future__ import annotations

import numpy as np

from warpforge.evaluator.sandbox.child.perturb import Perturb, moved, rounded_randomly


def test_an_inexact_result_takes_either_rounding_and_an_exact_one_never_moves() -> None:
    exact = np.full(4000, 1.0 / 3.0)  # float64: between two fp32 values
    nearest = exact.astype(np.float32)
    lo, hi = sorted(
        {float(nearest[0]), float(np.nextafter(nearest[0], np.float32(1.0 if nearest[0] < exact[0] else 0.0)))}
    )
    assert lo < exact[0] < hi
    Perturb.start(7)
    try:
        got = rounded_randomly(nearest, exact)
        again = rounded_randomly(nearest, exact)
        whole = rounded_randomly(np.float32([3.0, 0.0, -2.5, np.inf]), np.array([3.0, 0.0, -2.5, np.inf]))
    finally:
        Perturb.stop()
    assert set(np.unique(got).tolist()) == {lo, hi}  # both roundings, nothing else
    assert 0.4 < float((got == hi).mean()) < 0.6
    assert not np.array_equal(got, again)  # the draw moves on within a run
    assert whole.tolist() == [3.0, 0.0, -2.5, np.inf]
    assert rounded_randomly(nearest, exact) is nearest  # off: the interpreter's own result


def test_a_seed_replays_and_approximations_move_two_ulps_at_most() -> None:
    x = np.linspace(0.5, 4.0, 1000, dtype=np.float32)
    runs = []
    for seed in (3, 3, 4):
        Perturb.start(seed)
        try:
            runs.append(moved(x, 2))
        finally:
            Perturb.stop()
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])
    ulps = np.abs(runs[0].view(np.int32).astype(np.int64) - x.view(np.int32))
    assert ulps.max() == 2 and (ulps == 0).any()
