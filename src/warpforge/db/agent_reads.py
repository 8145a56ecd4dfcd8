"""The read layer's queries over the agent's tables (``wf_agent_calls``, ``wf_agent_runs``; migration 0003).

``Reader`` (db/queries.py) exposes them as ``llm_calls``, ``llm_call``, ``llm_call_for_variant``,
``llm_usage``, ``agent_runs``, ``llm_transcripts`` (a campaign's calls in order, for transcripts and replay)
and ``agent_plans`` (the plan agent's proposals); they live here to keep that module small. They are the
only reads of the agent's tables. Each function takes an open
read-only session and returns frozen rows (db/rows.py). The text was redacted when the agent stored it
(agent/transcripts.py passes everything through ``secrets.redact``); nothing here imports the agent.

Example::

    >>> with reader._session() as s:                                   # doctest: +SKIP
    ...     page = llm_calls(s, campaign="agent-c", offset=0, limit=20)
    >>> [c.outcome for c in page.items][:2]                            # doctest: +SKIP
    ['truncated', 'duplicate']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, case, func, select
from sqlalchemy.orm import Session

from warpforge.db.models import AgentCall, AgentPlan, AgentRun, Campaign, Evaluation, VariantRecord
from warpforge.db.rows import AgentPlanRow, AgentRunRow, LLMCallRow, LLMTranscript, LLMUsage, Page, utc

_CALL_COLUMNS = (
    AgentCall.id,
    Campaign.name,
    AgentCall.task,
    AgentCall.call_key,
    AgentCall.model,
    AgentCall.outcome,
    AgentCall.message,
    AgentCall.finish_reason,
    AgentCall.prompt_tokens,
    AgentCall.completion_tokens,
    AgentCall.cost_usd,
    AgentCall.latency_s,
    AgentCall.variant_hash,
    AgentCall.parents,
    AgentCall.replayed,
    AgentCall.created_at,
)


def _call_row(r: Sequence[Any]) -> LLMCallRow:
    v = list(r)
    return LLMCallRow(
        int(v[0]),
        v[1],
        v[2],
        v[3],
        v[4],
        v[5],
        v[6] or "",
        v[7] or "",
        int(v[8] or 0),
        int(v[9] or 0),
        float(v[10] or 0.0),
        float(v[11] or 0.0),
        v[12],
        tuple(v[13] or ()),
        bool(v[14]),
        utc(v[15]),
    )


def campaign_id_of(name: str) -> Select[Any]:
    """The id of the campaign called ``name``, as a query: ``s.scalar(...)`` for the value, or
    ``.scalar_subquery()`` inside a filter (the filter then stays on ix_wf_agent_calls_campaign_id)."""
    return select(Campaign.id).where(Campaign.name == name)


def _calls_stmt(*columns: Any) -> Select[Any]:
    return select(*columns).outerjoin(Campaign, Campaign.id == AgentCall.campaign_id)


def llm_calls(
    s: Session,
    *,
    campaign: str | None = None,
    task: str | None = None,
    model: str | None = None,
    outcome: str | None = None,
    variant_hash: str | None = None,
    offset: int = 0,
    limit: int = 50,
) -> Page[LLMCallRow]:
    """A page of calls, newest first (without their text)."""
    filters: list[Any] = []
    if campaign is not None:
        filters.append(AgentCall.campaign_id == campaign_id_of(campaign).scalar_subquery())
    if task is not None:
        filters.append(AgentCall.task == task)
    if model is not None:
        filters.append(AgentCall.model == model)
    if outcome is not None:
        filters.append(AgentCall.outcome == outcome)
    if variant_hash is not None:
        filters.append(AgentCall.variant_hash == variant_hash)
    total = int(s.scalar(select(func.count(AgentCall.id)).where(*filters)) or 0)
    stmt = _calls_stmt(*_CALL_COLUMNS).where(*filters).order_by(AgentCall.id.desc()).offset(offset).limit(limit)
    return Page(tuple(_call_row(r) for r in s.execute(stmt)), total, offset, limit)


def llm_call(s: Session, id: int) -> LLMTranscript | None:
    """One call with its messages, answer and reasoning."""
    r = s.execute(
        _calls_stmt(
            *_CALL_COLUMNS,
            AgentCall.messages,
            AgentCall.content,
            AgentCall.reasoning,
            AgentCall.params,
            AgentCall.prompt_cut,
        ).where(AgentCall.id == id)
    ).first()
    if r is None:
        return None
    n = len(_CALL_COLUMNS)
    return LLMTranscript(
        _call_row(r[:n]),
        _messages(r[n]),
        r[n + 1] or "",
        r[n + 2] or "",
        dict(r[n + 3] or {}),
        tuple(str(c) for c in r[n + 4] or ()),
    )


def _messages(stored: Any) -> tuple[dict[str, str], ...]:
    return tuple(
        {"role": str(m.get("role", "")), "content": str(m.get("content", ""))}
        for m in (stored or [])
        if isinstance(m, dict)
    )


def llm_call_for_variant(s: Session, source_hash: str) -> LLMTranscript | None:
    """The call whose answer became this variant: the variant's ``proposal_id`` is that call's id (what the
    agent stores); else the newest accepted call that produced the same source (a replayed or older database)."""
    proposal = s.scalar(select(VariantRecord.proposal_id).where(VariantRecord.source_hash == source_hash))
    if proposal is not None and str(proposal).isdigit():
        match = s.scalar(
            select(AgentCall.id).where(AgentCall.id == int(proposal), AgentCall.variant_hash == source_hash)
        )
        if match is not None:
            return llm_call(s, int(match))
    newest = s.scalar(
        select(AgentCall.id)
        .where(AgentCall.variant_hash == source_hash)
        .order_by((AgentCall.outcome == "accepted").desc(), AgentCall.id.desc())
        .limit(1)
    )
    return None if newest is None else llm_call(s, int(newest))


def llm_usage(s: Session, *, campaign: str | None = None) -> tuple[LLMUsage, ...]:
    """Calls, tokens, cost and outcome mix per campaign x model (one grouped query; the calls of one campaign
    are a few hundred at most, so grouping them in SQL is bounded), ordered by campaign then model."""

    # A replayed call was answered from a stored transcript: it counts as a call, but its tokens and cost were
    # spent (and counted) by the campaign it replays, not again here.
    def spent(column: Any) -> Any:
        return func.sum(case((AgentCall.replayed.is_(True), 0), else_=column))

    stmt = (
        select(
            Campaign.name,
            AgentCall.model,
            AgentCall.outcome,
            func.count(AgentCall.id),
            spent(AgentCall.prompt_tokens),
            spent(AgentCall.completion_tokens),
            spent(AgentCall.cost_usd),
            spent(AgentCall.latency_s),
        )
        .outerjoin(Campaign, Campaign.id == AgentCall.campaign_id)
        .group_by(Campaign.name, AgentCall.model, AgentCall.outcome)
    )
    if campaign is not None:
        stmt = stmt.where(AgentCall.campaign_id == campaign_id_of(campaign).scalar_subquery())
    groups: dict[tuple[str | None, str], list[Any]] = {}
    for name, model, outcome, n, pt, ct, cost, lat in s.execute(stmt):
        g = groups.setdefault((name, model), [0, 0, 0, 0.0, 0.0, {}])
        g[0] += int(n)
        g[1] += int(pt or 0)
        g[2] += int(ct or 0)
        g[3] += float(cost or 0.0)
        g[4] += float(lat or 0.0)
        g[5][outcome] = g[5].get(outcome, 0) + int(n)
    keys = sorted(groups, key=lambda k: (k[0] is None, k[0] or "", k[1]))
    return tuple(_usage(k[0], k[1], groups[k], "campaign x model") for k in keys)


def _usage(campaign: str | None, model: str | None, g: list[Any], scope: str) -> LLMUsage:
    return LLMUsage(
        campaign, model, int(g[0]), int(g[1]), int(g[2]), float(g[3]), float(g[4]), dict(sorted(g[5].items())), scope
    )


def rollup(rows: Sequence[LLMUsage], by: str) -> tuple[LLMUsage, ...]:
    """Sum campaign x model rows per ``campaign``, per ``model``, or over ``all`` of them."""
    if by not in ("campaign", "model", "all"):
        raise ValueError(f"unknown rollup {by!r}: use campaign, model or all")
    sums: dict[str | None, list[Any]] = {}
    for u in rows:
        key = u.campaign if by == "campaign" else u.model if by == "model" else None
        g = sums.setdefault(key, [0, 0, 0, 0.0, 0.0, {}])
        g[0] += u.calls
        g[1] += u.prompt_tokens
        g[2] += u.completion_tokens
        g[3] += u.cost_usd
        g[4] += u.latency_s
        for o, n in u.outcomes.items():
            g[5][o] = g[5].get(o, 0) + n
    if by == "all" and not sums:
        sums[None] = [0, 0, 0, 0.0, 0.0, {}]
    out = []
    for key in sorted(sums, key=lambda k: (k is None, k or "")):
        g = sums[key]
        out.append(_usage(key if by == "campaign" else None, key if by == "model" else None, g, by))
    return tuple(out)


def agent_runs(s: Session, *, campaign: str | None = None, offset: int = 0, limit: int = 50) -> Page[AgentRunRow]:
    """The agent's totals per (campaign, task), most recently updated first."""
    filters = [] if campaign is None else [AgentRun.campaign_id == campaign_id_of(campaign).scalar_subquery()]
    total = int(s.scalar(select(func.count(AgentRun.id)).where(*filters)) or 0)
    stmt = (
        select(AgentRun, Campaign.name)
        .outerjoin(Campaign, Campaign.id == AgentRun.campaign_id)
        .where(*filters)
        .order_by(AgentRun.updated_at.desc(), AgentRun.id.desc())
        .offset(offset)
        .limit(limit)
    )
    items = tuple(_run_row(r, name) for r, name in s.execute(stmt))
    return Page(items, total, offset, limit)


