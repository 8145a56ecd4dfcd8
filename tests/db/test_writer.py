"""The single writer's batched result store (db/writer.py), on SQLite and on a real PostgreSQL server.

It must write the very rows ``store.save_evaluation`` writes, make nothing visible before ``flush`` and
everything after it, and never half-write a batch.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from warpforge.db import store
from warpforge.db.models import Evaluation, Hardware, Measurement, TaskRecord
from warpforge.db.session import Database
from warpforge.db.writer import ResultWriter
from warpforge.evaluator.result import EvalResult, ShapeResult, Timing, Verdict
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import load_variant

PLANTED = Path(__file__).parents[1] / "evaluator" / "planted"
SKIP = {"id", "created_at", "evaluation_id"}


def _result(block: int, ms: float) -> EvalResult:
    # Storage fixtures: the numbers only have to round-trip, they are never reported as measurements.
    shapes = [
        ShapeResult(
            shape={"N": 1024},
            dtype="float32",
            p20_ms=ms * 0.9,
            p50_ms=ms,
            p80_ms=ms * 1.1,
            ref_p50_ms=2 * ms,
            speedup=2.0,
            roofline_pct=40.0,
        ),
        ShapeResult(shape={"N": 97}, dtype="float32", p50_ms=ms / 4),
    ]
    return EvalResult(
        verdict=Verdict.OK,
        task="double",
        params={"BLOCK": block},
        backend="replay",
        shapes=shapes,
        objective_ms=ms,
        speedup=2.0,
        fingerprint="gpu-h100",
        device="NVIDIA H100 80GB HBM3",
        timing=Timing(source="recorded", gpu="NVIDIA H100 80GB HBM3"),
        compile_s=0.5,
        wall_s=1.5,
        versions={"torch": "2.13.0", "triton": "3.9.0", "warpforge": "0.1.0"},
    )


def _setup(url: str) -> tuple[Database, Any, Any, int, int]:
    db = Database(url)
    db.upgrade()
    task = load_task_file(PLANTED / "task_double.py")
    variant = load_variant(PLANTED / "good.py")
    with db.session() as s:
        campaign_id = store.create_campaign(s, "w", {}).id
        variant_id = store.ensure_variant(s, variant).id
    return db, task, variant, campaign_id, variant_id


def _columns(row: Any) -> dict[str, Any]:
    return {c.key: getattr(row, c.key) for c in row.__table__.columns if c.key not in SKIP}


def test_the_writer_stores_the_rows_save_evaluation_stores(db_url: str) -> None:
    db, task, variant, campaign_id, variant_id = _setup(db_url)
    with db.session() as s:
        orm = store.save_evaluation(
            s,
            _result(64, 0.5),
            task=task,
            variant=s.get(store.VariantRecord, variant_id),
            campaign=s.get(store.Campaign, campaign_id),
            study_name="w:s",
            trial_number=7,
        )
        orm_id = orm.id
    writer = ResultWriter(db, campaign_id)
    writer.add(
        _result(64, 0.5),
        task=task,
        variant_id=variant_id,
        variant_hash=variant.source_hash,
        study_name="w:s",
        trial_number=7,
    )
    assert writer.flush() == 1
    writer.close()
    with db.session() as s:
        a, b = s.scalars(select(Evaluation).order_by(Evaluation.id)).all()
        assert a.id == orm_id and _columns(a) == _columns(b)
        assert b.params_key == '{"BLOCK":64}' and b.objective_ms == 0.5 and b.timing_gpu == "NVIDIA H100 80GB HBM3"
        assert b.campaign_id == campaign_id and b.variant_id == variant_id and b.final is False
        assert EvalResult.model_validate(b.result) == _result(64, 0.5)
        ma = [_columns(m) for m in a.measurements]
        mb = [_columns(m) for m in b.measurements]
        assert ma == mb and [m["shape_key"] for m in mb] == ["N=1024", "N=97"]
        assert len(s.scalars(select(TaskRecord)).all()) == 1  # the task and the GPU: one row each
        assert [h.fingerprint for h in s.scalars(select(Hardware))] == ["gpu-h100"]


def test_nothing_is_visible_before_flush_and_a_batch_is_one_transaction(db_url: str) -> None:
    db, task, variant, campaign_id, variant_id = _setup(db_url)
    writer = ResultWriter(db, campaign_id)
    for i in range(5):
        writer.add(
            _result(32 << i, 1.0 / (i + 1)),
            task=task,
            variant_id=variant_id,
            variant_hash=variant.source_hash,
            trial_number=i,
            final=i == 4,
        )
    with db.session() as s:
        assert s.scalars(select(Evaluation.id)).all() == []  # queued is not stored
    assert writer.pending == 5 and writer.flush() == 5 and writer.pending == 0 and writer.flushes == 1
    assert writer.flush() == 0 and writer.flushes == 1  # an empty queue costs no transaction
    with db.session() as s:
        rows = s.scalars(select(Evaluation).order_by(Evaluation.id)).all()
        assert [r.trial_number for r in rows] == [0, 1, 2, 3, 4]
        assert [r.final for r in rows] == [False] * 4 + [True]
        # each evaluation's measurements point at it, in the batch's order (RETURNING ids in parameter order)
        assert [(m.evaluation_id, m.shape_key) for r in rows for m in r.measurements] == [
            (r.id, k) for r in rows for k in ("N=1024", "N=97")
        ]
        assert len(s.scalars(select(Measurement.id)).all()) == 10
    writer.close()


def test_a_failing_batch_writes_nothing_and_stays_queued(db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    db, task, variant, campaign_id, variant_id = _setup(db_url)
    writer = ResultWriter(db, campaign_id)
    writer.add(_result(64, 0.5), task=task, variant_id=variant_id, variant_hash=variant.source_hash)
    writer.add(_result(128, 0.4), task=task, variant_id=variant_id + 1000, variant_hash="no-such-variant")
    with pytest.raises(IntegrityError):  # the second row names no variant (a foreign key)
        writer.flush()
    assert writer.pending == 2
    with db.session() as s:
        assert s.scalars(select(Evaluation.id)).all() == [] and s.scalars(select(Measurement.id)).all() == []
        assert s.scalars(select(TaskRecord.id)).all() == []  # the task row of the failed batch is rolled back too
    with caplog.at_level(logging.WARNING, logger="warpforge.db"):
        writer.close(quiet=True)  # the caller is already failing: logged, not raised
    assert "2 completed evaluation(s) could not be stored" in caplog.text
