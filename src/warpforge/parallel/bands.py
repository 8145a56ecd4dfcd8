"""Validated error bands: how far a prediction of this GPU family / precision / model kind has been off.

The bands are the held-out step-time MAPE per ``family/precision/kind`` (``kind`` = dense | moe) that
``benchmarks/planner_validation.py --write-calibration`` computed and stored in
``presets/error_bands.yaml``. A combination without measured rows gets ``validated=False`` and a message
that says so; it is never silently given another combination's band.

Example::

    >>> from warpforge.parallel.specs import load_cluster, load_model, PlanConfig
    >>> b = error_band(load_cluster("dgx-h200"), load_model("llama3-8b"), PlanConfig())
    >>> b.validated, b.key
    (False, 'h200/bf16/dense')
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from warpforge.parallel.specs import ClusterSpec, ModelSpec, PlanConfig


class ErrorBand(BaseModel):
    """Held-out step-time error of predictions like this one (``mape`` as a fraction)."""

    model_config = ConfigDict(frozen=True)

    key: str
    validated: bool
    mape: float | None = None
    worst: float | None = None
    n: int = 0
    source: str = ""

    def label(self) -> str:
        """Short text for tables, e.g. ``±8.0% (held-out MAPE, 36 runs)``."""
        if not self.validated or self.mape is None:
            return f"not validated ({self.key}: no measured runs)"
        return f"±{self.mape:.1%} (held-out MAPE, {self.n} runs)"


@lru_cache(maxsize=1)
def _bands() -> dict[str, dict[str, Any]]:
    path = resources.files("warpforge.parallel").joinpath("presets").joinpath("error_bands.yaml")
    if not path.is_file():
        return {}
    data: dict[str, dict[str, Any]] = yaml.safe_load(path.read_text()) or {}
    return data


def band_entries(prefix: str) -> dict[str, dict[str, Any]]:
    """Stored bands whose key starts with ``prefix`` (e.g. ``memory/``), keyed by the rest of the key."""
    return {k[len(prefix) :]: v for k, v in _bands().items() if k.startswith(prefix)}


def band_key(cluster: ClusterSpec, model: ModelSpec, plan: PlanConfig) -> str:
    return f"{cluster.gpu_family}/{plan.precision}/{'moe' if model.is_moe else 'dense'}"


def error_band(cluster: ClusterSpec, model: ModelSpec, plan: PlanConfig) -> ErrorBand:
    key = band_key(cluster, model, plan)
    entry = _bands().get(key)
    if not entry:
        return ErrorBand(
            key=key, validated=False, source="no measured runs of this GPU family / precision / model kind"
        )
    return ErrorBand(
        key=key,
        validated=True,
        mape=float(entry["mape"]),
        worst=float(entry["worst"]) if entry.get("worst") is not None else None,
        n=int(entry.get("n", 0)),
        source=str(entry.get("source", "")),
    )
