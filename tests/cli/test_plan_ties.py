"""``plan search`` says when its top plans are closer than the simulator's validated error (issue 31)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from warpforge.cli.plan_render import indistinguishable
from warpforge.parallel.bands import ErrorBand


def result(times: list[float], band: ErrorBand) -> Any:
    plans = [
        SimpleNamespace(rank=i + 1, prediction=SimpleNamespace(step_time_s=t, error_band=band))
        for i, t in enumerate(times)
    ]
    return SimpleNamespace(plans=plans)


def test_plans_within_the_band_are_called_indistinguishable() -> None:
    band = ErrorBand(key="a100/bf16/dense", validated=True, mape=0.21, n=12)
    # 0.8% and 15% slower than #1: both inside ±21%; 30% slower: outside.
    line = indistinguishable(result([10.0, 10.08, 11.5, 13.0], band))
    assert line is not None and line.startswith("#1, #2, #3 are indistinguishable") and "15.0%" in line
    assert "±21%" in line and "#4" not in line


def test_no_line_without_a_validated_band_or_a_close_plan() -> None:
    assert indistinguishable(result([10.0, 10.08], ErrorBand(key="h100/bf16/dense", validated=False))) is None
    assert indistinguishable(result([10.0, 20.0], ErrorBand(key="k", validated=True, mape=0.21, n=3))) is None
