"""Reads the dashboard needs beyond ``queries.Reader``: compile facts and the static ranking.

A CPU-only database holds no times; what it holds per evaluation is the compiler's facts (registers, spills,
shared memory, the occupancy they allow). These functions give the dashboard what ``best --static`` and
``results`` show, through the same code (``compile_facts``), so the web pages and the CLI rank alike.

Example::

    >>> first = static_first(reader, "rmsnorm")        # doctest: +SKIP
    >>> (first.variant, first.worst["occupancy"])      # doctest: +SKIP
    ('multi_row', 1.0)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def static_ranking(reader: Any, task: str, campaign: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """Target -> ``compile_facts.TargetRanking`` (its first ``limit`` rows, best compile facts first, and its
    total): ``best --static``'s order."""
    from warpforge.compile_facts import static_ranking as rank

    return rank(reader, task, campaign, limit=limit)


def static_first(reader: Any, task: str, campaign: str | None = None, variant_hash: str | None = None) -> Any:
    """``best --static``'s first (the first target in name order, as the CLI prints them), optionally among
    one variant's configurations; None when nothing was verified ok."""
    from warpforge.compile_facts import static_ranking as rank

    for target in rank(reader, task, campaign, limit=1, variant_hash=variant_hash).values():
        return target.rows[0]
    return None


def worst_facts_by_id(reader: Any, ids: Iterable[int]) -> dict[int, Mapping[str, float | None]]:
    """Evaluation id -> the worst registers/spill/shared/occupancy over its kernels and shapes (only ids with
    stored facts)."""
    from warpforge.compile_facts import load_facts, worst_facts

    return {i: worst_facts(f) for i, f in load_facts(reader, ids).items() if f}


# The pages show variant hashes cut to 12 hex digits (fmt.short): 48 bits, so two of a database's variants
# share a 12-digit prefix with probability ~n^2/2^49 (1e-5 at 50,000 variants); an ambiguous prefix is refused.
MIN_PREFIX = 12


def resolve_variant_hash(reader: Any, given: str) -> str | None:
    """The full source hash that ``given`` (the full hash, or a prefix of at least 12 hex digits, as pages show
    it) names; None when none does (a short or non-hex one names none). UsageError for an ambiguous prefix."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from warpforge.db.models import VariantRecord
    from warpforge.errors import UsageError

    h = given.strip().lower()
    if len(h) == 64:
        return h
    if len(h) < MIN_PREFIX or len(h) > 64 or any(c not in "0123456789abcdef" for c in h):
        return None  # names no variant (the 404 says what a hash looks like)
    with Session(reader.db.engine) as s:
        found = list(
            s.scalars(
                select(VariantRecord.source_hash)
                .where(VariantRecord.source_hash.startswith(h, autoescape=True))
                .limit(2)
            )
        )
    if len(found) > 1:
        raise UsageError(f"variant hash prefix {h!r} names more than one variant: give more digits")
    return found[0] if found else None


def plan_models(reader: Any) -> list[str]:
    """The model names of the stored plans, the newest plan's model first (the plans page's filter)."""
    from sqlalchemy import func, select
    from sqlalchemy.orm import Session

    from warpforge.db.models import Plan

    with Session(reader.db.engine) as s:
        rows = s.execute(
            select(Plan.model_name, func.max(Plan.id)).group_by(Plan.model_name).order_by(func.max(Plan.id).desc())
        )
        return [str(name) for name, _ in rows]
