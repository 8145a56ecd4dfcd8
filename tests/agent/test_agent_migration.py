"""Migrations 0003 (the agent's transcripts) and 0004 (the plans it proposed) on SQLite and PostgreSQL: each
creates exactly what the models declare, sits on its parent, and downgrades cleanly; transcripts round-trip."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from warpforge.agent.client import LLMResponse
from warpforge.agent.transcripts import CallRecord, read_runs, read_transcripts, store_call, store_run
from warpforge.db import store
from warpforge.db.models import Base
from warpforge.db.session import Database


def _alembic(db: Database, revision: str, up: bool) -> None:
    from alembic import command
    from alembic.config import Config

    from warpforge.db.session import MIGRATIONS_DIR

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = db.engine
    (command.upgrade if up else command.downgrade)(cfg, revision)


def test_0003_matches_the_models_and_downgrades(db_url: str) -> None:
    db = Database(db_url)
    db.upgrade()
    assert db.current_revision() == "0007_static_summary"
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    agent_diff = [d for d in diff if "wf_agent" in repr(d)]
    assert agent_diff == []
    _alembic(db, "0002", up=False)
    assert "wf_agent_plans" not in set(inspect(db.engine).get_table_names())
    tables = set(inspect(db.engine).get_table_names())
    assert "wf_agent_calls" not in tables and "wf_agent_runs" not in tables and "wf_variants" in tables
    _alembic(db, "head", up=True)
    assert {"wf_agent_calls", "wf_agent_runs", "wf_agent_plans"} <= set(inspect(db.engine).get_table_names())
    db.engine.dispose()


def test_0004_adds_only_wf_agent_plans_and_downgrades_to_0003(db_url: str) -> None:
    db = Database(db_url)
    _alembic(db, "0003", up=True)
    before = set(inspect(db.engine).get_table_names())
    assert "wf_agent_plans" not in before and "wf_agent_calls" in before
    _alembic(db, "0004", up=True)
    after = set(inspect(db.engine).get_table_names())
    assert after - before == {"wf_agent_plans"}
    cols = {c["name"] for c in inspect(db.engine).get_columns("wf_agent_plans")}
    assert {"call_id", "rationale", "outcome", "rank", "plan_key"} <= cols
    fks = {fk["referred_table"] for fk in inspect(db.engine).get_foreign_keys("wf_agent_plans")}
    assert fks == {"wf_agent_calls", "wf_campaigns"}
    _alembic(db, "0003", up=False)
    assert set(inspect(db.engine).get_table_names()) == before
    db.engine.dispose()


def test_transcripts_round_trip(db_url: str) -> None:
    db = Database(db_url)
    db.upgrade()
    with db.session() as s:
        store.create_campaign(s, "c", {})
    rec = CallRecord(
        task="softmax",
        call_key="r1.s0.a0",
        messages=({"role": "user", "content": "hi"},),
        response=LLMResponse("m", "answer", "why", "stop", 3, 4, 0.5, 0.25, {"max_tokens": 9}),
        outcome="no_code",
        message="no code",
        parents=("abc",),
        prompt_cut=("Past winners",),
    )
    call_id = store_call(db, "c", rec)
    store_run(db, "c", "softmax", {"stop_reason": "calls", "calls": 1, "outcomes": {"no_code": 1}})
    store_run(db, "c", "softmax", {"calls": 2})  # an upsert, not a second row
    (back,) = read_transcripts(db, "c")
    assert back.id == call_id and back.parents == ("abc",) and back.prompt_cut == ("Past winners",)
    assert back.response == rec.response  # the client's response, whole
    (run,) = read_runs(db, "c")
    assert (run["stop_reason"], run["calls"], run["outcomes"]) == ("calls", 2, {"no_code": 1})
    assert read_transcripts(db, "other") == []
    db.engine.dispose()
