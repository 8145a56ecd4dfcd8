"""Ordered pages of evaluation ids that stay on an index at 100,000 rows, by offset or by cursor.

A sort on a column that may be NULL (``objective_ms``: unmeasured rows) puts NULLs last in both
directions. Neither SQLite (NULLs first in its indexes) nor PostgreSQL (for a descending walk) can serve
"NULLS LAST" from an ordinary index in both directions, and sorting 100,000 rows per page took 65 ms
(benchmarks/read_layer.py, SQLite). So a page is read in two phases, each an index walk: the rows that have a
value, ordered by (value, id), then the NULL rows by id. A cursor (``next_cursor``) continues from the last
row's (phase, value, id) without counting past rows again; an offset still works (it is exact, but a deep
offset walks its rows).

Example::

    >>> ids, cursor = page_ids(session, filters, "objective_ms", offset=0, limit=50)   # doctest: +SKIP
    >>> more, _ = page_ids(session, filters, "objective_ms", cursor=cursor, limit=50)  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import json
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from warpforge.db.models import Evaluation
from warpforge.errors import UsageError

# sort name -> (column, may be NULL). Ties break on id, so pages never overlap.
SORTS: dict[str, tuple[Any, bool]] = {
    "id": (Evaluation.id, False),
    "created_at": (Evaluation.created_at, False),
    "objective_ms": (Evaluation.objective_ms, True),
    "speedup": (Evaluation.speedup, True),
}  # each has an index (db/models.py), so a page never sorts the table


def parse_sort(sort: str) -> tuple[str, bool]:
    name, desc = sort.lstrip("-"), sort.startswith("-")
    if name not in SORTS:
        raise UsageError(f"unknown sort {sort!r}; use one of {', '.join(sorted(SORTS))} (prefix - to reverse)")
    return name, desc


def encode_cursor(sort: str, phase: int, value: Any, last_id: int) -> str:
    doc = json.dumps([sort, phase, value.isoformat() if hasattr(value, "isoformat") else value, last_id])
    return base64.urlsafe_b64encode(doc.encode()).decode()


def decode_cursor(cursor: str, sort: str) -> tuple[int, Any, int]:
    try:
        got, phase, value, last_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError) as exc:
        raise UsageError("bad cursor: pass back the next_cursor of the previous page unchanged") from exc
    if got != sort:
        raise UsageError(f"this cursor belongs to sort {got!r}, not {sort!r}: start again without a cursor")
    return int(phase), value, int(last_id)


def page_ids(
    s: Session, filters: list[Any], sort: str, *, offset: int = 0, limit: int = 50, cursor: str | None = None
) -> tuple[list[int], str | None]:
    """The ids of one page (``limit`` rows from ``offset``, or after ``cursor``) and the cursor of the next
    page (None at the end)."""
    name, desc = parse_sort(sort)
    column, nullable = SORTS[name]
    want = limit + 1  # one more than the page: tells whether a next page exists
    phase, value, last_id = decode_cursor(cursor, sort) if cursor else (0, None, 0)
    if isinstance(value, str) and name == "created_at":
        from datetime import datetime

        value = datetime.fromisoformat(value)
    rows: list[tuple[int, Any, int]] = []  # (phase, value, id)

    def walk(ph: int, skip: int, after: tuple[Any, int] | None, count: int) -> None:
        key = [column, Evaluation.id] if ph == 0 and column is not Evaluation.id else [Evaluation.id]
        stmt = select(*key).where(*filters)
        if ph == 0 and nullable:
            stmt = stmt.where(column.is_not(None))
        if ph == 1:
            stmt = stmt.where(column.is_(None))
        if after is not None:
            bound = tuple_(*key) if len(key) == 2 else key[0]
            mark = tuple_(*after) if len(key) == 2 else after[1]
            stmt = stmt.where(bound < mark if desc else bound > mark)
        stmt = stmt.order_by(*[k.desc() if desc else k.asc() for k in key]).offset(skip).limit(count)
        for r in s.execute(stmt):
            rows.append((ph, r[0], r[-1]))

    if cursor is None:
        skip = offset
        if nullable and offset > 0:  # how many rows the value phase holds decides where the offset lands
            valued = int(s.scalar(select(func.count()).where(*filters, column.is_not(None))) or 0)
            if offset >= valued:
                walk(1, offset - valued, None, want)
                return _finish(rows, limit, sort)
        walk(0, skip, None, want)
    elif phase == 0:
        walk(0, 0, (value, last_id), want)
    else:
        walk(1, 0, (None, last_id), want)
        return _finish(rows, limit, sort)
    if nullable and len(rows) < want:
        walk(1, 0, None, want - len(rows))
    return _finish(rows, limit, sort)


def _finish(rows: list[tuple[int, Any, int]], limit: int, sort: str) -> tuple[list[int], str | None]:
    page = rows[:limit]
    more = len(rows) > limit and bool(page)
    cursor = encode_cursor(sort, *page[-1]) if more else None
    return [r[2] for r in page], cursor
