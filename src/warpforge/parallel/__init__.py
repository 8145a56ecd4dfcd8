"""Parallelism planner: model/cluster specs, an analytical training-step simulator, plan search, export.

Example::

    >>> from warpforge.parallel import load_model, load_cluster, PlanConfig, predict
    >>> pred = predict(load_model("llama3-70b"), load_cluster("dgx-h100", nodes=8),
    ...                PlanConfig(tp=8, pp=4, dp=2, micro_batch=1, recompute="selective"))
    >>> pred.fits
    True
"""

from __future__ import annotations

from warpforge.parallel.calibration import Calibration, calibration_for
from warpforge.parallel.errors import InvalidPlanError, NoFeasiblePlanError, PlannerError, SpecError
from warpforge.parallel.prediction import MemoryBreakdown, Prediction, TimeBreakdown
from warpforge.parallel.simulator import check_plan, predict
from warpforge.parallel.specs import (
    ClusterSpec,
    ModelSpec,
    PlanConfig,
    load_cluster,
    load_model,
    preset_names,
)

__all__ = [
    "Calibration",
    "ClusterSpec",
    "InvalidPlanError",
    "MemoryBreakdown",
    "ModelSpec",
    "NoFeasiblePlanError",
    "PlanConfig",
    "PlannerError",
    "Prediction",
    "SpecError",
    "TimeBreakdown",
    "calibration_for",
    "check_plan",
    "load_cluster",
    "load_model",
    "predict",
    "preset_names",
]
