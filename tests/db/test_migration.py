"""Revision 0002 carries a database made by the release before it (schema 0001) forward, on SQLite and
PostgreSQL, and the migrated schema is exactly what the models declare.

The fixture ``data/release_0001.sql`` holds the ``wf_*`` rows that main at 1c14e0d (schema 0001) wrote for
two real campaigns (``data/make_release_db.py`` says how): 16 evaluations of which 6 are final re-benchmarks
marked by the ``:final`` study-name suffix. Expected values below are read from those rows before upgrading.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import MetaData, Table, create_engine, inspect, text

from warpforge.db import store
from warpforge.db.models import Base
from warpforge.db.queries import Reader
from warpforge.db.session import MIGRATIONS_DIR, VERSION_TABLE, Database
from warpforge.kernels.variant import load_variant

DATA = Path(__file__).parent / "data"
PLANTED = Path(__file__).parents[1] / "evaluator" / "planted"
TABLES = ("wf_campaigns", "wf_hardware", "wf_tasks", "wf_variants", "wf_evaluations", "wf_measurements", "wf_plans")


def _alembic(db: Database, revision: str, down: bool = False) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = db.engine
    (command.downgrade if down else command.upgrade)(cfg, revision)


def _release_db(url: str, tmp_path: Path) -> Database:
    """A database at revision 0001 holding the release's rows (copied table by table for PostgreSQL)."""
    source = tmp_path / "release.db"
    _alembic(Database(f"sqlite:///{source}"), "0001")
    conn = sqlite3.connect(source)
    conn.execute(f"DELETE FROM {VERSION_TABLE}")  # the dump carries the release's own version row
    conn.executescript((DATA / "release_0001.sql").read_text())
    conn.commit()
    conn.close()
    if url.startswith("sqlite"):
        return Database(f"sqlite:///{source}")
    db = Database(url)
    _alembic(db, "0001")
    src = create_engine(f"sqlite:///{source}")
    meta = MetaData()
    with src.connect() as read, db.engine.begin() as write:
        for name in TABLES:
            table = Table(name, meta, autoload_with=src)
            rows = [dict(r._mapping) for r in read.execute(table.select())]
            if rows:
                write.execute(Table(name, MetaData(), autoload_with=write).insert(), rows)
                if "id" in rows[0]:  # explicit ids leave the sequence behind: move it past them
                    top = max(r["id"] for r in rows)
                    write.execute(text(f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), {top})"))
    src.dispose()
    return db


def _scalar(db: Database, sql: str) -> Any:
    with db.engine.connect() as conn:
        return conn.execute(text(sql)).scalar()


def _study_names(db: Database) -> dict[int, str]:
    with db.engine.connect() as conn:
        return dict(conn.execute(text("SELECT id, study_name FROM wf_evaluations")).all())  # type: ignore[arg-type]


def test_upgrade_carries_a_release_database_forward_and_back(db_url: str, tmp_path: Path) -> None:
    db = _release_db(db_url, tmp_path)
    assert db.current_revision() == "0001"
    counts = {t: _scalar(db, f"SELECT count(*) FROM {t}") for t in TABLES}
    before = _study_names(db)
    suffixed = {i for i, n in before.items() if n.endswith(":final")}
    assert counts["wf_evaluations"] == 16 and len(suffixed) == 6  # what the release wrote (see the docstring)

    db.upgrade()  # to the head: 0002 (engine seams) and every later migration on top of it
    assert db.current_revision() == ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    assert {t: _scalar(db, f"SELECT count(*) FROM {t}") for t in TABLES} == counts  # every row carried
    with db.engine.connect() as conn:
        final = {i for (i,) in conn.execute(text("SELECT id FROM wf_evaluations WHERE final"))}
        variants = conn.execute(text("SELECT origin, proposer, parents, proposal_id, rationale FROM wf_variants")).all()
    assert final == suffixed
    after = _study_names(db)
    assert after == {i: n.removesuffix(":final") for i, n in before.items()}  # the study's own name again
    assert [(o, p, str(par).replace(" ", ""), pid, r) for o, p, par, pid, r in variants] == [
        ("template", "template", "[]", None, "")
    ]
    assert _scalar(db, "SELECT count(*) FROM wf_decisions") == 0  # nothing re-ranked into a decision
    indexes = {i["name"] for i in inspect(db.engine).get_indexes("wf_evaluations")}
    assert {
        "ix_wf_eval_campaign_verdict",
        "ix_wf_eval_campaign_task",
        "ix_wf_eval_task_id",
        "ix_wf_eval_variant_id",
    } <= indexes

    reader = Reader(db.url)
    a = reader.campaign("release-a")
    assert a is not None and a.evaluations == 6 and a.status == "finished"  # search rows only
    assert reader.evaluations(campaign="release-a", final=True).total == 3
    assert reader.evaluations(final=True).total == 6

    with db.session() as s:  # the migrated tables take new lineage rows
        parent = _scalar(db, "SELECT source_hash FROM wf_variants")
        child = store.ensure_variant(
            s,
            load_variant(PLANTED / "wrong.py"),
            origin="llm",
            proposer="llm",
            parents=[parent],
            proposal_id="call-1",
            rationale="why",
        )
        child_hash = child.source_hash
    assert [v.proposer for v in reader.lineage(child_hash)] == ["llm", "template"]

    _alembic(db, "0001", down=True)  # and back: the suffix returns, the new table and columns go
    assert db.current_revision() == "0001"
    assert {i: n for i, n in _study_names(db).items() if i in before} == before
    assert "wf_decisions" not in inspect(db.engine).get_table_names()


def test_migrations_build_exactly_the_models_schema(db_url: str) -> None:
    db = Database(db_url)
    db.upgrade()
    with db.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"include_object": _wf_only})
        diff = compare_metadata(ctx, Base.metadata)
    assert diff == []


def _wf_only(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    return type_ != "table" or bool(name and name.startswith("wf_") and name != VERSION_TABLE)
