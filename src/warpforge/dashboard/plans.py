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


def plans_view(reader: Any, *, model: str | None = None, cluster: str | None = None, offset: int = 0,
               limit: int = 20) -> PlansView:
    page = reader.plans(model=model, cluster=cluster, offset=offset, limit=limit)
    return PlansView(page, plan_figures(tuple(page.items)), tuple(export_for(p) for p in page.items))
