"""the plans an LLM proposed to the plan search (wf_agent_plans)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 17:30:00

A new table only: no existing row changes, so downgrading drops it and loses nothing else.
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: Union[str, Sequence[str], None] = "0003"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "wf_agent_plans",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=True),
        sa.Column("call_id", sa.Integer(), nullable=True),
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("plan_key", sa.String(length=400), nullable=True),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column("step_time_s", sa.Float(), nullable=True),
        sa.Column("tokens_per_s", sa.Float(), nullable=True),
        sa.Column("peak_mem_gb", sa.Float(), nullable=True),
        sa.Column("replayed", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["call_id"],
            ["wf_agent_calls.id"],
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["wf_campaigns.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("wf_agent_plans", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_wf_agent_plans_call_id"), ["call_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_wf_agent_plans_campaign_id"), ["campaign_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("wf_agent_plans", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_wf_agent_plans_campaign_id"))
        batch_op.drop_index(batch_op.f("ix_wf_agent_plans_call_id"))
    op.drop_table("wf_agent_plans")
