"""the reports of warpforge optimize runs (wf_optimize_runs)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06 10:00:00

A new table only: no existing row changes, so downgrading drops it and loses nothing else.
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: Union[str, Sequence[str], None] = "0005"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "wf_optimize_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=1000), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("mode", sa.String(length=10), nullable=False),
        sa.Column("dtype", sa.String(length=20), nullable=False),
        sa.Column("gpu", sa.String(length=200), nullable=False),
        sa.Column("coverage", sa.Float(), nullable=False),
        sa.Column("speedup", sa.Float(), nullable=True),
        sa.Column("measured", sa.Boolean(), nullable=False),
        sa.Column("regions", sa.Integer(), nullable=False),
        sa.Column("patched", sa.Integer(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.Column("warpforge_version", sa.String(length=50), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("wf_optimize_runs")
