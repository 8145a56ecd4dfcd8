"""Settled counts (db/counts.py) stay exact as rows arrive, on SQLite and PostgreSQL: every expected number is
how many rows this test inserted, never the cache's own earlier answer."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy.orm import Session

from warpforge.db.counts import SETTLE_S, CountCache, settle_point
from warpforge.db.models import Campaign, Evaluation, VariantRecord
from warpforge.db.queries import Reader
from warpforge.db.session import Database

OLD = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _add(db: Database, campaign: str, verdicts: list[str], created: datetime, final: bool = False) -> None:
    with db.session() as s:
        camp = s.query(Campaign).filter_by(name=campaign).one_or_none()
        if camp is None:
            camp = Campaign(name=campaign, spec={}, status="running")
            s.add(camp)
        v = s.query(VariantRecord).filter_by(source_hash="h" * 64).one_or_none()
        if v is None:
            v = VariantRecord(source_hash="h" * 64, task="softmax", name="v", source="#", space={})
            s.add(v)
        for i, verdict in enumerate(verdicts):
            s.add(
                Evaluation(
                    campaign=camp,
                    task="softmax",
                    variant=v,
                    variant_hash=v.source_hash,
                    params={"i": i},
                    params_key=json.dumps({"i": i}),
                    backend="replay",
                    verdict=verdict,
                    final=final,
                    created_at=created,
                )
            )


def test_counts_stay_exact_as_rows_arrive_and_settle(db_url: str) -> None:
    db = Database(db_url)
    db.upgrade()
    _add(db, "a", ["ok"] * 5 + ["incorrect"] * 2, OLD)
    _add(db, "b", ["ok"] * 3, OLD)
    _add(db, "a", ["ok"] * 2, OLD, final=True)  # the final re-benchmark: not in the verdict counts
    cache = CountCache()
    with Session(db.engine) as s:
        ids = {c.name: c.id for c in s.query(Campaign)}
        now = datetime.now(timezone.utc)
        upto = settle_point(s, now)
        assert upto > 0  # every row so far is old: settled
        assert cache.verdicts(s, [ids["a"], ids["b"]], upto) == {
            ids["a"]: {"ok": 5, "incorrect": 2},
            ids["b"]: {"ok": 3},
        }
        assert cache.total(s, "all", [], upto) == 12
        assert cache.total(s, "ok", [Evaluation.verdict == "ok"], upto) == 10
    # New rows (created now: not settled yet) are counted afresh on every call.
    _add(db, "a", ["ok", "timeout"], datetime.now(timezone.utc))
    with Session(db.engine) as s:
        upto2 = settle_point(s)
        assert upto2 == upto
        assert cache.verdicts(s, [ids["a"]], upto2) == {ids["a"]: {"ok": 6, "incorrect": 2, "timeout": 1}}
        assert cache.total(s, "all", [], upto2) == 14
        # Later they settle: only the rows between the two settle points are read, and the sums still hold.
        later = settle_point(s, datetime.now(timezone.utc) + timedelta(seconds=SETTLE_S + 60))
        assert later > upto
        assert cache.verdicts(s, [ids["a"], ids["b"]], later) == {
            ids["a"]: {"ok": 6, "incorrect": 2, "timeout": 1},
            ids["b"]: {"ok": 3},
        }
        assert cache.total(s, "all", [], later) == 14
        assert cache.total(s, "ok", [Evaluation.verdict == "ok"], later) == 11
    db.engine.dispose()


def test_the_overview_counts_through_the_reader_follow_new_rows(db_url: str) -> None:
    db = Database(db_url)
    db.upgrade()
    _add(db, "a", ["ok"] * 4, OLD)
    reader = Reader(db_url)
    first: Any = reader.campaign("a")
    assert first.evaluations == 4 and reader.evaluations().total == 4
    _add(db, "a", ["incorrect"] * 3, datetime.now(timezone.utc))
    again: Any = reader.campaigns().items[0]
    assert again.verdicts == {"ok": 4, "incorrect": 3} and reader.evaluations().total == 7
    assert reader.evaluations(verdict="incorrect").total == 3
    db.engine.dispose()
