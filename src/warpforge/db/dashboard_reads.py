"""Reads the dashboard needs beyond ``queries.Reader``: compile facts and the static ranking (issue 31).

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


def static_ranking(reader: Any, task: str, campaign: str | None = None) -> dict[str, list[Any]]:
    """Target -> ``compile_facts.Ranked`` rows, best compile facts first (``best --static``'s order)."""
    from warpforge.compile_facts import static_ranking as rank

    return rank(reader, task, campaign)


def static_first(reader: Any, task: str, campaign: str | None = None, variant_hash: str | None = None) -> Any:
    """``best --static``'s first (the first target in name order, as the CLI prints them), optionally among
    one variant's configurations; None when nothing was verified ok."""
    for rows in static_ranking(reader, task, campaign).values():
        for r in rows:
            if variant_hash is None or r.variant_hash == variant_hash:
                return r
    return None


def worst_facts_by_id(reader: Any, ids: Iterable[int]) -> dict[int, Mapping[str, float | None]]:
    """Evaluation id -> the worst registers/spill/shared/occupancy over its kernels and shapes (only ids with
    stored facts)."""
    from warpforge.compile_facts import load_facts
    from warpforge.evaluator.resources import worst_facts

    return {i: worst_facts(f) for i, f in load_facts(reader, ids).items() if f}
