"""Will it fit? ``yes``, ``no`` or ``uncertain``, with the memory error band validation measured.

A predicted peak ``p`` against HBM capacity ``c`` is only as good as the memory model's held-out error for
that framework: with a band of ``e`` (held-out memory MAPE, ``presets/error_bands.yaml`` keys
``memory/<framework>``, written by ``benchmarks/planner_validation.py --write-calibration``), the real peak
lies in about ``p * (1 +- e)``. The verdict is ``yes`` when even ``p * (1 + e) <= c``, ``no`` when even
``p * (1 - e) > c``, and ``uncertain`` in between. A framework without measured memory gets the widest
band measured for any framework and says so.

Example::

    >>> v = verdict(peak_gib=70.0, hbm_gib=80.0, framework="torchtitan")
    >>> v.verdict in ("yes", "uncertain"), v.band > 0
    (True, True)
    >>> verdict(peak_gib=79.0, hbm_gib=80.0, framework="torchtitan").verdict
    'uncertain'
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from warpforge.parallel.bands import band_entries

FALLBACK_BAND = 0.15  # used only when error_bands.yaml holds no memory entry at all (a fresh checkout)


class FitVerdict(BaseModel):
    """The memory verdict of one prediction."""

    model_config = ConfigDict(frozen=True)

    verdict: Literal["yes", "no", "uncertain"]
    band: float  # fraction, e.g. 0.10 = +-10%
    low_gib: float
    high_gib: float
    source: str

    def label(self) -> str:
        return (
            f"{self.verdict} (peak {self.low_gib:.1f}-{self.high_gib:.1f} GiB at the validated "
            f"±{self.band:.0%}; {self.source})"
        )


def memory_band(framework: str) -> tuple[float, str]:
    """(band, where it comes from) for ``framework``'s memory predictions."""
    entries = band_entries("memory/")
    if framework in entries:
        e = entries[framework]
        return float(e["mape"]), str(e.get("source", ""))
    if entries:
        worst = max(entries, key=lambda k: float(entries[k]["mape"]))
        return float(entries[worst]["mape"]), f"no measured memory for {framework}; widest band ({worst})"
    return FALLBACK_BAND, "no memory validation recorded; assumed ±15%"


def verdict(peak_gib: float, hbm_gib: float, framework: str) -> FitVerdict:
    band, source = memory_band(framework)
    low, high = peak_gib * (1 - band), peak_gib * (1 + band)
    v: Literal["yes", "no", "uncertain"] = "yes" if high <= hbm_gib else "no" if low > hbm_gib else "uncertain"
    return FitVerdict(verdict=v, band=band, low_gib=low, high_gib=high, source=source)
