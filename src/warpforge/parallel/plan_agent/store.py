"""Storing what the plan agent did: its campaign row, the plans it proposed (``wf_agent_plans``) and the ranked
plans (``wf_plans`` through ``parallel.store``, LLM-proposed ones with source ``llm`` and their rationale first in
``why``). Calls and totals go through agent/transcripts.py like the kernel agent's.

Example::

    >>> read_agent_plans(db, "plans-llama3-8b")          # doctest: +SKIP
    [AgentPlanRow(call_id=1, slot=0, outcome='ranked', rank=3, ...)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from warpforge.agent.secrets import redact
from warpforge.db.rows import AgentPlanRow
from warpforge.db.session import Database
from warpforge.errors import UsageError


class CampaignExists(UsageError):
    """The campaign name is taken; the message says how to pick another."""


def create_plan_campaign(db: Database, name: str, spec: Mapping[str, Any]) -> int:
    from warpforge.db import store

    with db.session() as s:
        if store.get_campaign(s, name) is not None:
            raise CampaignExists(f"campaign {name!r} already exists in {db.safe_url}: pass another --campaign")
        return int(store.create_campaign(s, name, dict(spec)).id)


def finish_campaign(db: Database, campaign_id: int, status: str = "finished") -> None:
    from warpforge.db import store

    with db.session() as s:
        store.set_campaign_status(s, campaign_id, status)


def campaign_spec(db: Database, name: str) -> dict[str, Any] | None:
    from warpforge.db.queries import Reader

    row = Reader(database=db).campaign(name)
    return None if row is None else dict(row.spec or {})


def store_agent_plan(db: Database, campaign_id: int, rec: AgentPlanRow) -> int:
    from warpforge.db import agent_store

    with db.session() as s:  # the model's text is untrusted: redacted before it is stored
        return agent_store.add_plan(
            s, campaign_id, replace(rec, message=redact(rec.message), rationale=redact(rec.rationale))
        )


def set_ranks(db: Database, ranks: Mapping[int, int | None]) -> None:
    """Store each proposal's final rank (row id -> rank among the search's fitting plans)."""
    from warpforge.db import agent_store

    with db.session() as s:
        agent_store.set_plan_ranks(s, ranks)


def read_agent_plans(db: Database, campaign: str) -> list[AgentPlanRow]:
    """A campaign's proposed plans in the order they were proposed, with the key of the call behind each."""
    from warpforge.db.queries import Reader

    return list(Reader(database=db).agent_plans(campaign))


def store_ranked_plans(
    url: str | None,
    model: Any,
    cluster: Any,
    result: Any,
    llm: Mapping[str, str],
    extra: Sequence[Any] = (),
    campaign_id: int | None = None,
    limit: int = 100,
) -> int:
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
