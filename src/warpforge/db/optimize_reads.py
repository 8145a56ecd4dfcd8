"""The read layer's queries over ``wf_optimize_runs`` (migration 0006): the stored ``warpforge optimize`` runs.

``Reader`` (db/queries.py) exposes them as ``optimize_runs`` (a page, newest first, without the reports) and
``optimize_run`` (one run with its whole report). Each function takes an open read-only session and returns
frozen rows (db/rows.py); nothing here imports the optimizer.

Example::

    >>> with reader._session() as s:                                   # doctest: +SKIP
    ...     page = optimize_runs(s, offset=0, limit=20)
    >>> [r.target for r in page.items][:1]                             # doctest: +SKIP
    ['./qwen3-tiny']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from warpforge.db.models import OptimizeRun
from warpforge.db.rows import OptimizeRunDetail, OptimizeRunRow, Page, utc

_COLUMNS = (
    OptimizeRun.id,
    OptimizeRun.target,
    OptimizeRun.kind,
    OptimizeRun.mode,
    OptimizeRun.dtype,
    OptimizeRun.gpu,
    OptimizeRun.coverage,
    OptimizeRun.speedup,
    OptimizeRun.measured,
    OptimizeRun.regions,
    OptimizeRun.patched,
    OptimizeRun.created_at,
)


def _row(r: Sequence[Any]) -> OptimizeRunRow:
    v = list(r)
    return OptimizeRunRow(
        int(v[0]),
        v[1],
        v[2],
        v[3],
        v[4],
        v[5],
        float(v[6]),
        v[7],
        bool(v[8]),
        int(v[9] or 0),
        int(v[10] or 0),
        utc(v[11]),
    )


def optimize_runs(s: Session, *, target: str | None = None, offset: int, limit: int) -> Page[OptimizeRunRow]:
    """Runs newest first (reports not read: a list page stays cheap however large the reports)."""
    stmt = select(*_COLUMNS)
    count = select(func.count()).select_from(OptimizeRun)
    if target is not None:
        stmt, count = stmt.where(OptimizeRun.target == target), count.where(OptimizeRun.target == target)
    total = int(s.scalar(count) or 0)
    items = tuple(_row(r) for r in s.execute(stmt.order_by(OptimizeRun.id.desc()).offset(offset).limit(limit)))
    return Page(items, total, offset, limit)


def optimize_run(s: Session, id: int) -> OptimizeRunDetail | None:
    r = s.execute(select(*_COLUMNS, OptimizeRun.report).where(OptimizeRun.id == id)).first()
    if r is None:
        return None
    values = tuple(r)
    report: dict[str, Any] = dict(values[-1] or {})
    return OptimizeRunDetail(_row(values[:-1]), report)
