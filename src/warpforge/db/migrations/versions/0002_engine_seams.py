"""engine seams: variant lineage, the final flag, stored decisions, read-layer indexes

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 14:20:00

What it carries forward from a 0001 database:
- ``wf_variants`` gains ``proposer`` (existing rows: their ``origin``, which 0001 filled with the
  campaign's proposer name), ``parents`` (``[]``), ``proposal_id`` (NULL) and ``rationale`` ("").
- ``wf_evaluations.final`` replaces the ``:final`` suffix of ``study_name`` (search/engine/campaign.py's
  former ``FINAL_SUFFIX``): rows with the suffix get ``final = true`` and their ``study_name`` loses the
  suffix (it names the Optuna study again).
- ``wf_decisions`` starts empty: decisions of campaigns finished before 0002 were never stored, and
  re-ranking their raw times would be exactly what the table exists to avoid.
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: Union[str, Sequence[str], None] = "0001"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

SUFFIX = ":final"

_evaluations = sa.table(
    "wf_evaluations",
    sa.column("id", sa.Integer()),
    sa.column("study_name", sa.String()),
    sa.column("final", sa.Boolean()),
)
_variants = sa.table("wf_variants", sa.column("origin", sa.String()), sa.column("proposer", sa.String()))

EVAL_INDEXES = {
    "ix_wf_eval_campaign_verdict": ["campaign_id", "verdict", "final"],
    "ix_wf_eval_campaign_task": ["campaign_id", "task", "id"],
    "ix_wf_eval_task_id": ["task", "id"],
    "ix_wf_eval_variant_id": ["variant_hash", "id"],
    "ix_wf_eval_objective": ["objective_ms", "id"],
    "ix_wf_eval_speedup": ["speedup", "id"],
    "ix_wf_eval_created": ["created_at", "id"],
    "ix_wf_eval_task_objective": ["task", "verdict", "objective_ms", "id"],
}


def upgrade() -> None:
    with op.batch_alter_table("wf_variants", schema=None) as batch_op:
        batch_op.add_column(sa.Column("proposer", sa.String(length=100), nullable=False, server_default="template"))
        batch_op.add_column(sa.Column("parents", sa.JSON(), nullable=False, server_default=sa.text("'[]'")))
        batch_op.add_column(sa.Column("proposal_id", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("rationale", sa.Text(), nullable=False, server_default=""))
    op.execute(_variants.update().values(proposer=_variants.c.origin))

    with op.batch_alter_table("wf_evaluations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("final", sa.Boolean(), nullable=False, server_default=sa.false()))
    name = _evaluations.c.study_name
    op.execute(
        _evaluations.update()
        .where(name.like("%" + SUFFIX))
        .values(final=True, study_name=sa.func.substr(name, 1, sa.func.length(name) - len(SUFFIX)))
    )
    with op.batch_alter_table("wf_evaluations", schema=None) as batch_op:
        for index, columns in EVAL_INDEXES.items():
            batch_op.create_index(index, columns, unique=False)

    op.create_table(
        "wf_decisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("backend", sa.String(length=20), nullable=False),
        sa.Column("timing_source", sa.String(length=20), nullable=True),
        sa.Column("timing_gpu", sa.String(length=200), nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("accepted", sa.Boolean(), nullable=False),
        sa.Column("evaluation_id", sa.Integer(), nullable=True),
        sa.Column("variant_hash", sa.String(length=64), nullable=True),
        sa.Column("variant_name", sa.String(length=200), nullable=True),
        sa.Column("params", sa.JSON(), nullable=True),
        sa.Column("objective_ms", sa.Float(), nullable=True),
        sa.Column("speedup", sa.Float(), nullable=True),
        sa.Column("speedup_low", sa.Float(), nullable=True),
        sa.Column("speedup_high", sa.Float(), nullable=True),
        sa.Column("interval", sa.String(length=200), nullable=False),
        sa.Column("evaluations", sa.Integer(), nullable=False),
        sa.Column("measured", sa.Integer(), nullable=False),
        sa.Column("top_k", sa.JSON(), nullable=False),
        sa.Column("shapes", sa.JSON(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["campaign_id"], ["wf_campaigns.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("campaign_id", "task"),
    )
    with op.batch_alter_table("wf_decisions", schema=None) as batch_op:
        batch_op.create_index("ix_wf_decisions_task_gpu", ["task", "timing_gpu"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("wf_decisions", schema=None) as batch_op:
        batch_op.drop_index("ix_wf_decisions_task_gpu")
    op.drop_table("wf_decisions")

    with op.batch_alter_table("wf_evaluations", schema=None) as batch_op:
        for index in EVAL_INDEXES:
            batch_op.drop_index(index)
    op.execute(
        _evaluations.update()
        .where(_evaluations.c.final == sa.true())
        .values(study_name=sa.func.coalesce(_evaluations.c.study_name, "") + SUFFIX)
    )
    with op.batch_alter_table("wf_evaluations", schema=None) as batch_op:
        batch_op.drop_column("final")

    with op.batch_alter_table("wf_variants", schema=None) as batch_op:
        batch_op.drop_column("rationale")
        batch_op.drop_column("proposal_id")
        batch_op.drop_column("parents")
        batch_op.drop_column("proposer")
