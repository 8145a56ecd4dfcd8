"""Exact evaluation counts at 100,000 rows without recounting every row on every page.

Why: a page's ``total`` and the overview's per-campaign verdict counts are counts over every matching row.
At 100,000 stored evaluations on PostgreSQL the overview's grouped count read 100,000 index entries (32 ms of
a quiet server's CPU, 3-4x that on the loaded benchmark machine) and an unfiltered ``total`` 17 ms, on every
page view, although almost none of those rows had changed (benchmarks/read_layer.py, EXPLAIN ANALYZE).

How: evaluations are only ever inserted (never updated or deleted: the campaign's one writer appends them,
db/store.py), with increasing ids. A row is *settled* when its id is at or below the id of the newest row
created more than ``SETTLE_S`` seconds ago: an older id was inserted before that row, so its transaction
(one evaluation each) has long committed. Counts over settled rows are kept per filter (and per campaign for
verdict counts) with the id they were counted up to; each call adds the rows settled since (an id-range scan)
and counts the unsettled tail afresh. Totals stay exact; the first call pays the full count once per process.

Example::

    >>> counts = CountCache()
    >>> counts.total(session, ("verdict", "ok"), [Evaluation.verdict == "ok"])   # doctest: +SKIP
    70012
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import func, literal, select, union_all
from sqlalchemy.orm import Session

from warpforge.db.models import Evaluation

# Five minutes: an evaluation's insert transaction lasts milliseconds (one row and its measurements); a
# transaction open this long behind newer committed rows does not happen with one writer per campaign.
SETTLE_S = 300.0


def settle_point(s: Session, now: datetime | None = None) -> int:
    """The id at or below which every evaluation is settled (0: none is): one step down ix_wf_eval_created."""
    cut = (now or datetime.now(timezone.utc)) - timedelta(seconds=SETTLE_S)
    got = s.scalar(
        select(Evaluation.id)
        .where(Evaluation.created_at < cut)
        .order_by(Evaluation.created_at.desc(), Evaluation.id.desc())
        .limit(1)
    )
    return int(got or 0)


class CountCache:
    """Settled counts of one database, shared by a Reader's calls (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[Hashable, tuple[int, int]] = {}  # key -> (counted up to id, settled count)
        self._verdicts: dict[int, tuple[int, dict[str, int]]] = {}  # campaign id -> (up to id, verdict counts)

    def total(self, s: Session, key: Hashable, filters: list[Any], upto: int | None = None) -> int:
        """How many rows match ``filters`` (``key`` names the filters exactly)."""
        upto = settle_point(s) if upto is None else upto
        with self._lock:
            held = self._totals.get(key)
        if held is None or held[0] > upto:
            # One statement, so one snapshot: everything (an index-only count) minus the unsettled tail.
            # Restricting the full count to "id <= upto" instead would make PostgreSQL visit the table for
            # every row (the filters' indexes do not hold the id), ~3x slower than the count itself.
            count_all = select(func.count()).select_from(Evaluation).where(*filters).scalar_subquery()
            count_tail = (
                select(func.count()).select_from(Evaluation).where(*filters, Evaluation.id > upto).scalar_subquery()
            )
            every, tail = s.execute(select(count_all, count_tail)).one()
            settled = int(every) - int(tail)
        else:
            settled = held[1]
            if held[0] < upto:  # rows settled since the last call: an id-range scan
                settled += int(
                    s.scalar(
                        select(func.count())
                        .select_from(Evaluation)
                        .where(*filters, Evaluation.id > held[0], Evaluation.id <= upto)
                    )
                    or 0
                )
            tail = int(
                s.scalar(select(func.count()).select_from(Evaluation).where(*filters, Evaluation.id > upto)) or 0
            )
        with self._lock:
            self._totals[key] = (upto, settled)
        return settled + int(tail)

    def verdicts(self, s: Session, campaign_ids: Sequence[int], upto: int | None = None) -> dict[int, dict[str, int]]:
        """Per campaign: verdict -> search evaluations (the final re-benchmark is not counted)."""
        upto = settle_point(s) if upto is None else upto
        settled: dict[int, dict[str, int]] = {}
        cold: list[int] = []
        since: dict[int, list[int]] = {}  # counted-up-to id -> campaigns counted that far
        with self._lock:
            for cid in campaign_ids:
                held = self._verdicts.get(cid)
                if held is None or held[0] > upto:
                    cold.append(cid)
                    settled[cid] = {}
                else:
                    settled[cid] = dict(held[1])
                    if held[0] < upto:
                        since.setdefault(held[0], []).append(cid)
        tail: dict[int, dict[str, int]] = {cid: {} for cid in campaign_ids}
        if cold:  # one statement (one snapshot): all rows (index-only) and the unsettled tail, subtracted
            every = _grouped(cold, []).add_columns(literal(0))
            recent = _grouped(cold, [Evaluation.id > upto]).add_columns(literal(1))
            for cid, verdict, n, part in s.execute(union_all(every, recent)):
                if cid is not None:
                    sign = 1 if part == 0 else -1
                    settled[cid][verdict] = settled[cid].get(verdict, 0) + sign * int(n)
        for start, ids in since.items():  # rows settled since the last call: an id-range scan
            _add(s, settled, ids, [Evaluation.id > start, Evaluation.id <= upto])
        with self._lock:
            for cid in campaign_ids:
                self._verdicts[cid] = (upto, {v: n for v, n in settled[cid].items() if n})
        _add(s, tail, list(campaign_ids), [Evaluation.id > upto])
        out = {}
        for cid in campaign_ids:
            merged = dict(settled[cid])
            for v, n in tail[cid].items():
                merged[v] = merged.get(v, 0) + n
            out[cid] = {v: n for v, n in merged.items() if n}
        return out


def _grouped(ids: list[int], window: list[Any]) -> Any:
    # the settled part is answered from ix_wf_eval_campaign_verdict (campaign_id, verdict, final) alone
    return (
        select(Evaluation.campaign_id, Evaluation.verdict, func.count())
        .where(Evaluation.campaign_id.in_(ids), Evaluation.final.is_(False), *window)
        .group_by(Evaluation.campaign_id, Evaluation.verdict)
    )


def _add(s: Session, out: dict[int, dict[str, int]], ids: list[int], window: list[Any]) -> None:
    if not ids:
        return
    for cid, verdict, n in s.execute(_grouped(ids, window)):
        if cid is not None:
            counts = out.setdefault(cid, {})
            counts[verdict] = counts.get(verdict, 0) + int(n)
