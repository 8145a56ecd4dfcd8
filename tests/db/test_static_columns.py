"""The worst compile facts stored as columns (revision 0005), and the static ranking ordered by them in SQL.

Expectations come from the occupancy arithmetic done by hand and from ``compile_facts.static_rank`` (the
Python sort key the ranking had before SQL ordered it), never from the SQL ranking itself.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

import pytest
from sqlalchemy import inspect, select

from warpforge.compile_facts import static_rank, static_ranking
from warpforge.db.models import Campaign, Evaluation, VariantRecord
from warpforge.db.queries import Reader
from warpforge.db.session import Database

COLUMNS = ("static_target", "static_spill", "static_occupancy", "static_registers", "static_shared")
# Two kernels: 64 registers, 4 warps, 1 KiB shared -> 2048 registers per warp, 32 warps = 8 blocks: 50%;
# 128 registers -> 4096 per warp, 16 warps = 4 blocks of 4 (shared: 233472 // (49152 + 1024) = 4): 25%.
TWO_KERNELS = [
    {"kernel": "a", "target": "sm_90", "registers": 64, "num_warps": 4, "shared_bytes": 1024, "spill_bytes": 0},
    {"kernel": "b", "target": "sm_90", "registers": 128, "num_warps": 4, "shared_bytes": 49152, "spill_bytes": 16},
]
WORST = ("sm_90", 16.0, 0.25, 128.0, 49152.0)


def _add(
    s: Any, campaign: Campaign, variant: VariantRecord, params: dict[str, Any], resources: Any, verdict: str = "ok"
) -> None:
    s.add(
        Evaluation(
            campaign=campaign,
            task="double",
            variant=variant,
            variant_hash=variant.source_hash,
            params=params,
            params_key=json.dumps(params, sort_keys=True),
            backend="interpret",
            verdict=verdict,
            result={"resources": resources},
        )
    )


def _columns(db: Database) -> list[tuple[Any, ...]]:
    with db.engine.connect() as conn:
        return [
            tuple(r) for r in conn.execute(select(*(getattr(Evaluation, c) for c in COLUMNS)).order_by(Evaluation.id))
        ]


def test_writes_fill_the_columns_and_0005_backfills_an_old_database(db_url: str) -> None:
    db = Database(db_url)
    db.upgrade()
    with db.session() as s:
        c = Campaign(name="c", status="finished", spec={})
        v = VariantRecord(source_hash="v" * 64, task="double", name="v", source="#", space={})
        _add(s, c, v, {"B": 1}, TWO_KERNELS)
        _add(s, c, v, {"B": 2}, [])  # no compile facts: every column NULL
    assert _columns(db) == [WORST, (None,) * 5]
    db.downgrade("0004")
    assert not set(COLUMNS) & {col["name"] for col in inspect(db.engine).get_columns("wf_evaluations")}
    db.upgrade("0005")  # the rows written before the columns existed get them from their results
    assert _columns(db) == [WORST, (None,) * 5]
    db.engine.dispose()


def test_sql_order_is_the_python_sort_key(db_url: str) -> None:
    """Random facts with ties, unknowns and two targets (seed: WARPFORGE_TEST_SEED replays one): each target's
    SQL ranking equals a sort by ``static_rank`` then id over the newest ok search evaluation of each
    configuration of that target or without facts, and one variant's rows keep those ranks."""
    seed = int(os.environ.get("WARPFORGE_TEST_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    db = Database(db_url)
    db.upgrade()
    newest: dict[str, tuple[int, Any]] = {}
    with db.session() as s:
        c = Campaign(name="c", status="finished", spec={})
        v = VariantRecord(source_hash="v" * 64, task="double", name="v", source="#", space={})
        w = VariantRecord(source_hash="w" * 64, task="double", name="w", source="#w", space={})
        s.add_all([c, v, w])
        for i in range(300):
            number = rng.randrange(120)
            key = f"cfg{number}"  # repeats: only the newest evaluation of a configuration ranks
            target = rng.choice(["sm_90", "sm_90", "sm_80"])  # two targets, ranked apart
            kernels = (
                []
                if rng.random() < 0.1
                else [
                    {
                        "kernel": f"k{k}",
                        "target": target,
                        "registers": rng.choice([32, 64, 96, 128, None]),
                        "num_warps": rng.choice([4, 8]),
                        "shared_bytes": rng.choice([0, 16384, 100_000]),
                        "spill_bytes": rng.choice([0, 0, 0, 8]),
                    }
                    for k in range(rng.randrange(1, 3))
                ]
            )
            verdict = "ok" if rng.random() < 0.8 else "incorrect"
            _add(s, c, w if number % 3 == 0 else v, {"cfg": key}, kernels, verdict=verdict)
            s.flush()
            if verdict == "ok":
                newest[key] = (i + 1, kernels)
    ranked = static_ranking(Reader(db.url), "double")
    assert list(ranked) == ["sm_80", "sm_90"], f"seed {seed}"
    for target in ranked:  # a row without facts ranks last in every target
        mine = {k: v for k, v in newest.items() if not v[1] or v[1][0]["target"] == target}
        expected = [key for key, _ in sorted(mine.items(), key=lambda kv: (static_rank(kv[1][1]), kv[1][0]))]
        got = [r.params["cfg"] for r in ranked[target].rows]
        assert got == expected, f"seed {seed}"
        assert ranked[target].total == len(expected), f"seed {seed}"
        first3 = static_ranking(Reader(db.url), "double", limit=3)[target]
        assert [r.params["cfg"] for r in first3.rows] == expected[:3] and first3.total == len(expected)
        assert [r.rank for r in first3.rows] == [1, 2, 3]
        # one variant's rows keep their rank among all (numbered in SQL on both databases)
        ws = [(rank, key) for rank, key in enumerate(expected, 1) if int(key.removeprefix("cfg")) % 3 == 0]
        got_w = static_ranking(Reader(db.url), "double", variant_hash="w" * 64)[target]
        assert [(r.rank, r.params["cfg"]) for r in got_w.rows] == ws, f"seed {seed}"
        assert got_w.total == len(expected), f"seed {seed}"
        first_w = static_ranking(Reader(db.url), "double", limit=3, variant_hash="w" * 64)[target]
        assert [(r.rank, r.params["cfg"]) for r in first_w.rows] == ws[:3], f"seed {seed}"  # counted in SQL
    db.engine.dispose()


@pytest.mark.parametrize("variant", ["a", "b"])
def test_a_variants_rows_keep_their_rank_among_all(tmp_path: Any, variant: str) -> None:
    db = Database(f"sqlite:///{tmp_path / 'wf.db'}")
    db.upgrade()
    with db.session() as s:
        c = Campaign(name="c", status="finished", spec={})
        a = VariantRecord(source_hash="a" * 64, task="double", name="a", source="#a", space={})
        b = VariantRecord(source_hash="b" * 64, task="double", name="b", source="#b", space={})
        for regs, owner in ((32, a), (64, b), (96, a), (128, b)):  # occupancy 100%, 50%, 25%(+), 25%
            _add(
                s,
                c,
                owner,
                {"r": regs},
                [{"target": "sm_90", "registers": regs, "num_warps": 4, "shared_bytes": 0, "spill_bytes": 0}],
            )
    rows = static_ranking(Reader(db.url), "double", variant_hash=variant * 64)["sm_90"].rows
    assert [(r.rank, r.params["r"]) for r in rows] == ([(1, 32), (3, 96)] if variant == "a" else [(2, 64), (4, 128)])
    db.engine.dispose()
