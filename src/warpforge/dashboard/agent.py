"""The Agent page's view: LLM calls, tokens and cost per campaign and per model, the outcome mix, and one
call's transcript. Built from the read layer only (``Reader.llm_usage``/``llm_calls``/``llm_call``/``agent_runs``).

The agent stored every text redacted (agent/secrets.py); what the page shows is scrubbed again
(dashboard/redact.py).

Example::

    >>> view = agent_view(reader, campaign="agent-c")           # doctest: +SKIP
    >>> view.total.calls, view.total.cost_usd                  # doctest: +SKIP
    (7, 0.0112)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from warpforge.dashboard.charts import Figure, layout
from warpforge.dashboard.redact import scrub_calls
from warpforge.db.agent_reads import rollup

# Outcome colours follow the verdict palette's meaning: green used, red/brown broken, grey not the model's fault.
OUTCOME_COLORS = {
    "accepted": "#2ca02c",
    "no_code": "#ff7f0e",
    "parse_error": "#8c564b",
    "truncated": "#e377c2",
    "duplicate": "#17becf",
    "patch_failed": "#9467bd",
    "rejected": "#d62728",
    "call_failed": "#7f7f7f",
}


@dataclass(frozen=True)
class AgentView:
    total: Any  # LLMUsage over everything shown
    per_campaign: tuple[Any, ...]  # LLMUsage, one per campaign
    per_model: tuple[Any, ...]  # LLMUsage, one per model
    per_campaign_model: tuple[Any, ...]  # LLMUsage, campaign x model
    runs: Any  # Page[AgentRunRow]: what stopped the agent, per campaign and task
    calls: Any  # Page[LLMCallRow], newest first, filtered
    outcomes: tuple[str, ...]  # every outcome present (filter choices)
    models: tuple[str, ...]
    campaigns: tuple[str, ...]
    campaign: str  # the filters in force ("" = all)
    model: str
    outcome: str
    figure: Figure  # outcome mix per campaign (stacked bars)
    message: str  # "no LLM calls stored ..." when there are none


def outcome_figure(per_campaign: tuple[Any, ...]) -> Figure:
    labels = [u.campaign or "(no campaign)" for u in per_campaign]
    outcomes = sorted({o for u in per_campaign for o in u.outcomes}, key=lambda o: (o != "accepted", o))
    data = [
        {
            "type": "bar",
            "name": o,
            "x": labels,
            "y": [u.outcomes.get(o, 0) for u in per_campaign],
            "marker": {"color": OUTCOME_COLORS.get(o, "#333")},
        }
        for o in outcomes
    ]
    note = "" if data else "no LLM calls stored"
    return Figure(
        "llm-outcomes",
        "Outcome of each LLM call, per campaign",
        {
            "data": data,
            "layout": layout(
                "LLM call outcomes",
                "campaign",
                "calls",
                barmode="stack",
                xaxis={"type": "category", "title": {"text": "campaign"}},
            ),
        },
        note,
        sum(u.calls for u in per_campaign),
    )


def agent_view(
    reader: Any,
    *,
    campaign: str | None = None,
    model: str | None = None,
    outcome: str | None = None,
    offset: int = 0,
    limit: int = 50,
) -> AgentView:
    """Usage (filtered by ``campaign`` when given), the agent's runs, and a page of calls (all filters)."""
    everything = reader.llm_usage()  # campaign x model x outcome groups: a few rows per campaign
    grid = tuple(u for u in everything if not campaign or u.campaign == campaign)
    per_model = rollup(grid, "model")
    mine = [u for u in grid if not model or u.model == model]
    per_campaign, total = rollup(mine, "campaign"), rollup(mine, "all")[0]
    calls = reader.llm_calls(campaign=campaign, model=model, outcome=outcome, offset=offset, limit=limit)
    calls = scrub_calls(calls)
    runs = reader.agent_runs(campaign=campaign, limit=100)
    outcomes = tuple(sorted({o for u in everything for o in u.outcomes}))
    message = (
        ""
        if total.calls
        else (
            "no LLM calls stored"
            + (f" for campaign {campaign!r}" if campaign else "")
            + ": campaigns so far took their variants from templates (run with --proposer llm)"
        )
    )
    return AgentView(
        total,
        per_campaign,
        per_model,
        grid,
        runs,
        calls,
        outcomes,
        tuple(sorted({u.model for u in everything if u.model})),
        tuple(sorted({u.campaign for u in everything if u.campaign})),
        campaign or "",
        model or "",
        outcome or "",
        outcome_figure(per_campaign),
        message,
    )
