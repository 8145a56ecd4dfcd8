"""Where a cluster preset's numbers come from, and whether any measured training table backs its GPU.

Datasheet-only presets (Blackwell: ``dgx-b200``, ``gb200-nvl72``) carry a ``datasheet:`` block in
``presets/clusters.yaml``: ``validated: false``, the dense FP4 peak and one source per value. Every
prediction on such a GPU family is labelled unvalidated (``Prediction.hardware_validated`` and a note),
also when the cluster comes from a user's file naming the same GPU: the label is about the silicon, whose
achieved rates nobody here has measured, not about the preset.

Example::

    >>> from warpforge.parallel.specs import load_cluster
    >>> info = hardware_info(load_cluster("gb200"))
    >>> info.validated, info.fp4_tflops, "NVL72" in info.sources["intra_gbps"]
    (False, 10000.0, True)
    >>> hardware_info(load_cluster("dgx-h100")).validated
    True
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from warpforge.parallel.specs import ClusterSpec


class HardwareInfo(BaseModel):
    """Provenance of one cluster's numbers (empty sources: a validated preset or a user's file)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    preset: str
    family: str
    validated: bool = True
    fp4_tflops: float | None = None  # dense FP4 peak; informational (no FP4 training path is modelled)
    sources: dict[str, str] = {}

    def label(self) -> str:
        if self.validated:
            return "validated"
        return (
            f"unvalidated: {self.family} numbers are datasheet values only; no measured training table "
            "backs them (see presets/clusters.yaml for each value's source)"
        )


@lru_cache(maxsize=1)
def _datasheets() -> dict[str, HardwareInfo]:
    text = resources.files("warpforge.parallel").joinpath("presets").joinpath("clusters.yaml").read_text()
    raw: dict[str, dict[str, Any]] = yaml.safe_load(text)
    out = {}
    for name, body in raw.items():
        sheet = body.get("datasheet")
        if sheet is None:
            continue
        out[name] = HardwareInfo(
            preset=name,
            family=str(body["family"]),
            validated=bool(sheet["validated"]),
            fp4_tflops=sheet.get("fp4_tflops"),
            sources={str(k): str(v) for k, v in sheet.get("sources", {}).items()},
        )
    return out


def unvalidated_families() -> frozenset[str]:
    """GPU families whose presets are datasheet-only (``{"b200", "gb200"}`` today)."""
    return frozenset(h.family for h in _datasheets().values() if not h.validated)


def hardware_info(cluster: ClusterSpec) -> HardwareInfo:
    """The cluster's provenance: its preset's datasheet block, else by GPU family (a user's B200 file is as
    unvalidated as the preset)."""
    sheets = _datasheets()
    if cluster.name in sheets:
        return sheets[cluster.name]
    fam = cluster.gpu_family
    return HardwareInfo(preset=cluster.name, family=fam, validated=fam not in unvalidated_families())
