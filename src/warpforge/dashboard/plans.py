"""The plans page's model: stored parallelism plans, their breakdown charts and exported arguments.

Exports reuse ``parallel/export.py`` (Megatron-LM arguments, torchtitan TOML) on the stored model spec and
plan; a plan the exporter cannot express shows the exporter's own message instead.

Example::

    >>> view = plans_view(Reader("sqlite:///wf.db"))       # doctest: +SKIP
    >>> view.exports[0].megatron.startswith("--tensor-model-parallel-size")   # doctest: +SKIP
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from warpforge.dashboard.charts import Figure, plan_figures


@dataclass(frozen=True)
class PlanExport:
    plan_id: int
    megatron: str
    torchtitan: str
    notes: tuple[str, ...]


@dataclass(frozen=True)
class PlansView:
    plans: Any  # Page[PlanRow]
    figures: tuple[Figure, ...]
    exports: tuple[PlanExport, ...]
    models: tuple[str, ...] = ()  # every stored model, newest first (the filter's choices)
    model: str = ""  # the model shown ("" = all)
    campaign: str = ""


def export_for(p: Any) -> PlanExport:
    from pydantic import ValidationError

    from warpforge.parallel.errors import PlannerError
    from warpforge.parallel.export import export_plan
    from warpforge.parallel.specs import ModelSpec, PlanConfig

    try:
        model = ModelSpec.model_validate(dict(p.model_spec))
        plan = PlanConfig.model_validate(dict(p.plan))
        meg, tt = export_plan(model, plan, "megatron"), export_plan(model, plan, "torchtitan")
    except (ValidationError, PlannerError, ValueError) as exc:
        msg = f"cannot export this stored plan: {str(exc).splitlines()[0]}"
        return PlanExport(p.id, msg, msg, ())
    return PlanExport(p.id, meg.text, tt.text, tuple(meg.notes) + tuple(tt.notes))


def plans_view(
    reader: Any,
    *,
    model: str | None = None,
    cluster: str | None = None,
    campaign: str | None = None,
    offset: int = 0,
    limit: int = 20,
) -> PlansView:
    """Plans fastest first. ``model`` None (not chosen) shows the newest plan's model when several are stored:
    step times of different models on one speed-sorted list compare nothing; ``""`` shows all."""
    from warpforge.db.dashboard_reads import plan_models

    models = tuple(plan_models(reader))
    if model is None:
        model = models[0] if len(models) > 1 and campaign is None else ""
    page = reader.plans(model=model or None, cluster=cluster, campaign=campaign, offset=offset, limit=limit)
    return PlansView(
        page, plan_figures(tuple(page.items)), tuple(export_for(p) for p in page.items), models, model, campaign or ""
    )
