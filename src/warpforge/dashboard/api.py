"""The JSON API under ``/api`` (OpenAPI schema at ``/api/openapi.json``; no Swagger UI, which would load from a CDN).

Each endpoint returns what the matching page shows, from the same Reader calls or view functions; lists
are pages (``items``, ``total``, ``offset``, ``limit``; ``limit`` at most the read layer's 1,000).

Example::

    >>> board = client.get("/api/leaderboard", params={"shape": "M=4096,N=4096"}).json()  # doctest: +SKIP
    >>> board["cells"][0]["speedup"]                                                  # doctest: +SKIP
    1.42
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import is_dataclass
from datetime import date, datetime
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.encoders import jsonable_encoder

from warpforge.dashboard import views
from warpforge.dashboard.state import get_reader

router = APIRouter(prefix="/api", tags=["api"])
Offset = Query(0, ge=0, description="first row of the page")
Limit = Query(50, ge=1, le=1000, description="rows per page (the read layer caps pages at 1,000)")


def plain(obj: Any) -> Any:
    """Frozen dataclasses (and what they hold) as JSON-ready values; ~10x faster than jsonable_encoder on a
    1,000-row page (its per-value introspection took 310 ms of a 312 ms response in dashboard_routes.py)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None  # JSON has no NaN/inf
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if is_dataclass(obj) and not isinstance(obj, type):
        return {name: plain(getattr(obj, name)) for name in obj.__dataclass_fields__}
    if isinstance(obj, Mapping):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [plain(v) for v in obj]
    if isinstance(obj, (datetime, date)):
        return obj.isoformat()
    return jsonable_encoder(obj)


