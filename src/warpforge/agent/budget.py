"""The agent's budgets, one rule for both proposers (kernel variants and parallelism plans).

``spent`` names the first budget a run has used up, in a fixed order (calls, tokens, cost, wall time,
rounds, failed calls in a row), or None. The name is the ``stop_reason`` stored in ``wf_agent_runs`` and
shown in the summary, so a reader knows which budget ended the run.

Example::

    >>> limits = Budgets(max_calls=4, max_tokens=None, max_cost_usd=None, max_wall_s=None)
    >>> spent(limits, Usage(calls=4))
    'calls'
    >>> spent(limits, Usage(calls=3)) is None
    True
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


class Budgets(BaseModel):
    """Limits per run (None: no limit). Subclassed by each proposer's settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_calls: int | None = Field(default=16, ge=1)
    max_tokens: int | None = Field(default=500_000, ge=1)  # prompt + completion tokens
    max_cost_usd: float | None = Field(default=5.0, ge=0)
    max_wall_s: float | None = Field(default=3600.0, gt=0)
    max_rounds: int | None = Field(default=None, ge=1)
    max_call_failures: int = Field(default=3, ge=1)  # failed calls in a row (after the client's retries)


@dataclass(frozen=True)
class Usage:
    """What a run has used so far."""

    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    started: float | None = None  # time.monotonic() of the first call
    rounds: int = 0
    failures_in_row: int = 0


def spent(limits: Budgets, used: Usage) -> str | None:
    """The first budget ``used`` has reached, or None."""
    if limits.max_calls is not None and used.calls >= limits.max_calls:
        return "calls"
    if limits.max_tokens is not None and used.tokens >= limits.max_tokens:
        return "tokens"
    if limits.max_cost_usd is not None and used.cost_usd >= limits.max_cost_usd:
        return "cost"
    if (
        limits.max_wall_s is not None
        and used.started is not None
        and time.monotonic() - used.started >= limits.max_wall_s
    ):
        return "wall_time"
    if limits.max_rounds is not None and used.rounds >= limits.max_rounds:
        return "rounds"
    if used.failures_in_row >= limits.max_call_failures:
        return "call_failures"
    return None
