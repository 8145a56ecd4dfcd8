"""Every LLM call stored (``wf_agent_calls``), the agent's totals (``wf_agent_runs``), and replay from them.

A call is stored with its messages, the answer's content and reasoning, model, parameters, finish reason,
tokens, latency, cost, the outcome of parsing it and the variant it produced (by source hash; the
evaluator's verdicts for that variant are in ``wf_evaluations``). Calls are keyed ``r<round>.s<slot>.a<attempt>``
per task (``LLMProposer._replay_all`` re-checks them for ``--llm-replay``). Nothing stored ever holds a key: text
passes through ``secrets.redact`` on the way in.

Example::

    >>> rows = read_transcripts(db, "my-campaign")                 # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import select

from warpforge.agent.client import LLMResponse
from warpforge.agent.secrets import redact
from warpforge.db.models import AgentCall, AgentRun, Campaign
from warpforge.db.session import Database


@dataclass(frozen=True)
class CallRecord:
    """One call as the agent stores it (and as ``warpforge agent transcripts`` shows it): the client's own
    response (a failed call's is :meth:`LLMResponse.failed`), what the agent made of it, and its lineage."""

    task: str
    call_key: str
    messages: tuple[Mapping[str, str], ...]
    response: LLMResponse
    outcome: str
    message: str = ""
    parents: tuple[str, ...] = ()
    prompt_cut: tuple[str, ...] = ()
    variant_hash: str | None = None
    ast_hash: str | None = None
    replayed: bool = False
    id: int | None = None
    created_at: datetime | None = None
    verdicts: Mapping[str, int] = field(default_factory=dict)  # evaluator verdicts of its variant (read side)

    def to_dict(self) -> dict[str, Any]:
        """Flat, as ``agent transcripts --json`` prints it (the response's fields beside the record's)."""
        d = {k: v for k, v in asdict(self).items() if k != "response"}
        r = self.response
        d |= {"model": r.model, "params": dict(r.params), "content": r.content, "reasoning": r.reasoning,
              "finish_reason": r.finish_reason, "prompt_tokens": r.prompt_tokens,
              "completion_tokens": r.completion_tokens, "latency_s": r.latency_s, "cost_usd": r.cost_usd}
        d["created_at"] = self.created_at.isoformat() if self.created_at else None
        return d


def _campaign_id(session: Any, campaign: str) -> int | None:
    return session.scalar(select(Campaign.id).where(Campaign.name == campaign))


def store_call(db: Database, campaign: str, rec: CallRecord) -> int:
    """Store one call (text redacted); returns its id (the candidate's ``proposal_id``)."""
    with db.session() as s:
        r = rec.response
        row = AgentCall(
            campaign_id=_campaign_id(s, campaign), task=rec.task, call_key=rec.call_key, parents=list(rec.parents),
            model=r.model, params=dict(r.params),
            messages=[{"role": m["role"], "content": redact(m["content"])} for m in rec.messages],
            prompt_cut=list(rec.prompt_cut), content=redact(r.content), reasoning=redact(r.reasoning),
            finish_reason=r.finish_reason, prompt_tokens=r.prompt_tokens, completion_tokens=r.completion_tokens,
            latency_s=r.latency_s, cost_usd=r.cost_usd, outcome=rec.outcome, message=redact(rec.message),
            variant_hash=rec.variant_hash, ast_hash=rec.ast_hash, replayed=rec.replayed)
        s.add(row)
        s.flush()
        return int(row.id)


def store_run(db: Database, campaign: str, task: str, totals: Mapping[str, Any]) -> None:
    """Upsert the agent's totals for (campaign, task): calls, tokens, cost, wall time, outcomes, stop reason."""
    with db.session() as s:
        cid = _campaign_id(s, campaign)
        row = s.scalar(select(AgentRun).where(AgentRun.campaign_id == cid, AgentRun.task == task))
        if row is None:
            row = AgentRun(campaign_id=cid, task=task)
            s.add(row)
        for k, v in totals.items():
            setattr(row, k, v)


def _record(row: AgentCall) -> CallRecord:
    response = LLMResponse(row.model, row.content, row.reasoning, row.finish_reason, row.prompt_tokens,
                           row.completion_tokens, row.latency_s, row.cost_usd, dict(row.params))
    return CallRecord(task=row.task, call_key=row.call_key, messages=tuple(row.messages), response=response,
                      outcome=row.outcome, message=row.message, parents=tuple(row.parents),
                      prompt_cut=tuple(row.prompt_cut), variant_hash=row.variant_hash, ast_hash=row.ast_hash,
                      replayed=row.replayed, id=row.id, created_at=row.created_at)


def read_transcripts(db: Database, campaign: str, task: str | None = None) -> list[CallRecord]:
    """A campaign's calls in order, each with the evaluator's verdict counts for the variant it produced."""
    from warpforge.db.models import Evaluation

    with db.session() as s:
        cid = _campaign_id(s, campaign)
        if cid is None:
            return []
        stmt = select(AgentCall).where(AgentCall.campaign_id == cid).order_by(AgentCall.id)
        if task is not None:
            stmt = stmt.where(AgentCall.task == task)
        rows = [_record(r) for r in s.scalars(stmt)]
        hashes = {r.variant_hash for r in rows if r.variant_hash}
        verdicts: dict[str, dict[str, int]] = {}
        if hashes:
            q = select(Evaluation.variant_hash, Evaluation.verdict).where(
                Evaluation.campaign_id == cid, Evaluation.variant_hash.in_(hashes))
            for h, v in s.execute(q):
                verdicts.setdefault(h, {})
                verdicts[h][v] = verdicts[h].get(v, 0) + 1
    return [replace(r, verdicts=verdicts.get(r.variant_hash or "", {})) for r in rows]


def read_runs(db: Database, campaign: str) -> list[dict[str, Any]]:
    with db.session() as s:
        cid = _campaign_id(s, campaign)
        rows = s.scalars(select(AgentRun).where(AgentRun.campaign_id == cid).order_by(AgentRun.id))
        return [{"task": r.task, "stop_reason": r.stop_reason, "calls": r.calls, "prompt_tokens": r.prompt_tokens,
                 "completion_tokens": r.completion_tokens, "cost_usd": r.cost_usd, "wall_s": r.wall_s,
                 "outcomes": dict(r.outcomes), "settings": dict(r.settings or {})} for r in rows]
