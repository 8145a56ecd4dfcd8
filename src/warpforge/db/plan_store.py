"""The store's writes to ``wf_plans``: planner predictions as typed records, inserted after migrating.

The planner (parallel/store.py) turns its predictions into :class:`PlanRecord` values; this layer builds the
ORM rows and imports nothing of the planner.

Example::

    >>> write_plans("sqlite:///wf.db", [PlanRecord(model_name="llama3-8b", ...)])   # doctest: +SKIP
    1
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from warpforge.db.models import Plan
from warpforge.db.session import Database


@dataclass(frozen=True)
class PlanRecord:
    """One ``wf_plans`` row: a plan's specs and prediction as JSON documents, and the columns readers filter on."""

    model_name: str
    cluster_name: str
    nodes: int
    model_spec: dict[str, Any]
    cluster_spec: dict[str, Any]
    plan: dict[str, Any]
    plan_key: str
    source: str  # search | enqueued | predict | llm
    fits: bool
    step_time_s: float | None
    mfu: float | None
    peak_mem_gb: float | None
    prediction: dict[str, Any]
    warpforge_version: str
    campaign_id: int | None = None


def write_plans(url: str | None, records: Sequence[PlanRecord]) -> int:
    """Insert plans (migrating the database first); returns the number of rows written."""
    db = Database(url)
    db.upgrade()
    with db.session() as s:
        s.add_all([Plan(**asdict(r)) for r in records])
    return len(records)
