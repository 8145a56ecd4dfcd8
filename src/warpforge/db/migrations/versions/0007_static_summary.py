"""the static ranking's rows kept by the database (wf_static_configs and its trigger)

Revision ID: 0007_static_summary
Revises: 0006
Create Date: 2026-12-07 18:00:00

A summary table, an index, and a trigger on wf_evaluations that keeps the table in the inserting statement's
transaction (SQLite: a trigger; PostgreSQL: a trigger and its function). The upgrade backfills the table from
the stored evaluations in two INSERT ... SELECTs, so an old database ranks as a new one. Downgrading drops the
three: the table holds nothing the evaluations do not.

A later migration that re-creates wf_evaluations on SQLite (``batch_alter_table`` copies and drops it) drops
its triggers with it and must create this one again: tests/db/test_static_summary.py fails if it does not.
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0007_static_summary'
down_revision: Union[str, Sequence[str], None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

COLUMNS = ('task, scope, variant_hash, params_key, evaluation_id, target, key_spill, key_occupancy, key_registers, '
           'key_shared')
KEY = ('{e}.task, {scope}, {e}.variant_hash, {e}.params_key, {e}.id, {e}.static_target, '
       'coalesce({e}.static_spill, 1e30), -coalesce({e}.static_occupancy, -1.0), '
       'coalesce({e}.static_registers, 1e30), coalesce({e}.static_shared, 1e30)')
# One row per scope: 0 (every campaign) and the evaluation's campaign, when it has one. Only a newer evaluation
# replaces a row (ids grow; the guard keeps the newest also when two writers' transactions commit out of order).
UPSERT = (f'INSERT INTO wf_static_configs ({COLUMNS}) '
          f'SELECT {KEY.format(e="NEW", scope="s.scope")} '
          'FROM (SELECT 0 AS scope UNION ALL SELECT NEW.campaign_id) AS s WHERE s.scope IS NOT NULL '
          'ON CONFLICT (task, scope, variant_hash, params_key) DO UPDATE SET '
          'evaluation_id = excluded.evaluation_id, target = excluded.target, key_spill = excluded.key_spill, '
          'key_occupancy = excluded.key_occupancy, key_registers = excluded.key_registers, '
          'key_shared = excluded.key_shared WHERE excluded.evaluation_id > wf_static_configs.evaluation_id')
WHEN = "NEW.verdict = 'ok' AND NOT NEW.final"  # a search evaluation verified ok (not the final re-benchmark)


def upgrade() -> None:
    op.create_table('wf_static_configs',
    sa.Column('task', sa.String(length=200), nullable=False),
    sa.Column('scope', sa.Integer(), nullable=False),
    sa.Column('variant_hash', sa.String(length=64), nullable=False),
    sa.Column('params_key', sa.String(length=1000), nullable=False),
    sa.Column('evaluation_id', sa.Integer(), nullable=False),
    sa.Column('target', sa.String(length=100), nullable=True),
    sa.Column('key_spill', sa.Float(), nullable=False),
    sa.Column('key_occupancy', sa.Float(), nullable=False),
    sa.Column('key_registers', sa.Float(), nullable=False),
    sa.Column('key_shared', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('task', 'scope', 'variant_hash', 'params_key')
    )
    op.create_index('ix_wf_static_rank', 'wf_static_configs',
                    ['task', 'scope', 'target', 'key_spill', 'key_occupancy', 'key_registers', 'key_shared',
                     'evaluation_id', 'variant_hash'], unique=False)
    if op.get_bind().dialect.name == 'sqlite':
        op.execute(f'CREATE TRIGGER wf_static_configs_keep AFTER INSERT ON wf_evaluations WHEN {WHEN} '
                   f'BEGIN {UPSERT}; END')
    else:
        op.execute('CREATE FUNCTION wf_static_configs_keep() RETURNS trigger LANGUAGE plpgsql AS $$ '
                   f'BEGIN {UPSERT}; RETURN NULL; END $$')
        op.execute(f'CREATE TRIGGER wf_static_configs_keep AFTER INSERT ON wf_evaluations FOR EACH ROW '
                   f'WHEN ({WHEN}) EXECUTE FUNCTION wf_static_configs_keep()')
    _backfill()


def _backfill() -> None:
    """The rows the trigger would have written, from the evaluations stored before it existed: per scope, the
    newest ok search evaluation of each configuration (what Reader's static ranking read per request)."""
    ok = "verdict = 'ok' AND NOT final"
    for scope, per, where in (('0', '', ''), ('e.campaign_id', 'campaign_id, ', ' AND campaign_id IS NOT NULL')):
        op.execute(f'INSERT INTO wf_static_configs ({COLUMNS}) SELECT {KEY.format(e="e", scope=scope)} '
                   f'FROM wf_evaluations e WHERE e.id IN (SELECT max(id) FROM wf_evaluations WHERE {ok}{where} '
                   f'GROUP BY task, {per}variant_hash, params_key)')


def downgrade() -> None:
    op.execute('DROP TRIGGER wf_static_configs_keep' + ('' if op.get_bind().dialect.name == 'sqlite'
                                                        else ' ON wf_evaluations'))
    if op.get_bind().dialect.name != 'sqlite':
        op.execute('DROP FUNCTION wf_static_configs_keep()')
    op.drop_index('ix_wf_static_rank', table_name='wf_static_configs')
    op.drop_table('wf_static_configs')
