"""Storing what the plan agent did: its campaign row, the plans it proposed (``wf_agent_plans``) and the ranked
plans (``wf_plans`` through ``parallel.store``, LLM-proposed ones with source ``llm`` and their rationale first in
``why``). Calls and totals go through agent/transcripts.py like the kernel agent's.

Example::

    >>> read_agent_plans(db, "plans-llama3-8b")          # doctest: +SKIP
    [AgentPlanRecord(call_id=1, slot=0, outcome='ranked', rank=3, ...)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import select

from warpforge.agent.secrets import redact
from warpforge.db.models import AgentPlan, Campaign
from warpforge.db.session import Database
from warpforge.errors import UsageError


@dataclass(frozen=True)
class AgentPlanRecord:
    """One proposed plan and what became of it."""

    task: str
    call_id: int | None
    call_key: str
    slot: int
    plan: Mapping[str, Any]  # as proposed
    plan_key: str | None
    outcome: str  # plan_parse.PLAN_OUTCOMES
    message: str
    rationale: str
    rank: int | None = None
    step_time_s: float | None = None
    tokens_per_s: float | None = None
    peak_mem_gb: float | None = None
    replayed: bool = False
    id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class CampaignExists(UsageError):
    """The campaign name is taken; the message says how to pick another."""


def create_plan_campaign(db: Database, name: str, spec: Mapping[str, Any]) -> int:
    from warpforge.db import store

    with db.session() as s:
        if store.get_campaign(s, name) is not None:
            raise CampaignExists(f"campaign {name!r} already exists in {db.safe_url}: pass another --campaign")
        return int(store.create_campaign(s, name, dict(spec)).id)


def finish_campaign(db: Database, campaign_id: int, status: str = "finished") -> None:
    with db.session() as s:
        row = s.get(Campaign, campaign_id)
        if row is not None:
            row.status = status


def campaign_spec(db: Database, name: str) -> dict[str, Any] | None:
    with db.session() as s:
        row = s.scalar(select(Campaign).where(Campaign.name == name))
        return None if row is None else dict(row.spec or {})


def store_agent_plan(db: Database, campaign_id: int, rec: AgentPlanRecord) -> int:
    with db.session() as s:
        row = AgentPlan(campaign_id=campaign_id, call_id=rec.call_id, task=rec.task, slot=rec.slot,
                        plan=dict(rec.plan), plan_key=rec.plan_key, outcome=rec.outcome,
                        message=redact(rec.message), rationale=redact(rec.rationale), rank=rec.rank,
                        step_time_s=rec.step_time_s, tokens_per_s=rec.tokens_per_s, peak_mem_gb=rec.peak_mem_gb,
                        replayed=rec.replayed)
        s.add(row)
        s.flush()
        return int(row.id)


def set_ranks(db: Database, ranks: Mapping[int, int | None]) -> None:
    """Store each proposal's final rank (row id -> rank among the search's fitting plans)."""
    with db.session() as s:
        for row_id, rank in ranks.items():
            row = s.get(AgentPlan, row_id)
            if row is not None:
                row.rank = rank


def read_agent_plans(db: Database, campaign: str) -> list[AgentPlanRecord]:
    """A campaign's proposed plans in the order they were proposed, with the key of the call behind each."""
    from warpforge.db.models import AgentCall

    with db.session() as s:
        cid = s.scalar(select(Campaign.id).where(Campaign.name == campaign))
        if cid is None:
            return []
        q = (select(AgentPlan, AgentCall.call_key).outerjoin(AgentCall, AgentCall.id == AgentPlan.call_id)
             .where(AgentPlan.campaign_id == cid).order_by(AgentPlan.id))
        return [AgentPlanRecord(r.task, r.call_id, key or "", r.slot, dict(r.plan), r.plan_key, r.outcome, r.message,
                                r.rationale, r.rank, r.step_time_s, r.tokens_per_s, r.peak_mem_gb, r.replayed, r.id)
                for r, key in s.execute(q)]


def store_ranked_plans(url: str | None, model: Any, cluster: Any, result: Any, llm: Mapping[str, str],
                       extra: Sequence[Any] = (), campaign_id: int | None = None, limit: int = 100) -> int:
    """The final search's fitting plans (best ``limit``, plus every LLM-ranked one) and the LLM's plans that do not
    fit (``extra`` predictions), into ``wf_plans``; ``llm`` maps a plan key to the line that says who proposed it
    and why. Returns the number of rows written."""
    from warpforge.parallel.store import store_predictions

    why = {r.prediction.plan.key(): r.why for r in result.plans}
    rows, seen = [], set()
    for i, p in enumerate(result.feasible_predictions):
        key = p.plan.key()
        if i >= limit and key not in llm:
            continue
        lines = why.get(key, [])
        rows.append((p, "llm", [llm[key], *lines]) if key in llm else (p, "search", lines))
        seen.add(key)
    for p in extra:
        key = p.plan.key()
        if key not in seen:
            rows.append((p, "llm", [llm.get(key, "proposed by the LLM"), "does not fit in memory"]))
            seen.add(key)
    return store_predictions(url, model, cluster, rows, campaign_id)
