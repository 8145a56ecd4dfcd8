"""Storing plans in the results database (``wf_plans``), like kernel results.

A search stores its ranked plans (every fitting plan up to ``limit``, best first) and every enqueued
plan with what became of it; ``plan predict --db`` stores the one plan it predicted. Rows carry the full
model/cluster specs and the full prediction, so a row is self-describing.

Example::

    >>> from warpforge.parallel import load_model, load_cluster, PlanConfig, predict
    >>> m, c = load_model("llama3-8b"), load_cluster("dgx-h100")
    >>> p = predict(m, c, PlanConfig(tp=2, dp=4))
    >>> store_predictions("sqlite:///:memory:", m, c, [(p, "predict", [])])  # doctest: +SKIP
    1
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from warpforge import __version__
from warpforge.parallel.prediction import Prediction
from warpforge.parallel.search import SearchResult
from warpforge.parallel.specs import ClusterSpec, ModelSpec

if TYPE_CHECKING:
    from warpforge.db.plan_store import PlanRecord

Row = tuple[Prediction, str, list[str]]  # prediction, source (search | enqueued | predict), why


def _record(
    model: ModelSpec, cluster: ClusterSpec, pred: Prediction, source: str, why: list[str], campaign_id: int | None
) -> PlanRecord:
    from warpforge.db.plan_store import PlanRecord  # SQLAlchemy behind it: only when a plan is stored

    doc = pred.model_dump(mode="json")
    doc["why"] = why
    return PlanRecord(
        campaign_id=campaign_id,
        model_name=model.name,
        cluster_name=cluster.name,
        nodes=cluster.nodes,
        model_spec=model.model_dump(mode="json"),
        cluster_spec=cluster.model_dump(mode="json"),
        plan=pred.plan.model_dump(mode="json"),
        plan_key=pred.plan.key()[:400],
        source=source,
        fits=pred.fits,
        step_time_s=pred.step_time_s,
        mfu=pred.mfu,
        peak_mem_gb=pred.peak_mem_gb,
        prediction=doc,
        warpforge_version=__version__,
    )


def store_predictions(
    url: str | None, model: ModelSpec, cluster: ClusterSpec, rows: Sequence[Row], campaign_id: int | None = None
) -> int:
    """Insert plans (migrating the database first); returns the number of rows written."""
    from warpforge.db.plan_store import write_plans

    return write_plans(url, [_record(model, cluster, p, src, why, campaign_id) for p, src, why in rows])


def store_search(
    url: str | None,
    model: ModelSpec,
    cluster: ClusterSpec,
    result: SearchResult,
    limit: int = 100,
    campaign_id: int | None = None,
) -> int:
    """Store a search: its best ``limit`` fitting plans and every enqueued plan that could be simulated."""
    why = {r.prediction.plan.key(): r.why for r in result.plans}
    enq = {e.plan.key() for e in result.enqueued if e.prediction is not None}
    rows: list[Row] = []
    seen: set[str] = set()
    for p in result.feasible_predictions[:limit]:
        key = p.plan.key()
        rows.append((p, "enqueued" if key in enq else "search", why.get(key, [])))
        seen.add(key)
    for e in result.enqueued:
        if e.prediction is not None and e.plan.key() not in seen:
            rows.append((e.prediction, "enqueued", [e.message] if e.message else []))
    return store_predictions(url, model, cluster, rows, campaign_id)
