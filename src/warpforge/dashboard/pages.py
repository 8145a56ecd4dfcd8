"""Server-rendered pages (Jinja2, autoescaped). Each page calls the same Reader/view functions as ``/api``.

Routes: ``/`` overview (``?partial=rows`` is the live-update fragment polled while a campaign runs),
``/campaigns/{name}``, ``/campaigns/{name}/charts``, ``/leaderboard``, ``/variants/{hash}``,
``/evaluations/{id}``, ``/plans``, ``/optimize``, ``/optimize/{id}``, ``/agent``, ``/agent/calls/{id}``.

Example::

    >>> client.get("/leaderboard?shape=M%3D4096%2CN%3D4096").status_code   # doctest: +SKIP
    200
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from warpforge.dashboard import views
from warpforge.dashboard.state import get_reader, html

router = APIRouter(include_in_schema=False)
PER_PAGE = 50


@router.get("/", response_class=HTMLResponse)
def overview(
    request: Request, status: str | None = Query(None), offset: int = Query(0, ge=0), partial: str | None = None
) -> Any:
    reader = get_reader(request)
    page = reader.campaigns(status=status or None, offset=offset, limit=PER_PAGE)
    live = any(c.status == "running" for c in page.items)
    name = "_campaign_rows.html" if partial == "rows" else "overview.html"
    return html(
        request,
        name,
        {
            "page": page,
            "status": status or "",
            "live": live,
            "nav": "overview",
            "plan_searches": views.plan_summaries(reader, page.items),
        },
    )


@router.get("/campaigns/{name:path}/charts", response_class=HTMLResponse)
def charts(request: Request, name: str) -> Any:
    from warpforge.dashboard.charts import campaign_figures

    reader = get_reader(request)
    row = reader.campaign(name)
    if row is None:
        raise HTTPException(404, f"no campaign {name!r}: see the overview for stored campaigns")
    return html(
        request,
        "charts.html",
        {"c": row, "charts": campaign_figures(reader, row), "nav": "overview", "live": row.status == "running"},
    )


@router.get("/campaigns/{name:path}", response_class=HTMLResponse)
def campaign(request: Request, name: str, verdict: str | None = Query(None), offset: int = Query(0, ge=0)) -> Any:
    reader = get_reader(request)
    row = reader.campaign(name)
    if row is None:
        raise HTTPException(404, f"no campaign {name!r}: see the overview for stored campaigns")
    evals = reader.evaluations(campaign=name, verdict=verdict or None, offset=offset, limit=PER_PAGE)
    settings = request.app.state.settings
    studies: tuple[Any, ...] = ()
    if settings.optuna_base:
        from warpforge.dashboard.optuna_link import study_links

        studies = study_links(settings.db_url, name, settings.optuna_base)
    return html(
        request,
        "campaign.html",
        {
            "c": row,
            "evals": evals,
            "verdict": verdict or "",
            "studies": studies,
            "nav": "overview",
            "live": row.status == "running",
            "static": views.campaign_static(reader, row),
            "facts": views.evaluation_facts(reader, evals.items),
            "plan_search": views.plan_summaries(reader, [row]).get(row.name),
        },
    )


@router.get("/leaderboard", response_class=HTMLResponse)
def leaderboard(
    request: Request,
    shape: str | None = None,
    task: str | None = None,
    gpu: str | None = None,
    sort: str = Query("task", pattern="^(task|speedup|sol)$"),
) -> Any:
    board = views.leaderboard(get_reader(request), shape=shape or None, task=task or None, gpu=gpu or None, sort=sort)
    return html(
        request, "leaderboard.html", {"board": board, "task": task or "", "gpu": gpu or "", "nav": "leaderboard"}
    )


@router.get("/variants/{source_hash}", response_class=HTMLResponse)
def variant(request: Request, source_hash: str, offset: int = Query(0, ge=0)) -> Any:
    view = views.variant_view(get_reader(request), source_hash, offset=offset, limit=PER_PAGE)
    if view is None:
        raise HTTPException(404, f"no variant {source_hash[:70]!r}: give its full hash or its first 12+ hex digits")
    # A variant belongs to the campaigns that evaluated it (Overview), as evaluation pages do; it was
    # highlighted as Leaderboard, where most variants never appear.
    return html(
        request, "variant.html", {"v": view, "highlighted": views.highlight(view.variant.source), "nav": "overview"}
    )


@router.get("/evaluations/{id}", response_class=HTMLResponse)
def evaluation(request: Request, id: int) -> Any:
    detail = get_reader(request).evaluation(id)
    if detail is None:
        raise HTTPException(404, f"no evaluation {id}")
    return html(request, "evaluation.html", {"e": detail, "nav": "overview"})


@router.get("/plans", response_class=HTMLResponse)
def plans(request: Request, offset: int = Query(0, ge=0), model: str | None = None, campaign: str | None = None) -> Any:
    from warpforge.dashboard.plans import plans_view

    view = plans_view(get_reader(request), model=model, campaign=campaign or None, offset=offset, limit=20)
    exports = {e.plan_id: e for e in view.exports}
    return html(request, "plans.html", {"view": view, "exports": exports, "nav": "plans"})


@router.get("/optimize", response_class=HTMLResponse)
def optimize_runs(request: Request, offset: int = Query(0, ge=0)) -> Any:
    runs = get_reader(request).optimize_runs(offset=offset, limit=PER_PAGE)
    return html(request, "optimize.html", {"runs": runs, "nav": "optimize"})


@router.get("/optimize/{id}", response_class=HTMLResponse)
def optimize_run(request: Request, id: int) -> Any:
    run = get_reader(request).optimize_run(id)
    if run is None:
        raise HTTPException(404, f"no optimize run {id}: see /optimize for stored runs")
    return html(request, "optimize_run.html", {"run": run, "nav": "optimize"})


@router.get("/agent", response_class=HTMLResponse)
def agent(
    request: Request,
    campaign: str | None = None,
    model: str | None = None,
    outcome: str | None = None,
    offset: int = Query(0, ge=0),
) -> Any:
    from warpforge.dashboard.agent import agent_view

    view = agent_view(
        get_reader(request),
        campaign=campaign or None,
        model=model or None,
        outcome=outcome or None,
        offset=offset,
        limit=PER_PAGE,
    )
    return html(request, "agent.html", {"view": view, "nav": "agent"})


@router.get("/agent/calls/{id}", response_class=HTMLResponse)
def llm_call(request: Request, id: int) -> Any:
    from warpforge.dashboard.redact import scrub_transcript

    t = scrub_transcript(get_reader(request).llm_call(id))
    if t is None:
        raise HTTPException(404, f"no LLM call {id}: see the Agent page for stored calls")
    return html(request, "llm_call.html", {"t": t, "nav": "agent"})
