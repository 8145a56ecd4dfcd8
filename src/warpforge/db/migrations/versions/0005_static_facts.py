"""the worst compile facts of each evaluation as columns, for the static ranking in SQL

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 21:20:00

Five nullable columns and an index; the upgrade fills the columns from each stored result's compile facts
(the same function the writer uses), so an old database ranks as a new one. Downgrading drops them: the
facts stay in each result document.
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: Union[str, Sequence[str], None] = "0004"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

COLUMNS = ("static_target", "static_spill", "static_occupancy", "static_registers", "static_shared")
BATCH = 2000  # rows read and updated per round trip: a 100,000-row database upgrades in 50 of them


def upgrade() -> None:
    with op.batch_alter_table("wf_evaluations") as batch:
        batch.add_column(sa.Column("static_target", sa.String(length=100), nullable=True))
        for name in COLUMNS[1:]:
            batch.add_column(sa.Column(name, sa.Float(), nullable=True))
        batch.create_index(
            "ix_wf_eval_task_config",
            ["task", "verdict", "final", "variant_hash", "params_key", "id", *COLUMNS, "campaign_id"],
            unique=False,
        )
    _fill()


def _fill() -> None:
    from warpforge.compile_facts import static_columns

    bind = op.get_bind()
    table = sa.table(
        "wf_evaluations",
        sa.column("id", sa.Integer),
        sa.column("result", sa.JSON),
        *(sa.column(name) for name in COLUMNS),
    )
    update = (
        table.update().where(table.c.id == sa.bindparam("eid")).values({name: sa.bindparam(name) for name in COLUMNS})
    )
    last = 0
    while True:
        rows = bind.execute(
            sa.select(table.c.id, table.c.result).where(table.c.id > last).order_by(table.c.id).limit(BATCH)
        ).all()
        if not rows:
            return
        values = [{"eid": id_, **static_columns((result or {}).get("resources"))} for id_, result in rows]
        filled = [v for v in values if v["static_target"] is not None]
        if filled:
            bind.execute(update, filled)
        last = rows[-1][0]


def downgrade() -> None:
    with op.batch_alter_table("wf_evaluations") as batch:
        batch.drop_index("ix_wf_eval_task_config")
        for name in COLUMNS:
            batch.drop_column(name)
