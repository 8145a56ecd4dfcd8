"""the static ranking's rows and their counts kept by the database (wf_static_configs, wf_static_counts)

Revision ID: 0007_static_summary
Revises: 0006
Create Date: 2026-12-07 18:00:00

Two summary tables and their triggers, which keep them in the inserting statement's transaction (PostgreSQL:
each trigger with its function): wf_static_configs (each ok configuration's newest evaluation and ranking key,
per task and scope), kept by a trigger on wf_evaluations, and wf_static_counts (its rows per target), kept by
triggers on wf_static_configs. The upgrade backfills them from the stored evaluations in two INSERT ... SELECTs,
so an old database ranks as a new one, and drops the index revision 0005 made for the ranking's per-request
GROUP BY (no reader left). Downgrading drops the tables (they hold nothing the evaluations do not) and
makes that index again.

A later migration that re-creates wf_evaluations on SQLite (``batch_alter_table`` copies and drops it) drops
its triggers with it and must create wf_static_configs_keep again: tests/db/test_static_summary.py fails if it
does not.
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0007_static_summary"
down_revision: Union[str, Sequence[str], None] = "0006"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

COLUMNS = (
    "task, scope, variant_hash, params_key, evaluation_id, target, key_spill, key_occupancy, key_registers, key_shared"
)
KEY = (
    "{e}.task, {scope}, {e}.variant_hash, {e}.params_key, {e}.id, {e}.static_target, "
    "coalesce({e}.static_spill, 1e30), -coalesce({e}.static_occupancy, -1.0), "
    "coalesce({e}.static_registers, 1e30), coalesce({e}.static_shared, 1e30)"
)
# One row per scope: 0 (every campaign) and the evaluation's campaign, when it has one. Only a newer evaluation
# replaces a row (ids grow; the guard keeps the newest also when two writers' transactions commit out of order).
UPSERT = (
    f"INSERT INTO wf_static_configs ({COLUMNS}) "
    f"SELECT {KEY.format(e='NEW', scope='s.scope')} "
    "FROM (SELECT 0 AS scope UNION ALL SELECT NEW.campaign_id) AS s WHERE s.scope IS NOT NULL "
    "ON CONFLICT (task, scope, variant_hash, params_key) DO UPDATE SET "
    "evaluation_id = excluded.evaluation_id, target = excluded.target, key_spill = excluded.key_spill, "
    "key_occupancy = excluded.key_occupancy, key_registers = excluded.key_registers, "
    "key_shared = excluded.key_shared WHERE excluded.evaluation_id > wf_static_configs.evaluation_id"
)
WHEN = "NEW.verdict = 'ok' AND NOT NEW.final"  # a search evaluation verified ok (not the final re-benchmark)
# wf_static_counts follows wf_static_configs: a new configuration counts in its target; one whose newest
# evaluation has another target moves ("": without facts, since a key column is never NULL).
COUNT_UP = (
    "INSERT INTO wf_static_counts (task, scope, target, configs) "
    "VALUES (NEW.task, NEW.scope, coalesce(NEW.target, ''), 1) "
    "ON CONFLICT (task, scope, target) DO UPDATE SET configs = wf_static_counts.configs + 1"
)
COUNT_DOWN = (
    "UPDATE wf_static_counts SET configs = configs - 1 "
    "WHERE task = OLD.task AND scope = OLD.scope AND target = coalesce(OLD.target, '')"
)
MOVED = "coalesce(NEW.target, '') <> coalesce(OLD.target, '')"


def upgrade() -> None:
    op.create_table(
        "wf_static_configs",
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("scope", sa.Integer(), nullable=False),
        sa.Column("variant_hash", sa.String(length=64), nullable=False),
        sa.Column("params_key", sa.String(length=1000), nullable=False),
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=100), nullable=True),
        sa.Column("key_spill", sa.Float(), nullable=False),
        sa.Column("key_occupancy", sa.Float(), nullable=False),
        sa.Column("key_registers", sa.Float(), nullable=False),
        sa.Column("key_shared", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("task", "scope", "variant_hash", "params_key"),
    )
    op.create_index(
        "ix_wf_static_rank",
        "wf_static_configs",
        [
            "task",
            "scope",
            "target",
            "key_spill",
            "key_occupancy",
            "key_registers",
            "key_shared",
            "evaluation_id",
            "variant_hash",
        ],
        unique=False,
    )
    op.create_table(
        "wf_static_counts",
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("scope", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=100), nullable=False),
        sa.Column("configs", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("task", "scope", "target"),
    )
    # The triggers first, the backfill after: on PostgreSQL creating a trigger locks wf_evaluations against
    # inserts until this transaction commits, so no row stored meanwhile escapes both.
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            f"CREATE TRIGGER wf_static_configs_keep AFTER INSERT ON wf_evaluations WHEN {WHEN} BEGIN {UPSERT}; END"
        )
        op.execute(f"CREATE TRIGGER wf_static_counts_add AFTER INSERT ON wf_static_configs BEGIN {COUNT_UP}; END")
        op.execute(
            f"CREATE TRIGGER wf_static_counts_move AFTER UPDATE ON wf_static_configs WHEN {MOVED} "
            f"BEGIN {COUNT_DOWN}; {COUNT_UP}; END"
        )
    else:
        op.execute(
            "CREATE FUNCTION wf_static_configs_keep() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN {UPSERT}; RETURN NULL; END $$"
        )
        op.execute(
            f"CREATE TRIGGER wf_static_configs_keep AFTER INSERT ON wf_evaluations FOR EACH ROW "
            f"WHEN ({WHEN}) EXECUTE FUNCTION wf_static_configs_keep()"
        )
        op.execute(
            "CREATE FUNCTION wf_static_counts_keep() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN IF TG_OP = 'UPDATE' THEN {COUNT_DOWN}; END IF; {COUNT_UP}; RETURN NULL; END $$"
        )
        op.execute(
            "CREATE TRIGGER wf_static_counts_add AFTER INSERT ON wf_static_configs FOR EACH ROW "
            "EXECUTE FUNCTION wf_static_counts_keep()"
        )
        op.execute(
            f"CREATE TRIGGER wf_static_counts_move AFTER UPDATE ON wf_static_configs FOR EACH ROW "
            f"WHEN ({MOVED}) EXECUTE FUNCTION wf_static_counts_keep()"
        )
    _backfill()
    # The index revision 0005 kept for the ranking's per-request GROUP BY: the backfill was its last reader.
    op.drop_index("ix_wf_eval_task_config", table_name="wf_evaluations")


def _backfill() -> None:
    """The rows the trigger would have written, from the evaluations stored before it existed: per scope, the
    newest ok search evaluation of each configuration (what Reader's static ranking read per request). The
    counts follow through their triggers."""
    ok = "verdict = 'ok' AND NOT final"
    for scope, per, where in (("0", "", ""), ("e.campaign_id", "campaign_id, ", " AND campaign_id IS NOT NULL")):
        op.execute(
            f"INSERT INTO wf_static_configs ({COLUMNS}) SELECT {KEY.format(e='e', scope=scope)} "
            f"FROM wf_evaluations e WHERE e.id IN (SELECT max(id) FROM wf_evaluations WHERE {ok}{where} "
            f"GROUP BY task, {per}variant_hash, params_key)"
        )


def downgrade() -> None:
    op.create_index(
        "ix_wf_eval_task_config",
        "wf_evaluations",
        [
            "task",
            "verdict",
            "final",
            "variant_hash",
            "params_key",
            "id",
            "static_target",
            "static_spill",
            "static_occupancy",
            "static_registers",
            "static_shared",
            "campaign_id",
        ],
        unique=False,
    )
    sqlite = op.get_bind().dialect.name == "sqlite"
    for trigger, table in (
        ("wf_static_counts_move", "wf_static_configs"),
        ("wf_static_counts_add", "wf_static_configs"),
        ("wf_static_configs_keep", "wf_evaluations"),
    ):
        op.execute(f"DROP TRIGGER {trigger}" + ("" if sqlite else f" ON {table}"))
    if not sqlite:
        op.execute("DROP FUNCTION wf_static_counts_keep()")
        op.execute("DROP FUNCTION wf_static_configs_keep()")
    op.drop_table("wf_static_counts")
    op.drop_index("ix_wf_static_rank", table_name="wf_static_configs")
    op.drop_table("wf_static_configs")
