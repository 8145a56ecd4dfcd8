"""GPU peak throughput and bandwidth (data in data/gpus.json) for speed-of-light and %-of-roofline."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

DATA = Path(__file__).resolve().parent.parent / "data" / "gpus.json"


@dataclass(frozen=True)
class GpuPeaks:
    name: str
    tensor_tflops: float
    fp32_tflops: float
    hbm_tbps: float

    def sol_ms(self, flops: float, bytes_moved: float, dtype: torch.dtype) -> float:
        """The speed-of-light time: no kernel can beat max(compute bound, memory bound)."""
        tflops = self.fp32_tflops if dtype == torch.float32 else self.tensor_tflops
        compute_s = flops / (tflops * 1e12)
        memory_s = bytes_moved / (self.hbm_tbps * 1e12)
        return max(compute_s, memory_s) * 1e3


@lru_cache(maxsize=1)
def _table() -> list[dict[str, object]]:
    return list(json.loads(DATA.read_text())["gpus"])


def known_gpus() -> list[str]:
    """The names ``peaks_for`` recognises (substrings of a device name)."""
    return [str(row["match"]) for row in _table()]


def peaks_for(device_name: str) -> GpuPeaks | None:
    """Peaks for a device name such as 'NVIDIA H200' (first table entry whose match is a substring)."""
    for row in _table():
        if str(row["match"]).lower() in device_name.lower():
            measured = row.get("measured")
            # A measured ceiling wins field by field; what was not measured falls back to the data sheet.
            src = {**row, **measured} if isinstance(measured, dict) else row
            return GpuPeaks(
                device_name,
                float(src["tensor_tflops"]),  # type: ignore[arg-type]
                float(src["fp32_tflops"]),  # type: ignore[arg-type]
                float(src["hbm_tbps"]),  # type: ignore[arg-type]
            )
    return None
