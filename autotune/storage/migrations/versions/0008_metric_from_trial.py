"""Reuse where the math is the same: ``autotune_trial_results.metric_from_trial``, the number
of the trial whose validation metric (and steps to the target) a trial reused because their
math keys were equal (``search.reuse_metric``); NULL for a trial that trained in full and for
the rows before.

A nullable column added only, so the rows before keep their values. Batch mode, for SQLite.

Revision ID: 0008_metric_from_trial
Revises: 0007_compile_cache
Create Date: 2026-11-24 09:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_metric_from_trial"
down_revision = "0007_compile_cache"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.add_column(sa.Column("metric_from_trial", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.drop_column("metric_from_trial")
