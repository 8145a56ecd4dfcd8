"""the agent's transcripts (wf_agent_calls) and per-task totals (wf_agent_runs)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 14:40:00

"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: Union[str, Sequence[str], None] = "0002"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "wf_agent_calls",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=True),
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("call_key", sa.String(length=100), nullable=False),
        sa.Column("parents", sa.JSON(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("messages", sa.JSON(), nullable=False),
        sa.Column("prompt_cut", sa.JSON(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("reasoning", sa.Text(), nullable=False),
        sa.Column("finish_reason", sa.String(length=40), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("variant_hash", sa.String(length=64), nullable=True),
        sa.Column("ast_hash", sa.String(length=64), nullable=True),
        sa.Column("replayed", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["wf_campaigns.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("wf_agent_calls", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_wf_agent_calls_campaign_id"), ["campaign_id"], unique=False)
        batch_op.create_index("ix_wf_agent_calls_lookup", ["campaign_id", "task", "call_key"], unique=False)
        batch_op.create_index(batch_op.f("ix_wf_agent_calls_variant_hash"), ["variant_hash"], unique=False)

    op.create_table(
        "wf_agent_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=True),
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("stop_reason", sa.String(length=40), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("wall_s", sa.Float(), nullable=False),
        sa.Column("outcomes", sa.JSON(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["wf_campaigns.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("campaign_id", "task"),
    )
    with op.batch_alter_table("wf_agent_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_wf_agent_runs_campaign_id"), ["campaign_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("wf_agent_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_wf_agent_runs_campaign_id"))
    op.drop_table("wf_agent_runs")
    with op.batch_alter_table("wf_agent_calls", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_wf_agent_calls_variant_hash"))
        batch_op.drop_index("ix_wf_agent_calls_lookup")
        batch_op.drop_index(batch_op.f("ix_wf_agent_calls_campaign_id"))
    op.drop_table("wf_agent_calls")