def _shallow(obj: Any) -> Any:
    """json.dumps' ``default``: one level of a dataclass/mapping/date; the C encoder does the primitives."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return {name: getattr(obj, name) for name in obj.__dataclass_fields__}
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    if isinstance(obj, (datetime, date)):
        return obj.isoformat()
    return jsonable_encoder(obj)


def _json(obj: Any) -> Response:
    # Fast path: the C encoder with a shallow default (a 1,000-row page: ~15 ms instead of ~55 ms through
    # plain()); a NaN/inf anywhere makes it refuse, and the slow path then writes those as null.
    try:
        body = json.dumps(obj, default=_shallow, allow_nan=False, separators=(",", ":"))
    except ValueError:
        body = json.dumps(plain(obj), allow_nan=False, separators=(",", ":"))
    return Response(body, media_type="application/json")


@router.get("/campaigns", summary="Campaigns, newest first, with verdict counts and stored decisions")
def campaigns(
    request: Request,
    status: str | None = Query(None, description="running | finished | interrupted"),
    offset: int = Offset,
    limit: int = Limit,
) -> Any:
    return _json(get_reader(request).campaigns(status=status, offset=offset, limit=limit))


@router.get("/campaigns/{name:path}", summary="One campaign")
def campaign(request: Request, name: str) -> Any:
    row = get_reader(request).campaign(name)
    if row is None:
        raise HTTPException(404, f"no campaign {name!r}")
    return _json(row)


@router.get("/charts/{name:path}", summary="The Plotly figure specs of a campaign's charts page")
def charts(request: Request, name: str) -> Any:
    from warpforge.dashboard.charts import campaign_figures

    reader = get_reader(request)
    row = reader.campaign(name)
    if row is None:
        raise HTTPException(404, f"no campaign {name!r}")
    return _json(campaign_figures(reader, row))


@router.get("/evaluations", summary="A page of evaluations (filters combine)")
def evaluations(
    request: Request,
    campaign: str | None = None,
    task: str | None = None,
    verdict: str | None = None,
    variant_hash: str | None = None,
    sort: str = Query("-id", description="id | created_at | objective_ms | speedup | wall_s; - = desc"),
    offset: int = Offset,
    limit: int = Limit,
    cursor: str | None = Query(
        None, description="the previous page's next_cursor (deep pages stay fast; offset is then ignored)"
    ),
) -> Any:
    reader = get_reader(request)
    if variant_hash:  # the 12-digit hashes the pages show work here too (UsageError -> 400)
        from warpforge.db.dashboard_reads import resolve_variant_hash

        variant_hash = resolve_variant_hash(reader, variant_hash) or variant_hash
    page = reader.evaluations(
        campaign=campaign,
        task=task,
        verdict=verdict,
        variant_hash=variant_hash,
        sort=sort,
        offset=offset,
        limit=limit,
        cursor=cursor,
    )  # a bad sort/cursor: UsageError -> 400
    return _json(page)


@router.get("/evaluations/{id}", summary="One evaluation with per-shape times, resources and versions")
def evaluation(request: Request, id: int) -> Any:
    detail = get_reader(request).evaluation(id)
    if detail is None:
        raise HTTPException(404, f"no evaluation {id}")
    return _json(detail)


@router.get("/variants/{source_hash}", summary="A variant: source, lineage, diff vs parent, best evaluation")
def variant(request: Request, source_hash: str, offset: int = Offset, limit: int = Limit) -> Any:
    view = views.variant_view(get_reader(request), source_hash, offset=offset, limit=limit)
    if view is None:
        raise HTTPException(404, f"no variant {source_hash[:70]!r}: give its full hash or its first 12+ hex digits")
    return _json(view)


@router.get("/decisions", summary="Stored campaign decisions (accepted winner, interval, top-k), newest first")
def decisions(
    request: Request,
    campaign: str | None = None,
    task: str | None = None,
    gpu: str | None = Query(None, description="part of the GPU name, e.g. H100"),
) -> Any:
    return _json({"items": get_reader(request).decisions(campaign=campaign, task=task, gpu=gpu)})


@router.get("/leaderboard", summary="Task x GPU matrix from stored decisions (shape selectable)")
def leaderboard(
    request: Request,
    shape: str | None = Query(None, description='e.g. "M=4096,N=4096"'),
    task: str | None = None,
    gpu: str | None = None,
    sort: str = Query("task", pattern="^(task|speedup|sol)$"),
) -> Any:
    return _json(
        views.leaderboard(get_reader(request), shape=shape or None, task=task or None, gpu=gpu or None, sort=sort)
    )


@router.get("/plans", summary="Stored parallelism plans (fastest predicted first) with exported arguments")
def plans(
    request: Request,
    model: str | None = None,
    cluster: str | None = None,
    offset: int = Offset,
    limit: int = Query(20, ge=1, le=1000, description="rows per page (at most 1,000, as every list)"),
) -> Any:
    from warpforge.dashboard.plans import plans_view

    return _json(plans_view(get_reader(request), model=model or "", cluster=cluster, offset=offset, limit=limit))


@router.get("/optimize", summary="Stored warpforge optimize runs, newest first (without their reports)")
def optimize_runs(request: Request, target: str | None = None, offset: int = Offset, limit: int = Limit) -> Any:
    return _json(get_reader(request).optimize_runs(target=target or None, offset=offset, limit=limit))


@router.get(
    "/optimize/{id}",
    summary="One optimize run with its whole report (regions, coverage, checks, speedup, patches, plans)",
)
def optimize_run(request: Request, id: int) -> Any:
    run = get_reader(request).optimize_run(id)
    if run is None:
        raise HTTPException(404, f"no optimize run {id}")
    return _json(run)


@router.get(
    "/agent",
    summary="LLM calls, tokens and cost per campaign and per model, outcome mix, the agent's "
    "runs and a page of calls (without their text)",
)
def agent(
    request: Request,
    campaign: str | None = None,
    model: str | None = None,
    outcome: str | None = None,
    offset: int = Offset,
    limit: int = Limit,
) -> Any:
    from warpforge.dashboard.agent import agent_view

    return _json(
        agent_view(get_reader(request), campaign=campaign, model=model, outcome=outcome, offset=offset, limit=limit)
    )


@router.get("/agent/calls", summary="A page of stored LLM calls, newest first (filters combine)")
def llm_calls(
    request: Request,
    campaign: str | None = None,
    task: str | None = None,
    model: str | None = None,
    outcome: str | None = None,
    variant_hash: str | None = None,
    offset: int = Offset,
    limit: int = Limit,
) -> Any:
    from warpforge.dashboard.redact import scrub_calls

    return _json(
        scrub_calls(
            get_reader(request).llm_calls(
                campaign=campaign,
                task=task,
                model=model,
                outcome=outcome,
                variant_hash=variant_hash,
                offset=offset,
                limit=limit,
            )
        )
    )


@router.get("/agent/calls/{id}", summary="One LLM call: messages, answer, reasoning (stored redacted)")
def llm_call(request: Request, id: int) -> Any:
    from warpforge.dashboard.redact import scrub_transcript

    t = scrub_transcript(get_reader(request).llm_call(id))
    if t is None:
        raise HTTPException(404, f"no LLM call {id}")
    return _json(t)


@router.get("/studies/{name:path}", summary="optuna-dashboard links for a campaign's studies")
def studies(request: Request, name: str) -> Any:
    base = request.app.state.settings.optuna_base
    if not base:
        return {"items": [], "note": "optuna-dashboard is not running: start with --optuna-port PORT"}
    from warpforge.dashboard.optuna_link import study_links

    return _json({"items": study_links(request.app.state.settings.db_url, name, base), "note": ""})
