"""Facts the planner knows per GPU model (``presets/gpus.yaml``): TDP, form factor (SXM / PCIe / NVL), HBM
kind, datasheet peaks. A cluster file names its GPU in free text (``H100-SXM5-80GB``, ``H100 SXM 96GB
HBM2e``, ``A100 PCIe 40GB``); ``gpu_model`` finds the entry by family, then form factor (SXM when the name
says none: every preset and every published table here is SXM), then memory size (the entry whose
capacity is nearest the number in the name, else the family's first).

Example::

    >>> gpu_model("H100-SXM-96GB-HBM2e").tdp_w, gpu_model("H100-SXM-96GB-HBM2e").hbm
    (700.0, 'HBM2e')
    >>> gpu_model("A100 PCIe 40GB").tdp_w
    250.0
    >>> gpu_model("MI300X") is None
    True
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict

FAMILIES = ("gb200", "b200", "h200", "h100", "a100")  # substring order: "gb200" before "b200"


class GpuModel(BaseModel):
    """One GPU part as its datasheet gives it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    family: str
    form: Literal["SXM", "PCIe", "NVL"]
    memory_gb: float
    tdp_w: float
    hbm: str  # HBM2 | HBM2e | HBM3 | HBM3e
    hbm_tbps: float
    peak_tflops: float  # dense bf16
    fp8_tflops: float | None = None  # dense FP8
    sms: int = 132  # streaming multiprocessors (what communication kernels take from the GEMMs)


@lru_cache(maxsize=1)
def gpu_models() -> tuple[GpuModel, ...]:
    text = resources.files("warpforge.parallel").joinpath("presets").joinpath("gpus.yaml").read_text()
    raw: dict[str, dict[str, object]] = yaml.safe_load(text)
    return tuple(GpuModel(name=name, **body) for name, body in raw.items())  # type: ignore[arg-type]


def family_of(gpu: str) -> str | None:
    g = gpu.lower()
    return next((f for f in FAMILIES if f in g), None)


def form_of(gpu: str) -> Literal["SXM", "PCIe", "NVL"] | None:
    """The form factor a GPU name states, or None. "NVL72" is GB200's rack (SXM-class boards), not H100 NVL."""
    g = gpu.lower()
    if "pcie" in g:
        return "PCIe"
    if re.search(r"nvl(?!\d)", g):
        return "NVL"
    if "sxm" in g:
        return "SXM"
    return None


def gpu_model(gpu: str) -> GpuModel | None:
    """The table's entry for a GPU name, or None when its family is not in the table."""
    fam = family_of(gpu)
    if fam is None:
        return None
    form = form_of(gpu) or "SXM"
    cands = [m for m in gpu_models() if m.family == fam and m.form == form] or [
        m for m in gpu_models() if m.family == fam
    ]
    size = re.search(r"(\d+)\s*gb", gpu.lower())
    if size:
        want = float(size.group(1))
        return min(cands, key=lambda m: abs(m.memory_gb - want))
    return cands[0]