def _run_row(r: AgentRun, name: str | None) -> AgentRunRow:
    return AgentRunRow(
        name,
        r.task,
        r.stop_reason or "",
        int(r.calls or 0),
        int(r.prompt_tokens or 0),
        int(r.completion_tokens or 0),
        float(r.cost_usd or 0.0),
        float(r.wall_s or 0.0),
        {str(k): int(v) for k, v in dict(r.outcomes or {}).items()},
        utc(r.updated_at),
        dict(r.settings or {}),
    )


def run_totals(s: Session, campaign: str) -> tuple[AgentRunRow, ...]:
    """A campaign's agent totals per task, in the order the runs started (replay reuses the first's settings)."""
    stmt = (
        select(AgentRun, Campaign.name)
        .join(Campaign, Campaign.id == AgentRun.campaign_id)
        .where(Campaign.name == campaign)
        .order_by(AgentRun.id)
    )
    return tuple(_run_row(r, name) for r, name in s.execute(stmt))


def transcripts(s: Session, campaign: str, task: str | None = None) -> tuple[LLMTranscript, ...]:
    """A campaign's calls in the order they were made, each with its whole text and the evaluator's verdict
    counts for the variant it became (what ``agent transcripts`` shows and what replay answers from)."""
    filters = [AgentCall.campaign_id == campaign_id_of(campaign).scalar_subquery()]
    if task is not None:
        filters.append(AgentCall.task == task)
    stmt = (
        _calls_stmt(
            *_CALL_COLUMNS,
            AgentCall.messages,
            AgentCall.content,
            AgentCall.reasoning,
            AgentCall.params,
            AgentCall.prompt_cut,
            AgentCall.ast_hash,
        )
        .where(*filters)
        .order_by(AgentCall.id)
    )
    n = len(_CALL_COLUMNS)
    rows = s.execute(stmt).all()
    hashes = {r[12] for r in rows if r[12]}
    verdicts: dict[str, dict[str, int]] = {}
    if hashes:
        q = select(Evaluation.variant_hash, Evaluation.verdict).where(
            Evaluation.campaign_id == campaign_id_of(campaign).scalar_subquery(), Evaluation.variant_hash.in_(hashes)
        )
        for h, v in s.execute(q):
            verdicts.setdefault(h, {})
            verdicts[h][v] = verdicts[h].get(v, 0) + 1
    return tuple(
        LLMTranscript(
            _call_row(r[:n]),
            _messages(r[n]),
            r[n + 1] or "",
            r[n + 2] or "",
            dict(r[n + 3] or {}),
            tuple(str(c) for c in r[n + 4] or ()),
            r[n + 5],
            verdicts.get(r[12] or "", {}),
        )
        for r in rows
    )


def agent_plans(s: Session, campaign: str) -> tuple[AgentPlanRow, ...]:
    """A campaign's proposed plans in the order they were proposed, with the key of the call behind each."""
    q = (
        select(AgentPlan, AgentCall.call_key)
        .outerjoin(AgentCall, AgentCall.id == AgentPlan.call_id)
        .where(AgentPlan.campaign_id == campaign_id_of(campaign).scalar_subquery())
        .order_by(AgentPlan.id)
    )
    return tuple(
        AgentPlanRow(
            r.task,
            r.call_id,
            key or "",
            r.slot,
            dict(r.plan),
            r.plan_key,
            r.outcome,
            r.message,
            r.rationale,
            r.rank,
            r.step_time_s,
            r.tokens_per_s,
            r.peak_mem_gb,
            r.replayed,
            r.id,
        )
        for r, key in s.execute(q)
    )
