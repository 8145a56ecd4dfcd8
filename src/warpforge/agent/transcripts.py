"""Every LLM call stored (``wf_agent_calls``), the agent's totals (``wf_agent_runs``), and replay from them.

The agent's side of the store: it redacts and builds :class:`CallRecord`; the SQL is db/agent_store.py's
(writes) and the read layer's (``Reader.llm_transcripts``, ``Reader.agent_run_totals``).

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
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from warpforge.agent.client import LLMResponse
from warpforge.agent.secrets import redact
from warpforge.db.rows import LLMTranscript
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
        d |= {
            "model": r.model,
            "params": dict(r.params),
            "content": r.content,
            "reasoning": r.reasoning,
            "finish_reason": r.finish_reason,
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.completion_tokens,
            "latency_s": r.latency_s,
            "cost_usd": r.cost_usd,
        }
        d["created_at"] = self.created_at.isoformat() if self.created_at else None
        return d


def store_call(db: Database, campaign: str, rec: CallRecord) -> int:
    """Store one call (text redacted); returns its id (the candidate's ``proposal_id``)."""
    from warpforge.db import agent_store

    r = rec.response
    messages = [{"role": m["role"], "content": redact(m["content"])} for m in rec.messages]
    with db.session() as s:
        return agent_store.add_call(
            s,
            campaign,
            task=rec.task,
            call_key=rec.call_key,
            parents=list(rec.parents),
            model=r.model,
            params=dict(r.params),
            messages=messages,
            prompt_cut=list(rec.prompt_cut),
            content=redact(r.content),
            reasoning=redact(r.reasoning),
            finish_reason=r.finish_reason,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
            latency_s=r.latency_s,
            cost_usd=r.cost_usd,
            outcome=rec.outcome,
            message=redact(rec.message),
            variant_hash=rec.variant_hash,
            ast_hash=rec.ast_hash,
            replayed=rec.replayed,
        )


def store_run(db: Database, campaign: str, task: str, totals: Mapping[str, Any]) -> None:
    """Upsert the agent's totals for (campaign, task): calls, tokens, cost, wall time, outcomes, stop reason."""
    from warpforge.db import agent_store

    with db.session() as s:
        agent_store.save_run(s, campaign, task, totals)


def _record(t: LLMTranscript) -> CallRecord:
    c = t.call
    response = LLMResponse(
        c.model,
        t.content,
        t.reasoning,
        c.finish_reason,
        c.prompt_tokens,
        c.completion_tokens,
        c.latency_s,
        c.cost_usd,
        dict(t.params),
    )
    return CallRecord(
        task=c.task,
        call_key=c.call_key,
        messages=t.messages,
        response=response,
        outcome=c.outcome,
        message=c.message,
        parents=c.parents,
        prompt_cut=t.prompt_cut,
        variant_hash=c.variant_hash,
        ast_hash=t.ast_hash,
        replayed=c.replayed,
        id=c.id,
        created_at=c.created_at,
        verdicts=dict(t.verdicts),
    )


def read_transcripts(db: Database, campaign: str, task: str | None = None) -> list[CallRecord]:
    """A campaign's calls in order, each with the evaluator's verdict counts for the variant it produced."""
    from warpforge.db.queries import Reader

    return [_record(t) for t in Reader(database=db).llm_transcripts(campaign, task)]


def read_runs(db: Database, campaign: str) -> list[dict[str, Any]]:
    """A campaign's agent totals per task, in the order the runs started (replay reuses the first's settings)."""
    from warpforge.db.queries import Reader

    return [
        {
            "task": r.task,
            "stop_reason": r.stop_reason,
            "calls": r.calls,
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.completion_tokens,
            "cost_usd": r.cost_usd,
            "wall_s": r.wall_s,
            "outcomes": dict(r.outcomes),
            "settings": dict(r.settings),
        }
        for r in Reader(database=db).agent_run_totals(campaign)
    ]
