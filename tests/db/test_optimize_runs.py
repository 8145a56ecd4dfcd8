"""Revision 0006 (``wf_optimize_runs``) on SQLite and PostgreSQL, and a ``warpforge optimize`` report stored
through optimize/store.py and read back through the Reader whole."""

from __future__ import annotations

import json
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from warpforge.db.models import Base
from warpforge.db.queries import Reader
from warpforge.db.session import Database
from warpforge.optimize.report import OptimizeReport
from warpforge.optimize.store import store_report


def test_0006_adds_only_wf_optimize_runs_and_downgrades_to_0005(db_url: str) -> None:
    db = Database(db_url)
    db.upgrade("0005")
    before = set(inspect(db.engine).get_table_names())
    assert "wf_optimize_runs" not in before
    db.upgrade("0006")
    assert db.current_revision() == "0006"
    assert set(inspect(db.engine).get_table_names()) - before == {"wf_optimize_runs"}
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert [d for d in diff if "wf_optimize_runs" in repr(d)] == []  # exactly what the model declares
    db.downgrade("0005")
    assert db.current_revision() == "0005"
    assert set(inspect(db.engine).get_table_names()) == before
    db.upgrade()
    assert "wf_optimize_runs" in set(inspect(db.engine).get_table_names())
    db.engine.dispose()


def test_a_stored_report_reads_back_whole(db_url: str, optimize_report: Any) -> None:
    first = store_report(db_url, optimize_report)
    measured = optimize_report.model_copy(
        update={
            "target": "kb/1_Conv2D_ReLU.py",
            "kind": "kernelbench",
            "train": False,
            "speedup": optimize_report.speedup.model_copy(update={"measured": 1.07}),
        }
    )
    second = store_report(db_url, measured)
    assert second > first

    reader = Reader(db_url)
    page = reader.optimize_runs()
    assert page.total == 2 and [r.id for r in page.items] == [second, first]  # newest first
    new, old = page.items
    assert (old.target, old.kind, old.mode, old.dtype, old.gpu) == (
        "./qwen3-tiny",
        "transformers",
        "train",
        "float16",
        "H100 SXM",
    )
    assert (old.coverage, old.speedup, old.measured, old.regions, old.patched) == (0.4062, 1.1873, False, 4, 2)
    assert (new.mode, new.speedup, new.measured) == ("infer", 1.07, True)  # a measured speedup wins over the estimate
    assert [r.id for r in reader.optimize_runs(offset=1, limit=1).items] == [first]
    assert reader.optimize_runs(target="./qwen3-tiny").total == 1

    detail = reader.optimize_run(first)
    assert detail is not None and detail.row == old
    assert detail.report == json.loads(optimize_report.model_dump_json())
    assert OptimizeReport.model_validate(dict(detail.report)) == optimize_report  # the whole document, typed again
    assert reader.optimize_run(second + 100) is None
    reader.db.engine.dispose()


def test_a_value_that_is_not_finite_is_stored_as_null(db_url: str, optimize_report: Any) -> None:
    """A proof that produced NaN differences is still stored (PostgreSQL's JSON has no NaN)."""
    checks = optimize_report.checks.model_copy(update={"max_abs_diff": float("nan"), "outputs_match": False})
    run = store_report(db_url, optimize_report.model_copy(update={"checks": checks}))
    detail = Reader(db_url).optimize_run(run)
    assert detail is not None and detail.report["checks"]["max_abs_diff"] is None
