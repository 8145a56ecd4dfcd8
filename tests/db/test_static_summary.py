"""The static ranking's summary rows (``wf_static_configs``, revision 0007_static_summary), which a trigger keeps
in the evaluations' own transaction, against the row-by-row computation, on SQLite and PostgreSQL.

The expected values are computed here from the evaluation rows themselves: per scope (every campaign, one
campaign) the newest search evaluation verified ok of each (source, parameters), ranked per target by
``compile_facts.static_rank`` of its stored result document (the Python sort key; not the stored columns the
trigger reads), ties by id, rows without facts last in every target. Checked after writes through every write
path (the campaign's batched writer, ``store.save_evaluation``, ORM rows, a bulk insert), after a writer killed
inside its transaction, and after the migration's backfill of rows stored before the summary existed.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select, text

from warpforge.compile_facts import static_rank, static_ranking
from warpforge.db import store
from warpforge.db.models import Campaign, Evaluation, StaticConfig, StaticCount, VariantRecord
from warpforge.db.queries import Reader
from warpforge.db.session import Database
from warpforge.db.writer import ResultWriter
from warpforge.evaluator.result import EvalResult, Verdict
from warpforge.kernels.task import load_task_file

PLANTED = Path(__file__).parents[1] / "evaluator" / "planted"
VARIANTS = ("a" * 64, "b" * 64, "c" * 64)


def _seed() -> int:
    return int(os.environ.get("WARPFORGE_TEST_SEED", random.randrange(2**32)))


def _result(rng: random.Random) -> EvalResult:
    """A CPU result: a configuration drawn from a small space (repeats), compile facts for one of two targets,
    unknown facts or none at all now and then; verdicts other than ok too."""
    target = rng.choice(["sm_90", "sm_90", "sm_80"])
    resources = (
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
    verdict = Verdict.OK if rng.random() < 0.75 else rng.choice([Verdict.INCORRECT, Verdict.COMPILE_ERROR])
    return EvalResult(
        verdict=verdict,
        task="double",
        params={"B": rng.randrange(12)},
        backend="interpret",
        resources=resources,
        versions={"torch": "2.13.0", "triton": "3.9.0"},
    )


def _setup(url: str, revision: str = "head") -> tuple[Database, Any, dict[str, int], dict[str, int]]:
    db = Database(url)
    db.upgrade(revision)
    task = load_task_file(PLANTED / "task_double.py")
    with db.session() as s:
        campaigns = {n: store.create_campaign(s, n, {}).id for n in ("a", "b", "c")}
        rows = [
            VariantRecord(source_hash=h, task="double", name=f"v{i}", source=f"# {i}", space={})
            for i, h in enumerate(VARIANTS)
        ]
        s.add_all(rows)
        s.flush()
        variants = {r.source_hash: r.id for r in rows}
    return db, task, campaigns, variants


def _write(
    db: Database, task: Any, campaigns: dict[str, int], variants: dict[str, int], rng: random.Random, n: int = 40
) -> None:
    """``n`` evaluations through each write path, some of them final re-benchmarks (never ranked)."""
    writer = ResultWriter(db, campaigns["a"])  # the campaign's path: batches on one connection
    for i in range(n):
        h = rng.choice(VARIANTS)
        writer.add(_result(rng), task=task, variant_id=variants[h], variant_hash=h, final=rng.random() < 0.1)
        if i % 7 == 6:
            writer.flush()
    writer.close()
    with db.session() as s:  # store.save_evaluation (ORM), into campaign b and into no campaign
        for i in range(n):
            h = rng.choice(VARIANTS)
            campaign = s.get(Campaign, campaigns["b"]) if i % 4 else None
            store.save_evaluation(
                s,
                _result(rng),
                task=task,
                variant=s.get(VariantRecord, variants[h]),
                campaign=campaign,
                final=rng.random() < 0.1,
            )
    rows = []  # a bulk insert, as benchmarks/dashboard_routes.py fills a database; a second task among them
    for i in range(n):
        h = rng.choice(VARIANTS)
        values = store.evaluation_values(_result(rng), task=task, variant_hash=h, final=rng.random() < 0.1)
        rows.append(
            values
            | {"campaign_id": campaigns["c"], "variant_id": variants[h]}
            | ({"task": "triple"} if i % 3 == 0 else {})
        )
    with db.session() as s:
        s.execute(insert(Evaluation), rows)


def _evaluations(db: Database) -> list[tuple[Any, ...]]:
    with db.engine.connect() as conn:
        return list(
            conn.execute(
                select(
                    Evaluation.id,
                    Evaluation.campaign_id,
                    Evaluation.task,
                    Evaluation.variant_hash,
                    Evaluation.params_key,
                    Evaluation.verdict,
                    Evaluation.final,
                    Evaluation.result,
                ).order_by(Evaluation.id)
            )
        )


def _newest(rows: list[tuple[Any, ...]], campaign_id: int | None) -> dict[tuple[str, str, str], tuple[int, Any]]:
    """(task, source, params) -> (id, resources) of the newest ok search evaluation, in one scope."""
    newest: dict[tuple[str, str, str], tuple[int, Any]] = {}
    for id_, cid, task, h, key, verdict, final, result in rows:
        if verdict == "ok" and not final and (campaign_id is None or cid == campaign_id):
            newest[(task, h, key)] = (id_, (result or {}).get("resources") or [])
    return newest


def _target(resources: Any) -> str | None:
    return resources[0]["target"] if resources else None


def _expected_summary(db: Database) -> dict[tuple[str, int, str, str], tuple[Any, ...]]:
    rows = _evaluations(db)
    out = {}
    for scope in {0} | {r[1] for r in rows if r[1] is not None}:
        for (task, h, key), (id_, resources) in _newest(rows, scope or None).items():
            # the stored key: an unknown fact 1e30, an unknown occupancy 1 (static_rank: inf for both)
            spill, occ, regs, shared = static_rank(resources)
            known = [1e30 if math.isinf(v) else v for v in (spill, regs, shared)]
            out[(task, scope, h, key)] = (
                id_,
                _target(resources),
                known[0],
                1.0 if math.isinf(occ) else occ,
                *known[1:],
            )
    return out


def _summary(db: Database) -> dict[tuple[str, int, str, str], tuple[Any, ...]]:
    c = StaticConfig
    with db.engine.connect() as conn:
        return {
            tuple(r[:4]): tuple(r[4:])
            for r in conn.execute(  # type: ignore[misc]
                select(
                    c.task,
                    c.scope,
                    c.variant_hash,
                    c.params_key,
                    c.evaluation_id,
                    c.target,
                    c.key_spill,
                    c.key_occupancy,
                    c.key_registers,
                    c.key_shared,
                )
            )
        }


def _expected_ranking(
    rows: list[tuple[Any, ...]], campaign_id: int | None, task: str = "double"
) -> dict[str, list[int]]:
    newest = {k: v for k, v in _newest(rows, campaign_id).items() if k[0] == task}
    targets = sorted({t for _, res in newest.values() if (t := _target(res)) is not None}) or [None]
    ranking = {
        t or "unknown target": [
            i for _, i in sorted((static_rank(res), i) for i, res in newest.values() if _target(res) in (t, None))
        ]
        for t in targets
    }
    return {t: ids for t, ids in ranking.items() if ids}


def _check(db: Database, campaigns: dict[str, int], seed: int) -> None:
    """The summary holds exactly the rows the evaluations imply, and every static read agrees with them."""
    expected_summary = _expected_summary(db)
    assert _summary(db) == expected_summary, f"seed {seed}"
    counts: dict[tuple[str, int, str], int] = {}
    for (task, scope, _, _), (_, target, *_) in expected_summary.items():
        counts[(task, scope, target or "")] = counts.get((task, scope, target or ""), 0) + 1
    with db.engine.connect() as conn:
        stored = {
            (t, sc, tg): n
            for t, sc, tg, n in conn.execute(
                select(StaticCount.task, StaticCount.scope, StaticCount.target, StaticCount.configs)
            )
            if n
        }
    assert stored == counts, f"seed {seed}"
    rows, reader = _evaluations(db), Reader(db.url)
    for name, cid in [(None, None), *campaigns.items()]:
        expected = _expected_ranking(rows, cid)
        ranked = static_ranking(reader, "double", name)
        assert {t: [r.evaluation_id for r in ranked[t].rows] for t in ranked} == expected, f"seed {seed}"
        assert {t: ranked[t].total for t in ranked} == {t: len(ids) for t, ids in expected.items()}
        if name not in (None, "a"):
            continue  # the first rows and a variant's: in every campaign's scope and one campaign's
        first = static_ranking(reader, "double", name, limit=3)
        assert {t: [(r.rank, r.evaluation_id) for r in first[t].rows] for t in first} == {
            t: list(enumerate(ids[:3], 1)) for t, ids in expected.items()
        }, f"seed {seed}"
        mine = {r[0] for r in rows if r[3] == VARIANTS[0]}  # its rows keep their rank among all
        want = {t: [(k, i) for k, i in enumerate(ids, 1) if i in mine] for t, ids in expected.items()}
        want = {t: ranks for t, ranks in want.items() if ranks}
        for limit in (None, 2):  # more than three rows are placed in the whole order, a few counted
            got = static_ranking(reader, "double", name, limit=limit, variant_hash=VARIANTS[0])
            assert {t: [(r.rank, r.evaluation_id) for r in got[t].rows] for t in got} == {
                t: ranks[:limit] for t, ranks in want.items()
            }, f"seed {seed}"
    ranked = static_ranking(reader, "triple")  # the other task's ranking holds only its own rows
    assert {t: [r.evaluation_id for r in ranked[t].rows] for t in ranked} == _expected_ranking(rows, None, "triple")
    assert reader.ok_campaigns("double") == sorted(
        n for n, cid in campaigns.items() if any(k[0] == "double" for k in _newest(rows, cid))
    )
    reader.db.engine.dispose()


def test_the_summary_agrees_with_the_rows_written_by_every_path(db_url: str) -> None:
    seed = _seed()
    db, task, campaigns, variants = _setup(db_url)
    _write(db, task, campaigns, variants, random.Random(seed))
    assert len(_summary(db)) > 20, f"seed {seed}"  # the draw holds something to rank in every scope
    _check(db, campaigns, seed)
    db.engine.dispose()


# A writer's transaction killed after its evaluations (and so, through the trigger, their summary rows) were
# inserted, before the commit. SQLAlchemy alone: the child starts in about a second (warpforge's writer imports torch).
CHILD = """
import datetime, json, os, signal, sys
from sqlalchemy import MetaData, Table, create_engine, func, select
url, rows = sys.argv[1], json.loads(sys.argv[2])
for row in rows:
    row["created_at"] = datetime.datetime.fromisoformat(row["created_at"])
