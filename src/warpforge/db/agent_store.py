"""The store's writes to the agent's tables: calls (``wf_agent_calls``), totals (``wf_agent_runs``) and the plan
agent's proposals (``wf_agent_plans``). Reads are db/agent_reads.py's.

The caller passes text already redacted (agent/transcripts.py and the plan agent run everything through
``agent.secrets.redact``): this layer stores what it is given and imports nothing of the agent.

Example::

    >>> with db.session() as s:                                                   # doctest: +SKIP
    ...     call_id = add_call(s, "my-campaign", task="softmax", call_key="r1.s0.a0", model="m", ...)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from warpforge.db.agent_reads import campaign_id_of
from warpforge.db.models import AgentCall, AgentPlan, AgentRun
from warpforge.db.rows import AgentPlanRow


def add_call(s: Session, campaign: str, **columns: Any) -> int:
    """Store one call (``columns``: the ``wf_agent_calls`` columns); returns its id."""
    row = AgentCall(campaign_id=s.scalar(campaign_id_of(campaign)), **columns)
    s.add(row)
    s.flush()
    return int(row.id)


def save_run(s: Session, campaign: str, task: str, totals: Mapping[str, Any]) -> None:
    """Upsert the agent's totals for (campaign, task)."""
    cid = s.scalar(campaign_id_of(campaign))
    row = s.scalar(select(AgentRun).where(AgentRun.campaign_id == cid, AgentRun.task == task))
    if row is None:
        row = AgentRun(campaign_id=cid, task=task)
        s.add(row)
    for k, v in totals.items():
        setattr(row, k, v)


def add_plan(s: Session, campaign_id: int, rec: AgentPlanRow) -> int:
    row = AgentPlan(
        campaign_id=campaign_id,
        call_id=rec.call_id,
        task=rec.task,
        slot=rec.slot,
        plan=dict(rec.plan),
        plan_key=rec.plan_key,
        outcome=rec.outcome,
        message=rec.message,
        rationale=rec.rationale,
        rank=rec.rank,
        step_time_s=rec.step_time_s,
        tokens_per_s=rec.tokens_per_s,
        peak_mem_gb=rec.peak_mem_gb,
        replayed=rec.replayed,
    )
    s.add(row)
    s.flush()
    return int(row.id)


def set_plan_ranks(s: Session, ranks: Mapping[int, int | None]) -> None:
    """Each proposal's final rank (row id -> rank among the search's fitting plans)."""
    for row_id, rank in ranks.items():
        row = s.get(AgentPlan, row_id)
        if row is not None:
            row.rank = rank
