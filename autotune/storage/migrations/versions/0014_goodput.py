"""Goodput in the results table: the baseline's gradient noise scale
(``autotune_trial_results.gradient_noise_scale``, samples) and a global-batch change's
statistical efficiency and goodput (``statistical_efficiency``, ``goodput_sps``). Nullable:
the rows before hold none.

Batch mode, for SQLite.

Revision ID: 0014_goodput
Revises: 0013_end_to_end
Create Date: 2026-11-29 01:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_goodput"
down_revision = "0013_end_to_end"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.add_column(sa.Column("gradient_noise_scale", sa.Float(), nullable=True))
        batch.add_column(sa.Column("statistical_efficiency", sa.Float(), nullable=True))
        batch.add_column(sa.Column("goodput_sps", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.drop_column("goodput_sps")
        batch.drop_column("statistical_efficiency")
        batch.drop_column("gradient_noise_scale")
