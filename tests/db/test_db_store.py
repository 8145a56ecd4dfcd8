"""Database round trips on SQLite and on a real PostgreSQL server (the `db_url` fixture runs both)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from sqlalchemy import inspect

from warpforge.db import store
from warpforge.db.session import VERSION_TABLE, Database, DatabaseError
from warpforge.evaluator.result import EvalResult, ShapeResult, Timing, Verdict
from warpforge.kernels.task import load_task_file
from warpforge.kernels.variant import load_variant

PLANTED = Path(__file__).parents[1] / "evaluator" / "planted"


def _result(params: dict, ms: float | None, gpu: str = "NVIDIA H100 80GB HBM3", verdict=Verdict.OK) -> EvalResult:
    # Storage fixtures: the numbers only have to round-trip, they are never reported as measurements.
    shapes = (
        []
        if ms is None
        else [
            ShapeResult(
                shape={"N": 1 << 20},
                dtype="float32",
                p20_ms=ms * 0.9,
                p50_ms=ms,
                p80_ms=ms * 1.1,
                ref_p50_ms=2 * ms,
                speedup=2.0,
            )
        ]
    )
    return EvalResult(
        verdict=verdict,
        task="double",
        params=params,
        backend="replay",
        shapes=shapes,
        objective_ms=ms,
        speedup=None if ms is None else 2.0,
        fingerprint=gpu[-8:],
        device=gpu,
        timing=None if ms is None else Timing(source="recorded", gpu=gpu),
        versions={"torch": "2.13.0", "triton": "3.9.0", "warpforge": "0.1.0"},
    )


def test_round_trip(db_url: str) -> None:
    db = Database(db_url)
    db.upgrade()
    db.upgrade()  # idempotent
    task = load_task_file(PLANTED / "task_double.py")
    variant = load_variant(PLANTED / "good.py")
    with db.session() as s:
        campaign = store.create_campaign(s, "c1", {"trials": 3})
        rec = store.ensure_variant(s, variant)
        assert store.ensure_variant(s, variant).id == rec.id  # content-hash keyed: one row per source
        store.save_evaluation(s, _result({"BLOCK": 128}, 0.5), task=task, variant=rec, campaign=campaign)
        store.save_evaluation(s, _result({"BLOCK": 256}, 0.25), task=task, variant=rec, campaign=campaign)
        store.save_evaluation(
            s, _result({"BLOCK": 512}, None, verdict=Verdict.INCORRECT), task=task, variant=rec, campaign=campaign
        )
        store.save_evaluation(
            s, _result({"BLOCK": 1024}, 0.1, gpu="NVIDIA A100-SXM4-80GB"), task=task, variant=rec, campaign=campaign
        )
    with db.session() as s:
        rows = store.results(s, campaign="c1")
        assert len(rows) == 4
        assert {r.verdict for r in rows} == {"ok", "incorrect"}
        found = store.find_evaluation(
            s, variant.source_hash, {"BLOCK": 256}, "replay", {"torch": "2.13.0", "triton": "3.9.0"}
        )
        assert found is not None and found.objective_ms == pytest.approx(0.25)
        assert found.measurements[0].p50_ms == pytest.approx(0.25)
        assert store.result_of(found).timing.gpu == "NVIDIA H100 80GB HBM3"  # type: ignore[union-attr]
        # Never mix GPUs: asked for H100, the faster A100 row must not appear.
        best_h100 = store.best(s, "double", gpu="H100")
        assert [b.evaluation.params for b in best_h100] == [{"BLOCK": 256}, {"BLOCK": 128}]
        best_any = store.best(s, "double")
        assert {b.evaluation.timing_gpu for b in best_any} == {"NVIDIA A100-SXM4-80GB"}
        by_shape = store.best(s, "double", gpu="H100", shape="N=1048576")
        assert by_shape[0].time_ms == pytest.approx(0.25)


def test_optuna_shares_the_url_and_migrations_ignore_its_tables(db_url: str) -> None:
    db = Database(db_url)
    db.upgrade()
    study = optuna.create_study(study_name="s", storage=db_url)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    db.upgrade()  # Alembic must not touch (or try to drop) Optuna's tables
    tables = set(inspect(db.engine).get_table_names())
    assert {"wf_evaluations", "wf_campaigns", "wf_variants", "wf_plans", VERSION_TABLE, "trials", "studies"} <= tables
    assert len(optuna.load_study(study_name="s", storage=db_url).trials) == 2


def test_failed_transaction_writes_nothing(db_url: str) -> None:
    db = Database(db_url)
    db.upgrade()
    with pytest.raises(RuntimeError):
        with db.session() as s:
            store.create_campaign(s, "half", {})
            raise RuntimeError("crash mid-transaction")
    with db.session() as s:
        assert store.get_campaign(s, "half") is None


def test_unreachable_postgres_is_a_clear_error() -> None:
    db = Database("postgresql+psycopg://nobody@127.0.0.1:1/none")
    with pytest.raises(DatabaseError, match="cannot connect"):
        db.upgrade()


def test_read_only_sqlite_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    Database(f"sqlite:///{path}").upgrade()
    before = path.read_bytes()
    # mode=ro: read-only even for root, which ignores file permissions.
    db = Database(f"sqlite:///file:{path}?mode=ro&uri=true")
    db.upgrade()  # already at head: nothing to write
    with pytest.raises(DatabaseError, match="read-only"):
        with db.session() as s:
            store.create_campaign(s, "x", {})
    assert path.read_bytes() == before