with create_engine(url).connect() as conn:
    conn.begin()
    meta = MetaData()
    conn.execute(Table("wf_evaluations", meta, autoload_with=conn).insert(), rows)
    summary = Table("wf_static_configs", meta, autoload_with=conn)
    print(conn.scalar(select(func.count()).select_from(summary)), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_writer_killed_inside_its_transaction_leaves_summary_and_rows_in_step(db_url: str) -> None:
    """kill -9 inside a transaction that inserted evaluations: the database keeps what was committed before and
    nothing of that transaction, in the evaluations and in the summary alike."""
    seed = _seed()
    rng = random.Random(seed)
    db, task, campaigns, variants = _setup(db_url)
    _write(db, task, campaigns, variants, rng, n=15)
    before = _summary(db)
    rows = []
    for _ in range(20):
        h = rng.choice(VARIANTS)
        result = _result(rng).model_copy(update={"verdict": Verdict.OK, "params": {"B": 100 + rng.randrange(12)}})
        rows.append(
            store.evaluation_values(result, task=task, variant_hash=h)
            | {"campaign_id": campaigns["a"], "variant_id": variants[h], "created_at": "2026-12-07T18:00:00+00:00"}
        )
    child = subprocess.run(
        [sys.executable, "-c", CHILD, db.url, json.dumps(rows)], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -9, child.stderr  # killed, as planned
    assert int(child.stdout) > len(before), f"seed {seed}"  # its transaction had written summary rows
    assert _summary(db) == before, f"seed {seed}"  # gone with it
    _check(db, campaigns, seed)
    _write(db, task, campaigns, variants, rng, n=10)  # and the next writes keep it so
    _check(db, campaigns, seed)
    db.engine.dispose()


def test_the_migration_backfills_rows_stored_before_it(db_url: str) -> None:
    seed = _seed()
    rng = random.Random(seed)
    db, task, campaigns, variants = _setup(db_url, "0006")
    _write(db, task, campaigns, variants, rng)  # stored before the summary and its trigger existed
    db.upgrade()
    _check(db, campaigns, seed)
    db.downgrade("0006")
    _write(db, task, campaigns, variants, rng, n=10)  # rows the dropped summary never saw
    db.upgrade()
    _check(db, campaigns, seed)
    _write(db, task, campaigns, variants, rng, n=10)  # the trigger takes over from the backfill
    _check(db, campaigns, seed)
    db.engine.dispose()


def test_a_writer_chosen_as_a_deadlocks_victim_writes_its_batch_again(fresh_postgres: str) -> None:
    """Two campaigns store the same two configurations at once, in opposite orders: on PostgreSQL their triggers
    wait on each other's summary rows, the server aborts one transaction (the writer's here: it looks for a deadlock
    first), and the writer writes its batch again once the other has committed."""
    seed = _seed()
    # Each backend looks for a deadlock once, deadlock_timeout after it starts waiting: the writer's 3 s after it
    # waits (the other starts waiting well within that), the other's 60 s after.
    db, task, campaigns, variants = _setup(fresh_postgres + "?options=-c%20deadlock_timeout%3D3s")
    h = VARIANTS[0]

    def result(b: int) -> EvalResult:
        return EvalResult(
            verdict=Verdict.OK,
            task="double",
            params={"B": b},
            backend="interpret",
            resources=[
                {
                    "kernel": "k",
                    "target": "sm_90",
                    "registers": 32 * b,
                    "num_warps": 4,
                    "shared_bytes": 0,
                    "spill_bytes": 0,
                }
            ],
        )

    def row(b: int) -> dict[str, Any]:
        return store.evaluation_values(result(b), task=task, variant_hash=h) | {
            "campaign_id": campaigns["b"],
            "variant_id": variants[h],
        }

    other, watch = db.engine.connect(), db.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    transaction = other.begin()
    other.exec_driver_sql("SET deadlock_timeout = '60s'")
    other.execute(insert(Evaluation), [row(2)])  # holds B=2's summary row of every campaign's scope
    writer = ResultWriter(db, campaigns["a"])
    for b in (1, 2):
        writer.add(result(b), task=task, variant_id=variants[h], variant_hash=h)
    written: list[int] = []
    thread = threading.Thread(target=lambda: written.append(writer.flush()))
    thread.start()
    for _ in range(600):  # until the writer waits for B=2's row (it holds B=1's)
        if watch.scalar(text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")):
            break
        time.sleep(0.05)
    other.execute(insert(Evaluation), [row(1)])  # waits for the writer's B=1: a deadlock, the writer aborted
    transaction.commit()
    thread.join(120)
    assert written == [2] and writer.flushes == 1, f"seed {seed}"
    writer.close()
    other.close()
    watch.close()
    # the other's two rows and the writer's second attempt; ids 2 and 3 went to its first, rolled back
    assert [r[0] for r in _evaluations(db)] == [1, 4, 5, 6], f"seed {seed}"
    _check(db, campaigns, seed)
    db.engine.dispose()
