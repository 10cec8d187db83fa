"""The warm-up's peak memory, one results column: ``warmup_peak_memory_bytes`` on
``autotune_trial_results`` (CUDA: the allocator's peak over the warm-up, kept apart from
``peak_memory_bytes``). Nullable: the rows before, and every CPU or mock trial, hold NULL.

Batch mode, for SQLite.

Revision ID: 0011_warmup_peak_memory
Revises: 0010_guide_knobs
Create Date: 2026-11-27 21:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_warmup_peak_memory"
down_revision = "0010_guide_knobs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.add_column(sa.Column("warmup_peak_memory_bytes", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.drop_column("warmup_peak_memory_bytes")
